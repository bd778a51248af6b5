"""The leaderboard: how much of the privacy-utility box each defense's frontier dominates.

Per attack, each defense label's Pareto frontier (:func:`privaudit.leaderboard.pareto.frontier`)
is scored by its **hypervolume**, defenses are ranked by it, and the overall standing is the
mean rank over the attacks a defense was scored on. Several run directories can be merged
first (:func:`merge_runs`), so a leaderboard can grow run by run.
"""

from __future__ import annotations

import html
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.leaderboard.pareto import NONE, seed_means, with_labels
from privaudit.params import shown

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.leaderboard.stats import Bootstrap, FamilyPoints, Outcomes, RunStats

HYPERVOLUME_DEFINITION = (
    "Worst-case hypervolume: per attack family (text recovery, entity recovery, each private "
    "attribute), a defense point's privacy is its worst-case normalised privacy, the minimum "
    "over the family's attacks that read its release of clip((s_none − s) / (s_none − "
    "s_baseline), 0, 1) (1 = the attacker does no better than its no-information baseline, 0 "
    "= as well as against the undefended text); the hypervolume is the area of the region "
    "its frontier dominates inside the box privacy ∈ [0, 1] × utility ∈ [chance, 1], as a "
    "fraction of that box. Utility is the headline metric (balanced accuracy: chance = 1/K "
    "whatever the class balance). Intervals are percentile bootstrap intervals over test "
    "documents, one set of resamples per run shared by every cell (paired); ranks are "
    "recomputed on every resample: 'holds' is the share of resamples in which a defense keeps "
    "its rank, and defenses whose rank intervals overlap are statistically tied. Only "
    "defenses that faced the whole family (no failed or missing cell) are ranked in it; the "
    "overall rank orders the mean family rank of defenses ranked in every family. Seeds are "
    "averaged. The undefended `none` is the reference (privacy 0), never ranked; a defense "
    "whose releases equal the originals ranks below any defense it ties with."
)
PER_ATTACK_DEFINITION = (
    "Per attack (raw privacy): the hypervolume of each defense's frontier of empirical "
    "privacy (1 − the attack's success; the embedding MSE divided by the largest seen for "
    "that attack) against utility, in the same box; `none` is scored for reference."
)

# Column -> header of the overall table, in display order.
OVERALL_HEADERS = {
    "rank": "rank",
    "label": "defense",
    "mean_rank": "mean family rank",
    "families": "families",
    "best_utility": "best utility",
    "s_per_1k_words": "s / 1k words",
    "guarantee": "guarantee",
}
# Column -> header of a family's table.
FAMILY_HEADERS = {
    "rank": "rank",
    "rank_ci": "rank interval",
    "label": "defense",
    "hypervolume": "worst-case HV",
    "hv_ci": "HV interval",
    "stability": "holds rank",
    "tied_with": "tied with",
    "strongest": "strongest attack",
    "n_points": "points",
}


# The results columns a leaderboard reads.
BOARD_COLUMNS = frozenset({
    "defense", "label", "knob", "knob_value", "seed", "attack", "attack_metric", "status",
    "attack_score", "attack_baseline", "empirical_privacy", "utility", "utility_metric",
    "replacement_rate", "privatize_seconds", "n_words", "defense_params", "guarantee",
    "cell_key", "point", "family", "n_test", "reason", "objective",
})  # fmt: skip


