"""The leaderboard: how much of the privacy-utility box each defense's frontier dominates.

Per attack, each defense label's Pareto frontier (:func:`privaudit.leaderboard.frontier.frontier`)
is scored by its **hypervolume**, defenses are ranked by it, and the overall standing is the
mean rank over the attacks a defense was scored on. Several run directories can be merged
first (:func:`privaudit.outputs.runs.merge_runs`), so a leaderboard can grow run by run.
This module ranks; :mod:`privaudit.leaderboard.render` formats the tables.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import NONE
from privaudit.leaderboard.frontier import seed_means
from privaudit.leaderboard.render import OVERALL_HEADERS, Table, knob_text_of, tables
from privaudit.leaderboard.stats import (
    MATCHED_LEVELS,
    family_points,
    hypervolume_samples,
    sample_ranks,
)
from privaudit.metrics.spec import find_metric
from privaudit.metrics.stats import Bootstrap, Outcomes, run_stats, with_labels

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.leaderboard.stats import FamilyPoints
    from privaudit.metrics.stats import RunStats


BOARD_COLUMNS = frozenset({
    "defense", "label", "knob", "knob_value", "seed", "attack", "attack_metric", "status",
    "attack_score", "attack_baseline", "empirical_privacy", "utility", "utility_metric",
    "replacement_rate", "privatize_seconds", "n_words", "defense_params", "guarantee",
    "cell_key", "point", "family", "n_test", "reason", "objective",
})  # fmt: skip


@dataclass(frozen=True)
class Leaderboard:
    """Standings per attack family and overall (see :data:`HYPERVOLUME_DEFINITION`).

    ``families``: one row per (family, label): ``hypervolume`` with ``hv_ci_low``/``high``,
    ``rank`` (Int64; missing when not ranked) with ``rank_ci_low``/``high``, ``stability``
    (share of resamples holding the rank), ``tied_with``, ``complete`` and ``reason`` (why it
    is not ranked), ``strongest`` (the attack that most often set the worst case),
    ``n_points``. ``overall``: one row per label. ``matched``: utility at matched privacy,
    one row per (family, label, level). ``per_attack``: raw-privacy hypervolume per attack.
    ``points``: the worst-case points (:class:`privaudit.leaderboard.stats.FamilyPoints`).
    ``notes``: caveats a reader must see beside the numbers.
    """

    overall: pd.DataFrame
    families: pd.DataFrame
    matched: pd.DataFrame
    per_attack: pd.DataFrame
    points: pd.DataFrame
    chance: float
    notes: tuple[str, ...] = ()
    level: float = 0.95
    rates: pd.DataFrame | None = None  # text defenses' points by measured replacement rate

    def wide(self) -> pd.DataFrame:
        """The overall table with per-family ``hypervolume[<f>]``, ``hv_ci_low[<f>]``,
        ``hv_ci_high[<f>]``, ``rank[<f>]``, ``rank_ci_low[<f>]``, ``rank_ci_high[<f>]``,
        ``stability[<f>]`` and per-attack ``hypervolume[<attack>]``/``rank[<attack>]``."""
        wide = self.overall.set_index("label")
        cols = ("hypervolume", "hv_ci_low", "hv_ci_high", "rank", "rank_ci_low",
                "rank_ci_high", "stability")  # fmt: skip
        for family, sub in self.families.groupby("family", sort=True):
            sub = sub.set_index("label")
            for col in cols:
                wide[f"{col}[{family}]"] = sub[col]
        for attack, sub in self.per_attack.groupby("attack", sort=True):
            sub = sub.set_index("label")
            wide[f"hypervolume[{attack}]"] = sub["hypervolume"]
            wide[f"rank[{attack}]"] = sub["rank"]
        wide = wide.reset_index()
        return wide[["rank", "label", *[c for c in wide.columns if c not in ("rank", "label")]]]

    def tables(self) -> dict[str, Table]:
        """Formatted tables (see :func:`privaudit.leaderboard.render.tables`)."""
        return tables(self)


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
    _check_chance(chance)
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


def _check_chance(chance: float) -> None:
    if chance is None or not np.isfinite(chance) or not 0.0 <= chance < 1.0:
        raise ValueError(
            f"The chance level must be a number in [0, 1), got {chance!r}. It is the "
            "majority-class accuracy that run.json records as chance_accuracy; pass it "
            "explicitly (e.g. `privaudit leaderboard --chance 0.5`) when run.json is missing."
        )


def leaderboard(
    frame: pd.DataFrame,
    chance: float,
    *,
    outcomes: Outcomes | None = None,
    bootstrap: Bootstrap | None = None,
) -> Leaderboard:
    """Rank the defense labels of a results table per attack family and overall.

    Per family, each label's worst-case frontier (:func:`privaudit.leaderboard.stats.
    family_points`) is scored by its hypervolume in the box normalised privacy ∈ [0, 1] ×
    utility ∈ [chance, 1] (:data:`HYPERVOLUME_DEFINITION`); with ``outcomes`` (the run's
    per-document outcomes) every hypervolume and rank is recomputed on each of
    ``bootstrap``'s resamples for intervals, the share of resamples holding the rank, and
    statistical ties. A label is ranked in a family only when it faced the whole family (no
    failed cell there); otherwise it is listed with the reason. Overall: the mean family rank
    over labels ranked in every family. ``none`` is the reference, never ranked.

    Raises ``ValueError`` when ``chance`` is not in [0, 1) or no cell is ``ok``.
    """
    _check_chance(chance)
    frame = frame[[c for c in frame.columns if c in BOARD_COLUMNS]]  # pandas copies the rest
    seed_means(frame)  # the same error as the plots when nothing is usable
    boot = bootstrap or Bootstrap()
    stats = run_stats(frame, outcomes or Outcomes(), boot)
    notes: list[str] = []
    identity = identity_labels(frame)
    points = family_points(stats)
    families = _family_table(stats, points, chance, identity)
    matched = _matched(points)
    per_attack = _per_attack(frame, chance, identity, notes)
    for label in sorted(identity - {NONE}):
        notes.append(
            f"{label} changed no word at any privacy level (replacement rate 0): its releases "
            "are the original texts, so it protects nothing; it ranks below any defense it ties "
            "with."
        )
    if not stats.available:
        notes.append(
            "No per-document outcomes (a run written before they were stored, or merged runs "
            "without them): hypervolumes and ranks are point estimates, with no intervals."
        )
    notes.extend(_verdict_notes(frame, stats, families, per_attack, chance))
    overall = _overall(frame, families, notes, identity)
    rates = _rates(frame, points)
    if rates is not None and rates["target_rate"].notna().any():
        calibrated = sorted(set(rates.loc[rates["target_rate"].notna(), "label"]))
        notes.append(
            f"{', '.join(calibrated)}: knob values were set as target replacement rates (η "
            "calibrated per rate on the train split, RAPT's protocol); the table 'at equal "
            "replacement rate' compares them rate for rate."
        )
    notes.append(f"Chance level of the utility metric: {chance:.4g}.")
    return Leaderboard(
        overall=overall, families=families, matched=matched, per_attack=per_attack,
        points=points.table, chance=chance, notes=tuple(notes), level=boot.level, rates=rates,
    )  # fmt: skip


def _family_table(
    stats: RunStats, points: FamilyPoints, chance: float, identity: set[str]
) -> pd.DataFrame:
    """One row per (family, label): worst-case hypervolume, its interval, rank, rank interval,
    holding share, ties, completeness."""
    import pandas as pd

    f = stats.frame
    table = points.table
    rows = []
    families = sorted(set(f["family"].dropna()))
    for family in families:
        fam = f[f["family"] == family]
        entries = []
        for label, g in fam.groupby("label", sort=True):
            failed = g[g["status"] == "failed"]
            ok = g[g["status"] == "ok"]
            reason = ""
            if len(failed):
                first = failed.iloc[0]
                reason = f"{first['attack']} failed at {knob_text_of(first)}"
            elif ok.empty:
                reason = "no attack of this family could read its releases (all n/a)"
            sel = (table["family"] == family) & (table["label"] == label) if len(table) else []
            idx = np.flatnonzero(np.asarray(sel)) if len(table) else np.zeros(0, int)
            if not reason and not len(idx):
                reason = "normalised privacy undefined (no baseline or no undefended reference)"
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
            strongest = ""
            if len(idx):
                strongest = str(table["strongest"].iloc[idx].value_counts().index[0])
            entries.append({
                "family": family, "label": label, "defense": g["defense"].iloc[0],
                "hypervolume": point_hv, "samples": samples, "complete": not reason,
                "reason": reason, "strongest": strongest, "n_points": len(idx),
            })  # fmt: skip
        ranked = [e for e in entries if e["complete"] and e["label"] != NONE]
        ident = np.array([e["label"] in identity for e in ranked], dtype=bool)
        point_scores = np.array([[e["hypervolume"]] for e in ranked], float).reshape(-1, 1)
        point_rank = sample_ranks(point_scores, ident)[:, 0] if ranked else np.zeros(0, int)
        if ranked and stats.available:
            rank_s = sample_ranks(np.stack([e["samples"] for e in ranked]), ident)
            lo = np.floor(np.percentile(rank_s, 100 * (1 - stats.level) / 2, axis=1))
            hi = np.ceil(np.percentile(rank_s, 100 * (1 + stats.level) / 2, axis=1))
            hold = np.mean(rank_s == point_rank[:, None], axis=1)
        else:
            lo = hi = hold = np.full(len(ranked), np.nan)
        for i, e in enumerate(ranked):
            e |= {"rank": int(point_rank[i]), "rank_ci_low": lo[i], "rank_ci_high": hi[i],
                  "stability": hold[i]}  # fmt: skip
        for i, e in enumerate(ranked):
            if not np.isfinite(lo[i]):
                e["tied_with"] = ""
                continue
            tied = [o["label"] for j, o in enumerate(ranked)
                    if j != i and lo[j] <= hi[i] and lo[i] <= hi[j]]  # fmt: skip
            e["tied_with"] = ", ".join(tied)
        for e in entries:
            s_ = e.pop("samples")
            hv_lo, hv_hi = stats.ci(s_) if stats.available else (np.nan, np.nan)
            e.setdefault("rank", pd.NA)
            e.setdefault("rank_ci_low", np.nan)
            e.setdefault("rank_ci_high", np.nan)
            e.setdefault("stability", np.nan)
            e.setdefault("tied_with", "")
            e["hv_ci_low"], e["hv_ci_high"] = float(hv_lo), float(hv_hi)
            rows.append(e)
    out = pd.DataFrame(rows)
    if out.empty:
        return pd.DataFrame(columns=[
            "family", "label", "defense", "hypervolume", "hv_ci_low", "hv_ci_high", "rank",
            "rank_ci_low", "rank_ci_high", "stability", "tied_with", "complete", "reason",
            "strongest", "n_points", "is_none", "ranked_order",
        ])  # fmt: skip
    out["rank"] = out["rank"].astype("Int64")
    out["is_none"] = out["label"] == NONE
    out["ranked_order"] = out["rank"].astype(float).fillna(np.inf)
    return out


def _rates(frame: pd.DataFrame, points: FamilyPoints) -> pd.DataFrame | None:
    """The points of defenses that replace words (a finite, non-zero replacement rate
    somewhere), with utility and worst-case text privacy, ordered by replacement rate."""
    f = with_labels(frame)
    if "replacement_rate" not in f.columns:
        return None
    f = f[(f["defense"] != NONE) & np.isfinite(f["replacement_rate"].astype(float))]
    if "target_rate" not in f.columns:
        f = f.assign(target_rate=np.nan)
    keys = ["label", "knob", "knob_value"]
    by = f.groupby(keys, dropna=False, sort=False).agg(
        replacement_rate=("replacement_rate", "mean"), target_rate=("target_rate", "first"),
        defense=("defense", "first"),
    ).reset_index()  # fmt: skip
    by = by[by.groupby("label")["replacement_rate"].transform("max") > 0]
    if by.empty:
        return None
    t = points.table
    text = t[t["family"] == "text"] if len(t) else t
    cols = ["utility", "utility_ci_low", "utility_ci_high", "privacy", "privacy_ci_low",
            "privacy_ci_high"]  # fmt: skip
    if len(text):
        by = by.merge(text[["label", "knob_value", *cols]], on=["label", "knob_value"], how="left")
    else:
        by = by.assign(**{c: np.nan for c in cols})
    return by.sort_values(["replacement_rate", "label"]).reset_index(drop=True)


def _matched(points: FamilyPoints) -> pd.DataFrame:
    """Utility at matched privacy: per family, label and level in MATCHED_LEVELS, the best
    measured utility among the label's points whose worst-case privacy reaches the level
    (measured points only, no interpolation; NaN = not reached)."""
    import pandas as pd

    t = points.table
    rows = []
    columns = ["family", "label", "level", "utility", "utility_ci_low", "utility_ci_high",
               "privacy", "knob", "knob_value"]  # fmt: skip
    if t.empty:
        return pd.DataFrame(columns=columns)
    for (family, label), g in t.groupby(["family", "label"], sort=True):
        if label == NONE:
            continue
        for level in MATCHED_LEVELS:
            reach = g[g["privacy"] >= level]
            row = {"family": family, "label": label, "level": level, "utility": np.nan,
                   "utility_ci_low": np.nan, "utility_ci_high": np.nan, "privacy": np.nan,
                   "knob": None, "knob_value": np.nan}  # fmt: skip
            if len(reach):
                best = reach.loc[reach["utility"].idxmax()]
                row |= {k: best[k] for k in ("utility", "utility_ci_low", "utility_ci_high",
                                             "privacy", "knob", "knob_value")}  # fmt: skip
            rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def _per_attack(
    frame: pd.DataFrame, chance: float, identity: set[str], notes: list[str]
) -> pd.DataFrame:
    """Raw-privacy hypervolume and rank per attack (the secondary, per-attack view)."""
    import pandas as pd

    points = seed_means(frame)
    rows: list[dict[str, Any]] = []
    for attack, sub in points.groupby("attack", sort=True):
        metric = str(sub["attack_metric"].iloc[0])
        scale = 1.0
        spec = find_metric(metric)
        if spec is not None and not spec.bounded:
            # An unbounded error: measure it against the most private point seen for this attack.
            top = float(sub["empirical_privacy"].max())
            scale = top if top > 0 else 1.0
            notes.append(
                f"{attack} (per-attack view): privacy is the {spec.display} divided by "
                f"{scale:.4g}, the largest value observed for this attack."
            )
        for label, group in sub.groupby("label", sort=True):
            front = group[group["on_frontier"]]
            rows.append({
                "attack": attack, "attack_metric": metric, "label": label,
                "defense": group["defense"].iloc[0],
                "hypervolume": hypervolume(front["empirical_privacy"], front["utility"],
                                           chance=chance, privacy_scale=scale),
                "n_points": len(group), "n_frontier": len(front), "privacy_scale": scale,
            })  # fmt: skip
    per_attack = pd.DataFrame(rows)
    ranked = per_attack["label"] != NONE
    score = per_attack["hypervolume"].round(12).where(ranked)
    same = per_attack["label"].isin(identity)
    per_attack["rank"] = pd.concat(
        [_ranks(-score[idx], same[idx]) for idx in per_attack.groupby("attack").groups.values()]
    ).reindex(per_attack.index)
    return per_attack


def _verdict_notes(
    frame: pd.DataFrame,
    stats: RunStats,
    families: pd.DataFrame,
    per_attack: pd.DataFrame,
    chance: float,
) -> list[str]:
    """Loud caveats: undefended utility at or below chance; an attack on which no defense
    beats the undefended release; families where nothing could be ranked."""
    notes = []
    if "objective" in frame.columns:
        partial = with_labels(frame)
        partial = partial[partial["objective"].astype(str).str.startswith("not applied")]
        for label, group in partial.groupby("label", sort=True):
            reason = str(group["objective"].iloc[0]).removeprefix("not applied: ")
            notes.append(
                f"WARNING: {label}: the utility evaluator did not train this defense's "
                f"service-side objective ({reason}); its rows measure the privatizer's noise "
                "alone, not the method as published."
            )
    ref = with_labels(frame)
    ref = ref[(ref["defense"] == NONE) & np.isfinite(ref["utility"].astype(float))]
    if len(ref):
        u = float(ref["utility"].astype(float).mean())
        if u <= chance + 1e-9:
            notes.append(
                f"WARNING: the undefended utility ({u:.3f}) is at or below chance ({chance:.3f}): "
                "the text does not predict this label, so every hypervolume is 0 and the "
                "ranking says nothing. Choose a label the text predicts."
            )
    f = stats.frame
    idle = f[(f["defense"] == NONE) & (f["status"] == "ok") & np.isnan(stats.normalised_point)]
    for _, row in idle.drop_duplicates("attack").iterrows():
        notes.append(
            f"{row['attack']}: against the undefended release it scores "
            f"{float(row['attack_score']):.3f} vs {float(row['attack_baseline']):.3f} for its "
            "no-information baseline, no measurable advantage (less than 0.02, or an interval "
            "that reaches 0): it sets no worst case."
        )
    if len(per_attack):
        for attack, sub in per_attack.groupby("attack", sort=True):
            none = sub[sub["label"] == NONE]["hypervolume"]
            others = sub[sub["label"] != NONE]["hypervolume"]
            if len(none) and len(others) and float(others.max()) <= float(none.iloc[0]) + 1e-12:
                notes.append(
                    f"{attack}: no defense's frontier beats the undefended release "
                    f"(hypervolume {float(none.iloc[0]):.3f} for none, at most "
                    f"{float(others.max()):.3f} for a defense): on this attack's raw scale "
                    "privatizing bought nothing."
                )
    if len(families):
        for family, sub in families.groupby("family"):
            ranked = sub[sub["rank"].notna()]
            if ranked.empty:
                notes.append(f"{family}: no defense faced the whole family; none is ranked.")
            elif float(ranked["hypervolume"].max()) == 0.0:
                notes.append(
                    f"{family}: every defense's worst-case hypervolume is 0 (no point above "
                    "chance utility with worst-case privacy above 0): they tie."
                )
    return notes


def identity_labels(frame: pd.DataFrame) -> set[str]:
    """Labels whose releases equal the originals: the undefended ``none``, and any defense whose
    every point with a measured replacement rate changed nothing (rate 0). Vector releases and
    results without the column have no rate (NaN), so they are never counted here."""
    labelled = with_labels(frame)
    found = set(labelled.loc[labelled["defense"] == NONE, "label"])
    if "replacement_rate" in labelled.columns:
        rate = labelled["replacement_rate"].astype(float)
        measured = labelled[np.isfinite(rate)].groupby("label")["replacement_rate"]
        found |= {str(label) for label, top in measured.max().items() if top == 0.0}
    return found


def _ranks(cost: pd.Series, identity: pd.Series) -> pd.Series:
    """Rank 1 = smallest ``cost``; equal costs share the smallest rank, except that an identity
    defense (``identity`` True) ranks below a real one of equal cost, so doing nothing never
    wins a tie. NaN cost (the unranked ``none``) gets no rank."""
    import pandas as pd

    c, same = cost.to_numpy(float), identity.to_numpy(bool)
    ok = np.isfinite(c)
    ranks = [
        1 + int(np.sum(ok & ((c < c[i]) | ((c == c[i]) & ~same & same[i])))) if ok[i] else pd.NA
        for i in range(len(c))
    ]
    return pd.Series(ranks, index=cost.index, dtype="Int64")


def _overall(
    frame: pd.DataFrame, families: pd.DataFrame, notes: list[str], identity: set[str]
) -> pd.DataFrame:
    """One row per label: mean family rank (over labels ranked in every family), the number
    of families ranked in, best utility, guarantee, cost."""
    import pandas as pd

    labelled = with_labels(frame)
    labels = sorted(set(labelled["label"]))
    overall = pd.DataFrame(index=pd.Index(labels, name="label"))
    overall["defense"] = labelled.groupby("label")["defense"].first()
    n_fam = families["family"].nunique() if len(families) else 0
    if len(families):
        ranked = families[families["rank"].notna()]
        counts = ranked.groupby("label").size()
        means = ranked.groupby("label")["rank"].apply(lambda r: r.astype(float).mean())
        overall["n_ranked"] = counts.reindex(labels).fillna(0).astype(int)
        overall["mean_rank"] = means.where(overall["n_ranked"] == n_fam)
    else:
        overall["n_ranked"], overall["mean_rank"] = 0, math.nan
    overall["families"] = [f"{n} of {n_fam}" for n in overall["n_ranked"]]
    overall.loc[overall.index == NONE, ["mean_rank"]] = math.nan
    overall.loc[overall.index == NONE, "families"] = "reference"
    partial = [lb for lb in labels if lb != NONE and overall.at[lb, "n_ranked"] < n_fam]
    if partial:
        reasons = families[(families["label"].isin(partial)) & (families["reason"] != "")]
        detail = "; ".join(f"{r['label']} in {r['family']}: {r['reason']}"
                           for _, r in reasons.iterrows())  # fmt: skip
        notes.append(
            "Not ranked overall (not ranked in every family, so a mean over families would "
            f"compare unlike sets): {', '.join(partial)}" + (f" ({detail})" if detail else "") + "."
        )
    overall["is_identity"] = overall.index.isin(list(identity))
    overall["rank"] = _ranks(overall["mean_rank"].astype(float).round(12), overall["is_identity"])
    util = labelled[np.isfinite(labelled["utility"].astype(float))]
    util = util.groupby(["label", "knob_value"], dropna=False)["utility"].mean()
    overall["best_utility"] = util.groupby(level="label").max()
    if "guarantee" in labelled.columns:
        overall["guarantee"] = (
            labelled.dropna(subset=["guarantee"]).groupby("label")["guarantee"].first()
        )
    else:
        overall["guarantee"] = ""
    overall["s_per_1k_words"] = _cost(labelled, notes)
    overall = overall.reset_index()
    overall["is_none"] = overall["label"] == NONE
    overall = overall.sort_values(
        ["is_none", "rank", "is_identity", "n_ranked", "label"],
        ascending=[True, True, True, False, True],
    )
    return overall[list(OVERALL_HEADERS)].reset_index(drop=True)


def _cost(labelled: pd.DataFrame, notes: list[str]) -> pd.Series:
    """Seconds of privatization per 1,000 words, per label (NaN where n_words is unknown)."""
    import pandas as pd

    labels = labelled["label"].unique()
    if "n_words" not in labelled.columns or labelled["n_words"].isna().all():
        notes.append(
            "Cost (s / 1k words) is not available: these results have no n_words column "
            "(written by an older runner); re-run the grid to measure it."
        )
        return pd.Series(math.nan, index=labels)
    if "privatize_seconds" not in labelled.columns:
        notes.append("Cost (s / 1k words) is not available: no privatize_seconds column.")
        return pd.Series(math.nan, index=labels)
    # privatize_seconds and n_words repeat on every attack row of a defense point: count once.
    keys = [c for c in ("label", "knob_value", "seed", "defense_params") if c in labelled.columns]
    point = labelled.drop_duplicates(subset=keys, keep="last")
    point = point[
        np.isfinite(point["privatize_seconds"].astype(float))
        & np.isfinite(point["n_words"].astype(float))
    ]
    sums = point.groupby("label")[["privatize_seconds", "n_words"]].sum()
    cost = sums["privatize_seconds"] / sums["n_words"].where(sums["n_words"] > 0) * 1000.0
    unknown = sorted(set(labels) - set(cost.dropna().index))
    if unknown:
        notes.append(f"Cost (s / 1k words) unknown for {', '.join(unknown)} (no n_words).")
    return cost.reindex(labels)
