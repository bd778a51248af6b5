"""Calibration: privacy knob (eta) → measured replacement rate, and its inverse.

The rate is measured on a fixed sample of a corpus with the same seed at every eta (common
random numbers), which makes the measured curve smooth and monotone enough to invert by
bisection in log(eta).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privaudit.api import Defense
from privaudit.metrics import replacement_rate
from privaudit.registry import CORPORA


@dataclass
class Calibration:
    defense: str
    knob: str
    points: list[tuple[float, float]]  # (knob value, replacement rate), sorted by knob
    target: float | None = None
    solution: float | None = None

    @property
    def solved_rate(self) -> float | None:
        if self.solution is None:
            return None
        return dict(self.points).get(self.solution)


def check_calibratable(defense: type[Defense] | Defense) -> None:
    """Refuse, in one line and before any text is privatized, a defense whose knob cannot be
    mapped to a replacement rate: no knob, or a declaration ``calibrates_by_rate = False``."""
    if defense.knob is None:
        raise ValueError(f"Defense {defense.name!r} has no privacy knob to calibrate.")
    if not getattr(defense, "calibrates_by_rate", True):
        raise ValueError(
            f"Defense {defense.name!r} has no replacement-rate knob (its {defense.knob} is not a "
            "continuous scale of replaced words), so it cannot be calibrated by replacement "
            "rate; give "
            f"its {defense.knob} values directly (knob_values in a grid config)."
        )


def sample_texts(
    corpus: str = "synthetic-reviews",
    n_docs: int = 150,
    seed: int = 0,
    params: dict[str, object] | None = None,
) -> list[str]:
    """A seeded sample of a corpus's train split, for calibration."""
    if n_docs < 1:
        raise ValueError(f"n_docs must be at least 1, got {n_docs}.")
    data = CORPORA.get(corpus)(**(params or {}))
    texts = data.texts("train")
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(texts), size=min(n_docs, len(texts)), replace=False)
    return [texts[i] for i in sorted(idx)]


def measure_rate(defense: Defense, texts: Sequence[str], seed: int = 0) -> float:
    release = defense.privatize(list(texts), rng=np.random.default_rng(seed))
    rate = replacement_rate([release.audit])
    if math.isnan(rate):
        raise ValueError(
            f"Defense {defense.name!r} does not report which units it replaced, so it cannot "
            "be calibrated by replacement rate."
        )
    return rate


def calibrate(
    defense: Defense,
    texts: Sequence[str],
    *,
    values: Sequence[float] | None = None,
    target: float | None = None,
    seed: int = 0,
    tol: float = 0.003,
    max_steps: int = 14,
    known: dict[float, float] | None = None,
) -> Calibration:
    """Measure the rate at ``values`` (default: a log grid); with ``target``, also solve for the
    knob value whose measured rate is within ``tol`` of it."""
    check_calibratable(defense)
    if target is not None and not 0.0 < target < 1.0:
        raise ValueError(f"The target rate must lie strictly between 0 and 1, got {target}.")
    if not texts:
        raise ValueError("Calibration needs at least one text.")
    grid = sorted(values) if values else [float(v) for v in np.geomspace(10, 1000, 11)]
    # ``known`` carries measurements between calls (several targets, same texts and seed).
    rates = known if known is not None else {}
    for v in grid:
        if v not in rates:
            rates[v] = measure_rate(defense.with_knob(v), texts, seed)
    result = Calibration(defense.name, defense.knob, sorted((v, rates[v]) for v in grid))
    if target is None:
        return result
    # Bracket: rate falls as the knob grows (less noise).
    above = [v for v, r in rates.items() if r >= target]
    below = [v for v, r in rates.items() if r <= target]
    if not above or not below:
        lo, hi = min(rates), max(rates)
        raise ValueError(
            f"Target rate {target} is outside the measured range [{rates[hi]:.3f}, "
            f"{rates[lo]:.3f}] for {defense.knob} in [{lo:g}, {hi:g}]; widen --values."
        )
    lo, hi = max(above), min(v for v in below if v >= max(above))
    best = min(rates, key=lambda v: abs(rates[v] - target))
    for _ in range(max_steps):
        if abs(rates[best] - target) <= tol:
            break
        mid = math.exp((math.log(lo) + math.log(hi)) / 2)
        rates[mid] = measure_rate(defense.with_knob(mid), texts, seed)
        if rates[mid] >= target:
            lo = mid
        else:
            hi = mid
        best = min(rates, key=lambda v: abs(rates[v] - target))
    result.points = sorted(rates.items())
    result.target, result.solution = target, best
    return result
