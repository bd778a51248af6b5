"""Worst-case privacy per attack family and the resampled ranking statistics of the leaderboard.

Computed on the run's statistics (:mod:`privaudit.metrics.stats`: bootstrap samples of every
row, normalised privacy). A defense point's **worst-case privacy** in a family is the minimum
normalised privacy over that family's attacks that read its release (status ok): privacy is
set by the strongest adversary. On each resample the minimum is taken again, so its interval
is the interval of the minimum, not the minimum of intervals. Several seeds: a point's privacy
and utility are the mean over seeds (on each resample too) and ``*_sd`` their standard
deviation across seeds.

A family ranks its defenses on the attacks that read **every** ranked defense's release
(:func:`attack_sets`: like with like; text recovery from pooled vectors has no
token-position attack, so a word-replacement defense is not judged on attacks a vector
defense never faced); the worst case over every attack a defense faced is kept beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import REFERENCES
from privaudit.leaderboard.frontier import pareto_mask
from privaudit.metrics.outcomes import interval, quiet_nan
from privaudit.metrics.spec import find_metric

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.metrics.stats import RunStats

#: The normalised-privacy levels of the utility-at-matched-privacy table.
MATCHED_LEVELS = (0.5, 0.75, 0.9)


# ---- points per family -----------------------------------------------------------------


@dataclass
class FamilyPoints:
    """Worst-case privacy and utility per (family, label, knob value), seeds averaged.

    ``table`` columns: family, label, defense, knob, knob_value, privacy, privacy_ci_low,
    privacy_ci_high, privacy_sd, utility, utility_ci_low, utility_ci_high, utility_sd,
    n_seeds, n_attacks, strongest (the attack that set the worst case), on_frontier.
    ``privacy``/``utility``: samples (rows of ``table``, B); ``privacy_fixed`` as
    ``privacy`` with each seed's strongest attack on the data fixed
    (:func:`worst_case_interval`).
    """

    table: pd.DataFrame
    privacy: np.ndarray
    utility: np.ndarray
    #: ``privacy`` with each seed's attack fixed to the one that set its worst case on the
    #: data (no minimum on the resamples): the upper end of a worst case's interval.
    privacy_fixed: np.ndarray | None = None


@dataclass(frozen=True)
class AttackSets:
    """Which attacks a family compares its defenses on.

    ``faced``: per (family, label), the attacks that read the label's releases (status ok)
    and set a worst case (a measurable advantage on the undefended release), for every label
    that can be ranked (not a reference, ``none`` or ``clean``; no failed cell in the
    family). ``common``: per family, the attacks every such label faced. ``empty``: families
    whose labels share no attack; they fall back to each label's own set.
    """

    faced: dict[tuple[str, str], tuple[str, ...]]
    common: dict[str, tuple[str, ...]]
    empty: tuple[str, ...]

    def restriction(self) -> dict[str, tuple[str, ...]]:
        """The attacks to rank each family on (:func:`family_points`'s ``attacks``)."""
        return {family: attacks for family, attacks in self.common.items() if attacks}

    def more(self, family: str) -> dict[str, tuple[str, ...]]:
        """Labels of ``family`` that faced attacks outside its common set, with those."""
        common = set(self.common.get(family, ()))
        return {
            label: extra
            for (fam, label), attacks in sorted(self.faced.items())
            if fam == family and (extra := tuple(a for a in attacks if a not in common))
        }


def attack_sets(stats: RunStats) -> AttackSets:
    """The attacks each rankable label of each family faced, and those they all faced."""
    f = stats.frame
    ok = (f["status"] == "ok").to_numpy()
    informative = ok & np.isfinite(stats.normalised_point)
    faced: dict[tuple[str, str], tuple[str, ...]] = {}
    common: dict[str, tuple[str, ...]] = {}
    for family, fam in f.groupby("family", sort=True):
        sets = []
        for label, g in fam.groupby("label", sort=True):
            idx = g.index.to_numpy()
            if g["defense"].iloc[0] in REFERENCES or (g["status"] == "failed").any():
                continue  # a reference (none, clean), or a label the family does not rank
            attacks = tuple(sorted(set(g["attack"].to_numpy()[informative[idx]])))
            if attacks:
                faced[(str(family), str(label))] = attacks
                sets.append(set(attacks))
        if sets:
            common[str(family)] = tuple(sorted(set.intersection(*sets)))
    empty = tuple(family for family, attacks in common.items() if not attacks)
    return AttackSets(faced, common, empty)


def family_points(
    stats: RunStats, attacks: Mapping[str, Sequence[str]] | None = None
) -> FamilyPoints:
    """Worst-case points of every family; with ``attacks``, a family it names takes its worst
    case over those attacks only (:meth:`AttackSets.restriction`)."""
    import pandas as pd

    f = stats.frame
    ok = (f["status"] == "ok").to_numpy() & np.isfinite(stats.normalised_point)
    if attacks:
        kept = [
            family not in attacks or attack in attacks[family]
            for family, attack in zip(f["family"], f["attack"], strict=True)
        ]
        ok &= np.asarray(kept, dtype=bool)
    util_point = f["utility"].astype(float).to_numpy()
    ok &= np.isfinite(util_point)
    rows, priv_s, util_s, fixed_s = [], [], [], []
    per_seed, meta = _per_seed(stats, ok, util_point)
    for key, runs in per_seed.items():
        family, label, _ = key
        p = np.array([r[0] for r in runs])
        u = np.array([r[1] for r in runs])
        with np.errstate(all="ignore"), quiet_nan():
            ps = np.nanmean(np.stack([r[2] for r in runs]), axis=0)
            us = np.nanmean(np.stack([r[3] for r in runs]), axis=0)
            fixed_s.append(np.nanmean(np.stack([r[4] for r in runs]), axis=0))
        p_lo, p_hi = interval(ps, stats.level)
        u_lo, u_hi = interval(us, stats.level)
        rows.append(
            meta[key]
            | {
                "family": family,
                "label": label,
                "privacy": float(p.mean()),
                "privacy_ci_low": p_lo,
                "privacy_ci_high": p_hi,
                "privacy_sd": float(p.std(ddof=1)) if len(p) > 1 else np.nan,
                "utility": float(u.mean()),
                "utility_ci_low": u_lo,
                "utility_ci_high": u_hi,
                "utility_sd": float(u.std(ddof=1)) if len(u) > 1 else np.nan,
                "n_seeds": len(runs),
            }
        )
        priv_s.append(ps)
        util_s.append(us)
    table = pd.DataFrame(rows)
    b = stats.bootstrap.resamples
    if table.empty:
        return FamilyPoints(table, np.zeros((0, b)), np.zeros((0, b)), np.zeros((0, b)))
    table["on_frontier"] = False
    for _, idx in table.groupby(["family", "label"]).groups.items():
        sub = table.loc[idx]
        table.loc[idx, "on_frontier"] = pareto_mask(
            sub["privacy"].to_numpy(), sub["utility"].to_numpy()
        )
    return FamilyPoints(table, np.stack(priv_s), np.stack(util_s), np.stack(fixed_s))


def _per_seed(
    stats: RunStats, ok: np.ndarray, util_point: np.ndarray
) -> tuple[dict[tuple[Any, Any, Any], list[tuple[Any, ...]]], dict[tuple[Any, Any, Any], Any]]:
    """Per (family, label, knob value), each seed's worst case over the ``ok`` rows' attacks:
    (privacy, utility, the privacy and utility resamples, the fixed-effect privacy
    resamples); and the point's columns, from its first seed (the strongest attack named)."""
    f = stats.frame
    knob = f["knob_value"].astype(float).fillna(np.inf)  # NaN knobs (none) group together
    seeds = f.assign(_knob=knob)[ok].groupby(["family", "label", "_knob", "seed"], sort=True)
    per_seed: dict[tuple[Any, Any, Any], list[tuple[Any, ...]]] = {}
    meta: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for (family, label, k, _seed), idx in seeds.groups.items():
        idx = np.asarray(idx)
        worst = int(idx[np.argmin(stats.normalised_point[idx])])
        with np.errstate(all="ignore"), quiet_nan():
            p_s = np.nanmin(stats.normalised[idx], axis=0)
        key = (family, label, k)
        per_seed.setdefault(key, []).append(
            (
                float(stats.normalised_point[worst]),
                float(util_point[idx[0]]),
                p_s,
                stats.utility[idx[0]],
                stats.normalised[worst],
            )
        )
        meta.setdefault(
            key,
            {
                "defense": f.at[idx[0], "defense"],
                "knob": f.at[idx[0], "knob"],
                "knob_value": f.at[idx[0], "knob_value"],
                "n_attacks": len(idx),
                "target_rate": f.at[idx[0], "target_rate"] if "target_rate" in f else np.nan,
                "strongest": f.at[worst, "attack"],
            },
        )
    return per_seed, meta


def own_scale(stats: RunStats) -> RunStats:
    """``stats`` with each row's privacy on its attack's own scale in place of the normalised
    one: ``clip((perfect − s) / (perfect − s_base), 0, 1)``, 1 at the no-information
    baseline, 0 for a perfect attacker (the metric's declared perfect score), so the
    undefended release keeps the privacy it has rather than 0 by definition. The rows that
    set no worst case (normalised privacy undefined) set none here either. What "beats the
    undefended release" is read on (:data:`privaudit.leaderboard.verdict.BEATS_NONE`)."""
    from dataclasses import replace

    f = stats.frame
    specs = [find_metric(m) for m in f["attack_metric"]]
    perfect = np.array([1.0 if s is None else s.perfect for s in specs], dtype=float)
    null = np.array([0.0 if s is None else s.null_score for s in specs], dtype=float)
    b_point = f["attack_baseline"].astype(float).to_numpy()
    b_point = np.where(np.isfinite(b_point), b_point, null)
    base = np.where(np.isfinite(stats.baseline), stats.baseline, b_point[:, None])
    s_point = f["attack_score"].astype(float).to_numpy()
    keep = np.isfinite(stats.normalised_point)
    with np.errstate(divide="ignore", invalid="ignore"):
        point = (perfect - s_point) / (perfect - b_point)
        samples = (perfect[:, None] - stats.score) / (perfect[:, None] - base)
    point = np.where(keep, np.clip(point, 0.0, 1.0), np.nan)
    samples = np.where(keep[:, None], np.clip(samples, 0.0, 1.0), np.nan)
    return replace(stats, normalised=samples, normalised_point=point)


# ---- hypervolume on resamples ---------------------------------------------------------


def hypervolume_samples(privacy: np.ndarray, utility: np.ndarray, chance: float) -> np.ndarray:
    """Hypervolume (see :func:`privaudit.leaderboard.families.hypervolume`) of each column of
    ``privacy`` and ``utility`` (points × B): the area of the box [0, 1] × [chance, 1] the
    points dominate, on every resample at once. NaN coordinates add nothing."""
    x = np.clip(np.asarray(privacy, float), 0.0, 1.0)
    y = np.clip((np.asarray(utility, float) - chance) / (1.0 - chance), 0.0, 1.0)
    bad = ~(np.isfinite(x) & np.isfinite(y))
    x, y = np.where(bad, 0.0, x), np.where(bad, 0.0, y)
    order = np.argsort(-x, axis=0, kind="stable")
    xs = np.take_along_axis(x, order, axis=0)
    ys = np.maximum.accumulate(np.take_along_axis(y, order, axis=0), axis=0)
    nxt = np.vstack([xs[1:], np.zeros((1, xs.shape[1]))])
    return np.sum((xs - nxt) * ys, axis=0)


def worst_case_interval(
    samples: np.ndarray, fixed: np.ndarray | None, attacks: int, level: float
) -> tuple[float, float]:
    """The interval of a worst case over ``attacks`` attacks (a minimum), from its resamples
    ``samples`` and ``fixed``: the same statistic with each point's attack fixed to the one
    that set the worst case on the data (no minimum taken on the resamples).

    The minimum over equally strong attacks is biased down on the data and again on every
    resample, so its percentile interval missed the true value, low, on 20 % of boards
    (issue 47). The lower end stays the percentile one (biased down: conservative). The upper
    end is at least the fixed statistic's upper end at level ``1 − (1 − level) / attacks``:
    whichever attack the data picked, the true worst case is at most that attack's true value,
    and Bonferroni over the attacks the data could have picked keeps the chance of an upper
    end below the truth at ``(1 − level) / 2`` (about 96 % coverage of a tie of two attacks
    against 89 %, about 20 % wider). NaN when no sample is finite."""
    lo, hi = interval(samples, level)
    if fixed is not None and attacks > 1 and np.isfinite(fixed).any():
        _, top = interval(fixed, 1 - (1 - level) / attacks)
        hi = max(hi, top) if np.isfinite(hi) else hi
    return float(lo), float(hi)


def separation_ranks(
    labels: Sequence[str], beaten_by: Mapping[str, set[str]]
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Rank intervals and ties from a family's family-wise separations: a label's interval
    runs from 1 + the labels that beat it to the count − the labels it beats, and it is tied
    with every label it is not separated from. The intervals hold together whenever every
    separation does (at the family's level: Holm), the simultaneous rank intervals of pairwise
    comparisons (Holm, Scand. J. Statist. 2013 "confidence intervals for ranks"; Klein, Wright
    & Wieczorek 2020); so identical defenses are tied, and no table claims an order the pairs
    do not."""
    n = len(labels)
    beats = {lb: {o for o in labels if lb in beaten_by.get(o, set())} for lb in labels}
    lo = np.array([1 + len(beaten_by.get(lb, set())) for lb in labels], float)
    hi = np.array([n - len(beats[lb]) for lb in labels], float)
    tied = [
        ", ".join(
            o
            for o in labels
            if o != lb and o not in beats[lb] and o not in beaten_by.get(lb, set())
        )
        for lb in labels
    ]
    return lo, hi, tied


def rank_summary(
    rank_samples: np.ndarray, point_rank: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per label (rows of ``rank_samples``, labels × B): the rank interval at ``level``
    (integers) and the share of resamples holding ``point_rank``."""
    lo = np.floor(np.percentile(rank_samples, 100 * (1 - level) / 2, axis=1))
    hi = np.ceil(np.percentile(rank_samples, 100 * (1 + level) / 2, axis=1))
    hold = np.mean(rank_samples == np.asarray(point_rank)[:, None], axis=1)
    return lo, hi, hold


def overlapping(labels: Sequence[str], lo: np.ndarray, hi: np.ndarray) -> list[str]:
    """Per label, the other labels whose rank interval overlaps its own (statistical ties),
    joined by commas; empty where the interval is unknown."""
    return [
        ", ".join(o for j, o in enumerate(labels) if j != i and lo[j] <= hi[i] and lo[i] <= hi[j])
        if np.isfinite(lo[i])
        else ""
        for i in range(len(labels))
    ]


def sample_ranks(scores: np.ndarray, identity: np.ndarray) -> np.ndarray:
    """Ranks (labels × B) of ``scores`` (higher is better) on every resample: 1 + the number
    of labels that beat it, an identity label also below a real one it ties with."""
    s = np.round(np.asarray(scores, float), 12)
    beats = s[None, :, :] > s[:, None, :]  # [l, m, b]: m beats l
    ties = (s[None, :, :] == s[:, None, :]) & (~identity)[None, :, None] & identity[:, None, None]
    return 1 + np.sum(beats | ties, axis=1)
