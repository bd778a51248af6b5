"""The Laplace mechanism (Dwork, McSherry, Nissim, Smith 2006) for bounded representations.

Adding i.i.d. Laplace(0, b) noise to every coordinate of f(x), with b = Δ/ε and Δ the L1
sensitivity of f (the largest ||f(x) - f(x')||_1 over all pairs of inputs, in the local model),
is ε-differentially private. The std of Laplace(0, b) is √2·b.

Representations from an encoder are unbounded, so the defenses that use this module first bound
them: :func:`minmax_normalise` maps each vector to [0, 1]^d (Lyu et al. 2020; CAPE's released
code does the same). After it, any one coordinate moves by at most 1 between two inputs, and
the whole d-dimensional vector by at most d in L1 (two complementary 0/1 vectors reach it).

Written once here for numpy (the client-side release) and torch (training-time perturbation,
differentiable w.r.t. the representation); torch is imported only inside the torch helpers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import Release
from privaudit.params import FiniteNonNegativeFloat, FinitePositiveFloat, PositiveFloat, checked

if TYPE_CHECKING:
    import torch


@checked
def check_epsilon(epsilon: PositiveFloat) -> float:
    """A privacy parameter epsilon as a float: a positive number (``inf`` means no noise)."""
    return float(epsilon)


@checked
def laplace_scale(epsilon: PositiveFloat, sensitivity: FinitePositiveFloat) -> float:
    """The Laplace scale b = Δ/ε (Δ the L1 sensitivity); 0.0 when ε is ``inf``."""
    return 0.0 if math.isinf(epsilon) else float(sensitivity) / float(epsilon)


@checked
def _check_scale(scale: FiniteNonNegativeFloat) -> float:
    """A Laplace scale (sensitivity / epsilon) as a float."""
    return float(scale)


def sample_laplace(
    shape: int | Sequence[int],
    scale: float,
    rng: np.random.Generator,
    dtype: type = np.float32,
) -> np.ndarray:
    """I.i.d. Laplace(0, ``scale``) noise of ``shape``, drawn in one vectorised call.

    The same generator state yields the same bytes; ``scale == 0`` (ε = inf) returns zeros and
    consumes no randomness, so a noiseless run leaves the generator where it was.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            "rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(0)), "
            f"got {type(rng).__name__}."
        )
    b = _check_scale(scale)
    size = (int(shape),) if isinstance(shape, int | np.integer) else tuple(int(s) for s in shape)
    if any(s < 0 for s in size):
        raise ValueError(f"A noise shape has non-negative sizes, got {size}.")
    if b == 0.0 or math.prod(size) == 0:
        return np.zeros(size, dtype=dtype)
    return rng.laplace(0.0, b, size=size).astype(dtype, copy=False)


def minmax_normalise(x: np.ndarray) -> np.ndarray:
    """Map each row (the last axis) to [0, 1]: (x - min x) / (max x - min x), as float32.

    A constant row (max == min) becomes all zeros: any fixed value in [0, 1] keeps the
    sensitivity bound, and zeros avoid a division by zero.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x.astype(np.float32)
    lo = x.min(axis=-1, keepdims=True)
    span = x.max(axis=-1, keepdims=True) - lo
    safe = np.where(span > 0, span, 1.0)
    out = np.where(span > 0, (x - lo) / safe, 0.0)
    return np.clip(out, 0.0, 1.0).astype(np.float32)  # clip: rounding must not leave [0, 1]


def pooled_release(
    pooled: np.ndarray,
    epsilon: float,
    sensitivity: float,
    rng: np.random.Generator,
    meta: dict[str, Any],
    audit: dict[str, Any] | None = None,
) -> Release:
    """The release of CAPE and DPNR: each pooled row min-max normalised to [0, 1], plus i.i.d.
    Laplace(Δ/ε) noise per coordinate (none at ε = ``inf``). ``meta`` gains ``epsilon``,
    ``sensitivity`` and the whole-vector ``vector_epsilon`` = dim·ε/Δ."""
    clean = minmax_normalise(pooled)
    noisy = clean + sample_laplace(clean.shape, laplace_scale(epsilon, sensitivity), rng)
    dim = clean.shape[1] if clean.ndim == 2 else 0
    return Release(
        "pooled_vectors",
        vectors=[row.copy() for row in noisy],
        meta=meta
        | {
            "epsilon": epsilon,
            "sensitivity": sensitivity,
            "vector_epsilon": dim * epsilon / sensitivity,
        },
        audit=audit or {},
    )


def minmax_normalise_torch(x: torch.Tensor) -> torch.Tensor:
    """:func:`minmax_normalise` in torch, differentiable w.r.t. ``x`` (no NaN gradients on
    constant rows)."""
    import torch

    lo = x.amin(dim=-1, keepdim=True)
    span = x.amax(dim=-1, keepdim=True) - lo
    positive = span > 0
    safe = torch.where(positive, span, torch.ones_like(span))
    return torch.where(positive, (x - lo) / safe, torch.zeros_like(x))


def laplace_like(x: torch.Tensor, scale: float, generator: torch.Generator) -> torch.Tensor:
    """I.i.d. Laplace(0, ``scale``) noise shaped like ``x`` (same dtype and device), drawn from
    ``generator`` as the difference of two Exp(1) variables (``torch.distributions.Laplace``
    takes no generator); the draws are made on the generator's device (e.g. the CPU one of
    :func:`~privaudit.mechanisms.seeding.seeded_torch`) and moved to ``x``'s, so the noise is
    the same on every device. ``scale == 0`` returns zeros and consumes no randomness."""
    import torch

    b = _check_scale(scale)
    if b == 0.0 or x.numel() == 0:
        return torch.zeros_like(x)
    e = torch.empty((2, *x.shape), dtype=x.dtype, device=generator.device)
    e.exponential_(1.0, generator=generator)
    return ((e[0] - e[1]) * b).to(x.device)
