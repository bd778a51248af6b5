"""SanText and SanText+ (Yue et al., Findings of ACL 2021): exponential-mechanism word sampling."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, ClassVar, Self

import numpy as np

from privaudit.defenses._words import WordDefense, unique_rows
from privaudit.guarantees import Guarantee, Unit, embedding_distance, guarantee_property
from privaudit.mechanisms.word_sampling import WORD, exponential_choice, exponential_log_probs
from privaudit.params import PositiveFloat, Probability

_METRIC = "Euclidean distance between mean WordPiece input embeddings"


class SanText(WordDefense):
    """Natural text sanitization by the exponential mechanism over word embeddings.

    Paper: Yue, Du, Wang, Li, Sun, Chow, "Differential Privacy for Text Analytics via Natural
    Text Sanitization", Findings of ACL 2021 (SanText).

    Threat model: the user sanitizes text locally and releases it; the service and any
    attacker see the released text and may know the mechanism, the vocabulary and the
    embedding.

    Mechanism: each word x is replaced by a word y of the vocabulary V drawn with
    P(y | x) ∝ exp(−ε·d(x, y)/2), d the Euclidean distance of their embeddings (x itself
    included, at d = 0).

    Privacy knob: ``epsilon`` (1 / Euclidean distance in the backbone's input-embedding
    space). Guarantee: ε·d_X-privacy per word (metric LDP, as the paper proves); a document
    of n words composes to n·ε.

    Choices and deviations:
    - Vocabulary and embedding: the backbone's single-piece alphabetic whole words with their
      input embeddings (the paper's BERT setting uses BERT's input embeddings too), not the
      words of the sanitized corpus: the candidate set is public, a release does not depend
      on which other documents were sanitized with it, and no corpus word list is needed.
    - A word outside the vocabulary (a rare word of several WordPieces) is embedded as the
      mean of its pieces and sampled like any other (the paper's code keeps such words as
      they are); a word none of whose pieces the tokenizer knows is kept.
    - Words are runs of letters; digits, punctuation and spacing are kept, and a replacement
      takes the original's casing (the vocabulary is lower case).
    - Sampling is exact (inverse CDF per word, each distinct word's distribution computed once
      per call), where the paper's code precomputes a |V| x |V| probability matrix.
    """

    name: ClassVar[str] = "santext"
    # Replaced words on synthetic reviews (default backbone): 0.89, 0.50, 0.16 (t2t's levels
    # replace 0.88, 0.48, 0.14).
    levels: ClassVar[tuple[float, ...]] = (10, 13, 16)

    def __init__(self, epsilon: PositiveFloat = 13.0, backbone: str | None = None) -> None:
        self.epsilon = epsilon
        self.backbone = backbone

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """ε·d_X-privacy per word (Yue et al. 2021."""
        return Guarantee.dx(
            "epsilon",
            self.epsilon,
            unit=Unit.WORD,
            metric=embedding_distance(self.backbone, pooled=_METRIC),
            composes_over=Unit.DOCUMENT,
            source="Yue et al. 2021",
            mechanism="word_kernel",
        )

    def replace(
        self, words: Sequence[str], vectors: np.ndarray, rng: np.random.Generator
    ) -> list[str]:
        vocab = self.vocabulary()
        uniforms = rng.random(len(words))
        queries, inverse = unique_rows(words, vectors)
        picked = exponential_choice(
            queries, vocab.vectors, float(self.epsilon), uniforms, inverse=inverse
        )
        return [vocab.words[i] for i in picked.tolist()]

    def replacement_log_probs(
        self, originals: Sequence[str], *, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        """ln P(y | w), exact: the exponential mechanism's closed form."""
        vocab = self.vocabulary()
        rows = self._known(originals)
        return exponential_log_probs(vocab.vectors[rows], vocab.vectors, float(self.epsilon))


class SanTextPlus(SanText):
    """SanText+: only sensitive words are protected; the others are kept with probability 1 − p.

    Paper: Yue et al., Findings of ACL 2021, §4.2 (SanText+).

    Threat model: as :class:`SanText`.

    Mechanism: the ``sensitive_share`` (w, default 0.9) least frequent vocabulary words are
    sensitive (V_S). A sensitive word is always replaced by a word of V_S drawn with
    P(y | x) ∝ exp(−ε·d(x, y)/2), y ∈ V_S; a non-sensitive word is kept with probability
    1 − p and otherwise replaced the same way (so it too is replaced by a sensitive word),
    as in the paper's code.

    Privacy knob: ``epsilon`` (as SanText). Guarantee: ε·d_X-privacy per sensitive word,
    within the sensitive words; a non-sensitive word is released with probability ≥ 1 − p and
    has no guarantee (the paper's guarantee for SanText+ covers the sensitive words).

    Choices and deviations (beyond SanText's):
    - Word frequencies come from the training split (:meth:`fit`), as the paper counts its
      corpus; words the split never shows count 0. Unfitted, the vocabulary's own order
      stands in for frequency (BERT's WordPiece vocabulary is roughly frequency-ordered:
      ``the``, ``of``, ``and``, ...). Ties go by that order too.
    - A word outside the vocabulary is rarer than any vocabulary word: it is sensitive.
    """

    name: ClassVar[str] = "santext-plus"
    levels: ClassVar[tuple[float, ...]] = (10, 13, 16)
    # The replacement rate is set by p, not ε: 0.33 at every ε from 8 to 20 on synthetic
    # reviews (most of their words are frequent, so kept with probability 1 − p), so a
    # target rate cannot be reached by the knob.
    calibrates_by_rate: ClassVar[bool] = False

    def __init__(
        self,
        epsilon: PositiveFloat = 13.0,
        p: Probability = 0.3,
        sensitive_share: Probability = 0.9,
        backbone: str | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.p = p
        self.sensitive_share = sensitive_share
        self.backbone = backbone

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """ε·d_X-privacy per sensitive word, within the sensitive words."""
        share = f"{float(self.sensitive_share):.0%}"
        return Guarantee.dx(
            "epsilon",
            self.epsilon,
            unit=Unit.WORD,
            selected=True,
            within="the sensitive words",
            metric=embedding_distance(self.backbone, pooled=_METRIC),
            composes_over=Unit.DOCUMENT,
            source="Yue et al. 2021",
            notes=f"The {share} least frequent vocabulary words are sensitive; any other word "
            f"is kept with probability 1 − p = {1 - float(self.p):g} and has no guarantee",
            mechanism="word_kernel",
        )

    def fit(self, train: Any) -> Self:
        """Count the training split's words: the frequencies that choose the sensitive words."""
        texts = list(train["text"]) if not isinstance(train, (list, tuple)) else list(train)
        counts = Counter(w.lower() for t in texts for w in WORD.findall(str(t)))
        vocab = self.vocabulary()
        self._counts = np.asarray([counts.get(w, 0) for w in vocab.words], dtype=np.int64)
        return self

    def sensitive(self) -> np.ndarray:
        """Per vocabulary row, whether the word is sensitive."""
        vocab = self.vocabulary()
        counts = getattr(self, "_counts", None)
        order = np.arange(len(vocab))
        # most frequent first: by count (fitted), then by vocabulary order
        rank = order if counts is None else np.lexsort((order, -counts))
        n_sensitive = max(2, round(float(self.sensitive_share) * len(vocab)))
        mask = np.zeros(len(vocab), dtype=bool)
        mask[rank[len(vocab) - n_sensitive :]] = True
        return mask

    def replace(
        self, words: Sequence[str], vectors: np.ndarray, rng: np.random.Generator
    ) -> list[str]:
        vocab = self.vocabulary()
        flips, uniforms = rng.random(len(words)), rng.random(len(words))
        mask = self.sensitive()
        outputs = np.flatnonzero(mask)
        rows = self.rows_of(words)
        sensitive = np.where(rows >= 0, mask[np.maximum(rows, 0)], True)
        sample = sensitive | (flips < float(self.p))
        out = list(words)
        todo = np.flatnonzero(sample)
        if len(todo):
            queries, inverse = unique_rows([words[k] for k in todo], vectors[todo])
            picked = exponential_choice(
                queries,
                vocab.vectors[outputs],
                float(self.epsilon),
                uniforms[todo],
                inverse=inverse,
            )
            for k, j in zip(todo.tolist(), outputs[picked].tolist(), strict=True):
                out[k] = vocab.words[j]
        return out

    def audit_pool(self) -> tuple[np.ndarray, str]:
        return np.flatnonzero(self.sensitive()), "sensitive words"

    def replacement_log_probs(
        self, originals: Sequence[str], *, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        """ln P(y | w), exact: a sensitive original's exponential mechanism over V_S; a
        non-sensitive one's mixture of itself (1 − p) and that mechanism (p)."""
        vocab = self.vocabulary()
        rows = self._known(originals)
        mask = self.sensitive()
        out = np.full((len(rows), len(vocab)), -np.inf)
        out[:, mask] = exponential_log_probs(
            vocab.vectors[rows], vocab.vectors[mask], float(self.epsilon)
        )
        plain = np.flatnonzero(~mask[rows])
        if len(plain):
            with np.errstate(divide="ignore"):
                out[plain] += np.log(float(self.p))
            out[plain, rows[plain]] = np.log1p(-float(self.p))
        return out
