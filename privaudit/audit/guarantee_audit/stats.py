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

**What a sample can show** (:func:`loss_ceiling`): with n estimation draws a side, no event
can show more than ln(p_low(n of n) / q_high(0 of n)) ≈ ln(n / ln(1/a)), and an event of
probability p no more than ≈ ln(p·n / ln(1/a)). The ceiling used is that of p = 2 %
(:data:`RESOLUTION`): a claim above it is *untestable* at n (:func:`draws_needed` says how many
draws would test it), and "holds" means that no event the tests *search* (their thresholds,
sets of outputs and point masses) showed a violation, where one of probability >= 2 % would
have shown: an event no test looks at (a narrow band around the original, say) is not
covered. Besides the loss tests, two kinds of
evidence need no claim at all: an **independence** test (:func:`independence_evidence`: equal
outputs within one call against across calls; a fresh noise draw per unit makes them equally
likely) and a **scale** test on the declared noise density (:func:`scale_evidence`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta, fisher_exact

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


#: What a piece of evidence is about (``Evidence.role``): the release itself (a lower bound on
#: the privacy loss of what leaves the device: only these certify "holds"), the noise step
#: alone, the independence of the draws, the scale of the declared noise density.
RELEASE, NOISE, INDEPENDENCE, SCALE = "release", "noise", "independence", "scale"


#: The smallest probability (under the favoured input) of an event among those a test
#: searches whose violation a test that "holds" must have been able to show: a 2 % leak of
#: the original is such an event, and a claim no event of probability >= 2 % could
#: contradict at n is "untestable" there.
RESOLUTION = 0.02


def loss_ceiling(n: int, n2: int, a: float, p: float = RESOLUTION) -> float:
    """The largest lower bound an event of probability ``p`` under the first input can show
    with n and n2 estimation draws: p·n of the first sample in it, none of the second
    (``p = 1``: any event at all, ≈ ln(n / ln(1/a)))."""
    if n <= 0 or n2 <= 0:
        return -math.inf
    return float(log_ratio_bound(np.asarray(max(1, round(p * n))), n, np.asarray(0), n2, a))


def draws_needed(claimed: float, a: float) -> float:
    """The fewest draws per input (selection share included) whose :func:`loss_ceiling` is
    above ``claimed``: an event of probability :data:`RESOLUTION` that the other input never
    reaches could then contradict the claim. ``inf`` beyond 10^14 (no feasible audit)."""
    if claimed < 0:
        return 1.0
    lo, hi = 1, 2
    while loss_ceiling(hi, hi, a) <= claimed:
        lo, hi = hi, hi * 4
        if hi > 1e14:  # beyond any feasible audit (and q_high's float precision)
            return math.inf
    while hi - lo > max(1, lo // 1000):  # to 0.1 %: a count to report, not to the draw
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if loss_ceiling(mid, mid, a) <= claimed else (lo, mid)
    return float(math.ceil(hi / (1 - SELECT_SHARE)))


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
    role: str = RELEASE  # RELEASE, NOISE, INDEPENDENCE or SCALE (see above)
    bound: float | None = None  # a scale test's lower bound (η̂ or ε̂), in the claim's units
    drawn: bool = True  # False: not drawn, the claim is above what the draw cap could show

    @property
    def p_low(self) -> float:
        return float(cp_low(self.k, self.n, self.a))

    @property
    def q_high(self) -> float:
        return float(cp_high(self.k2, self.n2, self.a))

    @property
    def lower(self) -> float:
        """The empirical lower bound on the privacy loss: ln(p_low / q_high) (a scale test:
        its bound on the declared density's parameter)."""
        if self.bound is not None:
            return self.bound
        if not self.drawn:
            return -math.inf
        return float(
            log_ratio_bound(np.asarray(self.k), self.n, np.asarray(self.k2), self.n2, self.a)
        )

    @property
    def ceiling(self) -> float:
        """The largest lower bound this test's sample could show (``inf`` for a scale test)."""
        return math.inf if self.role == SCALE else loss_ceiling(self.n, self.n2, self.a)

    @property
    def testable(self) -> bool:
        """Whether the sample could have shown a violation: the claim is below the ceiling."""
        return self.claimed < self.ceiling

    @property
    def needed(self) -> float:
        """Draws per input that would make the test able to contradict its claim."""
        return draws_needed(self.claimed, self.a)

    @property
    def ratio(self) -> float:
        """Lower bound / claim: > 1 is a violation; how close to 1 shows how tight it is."""
        if self.claimed <= 0 or math.isinf(self.claimed):  # no tightness to show
            return math.inf if self.violated and not math.isinf(self.claimed) else 0.0
        return max(self.lower, 0.0) / self.claimed

    @property
    def violated(self) -> bool:
        return self.lower > self.claimed


@dataclass(frozen=True)
class Question:
    """What one distinguishing test asks, as its :class:`Evidence` reports it: the test's
    name, the two inputs (x first), d(x, x') in the claim's metric, the claim's bound at
    that distance and the one-sided error ``a`` of each bound."""

    test: str
    names: tuple[str, str]
    distance: float
    claimed: float
    a: float

    def evidence(self, event: str, forward: bool, kx: int, nx: int, ky: int, ny: int) -> Evidence:
        """The evidence for ``event`` counted k of n draws of x and of x': the event favours
        x (``forward``), else x', whose draws then come first."""
        first, second = self.names if forward else self.names[::-1]
        k, n, k2, n2 = (kx, nx, ky, ny) if forward else (ky, ny, kx, nx)
        pair = f"{first} vs {second}"
        return Evidence(self.test, pair, event, self.distance, self.claimed, k, n, k2, n2, self.a)


def _n_select(n: int) -> int:
    return max(1, min(n - 1, round(n * SELECT_SHARE)))


def discrete_evidence(
    outputs_x: Sequence[Hashable],
    outputs_y: Sequence[Hashable],
    question: Question,
    *,
    show: dict[Hashable, str] | None = None,
    max_set: int = 20,
) -> Evidence:
    """The best event over sets of discrete outputs, answering ``question``. Selection (the
    first :data:`SELECT_SHARE` of each input's draws): for each direction, the outputs ranked
    by the bound each gives alone, and each top-j set (j <= ``max_set``; outputs seen fewer
    than :data:`MIN_COUNT` times join none but the first) scored by the bound it would give;
    the best set and direction are then counted on the remaining draws."""
    a = question.a
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
    listed = ", ".join(shown_set[:5]) + (
        f", … ({len(shown_set)} outputs)" if len(shown_set) > 5 else ""
    )
    event = f"output ∈ {{{listed}}}"
    return question.evidence(event, forward, kx, len(est_x), ky, len(est_y))


def threshold_evidence(
    stat_x: np.ndarray,
    stat_y: np.ndarray,
    question: Question,
    *,
    statistic: str,
    grid: int = 400,
) -> Evidence:
    """The best threshold event {s >= t} or {s <= t} on a scalar statistic ``s`` of the
    release, answering ``question``. Selection: thresholds at the pooled selection draws'
    quantiles (and their extremes), both tails, both directions, scored by the bound each
    would give; the best is counted on the remaining draws."""
    a = question.a
    sx_n, sy_n = _n_select(len(stat_x)), _n_select(len(stat_y))
    sel_x, sel_y = np.sort(stat_x[:sx_n]), np.sort(stat_y[:sy_n])
    pooled = np.concatenate([sel_x, sel_y])
    ts = np.unique(
        np.concatenate(
            [
                np.quantile(pooled, np.linspace(0, 1, grid)),
                sel_x[:50],
                sel_x[-50:],
                sel_y[:50],
                sel_y[-50:],
            ]
        )
    )
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
    event = f"{statistic} {op} {t:.4g}"
    return question.evidence(event, forward, kx, len(est_x), ky, len(est_y))


def independence_evidence(
    within: Sequence[bool],
    across: Sequence[bool],
    *,
    a: float,
    test: str,
    pair: str,
    event: str,
    continuous: bool = False,
) -> Evidence:
    """Equal outputs in disjoint pairs drawn within one call (``within``) against pairs drawn
    in two calls (``across``): with a fresh noise draw per unit and per call every pair is
    equal with the same probability, so ``lower`` = ln(p_low / q_high) > 0 (each bound at
    ``a``) contradicts independence. ``continuous`` outputs (noise vectors) are never equal
    under a density: one exact repeat anywhere is the violation (``bound`` = inf)."""
    k, n, k2, n2 = int(np.sum(within)), len(within), int(np.sum(across)), len(across)
    bound = None
    if continuous:
        bound = math.inf if k + k2 > 0 else -math.inf
    return Evidence(test, pair, event, 0.0, 0.0, k, n, k2, n2, a, role=INDEPENDENCE, bound=bound)


def fisher_p(e: Evidence) -> float:
    """The one-sided Fisher exact p-value of an independence test (shown beside the bounds)."""
    table = [[e.k, e.n - e.k], [e.k2, e.n2 - e.k2]]
    return float(fisher_exact(table, alternative="greater").pvalue)


def scale_evidence(
    inside: np.ndarray,
    declared: float,
    estimate: Callable[[float], float],
    *,
    a: float,
    test: str,
    pair: str,
    event: str,
    claimed: float,
) -> Evidence:
    """The declared noise density's scale: ``inside`` marks the draws in an event whose
    probability under the declared density is ``declared`` and grows with the density's
    parameter (the noise norm below the declared median: more draws inside means less noise).
    The lower Clopper–Pearson bound p_low on its probability gives, through ``estimate``
    (the parameter at which the declared family puts p_low in the event), a lower bound on the
    parameter the mechanism really draws at: above ``claimed``, less noise than claimed."""
    k, n = int(np.sum(inside)), len(inside)
    p_low = float(cp_low(k, n, a))
    value = estimate(p_low) if p_low > 0 else 0.0
    k2 = round(declared * n)
    return Evidence(test, pair, event, 1.0, claimed, k, n, k2, n, a, role=SCALE, bound=value)
