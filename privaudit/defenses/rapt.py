"""RAPT's client side: privatized plain tokens prepended to PCT2T-privatized input."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Self

import numpy as np

from privaudit.api import Release, TrainingBatch
from privaudit.defenses.pct2t import PCT2T
from privaudit.guarantees import Guarantee, guarantee_property
from privaudit.mechanisms.inputs import check_rng, check_texts
from privaudit.params import NonNegativeInt, PositiveFloat, PositiveInt


@dataclass
class PlainTokenReconstruction:
    """RAPT's privatized-token reconstruction objective (service side, §III-B).

    A head W_down(W_up h) with W_up: hidden -> c and W_down: c -> |V_r| reads the hidden states
    at the plain-token positions and is trained with cross-entropy to recover the *original*
    plain tokens; loss = L_task + weight * L_rec. The head is dropped after training.
    ``vocabulary`` is V_r (the words plain tokens are drawn from); ``plain_targets`` (the fixed
    sequence's) index into it.
    """

    plain_words: list[str]
    vocabulary: list[str]
    plain_targets: list[int]
    hidden: int = 96
    weight: float = 1.0
    _index: dict[str, int] = field(default_factory=dict, repr=False)

    # ---- the Objective protocol (privaudit.api.Objective) ---------------------------------

    def applies_to(self, release: Release) -> str | None:
        if release.kind != "text" or release.plain_prefix == 0:
            return "RAPT's reconstruction reads the plain-token prefix of a text release"
        return None

    def targets(
        self, release: Release, rows: Sequence[int], attributes: Mapping[str, Sequence[Any]]
    ) -> list[Any]:
        """Per training row, the V_r indices of its plain words: the release's own
        per-document sequences (public ``meta["plain_words"]``) or the fixed sequence's."""
        own = release.meta.get("plain_words")
        return [self.row_targets(own[i] if own else None) for i in rows]

    def head(self, hidden_size: int, targets: Sequence[Any] = ()) -> Any:
        """W_down(W_up h): hidden -> ``hidden`` -> |V_r|."""
        import torch

        return torch.nn.Sequential(
            torch.nn.Linear(hidden_size, self.hidden),
            torch.nn.Linear(self.hidden, len(self.vocabulary)),
        )

    def loss(self, batch: TrainingBatch, head: Any) -> Any:
        """``weight`` × cross-entropy of the head at the first n plain positions of every row
        (n the fewest any row of the batch kept: truncation can cut a prefix short)."""
        import torch

        n = min((len(p) for p in batch.prefix_positions), default=0)
        if n == 0:
            return None
        hidden = batch.hidden
        device = hidden.device  # the trainer's (privaudit.runtime.devices)
        pos = torch.tensor([p[:n] for p in batch.prefix_positions], dtype=torch.long).to(device)
        at = hidden.gather(1, pos.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
        target = torch.tensor([t[:n] for t in batch.targets], dtype=torch.long).to(device)
        logits = head(at)
        ce = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), target.reshape(-1)
        )
        return float(self.weight) * ce

    def row_targets(self, words: Sequence[str] | None) -> list[int]:
        """Targets of one document: its own plain words (per-document sequences, from the
        release's public meta) or the fixed sequence's."""
        if words is None:
            return list(self.plain_targets)
        if not self._index:
            self._index.update({w: i for i, w in enumerate(self.vocabulary)})
        try:
            return [self._index[w] for w in words]
        except KeyError as exc:
            raise ValueError(f"Plain word {exc.args[0]!r} is not in the objective's V_r.") from None