@dataclass(frozen=True)
class Table:
    """A display table: headers and rows of already formatted strings."""

    headers: list[str]
    rows: list[list[str]]


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
        """Formatted tables: ``overall``, ``family <f>`` per family, ``matched <f>`` per
        family, and ``per attack``."""
        out = {
            "overall": Table(
                headers=list(OVERALL_HEADERS.values()),
                rows=[
                    [_fmt(row[c], c) for c in OVERALL_HEADERS] for _, row in self.overall.iterrows()
                ],
            )
        }
        for family, sub in self.families.groupby("family", sort=True):
            sub = sub.sort_values(["is_none", "ranked_order", "label"])
            rows = []
            for _, r in sub.iterrows():
                rows.append([
                    "ref" if r["label"] == NONE else _fmt(r["rank"]),
                    _span(r["rank_ci_low"], r["rank_ci_high"], "d"),
                    str(r["label"]),
                    _fmt(r["hypervolume"]),
                    _span(r["hv_ci_low"], r["hv_ci_high"]),
                    "—" if pd_isna(r["stability"]) else f"{100 * r['stability']:.0f} %",
                    str(r["tied_with"] or ("—" if r["complete"] else f"not ranked: {r['reason']}")),
                    str(r["strongest"] or "—"),
                    str(int(r["n_points"])),
                ])  # fmt: skip
            out[f"family {family}"] = Table(list(FAMILY_HEADERS.values()), rows)
        for family, sub in self.matched.groupby("family", sort=True):
            levels = sorted(sub["level"].unique())
            rows = []
            for label, g in sub.groupby("label", sort=False):
                g = g.set_index("level")
                row = [str(label)]
                for lv in levels:
                    r = g.loc[lv]
                    if pd_isna(r["utility"]):
                        row.append("not reached")
                    else:
                        ci = _span(r["utility_ci_low"], r["utility_ci_high"])
                        at = _knob_text(r)
                        row.append(f"{r['utility']:.3f} {ci} at {at}")
                rows.append(row)
            out[f"matched {family}"] = Table(
                ["defense", *[f"privacy ≥ {lv:g}" for lv in levels]], rows
            )
        attacks = sorted(self.per_attack["attack"].unique()) if len(self.per_attack) else []
        cells = self.per_attack.set_index(["label", "attack"]) if attacks else None
        rows = []
        for label in self.overall["label"]:
            row = [str(label)]
            for attack in attacks:
                assert cells is not None
                if (label, attack) not in cells.index:
                    row.append("—")  # never scored: n/a or failed on this attack
                    continue
                cell = cells.loc[(label, attack)]
                rank = "ref" if label == NONE else _fmt(cell["rank"])
                row.append(f"{cell['hypervolume']:.3f} ({rank})")
            rows.append(row)
        out["per attack"] = Table(headers=["defense", *attacks], rows=rows)
        if self.rates is not None and len(self.rates):
            out["rates"] = Table(
                ["replacement rate", "defense", "knob", "target rate", "utility",
                 "text privacy (worst case)"],
                [[f"{r['replacement_rate']:.3f}", str(r["label"]), _knob_text(r),
                  "—" if pd_isna(r["target_rate"]) else f"{r['target_rate']:.3g}",
                  f"{r['utility']:.3f} {_span(r['utility_ci_low'], r['utility_ci_high'])}",
                  "—" if pd_isna(r["privacy"])
                  else f"{r['privacy']:.3f} {_span(r['privacy_ci_low'], r['privacy_ci_high'])}"]
                 for _, r in self.rates.iterrows()],
            )  # fmt: skip
        return out


def pd_isna(value: Any) -> bool:
    import pandas as pd

    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def _span(lo: Any, hi: Any, spec: str = ".3f") -> str:
    """``[lo, hi]``, or ``—`` when the interval is unknown."""
    if pd_isna(lo) or pd_isna(hi):
        return "—"
    if spec == "d":
        return f"{int(lo)}–{int(hi)}"
    return f"[{format(float(lo), spec)}, {format(float(hi), spec)}]"


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
    from privaudit.leaderboard.stats import Bootstrap, Outcomes, family_points, run_stats

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

    from privaudit.leaderboard.stats import hypervolume_samples, sample_ranks

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
                reason = f"{first['attack']} failed at {_knob_text(first)}"
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


def _knob_text(row: Any) -> str:
    knob, value = row.get("knob"), row.get("knob_value")
    if isinstance(knob, str) and not pd_isna(value):
        return f"{knob}={shown(value)}"
    return "its only point"


