"""Paired comparisons of two defenses on the same bootstrap resamples: the difference of their
hypervolumes with its interval and standard error, Holm's family-wise test over a family's
pairs with Bonferroni's simultaneous interval, and what the run's data can decide
(:class:`FamilyPower`): the smallest difference it separates with :data:`POWER` power, and
the units (people or victims) and seeds per point a named difference needs. Both come from
the resampling spread of the family's paired differences (the documents' share and the
fits'), never from an observed difference: a tied pair's observed difference is mostly noise,
and a power figure computed from it predicts separations that are not there (the post-hoc
power fallacy: Hoenig & Heisey 2001, Am. Stat. 55:19–24)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from privaudit.metrics.outcomes import interval

#: Beyond this multiple of the current victims, a number of victims is not realistic.
REALISTIC_FACTOR = 100.0
#: A hypervolume difference this small is no difference (the hypervolume is in [0, 1]).
NO_DIFFERENCE = 1e-6
#: Beyond this many seeds per point, a number of refits is not realistic.
REALISTIC_SEEDS = 100
#: The power the minimum detectable difference and the units needed are stated at.
POWER = 0.8
#: The difference that matters on the board's own scale when the user names none: 0.05 of
#: the hypervolume box (5 % of the privacy-utility area between chance and perfect; about the
#: gap one knob step of a defense makes on the quick grid). ``leaderboard(difference=...)``
#: and ``privaudit leaderboard --difference`` name another.
MATTERS = 0.05


@dataclass(frozen=True)
class Pair:
    """Two defenses of a family, ``a`` the one with the larger point hypervolume: the paired
    difference ``diff`` = HV(a) − HV(b) with its interval and bootstrap ``se``, at ``n``
    units (people or victims)."""

    a: str
    b: str
    diff: float
    ci_low: float
    ci_high: float
    se: float
    n: int
    #: The part of ``se`` from the attackers' and the service's refits (does not shrink with n).
    se_fit: float = 0.0
    #: The Bonferroni simultaneous interval over the family's pairs (shown; Holm decides).
    adj_low: float = math.nan
    adj_high: float = math.nan
    #: The critical value of that interval (z for one pair): the power lines use it.
    crit: float = math.nan
    seeds: int = 1  # seeds per point now
    #: Rejected by Holm's procedure over the family's pairs; None: not tested.
    holm: bool | None = None

    @property
    def separated_raw(self) -> bool:
        """The pair's own interval excludes 0 (no correction for the family's other pairs)."""
        return bool(self.ci_low > 0 or self.ci_high < 0)

    @property
    def separated(self) -> bool:
        """Separated with family-wise confidence: the pair's own interval excludes 0 and
        Holm's procedure over the family's pairs rejects it (the interval alone where no
        Holm test was made)."""
        return self.separated_raw and self.holm is not False


def _z(level: float) -> float:
    return NormalDist().inv_cdf((1 + level) / 2)


def holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down rejections (Holm 1979, Scand. J. Statist. 6:65–70): the k-th smallest
    p-value is compared with ``alpha / (m − k)``, stopping at the first that fails; the
    chance of any false rejection stays at most ``alpha`` whatever the dependence. A NaN
    p-value is never rejected and does not count in ``m``."""
    p = np.asarray(p_values, float)
    finite = np.flatnonzero(np.isfinite(p))
    m, out = finite.size, [False] * len(p)
    for k, i in enumerate(finite[np.argsort(p[finite], kind="stable")]):
        if p[i] > alpha / (m - k):
            break
        out[i] = True
    return out


def pairs(
    scores: Mapping[str, float],
    samples: Mapping[str, np.ndarray],
    n: int,
    level: float,
    *,
    doc_samples: Mapping[str, np.ndarray] | None = None,
    seeds: int = 1,
) -> list[Pair]:
    """Every pair of ``scores``' labels, compared on their paired resamples, with the
    family-wise interval over all of them. ``doc_samples``: the same resamples without the
    fit effects (the documents alone), to split each difference's variance (module
    docstring); without them the whole of it is taken as the documents'."""
    labels = sorted(scores, key=lambda lb: (-scores[lb], lb))
    found = []
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            d = np.asarray(samples[a], float) - np.asarray(samples[b], float)
            lo, hi = interval(d, level)
            diff = float(scores[a] - scores[b])
            se = _sd(d)
            se_fit = 0.0
            if doc_samples is not None and a in doc_samples and b in doc_samples:
                docs = _sd(np.asarray(doc_samples[a], float) - np.asarray(doc_samples[b], float))
                if np.isfinite(docs) and np.isfinite(se):
                    se_fit = math.sqrt(max(se**2 - docs**2, 0.0))
            found.append((a, b, diff, lo, hi, se, se_fit, d))
    # Family-wise: Holm over the family's pairs, each pair's p-value the normal one of its
    # bootstrap-studentised difference; the interval shown is Bonferroni's (m pairs).
    m = sum(np.isfinite(f[5]) and f[5] > 0 for f in found)
    crit = _z(1 - (1 - level) / max(m, 1))
    p_values = [
        2 * NormalDist().cdf(-abs(diff) / se) if np.isfinite(se) and se > 0 else math.nan
        for _, _, diff, _, _, se, _, _ in found
    ]
    rejected = holm(p_values, 1 - level)
    return [
        Pair(
            a,
            b,
            diff,
            lo,
            hi,
            se,
            n,
            se_fit=se_fit,
            adj_low=diff - crit * se,
            adj_high=diff + crit * se,
            crit=crit,
            seeds=seeds,
            holm=fw,
        )
        for (a, b, diff, lo, hi, se, se_fit, _), fw in zip(found, rejected, strict=True)
    ]


