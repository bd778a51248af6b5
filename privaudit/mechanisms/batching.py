"""Ragged per-document arrays ↔ one flat batch, so the kernels run once per call."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np


def flatten(rows: Sequence[np.ndarray], *, dim: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate per-document arrays; ``bounds[i]:bounds[i+1]`` is document i's slice."""
    bounds = np.cumsum([0, *(len(r) for r in rows)])
    if rows:
        return np.concatenate(rows), bounds
    empty = np.zeros((0, dim), dtype=np.float32) if dim else np.zeros(0, dtype=np.int64)
    return empty, bounds


def unflatten(flat: np.ndarray, bounds: np.ndarray) -> list[np.ndarray]:
    return [flat[a:b] for a, b in itertools.pairwise(bounds)]
