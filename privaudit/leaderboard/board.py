"""The leaderboard: how much of the privacy-utility box each defense's frontier dominates.

Per attack, each defense label's Pareto frontier (:func:`privaudit.leaderboard.frontier.frontier`)
is scored by its **hypervolume**, defenses are ranked by it, and the overall standing is the
mean rank over the attacks a defense was scored on. Several run directories can be merged
first (:func:`privaudit.outputs.runs.merge_runs`), so a leaderboard can grow run by run.
This module ranks; :mod:`privaudit.leaderboard.render` formats the tables.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import NONE, REFERENCES
from privaudit.leaderboard.formats import FormatView, format_view
from privaudit.leaderboard.frontier import seed_means
from privaudit.leaderboard.reach import reach_cautions, reach_note
from privaudit.leaderboard.render import (
    OVERALL_HEADERS,
    Table,
    fmt_number,
    knob_text_of,
    pd_isna,
    tables,
)
from privaudit.leaderboard.service import (
    ServiceView,
    check_one_evaluator,
    probe_warning,
    service_view,
)
from privaudit.leaderboard.stats import (
    MATCHED_LEVELS,
    AttackSets,
    attack_sets,
    family_points,
    hypervolume_samples,
    overlapping,
    own_scale,
    rank_summary,
    sample_ranks,
)
from privaudit.leaderboard.verdict import BEATS_NONE, Verdict, decide
from privaudit.metrics.outcomes import quiet_nan
from privaudit.metrics.spec import find_metric
from privaudit.metrics.stats import Bootstrap, Outcomes, run_stats, with_labels
from privaudit.records import board_columns
from privaudit.registry import attack_fit_sds, utility_fit_sds

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.leaderboard.stats import FamilyPoints
    from privaudit.metrics.stats import RunStats


#: The results columns the board reads (declared with the schema, privaudit.records).
BOARD_COLUMNS = board_columns()


@dataclass(frozen=True)
class Leaderboard:
    """Standings per attack family and overall (see :data:`HYPERVOLUME_DEFINITION`).

    ``families``: one row per (family, label): ``hypervolume`` with ``hv_ci_low``/``high``,
    ``rank`` (Int64; missing when not ranked) with ``rank_ci_low``/``high``, ``stability``
    (share of resamples holding the rank), ``tied_with``, ``complete`` and ``reason`` (why it
    is not ranked), ``strongest`` (the attack that most often set the worst case),
    ``n_points``, ``hv_all`` with ``hv_all_ci_low``/``high`` (the worst case over every
    attack the label faced; ``hypervolume`` ranks on the attacks every ranked label faced).
    ``overall``: one row per label, its rank with ``rank_ci_low``/``high``, ``stability`` and
    ``tied_with`` as in a family. ``matched``: utility at matched privacy, one row per
    (family, label, level; ``at_chance``: the point at chance utility that alone would have
    reached it). ``per_attack``: raw-privacy hypervolume per attack.
    ``points``: the worst-case points (:class:`privaudit.leaderboard.stats.FamilyPoints`),
    over every attack a defense faced. Only the ranks (``families``' hypervolume, rank and
    what derives from them, the verdict's pairs) use the attacks every ranked defense faced,
    ``ranked_on`` per family (empty: they share none, each on its own); every privacy level
    a defense is said to reach (``matched``, ``points``, ``rates``, the verdict's best
    utility) is the worst case over all its attacks: the strongest adversary sets privacy.
    ``notes``: caveats a reader must see beside the numbers. ``verdict``: the headline
    (:mod:`privaudit.leaderboard.verdict`: paired comparisons, power, decisiveness).
    ``service``: the service's sections (:mod:`privaudit.leaderboard.service`).
    ``formats``: each vector defense's privacy split into its release format's share (the
    ``clean`` reference's) and its mechanism's (:mod:`privaudit.leaderboard.formats`).
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
    verdict: Verdict | None = None
    ranked_on: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    service: ServiceView | None = None  # RAPT's comparison, CAPE's adversary (leaderboard.service)
    formats: FormatView | None = None  # format and mechanism (leaderboard.formats)

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
    fit_sd: Mapping[str, float] | None = None,
    utility_fit_sd: float | Mapping[str, float] | None = None,
) -> Leaderboard:
    """Rank the defense labels of a results table per attack family and overall.

    Per family, each label's worst-case frontier (:func:`privaudit.leaderboard.stats.
    family_points`) is scored by its hypervolume in the box normalised privacy ∈ [0, 1] ×
    utility ∈ [chance, 1] (:data:`HYPERVOLUME_DEFINITION`); with ``outcomes`` (the run's
    per-document outcomes) every hypervolume and rank is recomputed on each of
    ``bootstrap``'s resamples for intervals, the share of resamples holding the rank, and
    statistical ties; each resample also draws every learned attack cell's fit effect from
    ``fit_sd`` (by attack label; default: the attack classes' declared ``fit_sd``,
    :func:`privaudit.registry.attack_fit_sds`), so the intervals include attacker
    randomness, and every point's utility fit effect from ``utility_fit_sd`` (default: the
    evaluator class's declared ``fit_sd``, :func:`privaudit.registry.utility_fit_sds`).
    A family ranks on the worst case over the attacks that read every ranked label's release
    (:func:`privaudit.leaderboard.stats.attack_sets`); the privacy
    levels stated (matched privacy, points, rates, the verdict's best utility) are the worst
    case over every attack a label faced. A label is
    ranked in a family only when it faced the whole family (no failed cell there); otherwise
    it is listed with the reason. Overall: the mean family rank over labels ranked in every
    family, with its interval from the family ranks on each resample. ``none`` (the text
    reference) and ``clean`` (the format references) are reference points, never ranked;
    each vector defense's privacy is set beside the clean reference in its format
    (:mod:`privaudit.leaderboard.formats`). Rows of several corpora (``corpus_fingerprint``;
    merged with ``mixed_corpora``, which labels each ``label @ corpus``) keep each corpus's
    undefended row apart: its utility and its attacks' normalised-privacy reference are its
    own, never a mean over corpora, and a note says the ranks compare across data.

    Raises ``ValueError`` when ``chance`` is not in [0, 1), no cell is ``ok``, or the rows
    got their utility from more than one evaluator (``utility_evaluator``).
    """
    _check_chance(chance)
    check_one_evaluator(frame)  # merged runs must share one utility scale
    subset_note = _subset_note(frame)
    cautions, reach = reach_cautions(frame), reach_note(frame)  # from attack_details
    frame = frame[[c for c in frame.columns if c in BOARD_COLUMNS]]  # pandas copies the rest
    seed_means(frame)  # the same error as the plots when nothing is usable
    boot = bootstrap or Bootstrap()
    sds = attack_fit_sds(frame["attack"]) if fit_sd is None else dict(fit_sd)
    if utility_fit_sd is None:
        evaluators = frame["utility_evaluator"].dropna() if "utility_evaluator" in frame else []
        utility_fit_sd = utility_fit_sds(evaluators)
    stats = run_stats(frame, outcomes or Outcomes(), boot, fit_sd=sds,
                      utility_fit_sd=utility_fit_sd)  # fmt: skip
    notes: list[str] = [n for n in (subset_note, reach) if n]
    u_sds = (dict(utility_fit_sd) if isinstance(utility_fit_sd, Mapping)
             else {"utility": utility_fit_sd})  # fmt: skip
    u_sds = {e: sd for e, sd in u_sds.items() if sd}
    if stats.available and (sds or u_sds):
        sources, effects = [], []
        if sds:
            shown = ", ".join(f"{a} {sd:.3g}" for a, sd in sorted(sds.items()))
            sources.append("attacker randomness")
            effects.append("each learned attack cell an independent fit effect with the "
                           f"attack's declared between-fit sd ({shown}; the others are "
                           "deterministic)")  # fmt: skip
        if u_sds:
            shown = ", ".join(f"{e} {sd:.3g}" for e, sd in sorted(u_sds.items()))
            sources.append("the utility evaluator's training randomness")
            effects.append("each point's utility an independent fit effect with the "
                           f"evaluator's declared between-fit sd ({shown})")  # fmt: skip
        notes.append(
            f"Intervals include {' and '.join(sources)} as well as the test documents: each "
            f"resample adds to {', and to '.join(effects)}."
        )
    identity = identity_labels(frame)
    unscorable = unscorable_families(stats.frame)
    sets = attack_sets(stats)
    # Like with like for the ranks only; a privacy level a defense reaches is always set by
    # the strongest adversary it faced, never by the subset its rivals also faced.
    ranking = family_points(stats, sets.restriction())
    points = family_points(stats)
    hv_samples: dict[tuple[str, str], np.ndarray] = {}  # kept for the verdict's paired pairs
    rank_samples: dict[str, dict[str, np.ndarray]] = {}  # kept for the overall intervals
    families = _family_table(stats, ranking, chance, identity, hv_samples, rank_samples,
                             all_points=points)  # fmt: skip
    notes.extend(_attack_set_notes(sets))
    matched = _matched(points, chance)
    per_attack = _per_attack(frame, chance, identity, notes)
    formats = format_view(stats)
    notes.extend(formats.notes)
    undefended = set(with_labels(frame).loc[lambda f: f["defense"] == NONE, "label"])
    corpora = _corpora_note(frame, undefended)
    if corpora:
        notes.insert(0, corpora)
    for label in sorted(identity - {NONE} - undefended):  # `none @ corpus` is none too
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
    for family, why in sorted(unscorable.items()):
        notes.append(
            f"{family}: left out of the overall ranking: this corpus has no truth to score its "
            f"attacks ({why}); they could read the releases, so it is the corpus, not the "
            "defenses, that cannot be judged here."
        )
    overall = _overall(frame, families, notes, identity, rank_samples, boot.level,
                       unscorable=set(unscorable))  # fmt: skip
    rates = _rates(frame, points)
    if rates is not None and rates["target_rate"].notna().any():
        calibrated = sorted(set(rates.loc[rates["target_rate"].notna(), "label"]))
        notes.append(
            f"{', '.join(calibrated)}: knob values were set as target replacement rates (η "
            "calibrated per rate on the train split, RAPT's protocol); the table 'at equal "
            "replacement rate' compares them rate for rate."
        )
    notes.append(f"Chance level of the utility metric: {chance:.4g}.")
    n_test = stats.frame.groupby("family")["n_test"].max() if "n_test" in stats.frame else None
    doc_samples = None
    if stats.available and (any(v > 0 for v in sds.values()) or u_sds):
        # The same resamples without the fit effects: the documents' share of each
        # difference's variance, for the power lines (verdict.needed_victims).
        docs = run_stats(frame, outcomes or Outcomes(), boot)
        doc_samples = _hv_by_label(family_points(docs, sets.restriction()), chance, docs)
        doc_samples = {k: v for k, (_, v) in doc_samples.items()}
    own = _hv_by_label(family_points(own_scale(stats), sets.restriction()), chance, stats)
    verdict = decide(
        families, hv_samples, matched, points.table, level=boot.level, chance=chance,
        n_test={} if n_test is None else n_test.dropna().astype(int).to_dict(),
        available=stats.available, ranked_on=sets.common, format_only=formats.format_only(),
        cautions=tuple(cautions), doc_samples=doc_samples, seeds=_seeds(ranking),
        own_scale=own, unscorable=unscorable,
    )  # fmt: skip
    notes.extend(_beats_none_notes(verdict))
    weak = probe_warning(frame)  # first: every utility below may be the service's, not the text's
    return Leaderboard(
        overall=overall, families=families, matched=matched, per_attack=per_attack,
        points=points.table, chance=chance, notes=(*([weak] if weak else []), *notes),
        level=boot.level, rates=rates, verdict=verdict, ranked_on=dict(sets.common),
        service=service_view(stats), formats=formats,
    )  # fmt: skip


def _family_table(
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
    holding share, ties, completeness. ``samples_out`` receives the hypervolume resamples
    per (family, label), the ones ranked on; ``ranks_out`` the rank resamples per family and
    ranked label. ``all_points`` (the worst case over every attack a label faced, where
    ``points`` keeps the family's common attacks) adds ``hv_all`` and its interval."""
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
                reason = _na_reason(g)
            sel = (table["family"] == family) & (table["label"] == label) if len(table) else []
            idx = np.flatnonzero(np.asarray(sel)) if len(table) else np.zeros(0, int)
            if not reason and not len(idx):
                reason = (
                    "normalised privacy undefined: the attack has no measurable advantage "
                    "on the undefended release, or no baseline to measure it by"
                )
            point_hv, samples = _label_hypervolume(points, idx, chance, stats)
            hv_all, all_lo, all_hi = point_hv, np.nan, np.nan
            if all_points is not None:
                t_all = all_points.table
                idx_all = (
                    np.flatnonzero((t_all["family"] == family) & (t_all["label"] == label))
                    if len(t_all)
                    else np.zeros(0, int)
                )
                hv_all, s_all = _label_hypervolume(all_points, idx_all, chance, stats)
                all_lo, all_hi = stats.ci(s_all) if stats.available else (np.nan, np.nan)
            strongest = ""
            if len(idx):
                strongest = str(table["strongest"].iloc[idx].value_counts().index[0])
            entries.append({
                "family": family, "label": label, "defense": g["defense"].iloc[0],
                "hypervolume": point_hv, "samples": samples, "complete": not reason,
                "reason": reason, "strongest": strongest, "n_points": len(idx),
                "hv_all": hv_all, "hv_all_ci_low": float(all_lo), "hv_all_ci_high": float(all_hi),
            })  # fmt: skip
        ranked = [e for e in entries if e["complete"] and e["defense"] not in REFERENCES]
        ident = np.array([e["label"] in identity for e in ranked], dtype=bool)
        point_scores = np.array([[e["hypervolume"]] for e in ranked], float).reshape(-1, 1)
        point_rank = sample_ranks(point_scores, ident)[:, 0] if ranked else np.zeros(0, int)
        if ranked and stats.available:
            rank_s = sample_ranks(np.stack([e["samples"] for e in ranked]), ident)
            lo, hi, hold = rank_summary(rank_s, point_rank, stats.level)
            if ranks_out is not None:
                ranks_out[family] = {e["label"]: rank_s[i] for i, e in enumerate(ranked)}
        else:
            lo = hi = hold = np.full(len(ranked), np.nan)
        tied = overlapping([e["label"] for e in ranked], lo, hi)
        for i, e in enumerate(ranked):
            e |= {"rank": int(point_rank[i]), "rank_ci_low": lo[i], "rank_ci_high": hi[i],
                  "stability": hold[i], "tied_with": tied[i]}  # fmt: skip
        for e in entries:
            s_ = e.pop("samples")
            if samples_out is not None:
                samples_out[(family, e["label"])] = s_
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
            "strongest", "n_points", "hv_all", "hv_all_ci_low", "hv_all_ci_high", "is_none",
            "ranked_order",
        ])  # fmt: skip
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


def _hv_by_label(
    points: FamilyPoints, chance: float, stats: RunStats
) -> dict[tuple[str, str], tuple[float, np.ndarray]]:
    """Per (family, label) of ``points``: its hypervolume and resamples."""
    t = points.table
    if t.empty:
        return {}
    groups = t.groupby(["family", "label"]).indices
    return {(str(f), str(lb)): _label_hypervolume(points, np.asarray(idx), chance, stats)
            for (f, lb), idx in groups.items()}  # fmt: skip


def _seeds(points: FamilyPoints) -> dict[str, int]:
    """Per family, the fewest seeds any ranked point averages (the power lines' refits)."""
    t = points.table
    if t.empty:
        return {}
    t = t[~t["defense"].isin(REFERENCES)]
    return {str(f): int(n) for f, n in t.groupby("family")["n_seeds"].min().items()}


def _beats_none_notes(verdict: Verdict) -> list[str]:
    """Per family with ranked defenses and none beating the undefended release: the note, from
    the verdict's own test (:data:`~privaudit.leaderboard.verdict.BEATS_NONE`), so the notes
    and the headline never disagree."""
    if not verdict.available:
        return []
    return [
        f"{fv.family}: no defense beats the undefended release ({BEATS_NONE}): privatizing "
        "bought nothing on this family's attacks."
        for fv in verdict.families
        if fv.n_ranked and not fv.beats_none and not fv.unscorable
    ]


def na_causes(frame: pd.DataFrame) -> pd.Series:
    """Per row, why it is n/a: ``truth`` (the attack ran; the corpus has no truth to score it:
    :class:`~privaudit.metrics.truth.NotScorable`), ``release`` (the attack cannot read the
    release), "" (not n/a). The ``na_cause`` column records it; in older results an n/a row
    with attack seconds ran, so the truth could not judge it."""
    import pandas as pd

    cause = frame["na_cause"] if "na_cause" in frame else pd.Series(None, index=frame.index)
    ran = (frame["attack_seconds"].astype(float).notna() if "attack_seconds" in frame
           else pd.Series(False, index=frame.index))  # fmt: skip
    out = cause.where(cause.isin(["truth", "release"]), np.where(ran, "truth", "release"))
    return out.where(frame["status"] == "n/a", "")


def unscorable_families(frame: pd.DataFrame) -> dict[str, str]:
    """Families this corpus cannot score: every row n/a, and every attack n/a somewhere for
    want of truth (not of a readable release); with the reasons, ``attack: reason``."""
    out: dict[str, str] = {}
    if "family" not in frame or frame.empty:
        return out
    causes = na_causes(frame)
    for family, g in frame.groupby("family", sort=True):
        truth = causes[g.index] == "truth"
        if (g["status"] != "n/a").any() or not truth.groupby(g["attack"]).any().all():
            continue
        reasons = sorted({f"{a}: {r}" for a, r in zip(g["attack"][truth], g["reason"][truth],
                                                     strict=True)})  # fmt: skip
        out[str(family)] = "; ".join(reasons)
    return out


def _na_reason(rows: pd.DataFrame) -> str:
    """Why a label has no ok row in a family whose rows are all n/a, by cause."""
    causes = set(na_causes(rows)) - {""}
    if causes == {"truth"}:
        shown = "; ".join(sorted({str(r) for r in rows["reason"]}))
        return f"all n/a: the corpus has no truth to score this family's attacks ({shown})"
    if causes == {"release"}:
        return "no attack of this family could read its releases (all n/a)"
    return ("all n/a: some attacks of this family could not read its releases, the corpus has "
            "no truth to score the others")  # fmt: skip


def _attack_set_notes(sets: AttackSets) -> list[str]:
    """Per family: the attacks its ranking compares on, and who faced more; or that its
    defenses share no attack."""
    notes = []
    for family in sorted(sets.common):
        common = sets.common[family]
        if not common:
            notes.append(
                f"{family}: no attack reads every ranked defense's release, so the ranking "
                "compares each defense's worst case over the attacks it faced (unlike sets)."
            )
            continue
        more = sets.more(family)
        if not more:
            continue
        extra = "; ".join(f"{label} (+{', '.join(a)})" for label, a in more.items())
        notes.append(
            f"{family}: ranked on the worst case over the attacks that read every ranked "
            f"defense's release ({', '.join(common)}), so each is judged on the same attacks; "
            f"'worst-case HV, all attacks' adds those only some faced: {extra}."
        )
    return notes


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


def _matched(points: FamilyPoints, chance: float) -> pd.DataFrame:
    """Utility at matched privacy: per family, label and level in MATCHED_LEVELS, the best
    measured utility among the label's points whose worst-case privacy reaches the level
    (``points`` over every attack the label faced, never the ranking's subset: a level is
    reached against the strongest adversary; measured points only, no interpolation; NaN =
    not reached). A point at chance utility (its point estimate, or its interval's upper
    end, at or below chance) bought its privacy with all of its utility: it reaches no
    level; ``at_chance`` keeps the best such point where it is the only one that would have
    (its knob value and utility with interval)."""
    import pandas as pd

    t = points.table
    rows = []
    columns = ["family", "label", "level", "utility", "utility_ci_low", "utility_ci_high",
               "privacy", "knob", "knob_value", "at_chance"]  # fmt: skip
    if t.empty:
        return pd.DataFrame(columns=columns)
    upper = t["utility_ci_high"].astype(float).fillna(t["utility"].astype(float))
    useless = (t["utility"].astype(float) <= chance + 1e-12) | (upper <= chance + 1e-12)
    keys = ("utility", "utility_ci_low", "utility_ci_high", "privacy", "knob", "knob_value")
    for (family, label), g in t.groupby(["family", "label"], sort=True):
        if g["defense"].iloc[0] in REFERENCES:
            continue
        for level in MATCHED_LEVELS:
            reach = g[(g["privacy"] >= level) & ~useless[g.index]]
            row = {"family": family, "label": label, "level": level, "utility": np.nan,
                   "utility_ci_low": np.nan, "utility_ci_high": np.nan, "privacy": np.nan,
                   "knob": None, "knob_value": np.nan, "at_chance": ""}  # fmt: skip
            if len(reach):
                best = reach.loc[reach["utility"].idxmax()]
                row |= {k: best[k] for k in keys}
            else:
                only = g[(g["privacy"] >= level) & useless[g.index]]
                if len(only):
                    best = only.loc[only["utility"].idxmax()]
                    lo, hi = fmt_number(best["utility_ci_low"]), fmt_number(best["utility_ci_high"])
                    ci = f" [{lo}, {hi}]" if "—" not in (lo, hi) else ""
                    row["at_chance"] = f"{best['utility']:.3f}{ci} at {knob_text_of(best)}"
            rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def _subset_note(frame: pd.DataFrame) -> str | None:
    """Which attacks scored a subset of the victims (``n_attacked`` in their details: a
    declared ``max_victims``), so a reader knows their intervals are on fewer documents."""
    if "attack_details" not in frame or "n_test" not in frame:
        return None
    scored: dict[str, tuple[int, int]] = {}
    for attack, details, n_test in frame[["attack", "attack_details", "n_test"]].itertuples(
        index=False
    ):
        try:
            n = int(json.loads(details).get("n_attacked", 0)) if isinstance(details, str) else 0
        except (ValueError, AttributeError):
            continue
        if 0 < n < int(n_test):
            scored[str(attack).split("[")[0]] = (n, int(n_test))
    if not scored:
        return None
    shown = "; ".join(f"{a}: {n:,} of {t:,}" for a, (n, t) in sorted(scored.items()))
    return (
        f"Scored on a subset of the victims ({shown}; each attack's declared cap: max_victims "
        "drawn with the run's seed, the same documents at every point and for every capped "
        "attack): their intervals, and the worst cases they set, are computed on those "
        "documents."
    )


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
    ranked = ~per_attack["defense"].isin(REFERENCES)
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
    """Loud caveats: undefended utility at or within its interval of chance; an attack with a
    measurable advantage on which no defense beats the undefended release; families where
    nothing could be ranked."""
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
    nones = sorted(set(stats.frame.loc[stats.frame["defense"] == NONE, "label"]))
    for none_label in nones or [NONE]:  # one per corpus: never averaged across corpora
        undefended = _undefended_utility(frame, stats, none_label)
        if undefended is None:
            continue
        u, lo, hi = undefended
        whose = f" of {none_label}" if len(nones) > 1 else ""
        if u <= chance + 1e-9:
            notes.append(
                f"WARNING: the undefended utility{whose} ({u:.3f}) is at or below chance "
                f"({chance:.3f}): the text does not predict this label, so every hypervolume "
                "is 0 and the ranking says nothing. Choose a label the text predicts."
            )
        elif lo <= chance + 1e-9:
            notes.append(
                f"WARNING: the undefended utility{whose} ({u:.3f} [{lo:.3f}, {hi:.3f}]) is "
                f"within its interval of chance ({chance:.3f}): the text barely predicts this "
                "label, so every defense's utility sits in a sliver above chance and the "
                "ranking may reflect noise, however stable it looks. Choose a label the text "
                "predicts better, or more test documents."
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
            others = sub[~sub["defense"].isin(REFERENCES)]["hypervolume"]
            if len(none) and len(others) and float(others.max()) <= float(none.iloc[0]) + 1e-12:
                # Nothing to buy: the attack learns nothing measurable from the original.
                # Whether a defense beats none is the family's note (_beats_none_notes, the
                # verdict's one definition), never another reading of the raw frontier.
                advantage = _undefended_advantage(stats, str(attack))
                said = any(n.startswith(f"{attack}: against the undefended") for n in notes)
                if advantage is not None and not said:
                    notes.append(
                        f"{attack}: the attack has no measurable advantage on the undefended "
                        f"release ({advantage}): there was no privacy to buy."
                    )
    if len(families):
        unscorable = unscorable_families(stats.frame)
        for family, sub in families.groupby("family"):
            ranked = sub[sub["rank"].notna()]
            if family in unscorable:
                continue  # its own note says why (leaderboard)
            if ranked.empty:
                notes.append(f"{family}: no defense is ranked ({_common_reason(sub)}); it is "
                             "left out of the overall ranking.")  # fmt: skip
            elif float(ranked["hypervolume"].max()) == 0.0:
                notes.append(
                    f"{family}: every defense's worst-case hypervolume is 0 (no point above "
                    "chance utility with worst-case privacy above 0): they tie."
                )
    return notes


def _undefended_utility(
    frame: pd.DataFrame, stats: RunStats, label: str = NONE
) -> tuple[float, float, float] | None:
    """The undefended release's utility (seeds averaged) with its interval: from the run's
    resamples, else the results' ``utility_ci_low``/``high`` (NaN when neither has one).
    ``label``: which undefended row (``none @ <corpus>`` on a board of several corpora)."""
    f = stats.frame
    ref = f[(f["label"] == label) & np.isfinite(f["utility"].astype(float))]
    if ref.empty:
        return None
    one = ref.drop_duplicates("seed")  # utility repeats on every attack row of a point
    u = float(one["utility"].astype(float).mean())
    samples = stats.utility[one.index.to_numpy()]
    if stats.available and np.isfinite(samples).any():
        with np.errstate(all="ignore"), quiet_nan():
            lo, hi = stats.ci(np.nanmean(samples, axis=0))
        return u, float(lo), float(hi)
    cols = [c for c in ("utility_ci_low", "utility_ci_high") if c in one.columns]
    if len(cols) == 2:
        return u, float(one[cols[0]].astype(float).mean()), float(one[cols[1]].astype(float).mean())
    return u, math.nan, math.nan


def _corpora_note(frame: pd.DataFrame, undefended: set[str]) -> str | None:
    """The board's note when its rows come from several corpora (``--mixed-corpora``), else
    None: each label names its corpus and each corpus keeps its own undefended reference."""
    if "corpus_fingerprint" not in frame.columns:
        return None
    n = frame["corpus_fingerprint"].dropna().nunique()
    if n < 2:
        return None
    return (
        f"These results come from {n} different corpora (--mixed-corpora): every label names "
        f"its corpus ('label @ corpus'), and each corpus's undefended release is its own "
        f"reference ({', '.join(sorted(undefended))}; never averaged). Ranks still set side by "
        "side hypervolumes measured on different data: compare defenses within one corpus."
    )


def _undefended_advantage(stats: RunStats, attack: str) -> str | None:
    """None when ``attack`` has a measurable advantage on the undefended release (its score's
    interval excludes its no-information baseline on the side of a stronger attack; the point
    estimate beyond it when there are no intervals); otherwise the score, its interval and the
    baseline, to say why not."""
    f = stats.frame
    rows = f[(f["attack"] == attack) & (f["defense"] == NONE) & (f["status"] == "ok")]
    spec = find_metric(str(rows["attack_metric"].iloc[0])) if len(rows) else None
    if rows.empty or spec is None:
        return None  # nothing to judge by: keep the note
    score = float(rows["attack_score"].astype(float).mean())
    base = float(rows["attack_baseline"].astype(float).mean())
    base = base if np.isfinite(base) else spec.null_score
    if not np.isfinite(base):
        return None
    samples = stats.score[rows.index.to_numpy()]
    lo = hi = score
    if stats.available and np.isfinite(samples).any():
        with np.errstate(all="ignore"), quiet_nan():
            lo, hi = (float(v) for v in stats.ci(np.nanmean(samples, axis=0)))
    beyond = lo > base if spec.higher_is_stronger else hi < base
    if beyond:
        return None
    return f"score {score:.3f} [{lo:.3f}, {hi:.3f}] against its no-information baseline {base:.3f}"


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
    frame: pd.DataFrame,
    families: pd.DataFrame,
    notes: list[str],
    identity: set[str],
    rank_samples: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    level: float = 0.95,
    unscorable: set[str] | None = None,
) -> pd.DataFrame:
    """One row per label: mean family rank (over labels ranked in every family), the number
    of families ranked in, best utility, guarantee, cost; with ``rank_samples`` (per family,
    each ranked label's rank on every resample) the overall rank is recomputed on each
    resample from the mean family rank, for its interval, holding share and ties, as in the
    family tables. ``unscorable``: families the corpus cannot score, left out of the count
    (:func:`unscorable_families`); so is a family that ranks no defense (e.g. none of its
    attacks learns anything measurable from the undefended release: SynthPAI's gender, income,
    education and region), which would otherwise leave every defense unranked overall."""
    import pandas as pd

    labelled = with_labels(frame)
    if unscorable and len(families):
        families = families[~families["family"].isin(unscorable)]
    if len(families):  # a family that ranks no defense cannot order them: left out (noted)
        ranks_any = families.groupby("family")["rank"].transform(lambda r: r.notna().any())
        families = families[ranks_any.astype(bool)]
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
        detail = "; ".join(f"{r['label']} in {r['family']}: {r['reason']}"
                           for _, r in reasons.iterrows())  # fmt: skip
        notes.append(
            "Not ranked overall (not ranked in every family, so a mean over families would "
            f"compare unlike sets): {', '.join(partial)}" + (f" ({detail})" if detail else "") + "."
        )
    overall["is_identity"] = overall.index.isin(list(identity))
    overall["rank"] = _ranks(overall["mean_rank"].astype(float).round(12), overall["is_identity"])
    _overall_intervals(overall, rank_samples or {}, level)
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


def _common_reason(rows: pd.DataFrame) -> str:
    """The reason most of a family's unranked labels give (their table's ``reason``)."""
    reasons = rows.loc[rows["reason"] != "", "reason"]
    if reasons.empty:
        return "no defense faced the whole family"
    return str(reasons.value_counts().index[0])


def _overall_intervals(
    overall: pd.DataFrame, rank_samples: Mapping[str, Mapping[str, np.ndarray]], level: float
) -> None:
    """Fill ``rank_ci_low``/``high``, ``stability`` and ``tied_with`` of the labels ranked
    overall (index = label) from the family ranks on each resample; NaN and empty without
    them (no outcomes)."""
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
    lo, hi, hold = rank_summary(rank_s, point, level)
    overall.loc[ranked, "rank_ci_low"], overall.loc[ranked, "rank_ci_high"] = lo, hi
    overall.loc[ranked, "stability"] = hold
    overall.loc[ranked, "tied_with"] = overlapping(ranked, lo, hi)


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
