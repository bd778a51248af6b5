"""The regularised Mahalanobis mechanism (Xu et al., PrivateNLP 2020)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from privaudit.defenses._words import WordDefense
from privaudit.guarantees import Guarantee, Unit, guarantee_property
from privaudit.mechanisms.audited import DXNoise
from privaudit.mechanisms.elliptical import Regularised, sample_mahalanobis_noise
from privaudit.params import PositiveFloat, Probability


def mahalanobis_metric(backbone: str | None, lam: float) -> str:
    """The d_R of a Mahalanobis-noise guarantee, in words."""
    return (
        f"regularised Mahalanobis distance ‖Σ_λ^(−1/2)(x − x')‖, λ = {float(lam):g}, Σ the "
        f"covariance of the candidate words' input embeddings of "
        f"{backbone or 'the default backbone'}"
    )


class MahalanobisMechanism(WordDefense):
    """Elliptical d_X noise on word embeddings, projected to the nearest word.

    Paper: Xu, Aggarwal, Feyisetan, Teissier, "A Differentially Private Text Perturbation
    Method Using a Regularized Mahalanobis Metric", PrivateNLP @ EMNLP 2020 (Algorithm 1).

    Threat model: the user privatizes text locally and releases it; the service and any
    attacker see the released text and may know the mechanism and the embedding.

    Mechanism: each word w becomes the nearest vocabulary word (Euclidean) to φ(w) + Z,
    Z = Y·Σ_λ^{1/2}·X, X uniform on the unit sphere, Y ~ Gamma(dim, 1/ε),
    Σ_λ = λΣ + (1 − λ)I, Σ the vocabulary embeddings' covariance scaled to mean variance 1
    (:mod:`privaudit.mechanisms.elliptical`). The noise stretches along the directions in
    which the vocabulary spreads, so a word in a sparse region is replaced more often than
    under spherical noise at the same ε.

    Privacy knob: ``epsilon`` (1 / d_R). Guarantee: ε·d_R-privacy per word for the
    regularised Mahalanobis distance d_R(x, x') = ‖Σ_λ^{−1/2}(x − x')‖ (the paper's
    proof; the projection is post-processing); a document of n words composes to n·ε.

    Choices and deviations:
    - Vocabulary and embedding: the backbone's single-piece whole words with their input
      embeddings (the paper uses GloVe and fastText); Σ is their covariance. λ defaults to
      0.2 (``mldp-text``'s default; the paper sweeps λ in [0, 1]).
    - Words outside the vocabulary are embedded as the mean of their WordPieces; words are
      runs of letters, the rest of the text is kept; replacements take the original's casing.
    - The nearest-word search is exact (pruned where the noise provably leaves the word
      nearest: :mod:`privaudit.mechanisms.nearest`).
    """

    name: ClassVar[str] = "mahalanobis"
    # Replaced words on synthetic reviews (default backbone, λ = 0.2): 0.82, 0.52, ~0.25.
    levels: ClassVar[tuple[float, ...]] = (60, 80, 100)

    def __init__(
        self, epsilon: PositiveFloat = 80.0, lam: Probability = 0.2, backbone: str | None = None
    ) -> None:
        self.epsilon = epsilon
        self.lam = lam
        self.backbone = backbone

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """ε·d_R-privacy per word, d_R the regularised Mahalanobis distance."""
        return Guarantee.dx(
            "epsilon",
            self.epsilon,
            unit=Unit.WORD,
            metric=mahalanobis_metric(self.backbone, self.lam),
            composes_over=Unit.DOCUMENT,
            source="Xu et al. 2020",
            mechanism="word_kernel",
        )

    def regularised(self) -> Regularised:
        """Σ_λ^{±1/2} of the vocabulary (computed once per λ)."""
        vocab = self.vocabulary()
        cache: dict[float, Regularised] = vocab.__dict__.setdefault("_regularised", {})
        lam = float(self.lam)
        if lam not in cache:
            cache[lam] = Regularised.of(vocab.vectors, lam)
        return cache[lam]

    def noisy(self, vectors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The words' vectors plus one draw of the elliptical noise each."""
        noise = sample_mahalanobis_noise(len(vectors), float(self.epsilon), self.regularised(), rng)
        return np.asarray(vectors, dtype=np.float32) + noise

    def replace(
        self, words: Sequence[str], vectors: np.ndarray, rng: np.random.Generator
    ) -> list[str]:
        vocab = self.vocabulary()
        queries = self.noisy(vectors, rng)
        rows = self.rows_of(words)
        known = rows >= 0
        found = np.empty(len(words), dtype=np.int64)
        index = self.index()
        if known.any():
            found[known] = index.project(
                queries[known], source_ids=rows[known], offsets=queries[known] - vectors[known]
            )
        if (~known).any():
            found[~known] = index.query(queries[~known])
        return [vocab.words[i] for i in found.tolist()]

    def audit_points(self) -> np.ndarray:
        """Vocabulary vectors whitened by Σ_λ^{−1/2}: Euclidean distance there is d_R."""
        return (self.vocabulary().vectors @ self.regularised().whiten).astype(np.float32)

    def audit_noise(self) -> DXNoise:
        """The elliptical noise, whitened: spherical with density ∝ exp(−ε‖u‖) if declared
        right (drawn through this module's ``sample_mahalanobis_noise``)."""
        reg = self.regularised()
        dim = reg.root.shape[0]

        def sample(n: int, eps: float, rng: np.random.Generator) -> np.ndarray:
            return sample_mahalanobis_noise(n, eps, reg, rng).astype(np.float64) @ reg.whiten

        return DXNoise(sample, dim, float(self.epsilon))
