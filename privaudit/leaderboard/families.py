"""Per attack family: each label's worst-case hypervolume (the share of the privacy-utility
box its frontier dominates) with its resamples, whether it faced the whole family, its rank,
rank interval, holding share and ties."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import REFERENCES
from privaudit.leaderboard.paired import pairs
from privaudit.leaderboard.stats import (
    hypervolume_samples,
    rank_summary,
    sample_ranks,
    separation_ranks,
    worst_case_interval,
)
from privaudit.leaderboard.tables import knob_text_of
from privaudit.leaderboard.unscored import na_reason

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.leaderboard.stats import FamilyPoints
    from privaudit.metrics.stats import RunStats


def hypervolume(
    privacy: Sequence[float] | np.ndarray,
    utility: Sequence[float] | np.ndarray,
    *,
    chance: float,
    privacy_scale: float = 1.0,
) -> float:
    """Fraction of the box privacy ∈ [0, 1] × utility ∈ [chance, 1] the points dominate.

    Privacy is divided by ``privacy_scale`` and clipped to [0, 1]; utility is mapped to
    ``(utility − chance) / (1 − chance)`` and clipped to [0, 1], so utility at or below chance
    adds nothing. The dominated region is the union of the rectangles [0, x] × [0, y] (the
    reference point is (privacy 0, utility chance)), computed by a sweep over decreasing
    privacy. Dominated points change nothing, so frontier points or all points give the same.
    """
    check_chance(chance)
    if not privacy_scale > 0:
        raise ValueError(f"privacy_scale must be positive, got {privacy_scale!r}.")
    x = np.clip(np.asarray(privacy, float) / privacy_scale, 0.0, 1.0)
    y = np.clip((np.asarray(utility, float) - chance) / (1.0 - chance), 0.0, 1.0)
    if x.shape != y.shape:
        raise ValueError(f"privacy and utility differ in length: {x.shape} vs {y.shape}.")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    area, best_y = 0.0, 0.0
    order = np.argsort(-x, kind="stable")
    for i, j in enumerate(order):
        best_y = max(best_y, float(y[j]))
        next_x = float(x[order[i + 1]]) if i + 1 < len(order) else 0.0
        area += (float(x[j]) - next_x) * best_y  # the strip between this x and the next
    return area


def check_chance(chance: float) -> None:
    if chance is None or not np.isfinite(chance) or not 0.0 <= chance < 1.0:
        raise ValueError(
            f"The chance level must be a number in [0, 1), got {chance!r}. It is the "
            "majority-class accuracy that run.json records as chance_accuracy; pass it "
            "explicitly (e.g. `privaudit leaderboard --chance 0.5`) when run.json is missing."
        )


def family_table(
    stats: RunStats,
    points: FamilyPoints,
    chance: float,
    identity: set[str],
    samples_out: dict[tuple[str, str], np.ndarray] | None = None,
    ranks_out: dict[str, dict[str, np.ndarray]] | None = None,
    *,
    all_points: FamilyPoints | None = None,
) -> pd.DataFrame:
    """One row per (family, label): worst-case hypervolume, its interval, rank, rank interval,
    holding share, ties, completeness (``failed``: a cell of the family failed on it).
    ``samples_out`` receives the hypervolume resamples per (family, label), the ones ranked
    on; ``ranks_out`` the rank resamples per family and ranked label. ``all_points`` (the
    worst case over every attack a label faced, where ``points`` keeps the family's common
    attacks) adds ``hv_all`` and its interval."""
    f = stats.frame
    rows = []
    families = sorted(set(f["family"].dropna()))
    for family in families:
        fam = f[f["family"] == family]
        entries = [
            _family_entry(stats, points, all_points, chance, family, label, g)
            for label, g in fam.groupby("label", sort=True)
        ]
        _rank_entries(entries, identity, stats, family, ranks_out)
        rows.extend(_with_intervals(entries, stats, family, samples_out))
    return _family_frame(rows)


def _family_entry(
    stats: RunStats,
    points: FamilyPoints,
    all_points: FamilyPoints | None,
    chance: float,
    family: str,
    label: Any,
    g: pd.DataFrame,
) -> dict[str, Any]:
    """One label's row of a family (its rows ``g``): hypervolume with its resamples, whether
    it faced the whole family (else why not), its strongest attack, the worst case over all
    its attacks."""
    table = points.table
    failed = g[g["status"] == "failed"]
    ok = g[g["status"] == "ok"]
    reason = ""
    if len(failed):
        first = failed.iloc[0]
        reason = f"{first['attack']} failed at {knob_text_of(first)}"
    elif ok.empty:
        reason = na_reason(g)
    sel = (table["family"] == family) & (table["label"] == label) if len(table) else []
    idx = np.flatnonzero(np.asarray(sel)) if len(table) else np.zeros(0, int)
    if not reason and not len(idx):
        reason = (
            "normalised privacy undefined: the attack has no measurable advantage "
            "on the undefended release, or no baseline to measure it by"
        )
    point_hv, samples = _label_hypervolume(points, idx, chance, stats)
    hv_ci = _hv_interval(points, idx, chance, stats, samples)
    hv_all, all_lo, all_hi = point_hv, np.nan, np.nan
    if all_points is not None:
        t_all = all_points.table
        idx_all = (
            np.flatnonzero((t_all["family"] == family) & (t_all["label"] == label))
            if len(t_all)
            else np.zeros(0, int)
        )
        hv_all, s_all = _label_hypervolume(all_points, idx_all, chance, stats)
        all_lo, all_hi = _hv_interval(all_points, idx_all, chance, stats, s_all)
    strongest = ""
    if len(idx):
        strongest = str(table["strongest"].iloc[idx].value_counts().index[0])
    return {
        "family": family,
        "label": label,
        "defense": g["defense"].iloc[0],
        "hypervolume": point_hv,
        "samples": samples,
        "hv_ci": hv_ci,
        "complete": not reason,
        "reason": reason,
        "strongest": strongest,
        "n_points": len(idx),
        "failed": bool(len(failed)),
        "hv_all": hv_all,
        "hv_all_ci_low": float(all_lo),
        "hv_all_ci_high": float(all_hi),
    }


def _rank_entries(
    entries: list[dict[str, Any]],
    identity: set[str],
    stats: RunStats,
    family: str,
    ranks_out: dict[str, dict[str, np.ndarray]] | None,
) -> None:
    """Rank the complete, non-reference ``entries`` of a family on their hypervolume, with
    holding shares from the resamples (kept in ``ranks_out``), and rank intervals and ties
    from the family-wise separations of their paired resamples
    (:func:`privaudit.leaderboard.stats.separation_ranks`: the verdict's pairs, the same
    test on the same resamples)."""
    ranked = [e for e in entries if e["complete"] and e["defense"] not in REFERENCES]
    ident = np.array([e["label"] in identity for e in ranked], dtype=bool)
    point_scores = np.array([[e["hypervolume"]] for e in ranked], float).reshape(-1, 1)
    point_rank = sample_ranks(point_scores, ident)[:, 0] if ranked else np.zeros(0, int)
    if ranked and stats.available:
        rank_s = sample_ranks(np.stack([e["samples"] for e in ranked]), ident)
        _, _, hold = rank_summary(rank_s, point_rank, stats.level)
        if ranks_out is not None:
            ranks_out[family] = {e["label"]: rank_s[i] for i, e in enumerate(ranked)}
        labels = [str(e["label"]) for e in ranked]
        found = pairs(
            {lb: e["hypervolume"] for lb, e in zip(labels, ranked, strict=True)},
            {lb: e["samples"] for lb, e in zip(labels, ranked, strict=True)},
            0,
            stats.level,
        )
        beaten_by: dict[str, set[str]] = {}
        for p in found:
            if p.separated:
                winner, loser = (p.a, p.b) if p.ci_low > 0 else (p.b, p.a)
                beaten_by.setdefault(loser, set()).add(winner)
        lo, hi, tied = separation_ranks(labels, beaten_by)
    else:
        lo = hi = hold = np.full(len(ranked), np.nan)
        tied = [""] * len(ranked)
    for i, e in enumerate(ranked):
        e |= {
            "rank": int(point_rank[i]),
            "rank_ci_low": lo[i],
            "rank_ci_high": hi[i],
            "stability": hold[i],
            "tied_with": tied[i],
        }


def _with_intervals(
    entries: list[dict[str, Any]],
    stats: RunStats,
    family: str,
    samples_out: dict[tuple[str, str], np.ndarray] | None,
) -> list[dict[str, Any]]:
    """The family's rows: each entry's hypervolume interval from its resamples (kept in
    ``samples_out``), unranked ones with empty rank columns."""
    import pandas as pd

    rows = []
    for e in entries:
        s_ = e.pop("samples")
        if samples_out is not None:
            samples_out[(family, e["label"])] = s_
        hv_lo, hv_hi = e.pop("hv_ci")
        e.setdefault("rank", pd.NA)
        e.setdefault("rank_ci_low", np.nan)
        e.setdefault("rank_ci_high", np.nan)
        e.setdefault("stability", np.nan)
        e.setdefault("tied_with", "")
        e["hv_ci_low"], e["hv_ci_high"] = float(hv_lo), float(hv_hi)
        rows.append(e)
    return rows


#: A family's per-defense ranking statistics, as the family table holds them and the overall
#: table widens them to ``<column>[<family>]``.
RANK_COLUMNS = (
    "hypervolume",
    "hv_ci_low",
    "hv_ci_high",
    "rank",
    "rank_ci_low",
    "rank_ci_high",
    "stability",
)


def _family_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The family table from its rows, references listed last, in rank order."""
    import pandas as pd

    out = pd.DataFrame(rows)
    if out.empty:
        return pd.DataFrame(
            columns=[
                "family",
                "label",
                "defense",
                *RANK_COLUMNS,
                "tied_with",
                "complete",
                "reason",
                "strongest",
                "n_points",
                "hv_all",
                "hv_all_ci_low",
                "hv_all_ci_high",
                "is_none",
                "ranked_order",
                "failed",
            ]
        )
    out["rank"] = out["rank"].astype("Int64")
    out["is_none"] = out["defense"].isin(REFERENCES)  # the references, listed last
    out["ranked_order"] = out["rank"].astype(float).fillna(np.inf)
    return out


