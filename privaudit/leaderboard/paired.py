"""Paired comparisons of two defenses on the same bootstrap resamples: the difference of their
hypervolumes with its interval and standard error, Holm's family-wise test over a family's
pairs with Bonferroni's simultaneous interval, and the victims or seeds per point that would
separate a tied pair (the variance split into the documents' share and the fits'; see
:mod:`privaudit.leaderboard.verdict`)."""

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


@dataclass(frozen=True)
class Pair:
    """Two defenses of a family, ``a`` the one with the larger point hypervolume: the paired
    difference ``diff`` = HV(a) − HV(b) with its interval and bootstrap ``se``; ``n`` victims
    now, ``n_needed`` to separate them (``inf`` when no realistic number would; the current
    ``n`` or less when the normal approximation already separates a pair the percentile
    interval does not)."""

    a: str
    b: str
    diff: float
    ci_low: float
    ci_high: float
    se: float
    n: int
    n_needed: float
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
    #: Seeds per point that would separate the pair at ``victims_with_seeds`` victims.
    seeds_needed: float = math.inf
    victims_with_seeds: float = math.nan

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

    @property
    def fit_bound(self) -> bool:
        """No number of victims separates it: the fits' own spread spans the difference."""
        c = self.crit if np.isfinite(self.crit) else _z(0.95)
        return bool(self.se_fit > 0 and c * self.se_fit >= abs(self.diff) > NO_DIFFERENCE)


def _z(level: float) -> float:
    return NormalDist().inv_cdf((1 + level) / 2)


def needed_victims(
    diff: float,
    se: float,
    n: int,
    level: float,
    *,
    se_fit: float = 0.0,
    crit: float | None = None,
) -> float:
    """Victims at which a paired difference ``diff`` with bootstrap standard error ``se`` at
    ``n`` victims would have an interval (critical value ``crit``, by default the normal
    ``z`` of ``level``) excluding 0. Of ``se``, only the documents' part
    ``se² − se_fit²`` shrinks as 1/n; the fits' part ``se_fit`` stays. ``inf`` when
    ``diff`` is about 0, when ``crit · se_fit`` alone reaches it (no number of victims
    would) or when the number exceeds :data:`REALISTIC_FACTOR` · n."""
    if not (np.isfinite(diff) and np.isfinite(se)) or abs(diff) <= NO_DIFFERENCE or n <= 0:
        return math.inf
    c = _z(level) if crit is None or not np.isfinite(crit) else crit
    room = (diff / c) ** 2 - se_fit**2  # the variance the documents may still take
    if room <= 0:
        return math.inf
    needed = n * max(se**2 - se_fit**2, 0.0) / room
    return needed if needed <= REALISTIC_FACTOR * n else math.inf


def needed_seeds(
    diff: float, se: float, se_fit: float, seeds: int, n: int, crit: float
) -> tuple[float, float]:
    """(seeds per point, victims) that would separate a pair whose fits' share of the
    variance, ``se_fit²``, shrinks as 1/K with K seeds averaged per point (each seed refits
    every attacker and the service; ``seeds`` now). At the current ``n`` when the documents'
    share leaves room; otherwise twice the fewest seeds that could, with the victims that
    then would. ``(inf, nan)`` when no realistic number would."""
    if not (se_fit > 0 and np.isfinite(se) and abs(diff) > NO_DIFFERENCE):
        return math.inf, math.nan
    target = (diff / crit) ** 2
    docs = max(se**2 - se_fit**2, 0.0)
    if docs < target:
        k = math.ceil(seeds * se_fit**2 / (target - docs))
        return (float(k), float(n)) if k <= REALISTIC_SEEDS else (math.inf, math.nan)
    k = 2 * math.ceil(seeds * se_fit**2 / target)  # half the variance left to the documents
    victims = n * docs / (target - seeds * se_fit**2 / k)
    if k > REALISTIC_SEEDS or victims > REALISTIC_FACTOR * n:
        return math.inf, math.nan
    return float(k), victims


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
    out = []
    for (a, b, diff, lo, hi, se, se_fit, _), fw in zip(found, rejected, strict=True):
        k, at = needed_seeds(diff, se, se_fit, seeds, n, crit)
        out.append(Pair(
            a, b, diff, lo, hi, se, n,
            needed_victims(diff, se, n, level, se_fit=se_fit, crit=crit),
            se_fit=se_fit, adj_low=diff - crit * se, adj_high=diff + crit * se, crit=crit,
            seeds=seeds, seeds_needed=k, victims_with_seeds=at, holm=fw,
        ))  # fmt: skip
    return out


def _sd(d: np.ndarray) -> float:
    finite = d[np.isfinite(d)]
    return float(np.std(finite, ddof=1)) if finite.size > 1 else math.nan
