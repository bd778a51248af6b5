"""1-Diffractor (Meisenbacher, Chevli, Matthes, 2024): word replacement on a 1-D word list."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from privaudit.defenses._words import WordDefense
from privaudit.guarantees import Guarantee, Unit, guarantee_property
from privaudit.models.backbone import backbone as load_backbone
from privaudit.params import PositiveFloat, PositiveInt
from privaudit.runtime.cache import cache_dir, keep_entry


def greedy_order(neighbours: np.ndarray) -> np.ndarray:
    """The 1-D word list: from row 0, repeatedly the nearest word not yet listed among the
    current word's ``neighbours`` (rows, nearest first), else the first unlisted row."""
    n = len(neighbours)
    listed = np.zeros(n, dtype=bool)
    order = np.empty(n, dtype=np.int64)
    current, first_free = 0, 0
    for k in range(n):
        order[k] = current
        listed[current] = True
        following = [int(j) for j in neighbours[current] if not listed[j]]
        if following:
            current = following[0]
            continue
        while first_free < n and listed[first_free]:
            first_free += 1
        current = first_free
    return order


class OneDiffractor(WordDefense):
    """1-Diffractor: the geometric mechanism on a word's position in a 1-D word list.

    Paper: Meisenbacher, Chevli, Matthes, "1-Diffractor: Efficient and Utility-Preserving Text
    Obfuscation Leveraging Word-Level Metric Differential Privacy", 2024.

    Threat model: the user privatizes text locally and releases it; the service and any
    attacker see the released text and may know the mechanism, the list and the embedding.

    Mechanism: the vocabulary is laid out once as a 1-D list by a greedy nearest-neighbour walk
    over the embeddings (from the first word, each next word is the nearest not yet listed
    among the current word's ``k`` nearest; when all are listed, the first unlisted word). A
    word at position i is replaced by the word at position i + G₁ − G₂, G₁, G₂ ~ Geometric(1 −
    e^{−ε}) (the two-sided geometric mechanism: P(shift = s) ∝ e^{−ε|s|}), clipped to the list.

    Privacy knob: ``epsilon`` (1 / position in the list). Guarantee: ε·d_X-privacy per word,
    d the distance of positions in the list (clipping is post-processing); a document of n
    words composes to n·ε.

    Choices and deviations:
    - One list, from the backbone's single-piece whole words and their input embeddings. The
      paper builds one list per embedding model (several) and releases one of their
      candidates at random; with several lists the guarantee is the largest of their
      position distances.
    - The geometric mechanism only (the paper also runs TEM on the list).
    - A word outside the vocabulary takes the position of its nearest vocabulary word (the
      paper's code keeps it); words are runs of letters, the rest of the text is kept, and a
      replacement takes the original's casing. Stop words are replaced too (the paper's code
      keeps them unless told otherwise).
    """

    name: ClassVar[str] = "diffractor"
    # 1 − tanh(ε/2) of the words move: about 0.9, 0.5 and 0.15.
    levels: ClassVar[tuple[float, ...]] = (0.2, 1.1, 2.5)

    def __init__(
        self, epsilon: PositiveFloat = 1.1, k: PositiveInt = 50, backbone: str | None = None
    ) -> None:
        self.epsilon = epsilon
        self.k = k
        self.backbone = backbone

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """ε·d_X-privacy per word, d the distance of positions in the 1-D list."""
        return Guarantee.dx(
            "epsilon",
            self.epsilon,
            unit=Unit.WORD,
            metric="distance of positions in the greedy nearest-neighbour list of the "
            f"single-piece words' input embeddings of {self.backbone or 'the default backbone'}",
            composes_over=Unit.DOCUMENT,
            source="Meisenbacher et al. 2024",
            mechanism="word_kernel",
        )

    def order(self) -> np.ndarray:
        """The 1-D list (vocabulary rows in list order; cached on disk per backbone and k)."""
        vocab = self.vocabulary()
        k = min(int(self.k), len(vocab))
        cache: dict[int, np.ndarray] = vocab.__dict__.setdefault("_diffractor", {})
        if k not in cache:
            key = f"diffractor_{load_backbone(self.backbone).fingerprint}_{len(vocab)}_{k}.npy"
            path = cache_dir() / key
            found = np.load(path) if path.is_file() else None
            if found is None or found.shape != (len(vocab),):
                knn = np.concatenate(
                    [
                        self.index().k_nearest(vocab.vectors[s : s + 2048], k)[0]
                        for s in range(0, len(vocab), 2048)
                    ]
                )
                found = greedy_order(knn)
                keep_entry(path, lambda fh: np.save(fh, found))  # read-only cache: recomputed
            cache[k] = found
        return cache[k]

    def positions(self) -> np.ndarray:
        """Per vocabulary row, its position in the list."""
        order = self.order()
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        return position

    def replace(
        self, words: Sequence[str], vectors: np.ndarray, rng: np.random.Generator
    ) -> list[str]:
        vocab = self.vocabulary()
        order, position = self.order(), self.positions()
        rows = self.rows_of(words)
        unknown = rows < 0
        if unknown.any():  # the nearest vocabulary word's position
            rows[unknown] = self.index().query(np.asarray(vectors)[unknown])
        p = -math.expm1(-float(self.epsilon))  # 1 − e^{−ε}
        shift = rng.geometric(p, len(words)) - rng.geometric(p, len(words))
        moved = np.clip(position[rows] + shift, 0, len(order) - 1)
        return [vocab.words[i] for i in order[moved].tolist()]

    #: Consecutive words of the list the guarantee audit searches its pairs in.
    AUDIT_WINDOW: ClassVar[int] = 200

    def audit_pool(self) -> tuple[np.ndarray, str]:
        """A window of consecutive words in the middle of the list: every pair of neighbours in
        the list is at distance 1, so any window holds the claim's smallest distances."""
        order = self.order()
        mid = len(order) // 2
        half = self.AUDIT_WINDOW // 2
        return np.sort(order[max(0, mid - half) : mid + half]), "a window of the list"

    def audit_points(self) -> np.ndarray:
        """Each word's position, as a 1-D point, centred on the audit's window: the audit
        computes distances in float32 by expanding squares, which at positions of 10^4 loses a
        distance of 1 (it came out 0), and centred it is exact."""
        position = self.positions()
        return (position - len(position) // 2).astype(np.float32)[:, None]

    def replacement_log_probs(
        self, originals: Sequence[str], *, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        """ln P(y | w), exact: the two-sided geometric law of the shift, the list's ends
        taking the mass beyond them."""
        rows = self._known(originals)
        position = self.positions()
        n, eps = len(position), float(self.epsilon)
        norm = math.log(-math.expm1(-eps)) - math.log1p(math.exp(-eps))  # ln (1−q)/(1+q)
        out = np.empty((len(rows), n))
        for i, r in enumerate(rows.tolist()):
            s = position - position[r]  # the shift that lands on each word
            logp = norm - eps * np.abs(s).astype(float)
            # the ends take P(shift <= lo) = q^|lo| / (1 + q) and P(shift >= hi) = q^hi / (1 + q)
            lo, hi = -position[r], n - 1 - position[r]
            logp[s == lo] = -eps * abs(lo) - math.log1p(math.exp(-eps))
            logp[s == hi] = -eps * hi - math.log1p(math.exp(-eps))
            out[i] = logp
        return out