class RAPT(PCT2T):
    """Client side of RAPT: PCT2T applied to ``[plain tokens ; x]``.

    Paper: Li et al., "Privacy-Preserving Prompt Tuning for Large Language Model Services"
    (RAPT), §III-A (privatization) and §III-B (privatized token reconstruction).

    Threat model: the user privatizes locally; the service sees the released text, whose first
    ``n_plain`` words are the privatized plain tokens. The plain-token sequence is fixed (seeded
    by ``plain_seed``) and shared with the service, which learns to reconstruct it from the
    privatized version during prompt tuning — the objective that restores utility lost to noise.

    Privacy knob: ``eta`` (as PCT2T). Guarantee: as PCT2T for the user's words; plain tokens
    are public and carry no private information.

    Plain tokens: ``n_plain`` (default 40) words sampled once from the selected POS categories'
    single-piece vocabulary: ``sampler="uniform"`` (default) or ``"frequency"`` (∝ word counts in
    the text passed to :meth:`fit`; the paper notes this can leak the data distribution into a
    public sequence, so it is off by default). Each document gets fresh noise on its plain
    tokens, as the paper privatizes the concatenation per input. Plain words are privatized
    with the category they were sampled from (not re-tagged in context, where a random word
    list would be tagged arbitrarily).

    Plain sequence: ``plain_sequence="fixed"`` (default) uses one sequence for every document,
    as the paper's shared plain tokens; ``"per-document"`` draws each document's plain words
    afresh (from the privatization ``rng``) and sends the originals in the release's public
    ``meta["plain_words"]``. Our reading of the paper is the fixed sequence; with it the
    reconstruction head can partly solve its task from position alone, which per-document
    sequences rule out (the service must read the noisy words) — offered as an option to test.

    Ablations (RAPT Table VIII): ``reconstruction=False`` keeps the plain tokens in the release
    but offers no reconstruction objective (the service trains on the task loss only);
    ``n_plain=0`` prepends nothing, so the release is PCT2T's and there is nothing to
    reconstruct (our reading of "without plain tokens": the service has no public targets).
    """

    name: ClassVar[str] = "rapt"
    version: ClassVar[str] = "2"  # 2: PCT2T tags with the tagger and token rules, no parser
    cost_prior: ClassVar[float] = 0.4  # s per 1,000 words (estimate)

    def __init__(
        self,
        eta: PositiveFloat = 100.0,
        categories: str | Sequence[str] | None = None,
        n_plain: NonNegativeInt = 40,
        plain_seed: NonNegativeInt = 0,
        sampler: Literal["uniform", "frequency"] = "uniform",
        reconstruction_hidden: PositiveInt = 96,
        reconstruction: bool = True,
        plain_sequence: Literal["fixed", "per-document"] = "fixed",
        backbone: str | None = None,
        spacy_model: str | None = None,
    ) -> None:
        super().__init__(eta=eta, categories=categories, backbone=backbone, spacy_model=spacy_model)
        self.n_plain = n_plain
        self.plain_seed = plain_seed
        self.sampler = sampler
        self.reconstruction_hidden = reconstruction_hidden
        self.reconstruction = reconstruction
        self.plain_sequence = plain_sequence

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """PCT2T's for the user's words; the plain tokens are public."""
        return super().guarantee.noting("the plain tokens are public and carry no private data")

    def fit(self, train: Any) -> Self:
        """Count word frequencies for ``sampler="frequency"`` (a Dataset or list of texts)."""
        texts = list(train["text"]) if hasattr(train, "column_names") else list(train)
        counts: dict[str, int] = {}
        for text in texts:
            for word in text.lower().split():
                word = word.strip(".,;:!?\"'()")
                counts[word] = counts.get(word, 0) + 1
        self._counts = counts
        return self

    def _pool(self) -> tuple[list[str], list[str]]:
        """Candidate plain words (single WordPiece each) and their categories."""
        bb, vocab, cats, _, _ = self._setup()
        words, word_cats = [], []
        for c in cats:
            for k in vocab.members(c):
                words.append(vocab.words[k])
                word_cats.append(c)
        pieces = bb.token_ids(words)
        keep = [i for i, p in enumerate(pieces) if len(p) == 1]
        return [words[i] for i in keep], [word_cats[i] for i in keep]

    def _plain_distribution(self) -> tuple[list[str], list[str], np.ndarray | None]:
        """Candidate plain words, their categories, and the sampling probabilities (None:
        uniform)."""
        words, cats = self._pool()
        if self.sampler == "uniform":
            return words, cats, None
        counts = getattr(self, "_counts", None)
        if counts is None:
            raise ValueError("sampler='frequency' needs fit(train) first, to count words.")
        weights = np.asarray([counts.get(w, 0) for w in words], dtype=float)
        if weights.sum() == 0:
            raise ValueError("No candidate plain word occurs in the fitted text.")
        return words, cats, weights / weights.sum()

    def plain_tokens(self) -> tuple[list[str], list[str]]:
        """The fixed plain-token sequence (words, categories), seeded by ``plain_seed``."""
        words, cats, p = self._plain_distribution()
        idx = np.random.default_rng(self.plain_seed).choice(len(words), self.n_plain, p=p)
        return [words[i] for i in idx], [cats[i] for i in idx]

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        texts = check_texts(texts)
        check_rng(rng)
        eta = float(self.eta)
        plain, plain_cats = self.plain_tokens()
        body = super().privatize(texts, rng=rng)
        n, m = len(texts), len(plain)
        if self.plain_sequence == "per-document":
            words, cats, p = self._plain_distribution()
            idx = rng.choice(len(words), size=(n, m), p=p) if n * m else np.zeros((n, 0), int)
            originals = [[words[i] for i in row] for row in idx]
            all_cats = [cats[i] for row in idx for i in row]
        else:
            originals, all_cats = [plain] * n, plain_cats * n
        flat = [w for row in originals for w in row]
        noisy = self.perturb_words(flat, all_cats, eta, rng) if flat else []
        out, plain_masks = [], []
        for d, text in enumerate(body.texts or []):
            words_d = noisy[d * m : (d + 1) * m]
            prefix = " ".join(words_d)
            out.append(f"{prefix} {text}" if text and prefix else prefix or text)
            plain_masks.append(
                np.asarray([a != b for a, b in zip(words_d, originals[d], strict=True)])
            )
        meta = body.meta | {"defense": self.name}
        if self.plain_sequence == "per-document":
            meta["plain_words"] = originals  # public: random words, sent for the service's loss
        return Release(
            "text",
            texts=out,
            plain_prefix=m,
            meta=meta,
            audit=body.audit | {"plain_replaced": plain_masks},
        )

    def training_objective(self) -> PlainTokenReconstruction | None:
        """RAPT's reconstruction objective, or None for the ablations (``reconstruction=False``
        or ``n_plain=0``)."""
        plain, _ = self.plain_tokens()
        if not self.reconstruction or not plain:
            return None
        vocabulary = sorted(set(self._pool()[0]))
        index = {w: i for i, w in enumerate(vocabulary)}
        return PlainTokenReconstruction(
            plain_words=plain,
            vocabulary=vocabulary,
            plain_targets=[index[w] for w in plain],
            hidden=self.reconstruction_hidden,
        )
