"""The overall standing: each label's mean family rank over the families that decide it, its
interval and holding share from the family ranks on every resample, best utility, guarantee
and cost; with the tie-aware rank order the per-attack view uses too.

Which families decide the overall ranking (:func:`deciding_families`)? Every family that ranks
a defense, except, each left out of the mean with one note saying which and why:

* a family **undecided because of the attacker** (its attacks learn too little from the
  undefended release to judge defenses: :attr:`privaudit.leaderboard.strength.FamilyStrength.
  weak`): a weak attacker is no evidence for or against a defense;
* a family that **only some defenses face by design**: it faces fewer defenses than the family
  that faces the most, where a family faces the defenses it ranks and those that failed one of
  its cells (a failure is the defense's own, so it keeps that defense out of the overall
  ranking instead). The others' releases are not read by its attacks with a measurable
  advantage (rows n/a, or only attacks that learn nothing): has-deanonymization, which reads
  only HaS's releases, would otherwise leave every other defense unranked overall;
* a family that ranks **fewer than two defenses**, on a board that ranks two or more: it
  orders nothing.

A defense is then ranked overall when it is ranked in every deciding family; the mean family
rank and its resamples are over those families only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from privaudit.api import NONE, REFERENCES
from privaudit.leaderboard.stats import overlapping, rank_summary, sample_ranks
from privaudit.leaderboard.tables import pd_isna
from privaudit.metrics.stats import with_labels

if TYPE_CHECKING:
    import pandas as pd


# Column -> header of the overall table, in display order.
OVERALL_HEADERS = {
    "rank": "rank",
    "rank_ci": "rank interval",
    "label": "defense",
    "mean_rank": "mean family rank",
    "stability": "holds rank",
    "tied_with": "tied with",
    "families": "families",
    "best_utility": "best utility",
    "s_per_1k_words": "s / 1k words",
    "guarantee": "guarantee",
}


def ranks_by_cost(cost: pd.Series, identity: pd.Series) -> pd.Series:
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


def overall_table(
    frame: pd.DataFrame,
    families: pd.DataFrame,
    notes: list[str],
    identity: set[str],
    rank_samples: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    level: float = 0.95,
    unscorable: set[str] | None = None,
    weak: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """One row per label: mean family rank (over labels ranked in every family), the number
    of families ranked in, best utility, guarantee, cost; with ``rank_samples`` (per family,
    each ranked label's rank on every resample) the overall rank is recomputed on each
    resample from the mean family rank, for its interval, holding share and ties, as in the
    family tables. ``unscorable``: families the corpus cannot score, left out of the count
    (:func:`privaudit.leaderboard.unscored.unscorable_families`); so is a family that ranks
    no defense (e.g. none of its attacks learns anything measurable from the undefended
    release: SynthPAI's gender, income, education and region), which would otherwise leave
    every defense unranked overall. ``weak``: families undecided because of the attacker,
    with why; they and the families only some defenses face, or that rank fewer than two,
    are left out too (:func:`deciding_families`, one note)."""
    import pandas as pd

    labelled = with_labels(frame)
    families = _deciding_rows(families, notes, unscorable, weak)
    deciding = set(families["family"]) if len(families) else set()
    rank_samples = {f: r for f, r in (rank_samples or {}).items() if f in deciding}
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
    refs = overall["defense"].isin(REFERENCES)
    overall.loc[refs, ["mean_rank"]] = math.nan
    overall.loc[refs, "families"] = np.where(
        overall.loc[refs, "defense"] == NONE, "reference", "format reference"
    )
    partial = [lb for lb in labels if not refs[lb] and overall.at[lb, "n_ranked"] < n_fam]
    if partial:
        reasons = families[(families["label"].isin(partial)) & (families["reason"] != "")]
        detail = "; ".join(
            f"{r['label']} in {r['family']}: {r['reason']}" for _, r in reasons.iterrows()
        )
        notes.append(
            "Not ranked overall (not ranked in every family, so a mean over families would "
            f"compare unlike sets): {', '.join(partial)}" + (f" ({detail})" if detail else "") + "."
        )
    overall["is_identity"] = overall.index.isin(list(identity))
    overall["rank"] = ranks_by_cost(
        overall["mean_rank"].astype(float).round(12), overall["is_identity"]
    )
    _overall_intervals(overall, rank_samples, level, families)
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
    overall["is_none"] = overall["defense"].isin(REFERENCES)  # the references, listed last
    overall = overall.sort_values(
        ["is_none", "rank", "is_identity", "n_ranked", "label"],
        ascending=[True, True, True, False, True],
    )
    columns = [c for c in OVERALL_HEADERS if c != "rank_ci"]
    columns[1:1] = ["rank_ci_low", "rank_ci_high"]
    return overall[columns].reset_index(drop=True)


def _deciding_rows(
    families: pd.DataFrame,
    notes: list[str],
    unscorable: set[str] | None,
    weak: Mapping[str, str] | None,
) -> pd.DataFrame:
    """The rows of the families that decide the overall rank: scorable, ranking some defense,
    and deciding (:func:`deciding_families`); the note on those left out goes to ``notes``."""
    if unscorable and len(families):
        families = families[~families["family"].isin(unscorable)]
    if len(families):  # a family that ranks no defense cannot order them: left out (noted)
        ranks_any = families.groupby("family")["rank"].transform(lambda r: r.notna().any())
        families = families[ranks_any.astype(bool)]
    families, left_out = deciding_families(families, weak or {})
    if left_out:
        notes.append(left_out_note(left_out, nothing_left=families.empty))
    return families


def deciding_families(
    families: pd.DataFrame, weak: Mapping[str, str]
) -> tuple[pd.DataFrame, dict[str, str]]:
    """The rows of ``families`` (the family table, families that rank a defense) whose family
    decides the overall ranking, and the families left out with why (the module docstring's
    rule; ``weak``: families undecided because of the attacker, with why)."""
    if not len(families):
        return families, {}
    left = {str(f): why for f, why in weak.items() if f in set(families["family"])}
    rest = families[~families["family"].isin(left) & ~families["defense"].isin(REFERENCES)]
    ranked = {
        str(f): set(g.loc[g["rank"].notna(), "label"].astype(str))
        for f, g in rest.groupby("family", sort=True)
    }
    failed = rest[rest["failed"].astype(bool)] if "failed" in rest.columns else rest.iloc[:0]
    faced = {
        f: ranked[f] | set(failed.loc[failed["family"] == f, "label"].astype(str)) for f in ranked
    }
    most = max((len(v) for v in faced.values()), default=0)
    every = set().union(*faced.values()) if faced else set()
    for f in sorted(faced):
        if len(faced[f]) < most:
            unread = sorted(every - faced[f])
            left[f] = (
                f"faced by only some defenses by design: its attacks with a measurable "
                f"advantage read {', '.join(sorted(faced[f]))}'s releases, not "
                f"{', '.join(unread)}'s"
            )
    kept = [f for f in ranked if f not in left]
    if len(set().union(*(ranked[f] for f in kept)) if kept else set()) >= 2:
        for f in kept:
            if len(ranked[f]) < 2:
                only = ", ".join(sorted(ranked[f])) or "no defense"
                left[f] = f"ranks only {only}: fewer than two defenses, it orders nothing"
    return families[~families["family"].isin(left)], left


def left_out_note(left_out: Mapping[str, str], nothing_left: bool) -> str:
    """The one note naming the families left out of the overall mean, with why."""
    shown = "; ".join(f"{f} ({why})" for f, why in sorted(left_out.items()))
    tail = (
        " No family is left to decide it, so no defense is ranked overall." if nothing_left else ""
    )
    return (
        f"Left out of the overall ranking (they do not decide which defenses are ranked "
        f"overall, nor their mean family rank): {shown}.{tail}"
    )


def _overall_intervals(
    overall: pd.DataFrame,
    rank_samples: Mapping[str, Mapping[str, np.ndarray]],
    level: float,
    families: pd.DataFrame,
) -> None:
    """Fill ``rank_ci_low``/``high``, ``stability`` and ``tied_with`` of the labels ranked
    overall (index = label); NaN and empty without resamples (no outcomes).

    The intervals and ties come from the deciding ``families``' rank intervals, which come
    from their family-wise separations (:func:`privaudit.leaderboard.stats.separation_ranks`):
    a label's mean family rank lies between the mean of its family intervals' lower ends and
    that of their upper ends whenever every family's separations hold; its overall rank
    interval runs from 1 + the labels whose mean-rank interval lies wholly below its own to
    the ranked count − those wholly above, and it is tied with the labels whose mean-rank
    intervals overlap its own. Two labels tied in every family are tied overall, so the
    overall table claims no order the families' pairs do not. ``stability`` is the share of
    resamples on which the mean family rank keeps the label's rank."""
    overall["rank_ci_low"] = overall["rank_ci_high"] = overall["stability"] = np.nan
    overall["tied_with"] = ""
    ranked = [lb for lb in overall.index if not pd_isna(overall.at[lb, "rank"])]
    if not ranked or not rank_samples:
        return
    if any(lb not in ranks for ranks in rank_samples.values() for lb in ranked):
        return  # a family without resamples: the point ranks stand alone
    mean_s = np.mean([[ranks[lb] for lb in ranked] for ranks in rank_samples.values()], axis=0)
    ident = overall.loc[ranked, "is_identity"].to_numpy(bool)
    rank_s = sample_ranks(-mean_s, ident)
    point = overall.loc[ranked, "rank"].astype(int).to_numpy()
    _, _, hold = rank_summary(rank_s, point, level)
    overall.loc[ranked, "stability"] = hold
    fam = families[families["family"].isin(list(rank_samples)) & families["label"].isin(ranked)]
    ends = fam.groupby("label")[["rank_ci_low", "rank_ci_high"]].mean().reindex(ranked)
    m_lo, m_hi = ends["rank_ci_low"].to_numpy(float), ends["rank_ci_high"].to_numpy(float)
    if not (np.isfinite(m_lo).all() and np.isfinite(m_hi).all()):
        return
    n = len(ranked)
    below = [int(np.sum(m_hi < m_lo[i])) for i in range(n)]  # surely ranked better
    above = [int(np.sum(m_lo > m_hi[i])) for i in range(n)]  # surely ranked worse
    overall.loc[ranked, "rank_ci_low"] = [1.0 + b for b in below]
    overall.loc[ranked, "rank_ci_high"] = [float(n - a) for a in above]
    overall.loc[ranked, "tied_with"] = overlapping(ranked, m_lo, m_hi)


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
