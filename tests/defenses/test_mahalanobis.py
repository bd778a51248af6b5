"""The Mahalanobis mechanism: Σ_λ, the elliptical noise's declared density, seeds, bad input."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import gamma

from privaudit.defenses.mahalanobis import MahalanobisMechanism
from privaudit.mechanisms.elliptical import Regularised, sample_mahalanobis_noise
from privaudit.mechanisms.noise import sample_dx_noise
from tests.conftest import TINY

POINTS = np.random.default_rng(0).normal(size=(400, 3)) * np.array([3.0, 1.0, 0.2])


def test_regularised_root_and_whitening() -> None:
    reg = Regularised.of(POINTS, 0.4)
    cov = np.cov(POINTS, rowvar=False, ddof=0)
    sigma = 0.4 * cov / (np.trace(cov) / 3) + 0.6 * np.eye(3)
    assert np.allclose(reg.root @ reg.root, sigma)
    assert np.allclose(reg.whiten @ reg.root, np.eye(3))
    assert np.allclose(Regularised.of(POINTS, 0.0).root, np.eye(3))


def test_lambda_zero_is_the_spherical_dx_noise() -> None:
    reg = Regularised.of(POINTS, 0.0)
    a = sample_mahalanobis_noise(50, 2.0, reg, np.random.default_rng(1))
    b = sample_dx_noise(50, 3, 2.0, np.random.default_rng(1))
    assert np.allclose(a, b, atol=1e-6)


def test_whitened_noise_has_the_declared_density() -> None:
    """Σ_λ^{-1/2} Z is spherical with norm Gamma(dim, 1/ε): the density ∝ exp(−ε d_R)."""
    eps, n = 4.0, 20_000
    reg = Regularised.of(POINTS, 0.9)
    z = sample_mahalanobis_noise(n, eps, reg, np.random.default_rng(2)).astype(float)
    white = z @ reg.whiten
    norms = np.linalg.norm(white, axis=1)
    assert abs(norms.mean() - 3 / eps) < 4 * np.sqrt(3) / eps / np.sqrt(n)
    assert abs((norms <= gamma.ppf(0.5, 3, scale=1 / eps)).mean() - 0.5) < 0.015
    directions = white / norms[:, None]
    assert np.abs(directions.mean(0)).max() < 0.02  # uniform directions
    raw = np.linalg.norm(z / np.linalg.norm(z, axis=1, keepdims=True) * [1, 0, 0], axis=1)
    assert raw.mean() > 0.6  # the raw noise stretches along the wide axis


def test_declared_noise_step_and_points_are_whitened() -> None:
    mech = MahalanobisMechanism(epsilon=50, lam=0.5, backbone=TINY)
    kernel = mech.word_kernel()
    reg = mech.regularised()
    vocab = mech.vocabulary()
    assert np.allclose(kernel.points[:5], vocab.vectors[:5] @ reg.whiten, atol=1e-5)
    z = kernel.noise.sample(2000, 50.0, np.random.default_rng(0))
    assert abs(np.linalg.norm(z, axis=1).mean() - kernel.noise.dim / 50.0) < 0.05 * (
        kernel.noise.dim / 50.0
    )


def test_same_seed_same_output() -> None:
    texts = ["The staff in Leeds were friendly.", "Bad food."]
    a = MahalanobisMechanism(epsilon=300, backbone=TINY).privatize(
        texts, rng=np.random.default_rng(5)
    )
    b = MahalanobisMechanism(epsilon=300, backbone=TINY).privatize(
        texts, rng=np.random.default_rng(5)
    )
    c = MahalanobisMechanism(epsilon=300, backbone=TINY).privatize(
        texts, rng=np.random.default_rng(6)
    )
    assert a.texts == b.texts and a.texts != c.texts


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="lam"):
        MahalanobisMechanism(lam=1.5)
    with pytest.raises(ValueError, match="lam"):
        Regularised.of(POINTS, -0.1)
    with pytest.raises(ValueError, match="epsilon"):
        MahalanobisMechanism(epsilon=-1)