def _matched(points: FamilyPoints) -> pd.DataFrame:
    """Utility at matched privacy: per family, label and level in MATCHED_LEVELS, the best
    measured utility among the label's points whose worst-case privacy reaches the level
    (measured points only, no interpolation; NaN = not reached)."""
    import pandas as pd

    from privaudit.leaderboard.stats import MATCHED_LEVELS

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
        if metric == "embedding_mse":
            # MSE is unbounded: measure it against the most private point seen for this attack.
            top = float(sub["empirical_privacy"].max())
            scale = top if top > 0 else 1.0
            notes.append(
                f"{attack} (per-attack view): privacy is the embedding MSE divided by "
                f"{scale:.4g}, the largest MSE observed for this attack."
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


def _fmt(value: Any, column: str = "") -> str:
    """Display form of a table value: '—' for missing, 3 decimals, costs with 3 significant."""
    import pandas as pd

    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "—"
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if column == "s_per_1k_words":
            return f"{value:.3g}"
        if column == "mean_rank":
            return f"{value:.2f}"
        return f"{value:.3f}"
    return str(value)


# ---- reading runs ----------------------------------------------------------------------------


def read_run(run_dir: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A run directory's results table (parquet, else csv) and its run.json (``{}`` if absent).

    Raises ``FileNotFoundError`` naming the directory and what to do when there are no results.
    """
    from privaudit.audit.store import RunDir

    rd = RunDir(run_dir)
    return rd.read_results(), rd.read_meta()


def run_chance(meta: Mapping[str, Any]) -> float | None:
    """The chance level of a run's headline utility: ``chance_level`` (1/K for balanced
    accuracy), else, for a run written before it, ``chance_accuracy`` (majority share)."""
    for key in ("chance_level", "chance_accuracy"):
        value = meta.get(key)
        if value is not None and np.isfinite(value):
            return float(value)
    return None


@dataclass(frozen=True)
class Runs:
    """One or more runs read for a leaderboard: results, chance, outcomes, resamples."""

    frame: pd.DataFrame
    chance: float
    outcomes: Outcomes
    bootstrap: Bootstrap


def load_runs(run_dirs: Iterable[str | Path], *, chance: float | None = None) -> Runs:
    """:func:`merge_runs` plus the runs' per-document outcomes (merged; the last run wins on
    a repeated key) and the first run's bootstrap settings."""
    from privaudit.audit.store import RunDir
    from privaudit.leaderboard.stats import Bootstrap, Outcomes

    dirs = [Path(d) for d in run_dirs]
    frame, level = merge_runs(dirs, chance=chance)
    entries = {}
    for run_dir in dirs:
        entries.update(Outcomes.from_frame(RunDir(run_dir).read_outcomes()).entries)
    boot = Bootstrap.from_meta(RunDir(dirs[0]).read_meta())
    return Runs(frame, level, Outcomes(entries), boot)


def merge_runs(
    run_dirs: Iterable[str | Path], *, chance: float | None = None
) -> tuple[pd.DataFrame, float]:
    """Concatenate several runs' results; a later run's row replaces an earlier one's.

    Rows are de-duplicated on ``cell_key`` keeping the last (the key hashes everything that
    determines a cell, so a repeated cell is the same measurement, re-run). The chance level
    comes from the runs' run.json (:func:`run_chance`; ``chance`` overrides it); runs on
    different corpora or with different chance levels are merged with a warning, using the
    highest chance level (the stricter box). Raises ``ValueError`` for no directories, a
    directory without results, or no chance level anywhere.
    """
    import pandas as pd

    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise ValueError("No run directory given; pass one or more (reports/<run-id>/).")
    frames, chances = [], []
    for run_dir in dirs:
        frame, meta = read_run(run_dir)
        frames.append(frame)
        value = run_chance(meta)
        if value is not None:
            chances.append(value)
    merged = pd.concat(frames, ignore_index=True)
    if "cell_key" in merged.columns:
        keyed = merged["cell_key"].notna()
        unique = merged[keyed].drop_duplicates(subset="cell_key", keep="last")
        merged = pd.concat([unique, merged[~keyed]]).sort_index().reset_index(drop=True)
    if "corpus_fingerprint" in merged.columns:
        prints = merged["corpus_fingerprint"].dropna().unique()
        if len(prints) > 1:
            warnings.warn(
                f"The runs used {len(prints)} different corpora (corpus_fingerprint); their "
                "utilities and privacies are not measured on the same data.",
                stacklevel=2,
            )
    if chance is None:
        if not chances:
            raise ValueError(
                f"None of {', '.join(map(str, dirs))} has a run.json with a chance level (an "
                "interrupted run writes none). Pass the utility's chance level with --chance."
            )
        if max(chances) - min(chances) > 1e-9:
            warnings.warn(
                f"The runs have different chance levels {sorted(set(chances))}; using the "
                f"highest, {max(chances):.4g}.",
                stacklevel=2,
            )
        chance = max(chances)
    return merged, float(chance)


# ---- writing ---------------------------------------------------------------------------------


