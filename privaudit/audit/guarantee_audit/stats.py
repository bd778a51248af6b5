"""The distinguishing test's statistics: holdout event selection and Clopper–Pearson bounds.

A test compares two inputs x and x' that differ in one protected unit. Draws of the public
mechanism on each are split in two: the **selection** part chooses the output event S (the
one that looks most distinguishing), the **estimation** part, never seen by the selection,
counts k = #{M(x) ∈ S} and k' = #{M(x') ∈ S} out of n fresh draws each. Because S is fixed
before the estimation draws are looked at, k and k' are binomial and the exact one-sided
Clopper–Pearson bounds hold:

    P[M(x) ∈ S] >= p_low  and  P[M(x') ∈ S] <= q_high,  each failing with probability <= a,

so ln(p_low / q_high) is a lower bound on the privacy loss ln P[M(x) ∈ S] / P[M(x') ∈ S]
with confidence 1 − 2a. An audit of m tests (pairs × test kinds) sets a = α / (2m)
(Bonferroni): the chance that *any* of its lower bounds overstates its true loss is <= α,
so a correct mechanism is flagged with probability <= α whatever it is.

Two kinds of outputs: discrete ones (a released word or token: S is a set of output values,
:func:`discrete_evidence`) and scalar statistics of a continuous release (S is a threshold
event on the statistic, :func:`threshold_evidence`). Both try both directions (S favouring
x over x', or x' over x) in the selection; the claim bounds either.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta

#: The share of each input's draws used to choose the event; the rest estimate it.
SELECT_SHARE = 0.3
#: Selection draws an output needs (beyond the best one) to join a chosen set of outputs.
MIN_COUNT = 5


def cp_low(k: int | np.ndarray, n: int, a: float) -> np.ndarray:
    """One-sided exact (Clopper–Pearson) lower bound on a binomial proportion: P[p < bound]
    <= ``a`` (0 when k = 0)."""
    k = np.asarray(k, dtype=float)
    out = beta.ppf(a, np.maximum(k, 1e-300), n - k + 1)
    return np.where(k <= 0, 0.0, out)


def cp_high(k: int | np.ndarray, n: int, a: float) -> np.ndarray:
    """One-sided exact (Clopper–Pearson) upper bound on a binomial proportion: P[p > bound]
    <= ``a`` (1 when k = n)."""
    k = np.asarray(k, dtype=float)
    out = beta.ppf(1 - a, k + 1, np.maximum(n - k, 1e-300))
    return np.where(k >= n, 1.0, out)


def log_ratio_bound(k: np.ndarray, n: int, k2: np.ndarray, n2: int, a: float) -> np.ndarray:
    """ln(p_low / q_high), ``-inf`` where the lower bound is 0."""
    low, high = cp_low(k, n, a), cp_high(k2, n2, a)
    with np.errstate(divide="ignore"):
        return np.log(low) - np.log(high)


@dataclass(frozen=True)
class Evidence:
    """One distinguishing test's outcome: the pair, the event chosen on the selection draws,
    its counts on the estimation draws and the bounds they give."""

    test: str  # what was tested: "release", "noise step", "batch of two", ...
    pair: str  # the two inputs, the favoured one first
    event: str  # the output event S, in words
    distance: float  # d(x, x') in the claim's metric
    claimed: float  # the claim's bound on ln P[M(x) ∈ S] / P[M(x') ∈ S] at this distance
    k: int  # draws of M(x) in S (estimation part)
    n: int
    k2: int  # draws of M(x') in S
    n2: int
    a: float  # the one-sided error of each bound (α / 2m)

    @property
    def p_low(self) -> float:
        return float(cp_low(self.k, self.n, self.a))

    @property
    def q_high(self) -> float:
        return float(cp_high(self.k2, self.n2, self.a))

    @property
    def lower(self) -> float:
        """The empirical lower bound on the privacy loss: ln(p_low / q_high)."""
        return float(log_ratio_bound(np.asarray(self.k), self.n, np.asarray(self.k2), self.n2,
                                     self.a))  # fmt: skip

    @property
    def ratio(self) -> float:
        """Lower bound / claim: > 1 is a violation; how close to 1 shows how tight it is."""
        if self.claimed <= 0 or math.isinf(self.claimed):
            return 0.0 if math.isinf(self.claimed) else math.inf
        return max(self.lower, 0.0) / self.claimed

    @property
    def violated(self) -> bool:
        return self.lower > self.claimed


def _n_select(n: int) -> int:
    return max(1, min(n - 1, round(n * SELECT_SHARE)))


def discrete_evidence(
    outputs_x: Sequence[Hashable],
    outputs_y: Sequence[Hashable],
    *,
    a: float,
    names: tuple[str, str],
    distance: float,
    claimed: float,
    test: str,
    show: dict[Hashable, str] | None = None,
    max_set: int = 20,
) -> Evidence:
    """The best event over sets of discrete outputs. Selection (the first
    :data:`SELECT_SHARE` of each input's draws): for each direction, the outputs ranked by
    the bound each gives alone, and each top-j set (j <= ``max_set``; outputs seen fewer than
    :data:`MIN_COUNT` times join none but the first) scored by the bound it would give; the
    best set and direction are then counted on the remaining draws."""
    xs, ys = list(outputs_x), list(outputs_y)
    sx, sy = _n_select(len(xs)), _n_select(len(ys))
    values = sorted(set(xs[:sx]) | set(ys[:sy]), key=repr)
    code = {v: i for i, v in enumerate(values)}
    cx = np.bincount([code[v] for v in xs[:sx]], minlength=len(values)).astype(float)
    cy = np.bincount([code[v] for v in ys[:sy]], minlength=len(values)).astype(float)
    best: tuple[float, bool, list[Hashable]] = (-math.inf, True, [])
    for forward in (True, False):
        num, den, nn, nd = (cx, cy, sx, sy) if forward else (cy, cx, sy, sx)
        # Ranked by the bound each output gives alone, and only outputs seen >= MIN_COUNT
        # times join a set: single sightings would fit the selection draws' noise.
        alone = log_ratio_bound(num, nn, den, nd, a)
        order = np.argsort(-alone, kind="stable")
        order = np.concatenate([order[:1], [i for i in order[1:] if num[i] >= MIN_COUNT]])
        order = order.astype(np.int64)[:max_set]
        kn, kd = np.cumsum(num[order]), np.cumsum(den[order])
        scores = log_ratio_bound(kn, nn, kd, nd, a)
        j = int(np.argmax(scores))
        if scores[j] > best[0]:
            best = (float(scores[j]), forward, [values[i] for i in order[: j + 1]])
    _, forward, chosen = best
    if not chosen:  # no selection draws at all: the first output of x
        chosen = [xs[0]]
    target = set(chosen)
    est_x, est_y = xs[sx:], ys[sy:]
    kx = sum(v in target for v in est_x)
    ky = sum(v in target for v in est_y)
    shown_set = [show.get(v, str(v)) if show else str(v) for v in chosen]
    listed = ", ".join(shown_set[:5]) + (f", … ({len(shown_set)} outputs)" if len(shown_set) > 5
                                          else "")  # fmt: skip
    event = f"output ∈ {{{listed}}}"
    first, second = names if forward else names[::-1]
    k, n, k2, n2 = (kx, len(est_x), ky, len(est_y)) if forward else (ky, len(est_y), kx,
                                                                      len(est_x))  # fmt: skip
    return Evidence(test, f"{first} vs {second}", event, distance, claimed, k, n, k2, n2, a)


def threshold_evidence(
    stat_x: np.ndarray,
    stat_y: np.ndarray,
    *,
    a: float,
    names: tuple[str, str],
    distance: float,
    claimed: float,
    test: str,
    statistic: str,
    grid: int = 400,
) -> Evidence:
    """The best threshold event {s >= t} or {s <= t} on a scalar statistic ``s`` of the
    release. Selection: thresholds at the pooled selection draws' quantiles (and their
    extremes), both tails, both directions, scored by the bound each would give; the best
    is counted on the remaining draws."""
    sx_n, sy_n = _n_select(len(stat_x)), _n_select(len(stat_y))
    sel_x, sel_y = np.sort(stat_x[:sx_n]), np.sort(stat_y[:sy_n])
    pooled = np.concatenate([sel_x, sel_y])
    ts = np.unique(np.concatenate([np.quantile(pooled, np.linspace(0, 1, grid)),
                                   sel_x[:50], sel_x[-50:], sel_y[:50], sel_y[-50:]]))  # fmt: skip
    # The midpoints between neighbouring candidates too: a gap between the two samples is
    # where an exact separation (a reused noise draw) shows.
    ts = np.unique(np.concatenate([ts, (ts[1:] + ts[:-1]) / 2]))
    ge_x = sx_n - np.searchsorted(sel_x, ts, side="left")
    ge_y = sy_n - np.searchsorted(sel_y, ts, side="left")
    le_x = np.searchsorted(sel_x, ts, side="right")
    le_y = np.searchsorted(sel_y, ts, side="right")
    candidates = [
        (log_ratio_bound(ge_x, sx_n, ge_y, sy_n, a), ">=", True),
        (log_ratio_bound(ge_y, sy_n, ge_x, sx_n, a), ">=", False),
        (log_ratio_bound(le_x, sx_n, le_y, sy_n, a), "<=", True),
        (log_ratio_bound(le_y, sy_n, le_x, sx_n, a), "<=", False),
    ]
    score, op, forward, t = -math.inf, ">=", True, float(ts[0])
    for scores, o, f in candidates:
        j = int(np.argmax(scores))
        if scores[j] > score:
            score, op, forward, t = float(scores[j]), o, f, float(ts[j])
    est_x, est_y = stat_x[sx_n:], stat_y[sy_n:]
    kx = int((est_x >= t).sum() if op == ">=" else (est_x <= t).sum())
    ky = int((est_y >= t).sum() if op == ">=" else (est_y <= t).sum())
    first, second = names if forward else names[::-1]
    k, n, k2, n2 = (kx, len(est_x), ky, len(est_y)) if forward else (ky, len(est_y), kx,
                                                                      len(est_x))  # fmt: skip
    event = f"{statistic} {op} {t:.4g}"
    return Evidence(test, f"{first} vs {second}", event, distance, claimed, k, n, k2, n2, a)
