"""Randomness enters one way: a ``numpy.random.Generator`` spawned per cell.

Torch code (attackers' and trainers' networks) draws its seed from that generator here, and
runs inside :func:`seeded_torch`, which forks torch's process-wide random state so that nothing
outside sees a change, and hands out a seeded ``torch.Generator`` for shuffling.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from privaudit.runtime.devices import current_device


def draw_seed(rng: np.random.Generator) -> int:
    """One integer seed from ``rng`` (checked), for a library that takes an int."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            "rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(0)), "
            f"got {type(rng).__name__}."
        )
    return int(rng.integers(2**31 - 1))


@contextmanager
def seeded_torch(seed: int | np.random.Generator) -> Iterator[Any]:
    """Seed torch (weights' initialisation, dropout) from ``seed`` — an int, or a generator
    to draw one from — inside a fork of torch's random state (the CPU's, and the current CUDA
    device's when :func:`privaudit.runtime.devices.current_device` is one); yields a CPU
    ``torch.Generator`` seeded the same way, for data order (drawn on the CPU, then moved)."""
    import torch

    value = draw_seed(seed) if isinstance(seed, np.random.Generator) else int(seed)
    # On a GPU, its random state (dropout there) is forked and seeded too.
    device = current_device()
    forked = [torch.device(device).index or 0] if device.startswith("cuda") else []
    with torch.random.fork_rng(devices=forked, device_type="cuda"):
        torch.manual_seed(value)
        yield torch.Generator().manual_seed(value)
