"""The truncated exponential mechanism, TEM (Carvalho et al., SDM 2023)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from privaudit.defenses._words import WordDefense, unique_rows
from privaudit.guarantees import Guarantee, Unit, embedding_distance, guarantee_property
from privaudit.mechanisms.word_sampling import exponential_choice, exponential_log_probs
from privaudit.params import OpenFraction, PositiveFloat


class TEM(WordDefense):
    """Truncated exponential mechanism over word embeddings.

    Paper: Carvalho, Vasiloudis, Feyisetan, Wang, "TEM: High Utility Metric Differential
    Privacy on Text", SIAM SDM 2023 (Algorithm 1).

    Threat model: the user privatizes text locally and releases it; the service and any
    attacker see the released text and may know the mechanism and the embedding.

    Mechanism: for a word w, L_w holds the words within distance γ of it (w included) and
    L̂_w the rest. Each y ∈ L_w scores −d(w, y), an extra element ⊥ scores
    −γ + 2·ln|L̂_w|/ε; Gumbel noise of scale 2/ε is added to every score and the best wins; ⊥
    releases a word of L̂_w uniformly at random. γ = (2/ε)·ln((1 − β)|W|/β) with β = 0.001
    (the probability of a far word is at most β). Summed out, this is exactly
    P(y | w) ∝ exp(−ε·min(d(w, y), γ)/2) over the whole vocabulary: every word of L̂_w gets
    weight exp(−εγ/2). This module draws from that closed form (inverse CDF, one uniform per
    word), which has the same distribution as the Gumbel race and costs one pass over the
    vocabulary per distinct word.

    Privacy knob: ``epsilon`` (1 / Euclidean distance in the backbone's input-embedding
    space). Guarantee: ε·d_X-privacy per word (the paper's proof: |min(d(w, y), γ) −
    min(d(w', y), γ)| <= d(w, w')); a document of n words composes to n·ε.

    Choices and deviations:
    - Vocabulary and embedding: the backbone's single-piece whole words with their input
      embeddings (the paper uses GloVe; its proof holds for any metric).
    - Words outside the vocabulary are embedded as the mean of their WordPieces; words are
      runs of letters, the rest of the text is kept; replacements take the original's casing.
    """

    name: ClassVar[str] = "tem"
    # Replaced words on synthetic reviews (default backbone): 0.89, 0.50, 0.16 (γ exceeds
    # every distance there, so TEM equals SanText at these ε; it truncates below ε ≈ 2).
    levels: ClassVar[tuple[float, ...]] = (10, 13, 16)

    def __init__(
        self,
        epsilon: PositiveFloat = 13.0,
        beta: OpenFraction = 0.001,
        backbone: str | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.beta = beta
        self.backbone = backbone

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """ε·d_X-privacy per word (Carvalho et al. 2023."""
        return Guarantee.dx(
            "epsilon",
            self.epsilon,
            unit=Unit.WORD,
            metric=embedding_distance(
                self.backbone, pooled="Euclidean distance between mean WordPiece input embeddings"
            ),
            composes_over=Unit.DOCUMENT,
            source="Carvalho et al. 2023",
            notes=f"Truncated at γ = (2/ε)·ln((1 − β)|W|/β), β = {float(self.beta):g}",
            mechanism="word_kernel",
        )

    def gamma(self) -> float:
        """The truncation distance γ."""
        n = len(self.vocabulary())
        beta = float(self.beta)
        return 2.0 / float(self.epsilon) * math.log((1.0 - beta) * n / beta)

    def replace(
        self, words: Sequence[str], vectors: np.ndarray, rng: np.random.Generator
    ) -> list[str]:
        vocab = self.vocabulary()
        uniforms = rng.random(len(words))
        queries, inverse = unique_rows(words, vectors)
        picked = exponential_choice(
            queries, vocab.vectors, float(self.epsilon), uniforms, cap=self.gamma(), inverse=inverse
        )
        return [vocab.words[i] for i in picked.tolist()]

    def replacement_log_probs(
        self, originals: Sequence[str], *, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        """ln P(y | w), exact: the truncated exponential mechanism's closed form."""
        vocab = self.vocabulary()
        rows = self._known(originals)
        return exponential_log_probs(
            vocab.vectors[rows], vocab.vectors, float(self.epsilon), cap=self.gamma()
        )