def markdown_table(table: Table) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(cell(h) for h in table.headers) + " |",
        "|" + "|".join("---" for _ in table.headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def html_table(table: Table, *, numeric_from: int = 1) -> str:
    """An HTML ``<table>``, every cell escaped; columns from ``numeric_from`` right-aligned
    where they look numeric."""

    def cell(tag: str, text: str, k: int) -> str:
        numeric = k >= numeric_from and _looks_numeric(text)
        cls = ' class="num"' if numeric else ""
        return f"<{tag}{cls}>{html.escape(text)}</{tag}>"

    head = "".join(cell("th", h, -1) for h in table.headers)
    thead = f"<thead><tr>{head}</tr></thead>\n" if table.headers else ""  # none: key/value
    body = "\n".join(
        "<tr>" + "".join(cell("td", c, k) for k, c in enumerate(row)) + "</tr>"
        for row in table.rows
    )
    # The wrapper scrolls a wide table sideways instead of widening the whole page.
    return f'<div class="scroll"><table>\n{thead}<tbody>\n{body}\n</tbody>\n</table></div>'


def _looks_numeric(text: str) -> bool:
    head = text.split(" ")[0]
    try:
        float(head)
    except ValueError:
        return head == "—"
    return True


TABLE_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem;
       color: #1d1d1f; max-width: 1200px; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #d0d0d5; padding: 0.3rem 0.6rem; text-align: left; }
th { background: #f2f2f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.scroll { overflow-x: auto; max-width: 100%; }
tbody tr:nth-child(even) { background: #fafafc; }
.note { color: #555; font-size: 0.9rem; }
"""


def _sections(board: Leaderboard) -> list[tuple[str, Table, str]]:
    """(title, table, caption) in reading order: overall, each family with its matched-privacy
    table, then the per-attack view."""
    tables = board.tables()
    level = f"{100 * board.level:.0f} %"
    out = [("Overall", tables["overall"], "")]
    for name, table in tables.items():
        if name.startswith("family "):
            family = name[len("family ") :]
            out.append((
                f"Family: {family} (worst-case privacy)", table,
                f"Intervals: {level} bootstrap over test documents; 'holds rank' = share of "
                "resamples in which the defense keeps this rank.",
            ))  # fmt: skip
            matched = tables.get(f"matched {family}")
            if matched is not None:
                out.append((
                    f"Utility at matched privacy: {family}", matched,
                    "Best measured utility among a defense's points whose worst-case "
                    "normalised privacy reaches the level (measured points only).",
                ))  # fmt: skip
    if "rates" in tables:
        out.append((
            "Text defenses at equal replacement rate", tables["rates"],
            "Every point of the defenses that replace words, ordered by the measured share of "
            "tokens changed, so T2T, PCT2T and RAPT can be compared at equal rate (RAPT Table "
            "II) as well as at equal η; 'target rate' is set where the grid gave knob values "
            "as target replacement rates (η calibrated per rate).",
        ))  # fmt: skip
    out.append(("Per attack: raw-privacy hypervolume (rank)", tables["per attack"], ""))
    return out


def leaderboard_html_body(board: Leaderboard) -> str:
    """The leaderboard's tables, notes and definition as an HTML fragment (no page around it)."""
    parts = []
    for title, table, caption in _sections(board):
        parts.append(f"<h3>{html.escape(title)}</h3>\n")
        if caption:
            parts.append(f'<p class="note">{html.escape(caption)}</p>\n')
        parts.append(html_table(table, numeric_from=0 if title == "Overall" else 1) + "\n")
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in board.notes)
    return (
        "".join(parts)
        + f'<ul class="note">{notes}</ul>\n'
        + f'<p class="note">{html.escape(HYPERVOLUME_DEFINITION)}</p>\n'
        + f'<p class="note">{html.escape(PER_ATTACK_DEFINITION)}</p>\n'
    )


def write_leaderboard(board: Leaderboard, out_dir: str | Path) -> list[Path]:
    """Write leaderboard.md, leaderboard.csv (overall plus per-family and per-attack columns),
    leaderboard.html (a plain standalone page) and worst_case_points.csv (per family, label
    and knob value: worst-case privacy and utility with intervals, their spread across seeds
    ``privacy_sd``/``utility_sd``, the strongest attack) into ``out_dir``; return the paths."""
    from privaudit.audit.store import RunDir, write_atomic, write_text

    rd = RunDir(out_dir).create()
    body = "".join(
        f"## {title}\n\n" + (f"{caption}\n\n" if caption else "") + markdown_table(t) + "\n\n"
        for title, t, caption in _sections(board)
    )
    md = write_text(
        rd.leaderboard("md"),
        "# privaudit leaderboard\n\n"
        + body
        + "".join(f"- {n}\n" for n in board.notes)
        + f"\n{HYPERVOLUME_DEFINITION}\n\n{PER_ATTACK_DEFINITION}\n",
    )
    csv = write_atomic(rd.leaderboard("csv"), lambda p: board.wide().to_csv(p, index=False))
    points = write_atomic(rd.worst_case_csv, lambda p: board.points.to_csv(p, index=False))
    page = write_text(
        rd.leaderboard("html"),
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<title>privaudit leaderboard</title>\n"
        f"<style>{TABLE_CSS}</style>\n</head>\n<body>\n<h1>privaudit leaderboard</h1>\n"
        + leaderboard_html_body(board)
        + "</body>\n</html>\n",
    )
    return [md, csv, page, points]