def _sd(d: np.ndarray) -> float:
    finite = d[np.isfinite(d)]
    return float(np.std(finite, ddof=1)) if finite.size > 1 else math.nan


@dataclass(frozen=True)
class Need:
    """What separating a true difference ``difference`` takes with :data:`POWER` power:
    ``units`` (people or victims) at ``seeds`` seeds per point; ``feasible`` False when no
    realistic number would (beyond :data:`REALISTIC_FACTOR` times the units now or
    :data:`REALISTIC_SEEDS` seeds)."""

    difference: float
    units: float
    seeds: int
    feasible: bool


@dataclass(frozen=True)
class FamilyPower:
    """What a family's data can decide, from the resampling spread of its paired differences
    (never from an observed difference). ``se``: the paired standard error of a typical pair
    (the median over the family's pairs; ``se_low``/``se_high`` the smallest and largest),
    ``se_fit`` its share from the attackers' and the service's refits (it shrinks only as
    1/K with K seeds per point; the rest, the units', as 1/N with N units), ``crit`` the
    family-wise critical value (Bonferroni over the family's pairs: Holm separates at least
    what it does), ``n`` the units now and ``seeds`` the seeds per point.

    The minimum detectable difference (:attr:`mdd`) is ``(crit + z_power) · se``: a pair
    that truly differs by it is separated family-wise with probability ``power`` (a normal
    approximation; Cohen 1988, ch. 12). :meth:`needed_for` solves the same equation for the
    units and seeds at which a named difference would be."""

    n: int
    seeds: int
    crit: float
    se: float
    se_fit: float
    se_low: float
    se_high: float
    n_pairs: int
    power: float = POWER

    @property
    def multiplier(self) -> float:
        return self.crit + NormalDist().inv_cdf(self.power)

    @property
    def mdd(self) -> float:
        """The smallest true difference separated with :attr:`power` (typical pair)."""
        return self.multiplier * self.se

    @property
    def mdd_range(self) -> tuple[float, float]:
        """The minimum detectable difference of the easiest and the hardest pair."""
        return self.multiplier * self.se_low, self.multiplier * self.se_high

    def needed_for(self, difference: float) -> Need:
        """Units and seeds per point at which a typical pair that truly differs by
        ``difference`` is separated with :attr:`power`: ``se_docs² · n/N + se_fit² · K0/K``
        must fall to ``(difference / multiplier)²``. More units at the current seeds where
        that can do it; otherwise more seeds, half the variance left to the units."""
        target = (abs(difference) / self.multiplier) ** 2
        docs = max(self.se**2 - self.se_fit**2, 0.0)
        fit = self.se_fit**2
        if not (np.isfinite(target) and np.isfinite(docs)) or target <= 0:
            return Need(difference, math.inf, self.seeds, False)
        if fit < target:
            units = self.n * docs / (target - fit)
            if units <= REALISTIC_FACTOR * self.n:
                return Need(difference, units, self.seeds, True)
        seeds = max(self.seeds, math.ceil(2 * self.seeds * fit / target))
        units = self.n * docs / (target - self.seeds * fit / seeds)
        ok = seeds <= REALISTIC_SEEDS and units <= REALISTIC_FACTOR * self.n
        return Need(difference, units if ok else math.inf, seeds, ok)


def family_power(found: Sequence[Pair]) -> FamilyPower | None:
    """The family's :class:`FamilyPower` from its pairs (None without a finite spread)."""
    ok = [p for p in found if np.isfinite(p.se) and p.se > 0]
    if not ok:
        return None
    se = np.array([p.se for p in ok])
    mid = int(np.argsort(se)[len(se) // 2])  # the median pair (its own fit share with it)
    crit = ok[0].crit if np.isfinite(ok[0].crit) else _z(0.95)
    return FamilyPower(
        n=ok[0].n,
        seeds=ok[0].seeds,
        crit=crit,
        se=float(se[mid]),
        se_fit=float(min(ok[mid].se_fit, se[mid])),
        se_low=float(se.min()),
        se_high=float(se.max()),
        n_pairs=len(found),
    )