def _label_hypervolume(
    points: FamilyPoints, idx: np.ndarray, chance: float, stats: RunStats
) -> tuple[float, np.ndarray]:
    """The hypervolume of the points at rows ``idx`` of ``points`` (one label of one family):
    the point estimate over its frontier and the resamples (NaN without outcomes)."""
    table = points.table
    front = idx[table["on_frontier"].to_numpy()[idx]] if len(idx) else idx
    point_hv = hypervolume(
        table["privacy"].to_numpy()[front] if len(front) else [],
        table["utility"].to_numpy()[front] if len(front) else [],
        chance=chance,
    )
    samples = (
        hypervolume_samples(points.privacy[idx], points.utility[idx], chance)
        if len(idx) and stats.available
        else np.full(stats.bootstrap.resamples, np.nan)
    )
    return point_hv, samples


def _hv_interval(
    points: FamilyPoints, idx: np.ndarray, chance: float, stats: RunStats, samples: np.ndarray
) -> tuple[float, float]:
    """A label's worst-case hypervolume interval (:func:`privaudit.leaderboard.stats.
    worst_case_interval`: its upper end also from the hypervolume on the attacks that set the
    worst case on the data); NaN without outcomes."""
    if not stats.available:
        return np.nan, np.nan
    fixed, attacks = None, 1
    if points.privacy_fixed is not None and len(idx):
        fixed = hypervolume_samples(points.privacy_fixed[idx], points.utility[idx], chance)
        attacks = int(points.table["n_attacks"].to_numpy()[idx].max())
    return worst_case_interval(samples, fixed, attacks, stats.level)


def hv_by_label(
    points: FamilyPoints, chance: float, stats: RunStats
) -> dict[tuple[str, str], tuple[float, np.ndarray]]:
    """Per (family, label) of ``points``: its hypervolume and resamples."""
    t = points.table
    if t.empty:
        return {}
    groups = t.groupby(["family", "label"]).indices
    return {
        (str(f), str(lb)): _label_hypervolume(points, np.asarray(idx), chance, stats)
        for (f, lb), idx in groups.items()
    }


def ranked_seeds(points: FamilyPoints) -> dict[str, int]:
    """Per family, the fewest seeds any ranked point averages (the power lines' refits)."""
    t = points.table
    if t.empty:
        return {}
    t = t[~t["defense"].isin(REFERENCES)]
    return {str(f): int(n) for f, n in t.groupby("family")["n_seeds"].min().items()}
