"""The Vickrey mechanism (Xu et al., PrivateNLP 2021)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from privaudit.defenses.mahalanobis import MahalanobisMechanism, mahalanobis_metric
from privaudit.guarantees import Guarantee, Unit, embedding_distance, guarantee_property
from privaudit.mechanisms.audited import DXNoise
from privaudit.mechanisms.noise import sample_dx_noise
from privaudit.params import PositiveFloat, Probability


def vickrey_first(d1: np.ndarray, d2: np.ndarray, t: float) -> np.ndarray:
    """P(release the nearest word) given the distances d1 <= d2 of the noisy vector to its
    two nearest words: (1 − t)·d2 / (t·d1 + (1 − t)·d2) (the paper's selection rule)."""
    num = (1.0 - t) * d2
    den = t * d1 + num
    # 0/0 (the noisy vector exactly on the nearest word, t = 1): the limit as d1 -> 0+
    limit = np.full(np.shape(num), 1.0 if t < 1 else 0.0)
    return np.divide(num, den, out=limit, where=den > 0)


class Vickrey(MahalanobisMechanism):
    """Noise on word embeddings, then a random choice between the two nearest words.

    Paper: Xu, Aggarwal, Feyisetan, Teissier, "On a Utilitarian Approach to Privacy
    Preserving Text Generation", PrivateNLP @ NAACL 2021.

    Threat model: the user privatizes text locally and releases it; the service and any
    attacker see the released text and may know the mechanism and the embedding.

    Mechanism: φ(w) + Z as in the d_X mechanism (``lam`` = 0, spherical noise of density
    ∝ exp(−ε‖z‖): Feyisetan et al. 2020) or the Mahalanobis mechanism (``lam`` > 0, elliptical
    noise: Xu et al. 2020); with w₁, w₂ its two nearest vocabulary words at distances
    d₁ <= d₂, w₁ is released with probability (1 − t)·d₂ / (t·d₁ + (1 − t)·d₂) and w₂
    otherwise. t = 0 is the nearest-neighbour mechanism; larger t moves the release to the
    second-nearest word (the original, nearest at small noise, is hidden as the highest bid is
    in a Vickrey auction).

    Privacy knob: ``epsilon`` (1 / Euclidean distance, or 1 / d_R with ``lam`` > 0).
    Guarantee: ε·d_X-privacy per word (the choice depends on the noisy vector only: randomised
    post-processing, as the paper argues); a document of n words composes to n·ε.

    Choices and deviations:
    - t defaults to 0.75 (the paper selects t per data set by a constrained optimisation of
      utility at a target empirical privacy; 0.75 favours the second-nearest word, the
      mechanism's point).
    - Vocabulary and embedding: the backbone's single-piece whole words with their input
      embeddings (the paper uses GloVe); words outside the vocabulary are embedded as the
      mean of their WordPieces; the rest of the text is kept; replacements take the
      original's casing. The two-nearest search is exact.
    """

    name: ClassVar[str] = "vickrey"
    # Replaced words on synthetic reviews (default backbone, t = 0.75): 0.97, 0.88, 0.75. In
    # 384 dimensions the noisy vector is nearly as far from its second-nearest word as from
    # the nearest, so the second is released ~3/4 of the time however small the noise: the
    # rate cannot fall below ~0.74 at t = 0.75.
    levels: ClassVar[tuple[float, ...]] = (40, 60, 100)

    def __init__(
        self,
        epsilon: PositiveFloat = 60.0,
        t: Probability = 0.75,
        lam: Probability = 0.0,
        backbone: str | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.t = t
        self.lam = lam
        self.backbone = backbone

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """ε·d_X-privacy per word (Euclidean, or d_R with ``lam`` > 0)."""
        metric = (
            embedding_distance(
                self.backbone, pooled="Euclidean distance between mean WordPiece input embeddings"
            )
            if float(self.lam) == 0
            else mahalanobis_metric(self.backbone, self.lam)
        )
        return Guarantee.dx(
            "epsilon",
            self.epsilon,
            unit=Unit.WORD,
            metric=metric,
            composes_over=Unit.DOCUMENT,
            source="Xu et al. 2021",
            mechanism="word_kernel",
        )

    def noisy(self, vectors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        if float(self.lam) == 0:
            dim = np.shape(vectors)[1]
            noise = sample_dx_noise(len(vectors), dim, float(self.epsilon), rng)
            return np.asarray(vectors, dtype=np.float32) + noise
        return super().noisy(vectors, rng)

    def replace(
        self, words: Sequence[str], vectors: np.ndarray, rng: np.random.Generator
    ) -> list[str]:
        vocab = self.vocabulary()
        queries = self.noisy(vectors, rng)
        uniforms = rng.random(len(words))
        ids, dist = self.index().k_nearest(queries, 2)
        first = uniforms < vickrey_first(dist[:, 0], dist[:, 1], float(self.t))
        chosen = np.where(first, ids[:, 0], ids[:, 1])
        return [vocab.words[i] for i in chosen.tolist()]

    def audit_points(self) -> np.ndarray:
        if float(self.lam) == 0:
            return self.vocabulary().vectors
        return super().audit_points()

    def audit_noise(self) -> DXNoise:
        if float(self.lam) == 0:
            dim = self.vocabulary().vectors.shape[1]
            return DXNoise(
                lambda n, e, rng: sample_dx_noise(n, dim, e, rng), dim, float(self.epsilon)
            )
        return super().audit_noise()
