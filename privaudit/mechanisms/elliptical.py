"""Elliptical d_X noise for the regularised Mahalanobis metric (Xu, Aggarwal, Feyisetan,
Teissier, "A Differentially Private Text Perturbation Method Using a Regularized Mahalanobis
Metric", PrivateNLP 2020).

Σ is the covariance of the candidate vectors scaled to mean variance 1 (trace = dim), and
Σ_λ = λΣ + (1 − λ)I. The noise is Z = Y·Σ_λ^{1/2}·X with X uniform on the unit sphere and
Y ~ Gamma(dim, 1/ε) (the paper's Algorithm 1): its density is ∝ exp(−ε‖Σ_λ^{−1/2} z‖), so the
noisy vector is ε·d_R-private for d_R(x, x') = ‖Σ_λ^{−1/2}(x − x')‖. λ = 0 is the spherical
d_X noise of :func:`privaudit.mechanisms.noise.sample_dx_noise`, which draws X and Y here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privaudit.mechanisms.noise import sample_dx_noise


@dataclass(frozen=True)
class Regularised:
    """Σ_λ^{1/2} (``root``) and Σ_λ^{−1/2} (``whiten``), both symmetric (float64)."""

    lam: float
    root: np.ndarray
    whiten: np.ndarray

    @classmethod
    def of(cls, vectors: np.ndarray, lam: float) -> Regularised:
        if not 0.0 <= float(lam) <= 1.0:
            raise ValueError(f"lam is in [0, 1], got {lam!r}.")
        x = np.asarray(vectors, dtype=np.float64)
        dim = x.shape[1]
        cov = np.cov(x, rowvar=False, ddof=0)
        cov /= np.trace(cov) / dim  # mean variance 1, as in the reference implementations
        sigma = float(lam) * cov + (1.0 - float(lam)) * np.eye(dim)
        values, vecs = np.linalg.eigh(sigma)
        values = np.maximum(values, 1e-12)
        root = (vecs * np.sqrt(values)) @ vecs.T
        whiten = (vecs / np.sqrt(values)) @ vecs.T
        return cls(float(lam), root, whiten)

    def distance(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """d_R between rows of ``a`` and ``b`` (same shape)."""
        return np.linalg.norm((np.asarray(a, float) - np.asarray(b, float)) @ self.whiten, axis=1)


def sample_mahalanobis_noise(
    n: int, epsilon: float, metric: Regularised, rng: np.random.Generator
) -> np.ndarray:
    """``n`` draws of Y·Σ_λ^{1/2}·X (float32, (n, dim)); the same generator state gives the
    same bytes (directions, then magnitudes, as :func:`sample_dx_noise`)."""
    dim = metric.root.shape[0]
    z = sample_dx_noise(n, dim, epsilon, rng, dtype=np.float64)
    return (z @ metric.root).astype(np.float32)
