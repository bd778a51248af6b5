"""d_X-privacy noise (Feyisetan et al., "Privacy- and Utility-Preserving Textual Analysis via
Calibrated Multivariate Perturbations", WSDM 2020).

The density of the noise z in R^d is proportional to exp(-eta * ||z||). It is sampled as a
magnitude l ~ Gamma(shape=d, scale=1/eta) times a direction uniform on the unit sphere (a
normalised standard Gaussian). E[||z||] = d / eta. ``eta`` is in units of inverse embedding
distance: larger eta, less noise, less privacy.
"""

from __future__ import annotations

import math

import numpy as np

from privaudit.params import NonNegativeInt, PositiveFloat, PositiveInt, checked


@checked
def check_eta(eta: PositiveFloat) -> float:
    """A privacy parameter eta as a float: a positive number (``inf`` means no noise)."""
    return float(eta)


@checked
def sample_dx_noise(
    n: NonNegativeInt,
    dim: PositiveInt,
    eta: PositiveFloat | np.ndarray,
    rng: np.random.Generator,
    *,
    dtype: type = np.float32,
) -> np.ndarray:
    """``n`` independent d_X noise vectors in R^dim, as an (n, dim) array.

    ``eta`` is one value, or an array of one value per row (a per-token budget, as SAP-CTI
    assigns); ``inf`` entries get no noise. Draw order is fixed (directions, then magnitudes),
    so the same generator state yields the same bytes. A scalar ``inf`` consumes no randomness.
    """
    if np.ndim(eta) == 0:
        value = float(eta)
        if math.isinf(value) or n == 0:
            return np.zeros((n, dim), dtype=dtype)
        etas = np.full((n, 1), value)
    else:
        etas = np.asarray(eta, dtype=float).reshape(-1, 1)
        if etas.shape[0] != n:
            raise ValueError(f"Got {etas.shape[0]} per-row eta values for {n} rows.")
        if np.isnan(etas).any() or (etas <= 0).any():  # the array's values: an input check
            raise ValueError("Every per-row eta must be a positive number (inf = no noise).")
    directions = rng.standard_normal((n, dim))
    norms = np.linalg.norm(directions, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # measure-zero event; keeps the output finite
    scale = np.where(np.isinf(etas), 1.0, 1.0 / etas)
    magnitudes = rng.gamma(shape=dim, scale=scale, size=(n, 1))
    magnitudes[np.isinf(etas)] = 0.0
    return (directions / norms * magnitudes).astype(dtype, copy=False)
