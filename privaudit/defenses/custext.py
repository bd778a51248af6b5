"""CusText and CusText+ (Chen et al., Findings of ACL 2023): sampling within customized
output sets."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar, Self

import numpy as np

from privaudit.defenses._words import WordDefense, unique_rows
from privaudit.guarantees import Guarantee, Kind, Unit, guarantee_property
from privaudit.mechanisms.word_sampling import WORD
from privaudit.mechanisms.words import stop_words
from privaudit.models.backbone import backbone as load_backbone
from privaudit.params import PositiveFloat, PositiveInt
from privaudit.runtime.cache import cache_dir, keep_entry


def custext_probs(query: np.ndarray, outputs: np.ndarray, epsilon: float) -> np.ndarray:
    """P(y | x) over an output set: exp(ε·u/2) normalised, u(x, y) = −(d − d_min)/(d_max −
    d_min) the min-max normalised negative distance (range 1: the score's sensitivity).
    ``query`` (m, dim) and ``outputs`` (m, K, dim): one output set per query."""
    d = np.sqrt(np.maximum(((outputs - query[:, None, :]) ** 2).sum(-1), 0.0))
    lo, hi = d.min(1, keepdims=True), d.max(1, keepdims=True)
    span = np.where(hi > lo, hi - lo, 1.0)
    logw = -0.5 * epsilon * (d - lo) / span
    w = np.exp(logw - logw.max(1, keepdims=True))
    return w / w.sum(1, keepdims=True)


class CusText(WordDefense):
    """Customized text sanitization: each word is replaced within a small output set.

    Paper: Chen, Mo, Wang, Chen, Nie, Wang, Cui, "A Customized Text Sanitization Mechanism
    with Differential Privacy", Findings of ACL 2023 (CusText).

    Threat model: the user sanitizes text locally and releases it; the service and any
    attacker see the released text and may know the mechanism, the mapping and the
    embedding.

    Mechanism: a *customized mapping* assigns every vocabulary word an output set of K words:
    going through the words from the most to the least frequent, a word not yet mapped (an
    anchor) takes its K nearest words (itself included) as an output set, and every word of
    that set not yet mapped is mapped to it (the paper's code, "aggressive" strategy). A
    word x is replaced by y of its output set with P(y | x) ∝ exp(ε·u(x, y)/2),
    u(x, y) = −(d(x, y) − d_min)/(d_max − d_min) the distance normalised over x's set.

    Privacy knob: ``epsilon``. Guarantee: ε-LDP per word among the words that share an
    output set (the paper's proof: the normalised score has range 1, so the exponential
    mechanism over a shared set is ε-DP); words of different sets are distinguishable.

    Choices and deviations:
    - Vocabulary and embedding: the backbone's single-piece whole words with their input
      embeddings (the paper uses counter-fitted GloVe vectors), K = 20 (the paper's default).
    - Frequencies come from the training split (:meth:`fit`), as the paper counts its
      training corpus; words the split never shows follow in vocabulary order (the paper
      maps only corpus words and keeps every other word as it is: here every vocabulary word
      is mapped). Unfitted, the vocabulary's order stands in for frequency.
    - A word outside the vocabulary takes the output set of its nearest vocabulary word, its
      scores from its own distances (the paper keeps it as it is).
    - Words are runs of letters; digits and punctuation are kept (the paper's code shifts
      numbers by a random integer); replacements take the original's casing.
    """

    name: ClassVar[str] = "custext"
    # Replaced words on synthetic reviews (default backbone): 0.89, ~0.5, 0.12.
    levels: ClassVar[tuple[float, ...]] = (2, 7, 12)
    skips_stop_words: ClassVar[bool] = False

    def __init__(
        self, epsilon: PositiveFloat = 7.0, k: PositiveInt = 20, backbone: str | None = None
    ) -> None:
        self.epsilon = epsilon
        self.k = k
        self.backbone = backbone

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """ε-LDP per word, within its output set (Chen et al. 2023."""
        return Guarantee(
            Kind.LDP,
            "epsilon",
            self.epsilon,
            Unit.WORD,
            within="its output set",
            selected=self.skips_stop_words,
            composes_over=Unit.DOCUMENT,
            metric=f"words sharing an output set of {int(self.k)} nearest input embeddings "
            f"of {self.backbone or 'the default backbone'}",
            source="Chen et al. 2023",
            mechanism="word_kernel",
            notes="The exponential mechanism on a min-max normalised score (range 1)"
            + ("; stop words are kept" if self.skips_stop_words else ""),
        )

    # -- the customized mapping ---------------------------------------------------------
    def fit(self, train: Any) -> Self:
        """Count the training split's words: the order in which the mapping takes anchors."""
        texts = list(train["text"]) if not isinstance(train, (list, tuple)) else list(train)
        counts = Counter(w.lower() for t in texts for w in WORD.findall(str(t)))
        vocab = self.vocabulary()
        self._counts = np.asarray([counts.get(w, 0) for w in vocab.words], dtype=np.int64)
        self._mapping = None
        return self

    def neighbours(self) -> np.ndarray:
        """Each vocabulary word's K nearest words (rows, nearest first; cached on disk)."""
        vocab = self.vocabulary()
        k = min(int(self.k), len(vocab))
        cache: dict[int, np.ndarray] = vocab.__dict__.setdefault("_knn", {})
        if k not in cache:
            key = f"custext_knn_{load_backbone(self.backbone).fingerprint}_{len(vocab)}_{k}.npy"
            path = cache_dir() / key
            found = np.load(path) if path.is_file() else None
            if found is None or found.shape != (len(vocab), k):
                found = np.concatenate(
                    [
                        self.index().k_nearest(vocab.vectors[s : s + 2048], k)[0]
                        for s in range(0, len(vocab), 2048)
                    ]
                )
                keep_entry(path, lambda fh: np.save(fh, found))  # read-only cache: recomputed
            cache[k] = found
        return cache[k]

    def anchors(self) -> np.ndarray:
        """Per vocabulary row, the anchor whose K nearest words are its output set (-1: a stop
        word CusText+ keeps)."""
        mapping = getattr(self, "_mapping", None)
        if mapping is not None and mapping[0] == int(self.k):
            return mapping[1]
        vocab = self.vocabulary()
        knn = self.neighbours()
        counts = getattr(self, "_counts", None)
        order = np.arange(len(vocab))
        order = order if counts is None else np.lexsort((order, -counts))
        anchor = np.full(len(vocab), -1, dtype=np.int64)
        skip = self._skipped()
        for a in order.tolist():
            if anchor[a] >= 0 or skip[a]:
                continue
            for s in knn[a].tolist():
                if anchor[s] < 0 and not skip[s]:
                    anchor[s] = a
            anchor[a] = a  # an anchor is always in its own set (ties aside)
        self._mapping = (int(self.k), anchor)
        return anchor

    def _skipped(self) -> np.ndarray:
        vocab = self.vocabulary()
        if not self.skips_stop_words:
            return np.zeros(len(vocab), dtype=bool)
        stops = stop_words()
        return np.asarray([w in stops for w in vocab.words])

    # -- the mechanism --------------------------------------------------------------------
    def output_sets(self, words: Sequence[str], vectors: np.ndarray) -> np.ndarray:
        """The output set (K vocabulary rows) of each word; -1 rows: kept (stop words)."""
        anchor = self.anchors()
        rows = self.rows_of(words)
        unknown = rows < 0
        if unknown.any():  # the nearest vocabulary word's set
            rows[unknown] = self.index().query(np.asarray(vectors)[unknown])
        mine = anchor[rows]
        sets = np.full((len(words), self.neighbours().shape[1]), -1, dtype=np.int64)
        ok = mine >= 0
        sets[ok] = self.neighbours()[mine[ok]]
        return sets

    def replace(
        self, words: Sequence[str], vectors: np.ndarray, rng: np.random.Generator
    ) -> list[str]:
        vocab = self.vocabulary()
        uniforms = rng.random(len(words))
        out = list(words)
        queries, inverse = unique_rows(words, vectors)
        firsts = [words[i] for i in np.unique(inverse, return_index=True)[1]]
        sets = self.output_sets(firsts, queries)
        live = np.flatnonzero(sets[:, 0] >= 0)
        if not len(live):
            return out
        probs = np.zeros((len(queries), sets.shape[1]))
        for s in range(0, len(live), 1024):
            b = live[s : s + 1024]
            probs[b] = custext_probs(
                queries[b].astype(np.float64),
                vocab.vectors[sets[b]].astype(np.float64),
                float(self.epsilon),
            )
        cdf = np.cumsum(probs, axis=1)
        for k in np.flatnonzero(sets[inverse, 0] >= 0).tolist():
            q = inverse[k]
            j = min(
                int(np.searchsorted(cdf[q], uniforms[k] * cdf[q, -1], side="right")),
                sets.shape[1] - 1,
            )
            out[k] = vocab.words[int(sets[q, j])]
        return out

    def audit_pool(self) -> tuple[np.ndarray, str]:
        """The words of the first anchor's output set (they share it)."""
        anchor = self.anchors()
        first = int(anchor[anchor >= 0][0]) if (anchor >= 0).any() else 0
        members = np.flatnonzero(anchor == first)
        return members, f"output set of '{self.vocabulary().words[first]}'"

    def replacement_log_probs(
        self, originals: Sequence[str], *, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        """ln P(y | w), exact: −inf outside w's output set (0 on w itself for a kept word)."""
        vocab = self.vocabulary()
        rows = self._known(originals)
        sets = self.output_sets([vocab.words[r] for r in rows], vocab.vectors[rows])
        out = np.full((len(rows), len(vocab)), -np.inf)
        for i, r in enumerate(rows.tolist()):
            if sets[i, 0] < 0:
                out[i, r] = 0.0
                continue
            p = custext_probs(
                vocab.vectors[[r]].astype(np.float64),
                vocab.vectors[sets[i]][None].astype(np.float64),
                float(self.epsilon),
            )[0]
            out[i, sets[i]] = np.log(p)
        return out


class CusTextPlus(CusText):
    """CusText+: CusText that leaves stop words as they are.

    Paper: Chen et al., Findings of ACL 2023, §3.4 (CusText+): stop words carry little private
    information, and keeping them keeps the sentence's structure; every other word goes
    through CusText's mechanism.

    Threat model and knob: as :class:`CusText`. Guarantee: ε-LDP per selected word (every
    word but the stop words), within its output set; a stop word is released as it is.

    Deviation: the stop-word list is scikit-learn's English list (318 words;
    :func:`privaudit.mechanisms.words.stop_words`), where the paper's code uses NLTK's (179):
    NLTK's list needs a download at run time. Stop words are neither anchors nor members of
    a set (they may still be released as a replacement of a nearby word).
    """

    name: ClassVar[str] = "custext-plus"
    skips_stop_words: ClassVar[bool] = True
