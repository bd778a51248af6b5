"""The adapter of the sentence inversions: any release's features mapped into the clean pooled
space by a ridge regression learnt on the attacker's aux (:mod:`privaudit.attacks._sentence`),
shrunk towards the identity when the release already lives there, towards zero otherwise."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from privaudit.runtime.memo import ObjectMemo, digest


class Split(Protocol):
    """Which aux rows train the map (``fit``) and which choose its strength (``val``)."""

    fit: np.ndarray
    val: np.ndarray


#: The feature maps of the latest defense points (:func:`fit_adapter`).
ADAPTERS = ObjectMemo(size=4)

#: Ridge strengths tried on the held-out aux (times the mean squared singular value).
ALPHAS = np.geomspace(1e-3, 1e2, 11)


@dataclass
class Adapter:
    """An affine map from a release's row-standardised features into the clean pooled space
    (row-standardised), ``y = y_mean + (x - x_mean) @ weight``."""

    x_mean: np.ndarray
    y_mean: np.ndarray
    weight: np.ndarray  # (d_in, d_out)
    alpha: float | None = None  # the chosen ridge strength (None: the prior alone)
    val_mse: float | None = None

    @classmethod
    def identity(cls, dim: int) -> Adapter:
        zero = np.zeros(dim, np.float32)
        return cls(zero, zero, np.eye(dim, dtype=np.float32))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        out = self.y_mean + (np.asarray(x, np.float32) - self.x_mean) @ self.weight
        return np.ascontiguousarray(out, dtype=np.float32)


def fit_adapter(
    source: np.ndarray, target: np.ndarray, aux: Split, *, identity_prior: bool
) -> Adapter:
    """Ridge regression from ``source`` to ``target`` rows on the aux training documents,
    shrunk towards the identity (``identity_prior``: the release lives in the target space)
    or towards zero; the strength (or the prior alone) chosen by held-out mean squared
    error. Memoised by content (:data:`ADAPTERS`): both attacks at a defense point fit the
    same map."""
    key = digest([source, target, aux.fit, aux.val, identity_prior])
    return ADAPTERS.get(key, lambda: _fit_adapter(source, target, aux, identity_prior))


def _fit_adapter(
    source: np.ndarray, target: np.ndarray, aux: Split, identity_prior: bool
) -> Adapter:
    x_fit, y_fit = source[aux.fit].astype(np.float64), target[aux.fit].astype(np.float64)
    x_mean, y_mean = x_fit.mean(axis=0), y_fit.mean(axis=0)
    x = x_fit - x_mean
    d_in, d_out = source.shape[1], target.shape[1]
    prior = np.eye(d_in, d_out) if identity_prior else np.zeros((d_in, d_out))
    residual = (y_fit - y_mean) - x @ prior
    u, sv, vt = np.linalg.svd(x, full_matrices=False)
    projected = u.T @ residual
    x_val = source[aux.val].astype(np.float64) - x_mean
    y_val = target[aux.val].astype(np.float64)

    def mse(weight: np.ndarray) -> float:
        return float(np.mean((y_mean + x_val @ weight - y_val) ** 2))

    best = (mse(prior), None, prior)
    scale = float(np.mean(sv**2)) if len(sv) else 1.0
    for alpha in ALPHAS * scale:
        weight = prior + vt.T @ ((sv / (sv**2 + alpha))[:, None] * projected)
        err = mse(weight)
        if err < best[0]:
            best = (err, float(alpha), weight)
    err, alpha, weight = best
    return Adapter(
        x_mean=x_mean.astype(np.float32),
        y_mean=y_mean.astype(np.float32),
        weight=weight.astype(np.float32),
        alpha=alpha,
        val_mse=err,
    )
