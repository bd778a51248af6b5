"""The leaderboard: how much of the privacy-utility box each defense's frontier dominates.

Per attack family, each defense label's worst-case frontier
(:func:`privaudit.leaderboard.stats.family_points`) is scored by its **hypervolume** in the box
normalised privacy ∈ [0, 1] × utility ∈ [chance, 1] (:data:`HYPERVOLUME_DEFINITION`). With the
run's per-document outcomes, every hypervolume and rank is recomputed on each bootstrap
resample for intervals, the share of resamples holding the rank, and statistical ties; each
resample also draws every learned attack cell's fit effect (its ``fit_sd``: declared by the
attack class, :func:`privaudit.registry.attack_fit_sds`, or measured) and every point's
utility fit effect, so the intervals include attacker and service randomness.

A family ranks on the worst case over the attacks that read every ranked label's release
(:func:`privaudit.leaderboard.stats.attack_sets`); the privacy levels stated (matched privacy,
points, rates, the verdict's best utility) are the worst case over every attack a label faced.
A label is ranked in a family only when it faced the whole family (no failed cell there);
otherwise it is listed with the reason. Overall: the mean family rank over labels ranked in
every family that decides it (:mod:`privaudit.leaderboard.overall`: not one only some
defenses face, one that ranks fewer than two, or one undecided because of its attacker), with
its interval from the family ranks on each resample.

``none`` (the text reference) and ``clean`` (the format references) are reference points,
never ranked; each vector defense's privacy is set beside the clean reference in its format
(:mod:`privaudit.leaderboard.formats`). Rows of several corpora (``corpus_fingerprint``;
merged with ``mixed_corpora``, which labels each ``label @ corpus``) keep each corpus's
undefended row apart: its utility and its attacks' normalised-privacy reference are its own,
never a mean over corpora, and a note says the ranks compare across data. Several run
directories can be merged first (:func:`privaudit.outputs.runs.merge_runs`), so a
leaderboard can grow run by run.

This module ranks; :mod:`privaudit.leaderboard.render` formats the tables,
:mod:`privaudit.leaderboard.overall` sets the overall standing,
:mod:`privaudit.leaderboard.verdict` the verdict and :mod:`privaudit.leaderboard.notes` writes
the caveats beside them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import NONE, REFERENCES
from privaudit.leaderboard.families import (
    RANK_COLUMNS,
    check_chance,
    family_table,
    hv_by_label,
    hypervolume,
    ranked_seeds,
)
from privaudit.leaderboard.fit_spreads import declared_sds, measured_notes, with_measured
from privaudit.leaderboard.formats import FormatView, format_view
from privaudit.leaderboard.frontier import seed_means
from privaudit.leaderboard.matched import matched_table, rates_table
from privaudit.leaderboard.notes import (
    NO_OUTCOMES_NOTE,
    attack_set_notes,
    beats_none_notes,
    calibrated_notes,
    corpora_note,
    fit_effect_notes,
    identity_notes,
    subset_note,
    unscorable_notes,
    verdict_notes,
)
from privaudit.leaderboard.overall import overall_table, ranks_by_cost
from privaudit.leaderboard.paired import MATTERS
from privaudit.leaderboard.reach import reach_cautions, reach_note
from privaudit.leaderboard.service import (
    ServiceView,
    check_one_evaluator,
    probe_warning,
    service_view,
)
from privaudit.leaderboard.stats import (
    attack_sets,
    family_points,
    own_scale,
)
from privaudit.leaderboard.strength import family_strengths
from privaudit.leaderboard.tables import knob_text_of
from privaudit.leaderboard.unscored import unscorable_families
from privaudit.leaderboard.verdict import Evidence, Verdict, decide
from privaudit.metrics.linked import LINKABILITY
from privaudit.metrics.spec import find_metric
from privaudit.metrics.stats import (
    Bootstrap,
    Outcomes,
    run_stats,
    with_labels,
)
from privaudit.records import board_columns

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.leaderboard.stats import AttackSets
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
        for family, sub in self.families.groupby("family", sort=True):
            sub = sub.set_index("label")
            for col in RANK_COLUMNS:
                wide[f"{col}[{family}]"] = sub[col]
        for attack, sub in self.per_attack.groupby("attack", sort=True):
            sub = sub.set_index("label")
            wide[f"hypervolume[{attack}]"] = sub["hypervolume"]
            wide[f"rank[{attack}]"] = sub["rank"]
        wide = wide.reset_index()
        return wide[["rank", "label", *[c for c in wide.columns if c not in ("rank", "label")]]]


@dataclass
class _Statistics:
    """The board's statistics before any table: the usable rows, the bootstrap, the run's
    resampled statistics, the fit spreads in use (attacks by label; the service's by label)
    and the notes they call for."""

    frame: pd.DataFrame
    boot: Bootstrap
    stats: RunStats
    sds: dict[str, float]
    u_sds: dict[str, float]
    notes: list[str]


def leaderboard(
    frame: pd.DataFrame,
    chance: float,
    *,
    outcomes: Outcomes | None = None,
    bootstrap: Bootstrap | None = None,
    fit_sd: Mapping[str, float] | None = None,
    utility_fit_sd: float | Mapping[str, float] | None = None,
    measured_fit_sd: Mapping[str, float] | None = None,
    measured_utility_fit_sd: float | None = None,
    difference: float | None = None,
) -> Leaderboard:
    """Rank the defense labels of a results table per attack family and overall (see the
    module docstring). ``outcomes``: the run's per-document outcomes (without them, no
    intervals); ``bootstrap``: how to resample them; ``fit_sd`` / ``utility_fit_sd``: the
    attacks' (by label) and the service's fit spreads (default: the classes' declared ones,
    :func:`privaudit.registry.attack_fit_sds`, :func:`~privaudit.registry.utility_fit_sds`);
    ``measured_*``: spreads a run measured (the larger is used, with a note); ``difference``:
    the hypervolume difference the verdict's power lines give the units and seeds for
    (default :data:`privaudit.leaderboard.paired.MATTERS`, 0.05 of the box).

    Raises ``ValueError`` when ``chance`` is not in [0, 1), ``difference`` not in (0, 1], no
    cell is ``ok``, or the rows got their utility from more than one evaluator
    (``utility_evaluator``).
    """
    check_chance(chance)
    check_difference(difference)
    check_one_evaluator(frame)  # merged runs must share one utility scale
    cautions = reach_cautions(frame)
    st = _statistics(
        frame,
        outcomes,
        bootstrap,
        fit_sd,
        utility_fit_sd,
        measured_fit_sd,
        measured_utility_fit_sd,
    )
    frame, boot, stats, notes = st.frame, st.boot, st.stats, st.notes
    tb = _tables(st, chance)
    weak = {f: s.why() for f, s in tb.strengths.items() if s.weak and f not in tb.unscorable}
    overall = overall_table(
        frame,
        tb.families,
        notes,
        tb.identity,
        tb.rank_samples,
        boot.level,
        unscorable=set(tb.unscorable),
        weak=weak,
    )
    rates = rates_table(frame, tb.points)
    notes.extend(calibrated_notes(rates))
    notes.append(f"Chance level of the utility metric: {chance:.4g}.")
    verdict = decide(_evidence(st, tb, chance, outcomes, cautions, difference))
    notes.extend(beats_none_notes(verdict))
    probe = probe_warning(frame)  # first: every utility below may be the service's, not the text's
    return Leaderboard(
        overall=overall,
        families=tb.families,
        matched=tb.matched,
        per_attack=tb.per_attack,
        points=tb.points.table,
        chance=chance,
        notes=(*([probe] if probe else []), *notes),
        level=boot.level,
        rates=rates,
        verdict=verdict,
        ranked_on=dict(tb.sets.common),
        service=service_view(stats),
        formats=tb.formats,
    )


@dataclass
class _Tables:
    """The per-family tables and what the overall ranking and the verdict read from them:
    the family table with each label's hypervolume and rank samples, the frontier points
    (worst case over every attack a label faced) and those the ranks use (the attacks every
    ranked label faced), matched privacy, per attack, the formats' view, the families no
    truth can score and each family's attacker strength."""

    families: pd.DataFrame
    hv_samples: dict[tuple[str, str], np.ndarray]
    rank_samples: dict[str, dict[str, np.ndarray]]
    points: Any
    ranking: Any
    sets: Any
    matched: pd.DataFrame
    per_attack: pd.DataFrame
    formats: FormatView
    identity: set[str]
    unscorable: Any
    strengths: Any


def _tables(st: _Statistics, chance: float) -> _Tables:
    """The family, matched, per-attack and format tables (their notes added to ``st``)."""
    frame, stats, notes = st.frame, st.stats, st.notes
    identity = identity_labels(frame)
    unscorable = unscorable_families(stats.frame)
    sets = attack_sets(stats)
    # Like with like for the ranks only; a privacy level a defense reaches is always set by
    # the strongest adversary it faced, never by the subset its rivals also faced.
    ranking = family_points(stats, sets.restriction())
    points = family_points(stats)
    hv_samples: dict[tuple[str, str], np.ndarray] = {}  # kept for the verdict's paired pairs
    rank_samples: dict[str, dict[str, np.ndarray]] = {}  # kept for the overall intervals
    families = family_table(
        stats, ranking, chance, identity, hv_samples, rank_samples, all_points=points
    )
    notes.extend(attack_set_notes(sets))
    matched = matched_table(points, chance)
    per_attack = _per_attack(frame, chance, identity, notes)
    formats = format_view(stats)
    notes.extend(formats.notes)
    _add_reference_notes(notes, frame, stats, families, per_attack, chance, identity, unscorable)
    strengths = family_strengths(stats, sets.common)  # a weak attacker decides nothing
    return _Tables(
        families,
        hv_samples,
        rank_samples,
        points,
        ranking,
        sets,
        matched,
        per_attack,
        formats,
        identity,
        unscorable,
        strengths,
    )


def _evidence(
    st: _Statistics,
    tb: _Tables,
    chance: float,
    outcomes: Outcomes | None,
    cautions: list[str],
    difference: float | None,
) -> Evidence:
    """What the verdict decides from (:class:`privaudit.leaderboard.verdict.Evidence`)."""
    stats, boot, frame = st.stats, st.boot, st.frame
    with_fits = stats.available and (any(v > 0 for v in st.sds.values()) or bool(st.u_sds))
    return Evidence(
        tb.families,
        tb.hv_samples,
        tb.matched,
        tb.points.table,
        n_test=_victims(stats),
        level=boot.level,
        chance=chance,
        available=stats.available,
        ranked_on=tb.sets.common,
        format_only=tb.formats.format_only(),
        cautions=tuple(cautions),
        doc_samples=_doc_samples(frame, outcomes, boot, tb.sets, chance) if with_fits else None,
        seeds=ranked_seeds(tb.ranking),
        own_points=_own_points(stats, tb.sets, chance),
        unscorable=tb.unscorable,
        strengths=tb.strengths,
        units=boot.units,
        difference=MATTERS if difference is None else float(difference),
        difference_named=difference is not None,
    )


def _statistics(
    frame: pd.DataFrame,
    outcomes: Outcomes | None,
    bootstrap: Bootstrap | None,
    fit_sd: Mapping[str, float] | None,
    utility_fit_sd: float | Mapping[str, float] | None,
    measured_fit_sd: Mapping[str, float] | None,
    measured_utility_fit_sd: float | None,
) -> _Statistics:
    """The run's resampled statistics with the fit spreads in use, and their notes."""
    subset, reach = subset_note(frame), reach_note(frame)
    frame = frame[[c for c in frame.columns if c in BOARD_COLUMNS]]  # pandas copies the rest
    seed_means(frame)  # the same error as the plots when nothing is usable
    boot = bootstrap or Bootstrap()
    declared = declared_sds(frame, fit_sd, utility_fit_sd)
    sds, u_fit_sd, u_sds = with_measured(declared, measured_fit_sd, measured_utility_fit_sd)
    stats = run_stats(frame, outcomes or Outcomes(), boot, fit_sd=sds, utility_fit_sd=u_fit_sd)
    notes = [
        unit_note(boot, frame),
        *(n for n in (subset, reach) if n),
        *fit_effect_notes(stats.available, sds, u_sds),
        *measured_notes(declared[0], declared[2], measured_fit_sd, measured_utility_fit_sd),
    ]
    return _Statistics(frame, boot, stats, sds, u_sds, notes)


def unit_note(boot: Bootstrap, frame: pd.DataFrame) -> str:
    """What the victims are and what every interval resamples: ``Victims: 1,000 documents by
    62 people; ...`` (:mod:`privaudit.metrics.units`)."""
    units = boot.units
    if units is None:
        n = frame["n_test"].dropna() if "n_test" in frame else []
        count = f"{int(n.max()):,} documents" if len(n) else "the test documents"
        return f"Victims: {count}; intervals resample documents (no authors recorded)."
    if units.kind == "document":
        return (
            f"Victims: {units.label()}, each its own unit (the corpus declares no authors); "
            "intervals resample documents."
        )
    linked = (
        f" Linkability: {LINKABILITY}."
        if frame["attack"].astype(str).str.startswith("person-").any()
        else ""
    )
    return (
        f"Victims: {units.label()}; every interval, paired difference, rank and test resamples "
        f"people, each drawn with all of their documents.{linked}"
    )


def _add_reference_notes(
    notes: list[str],
    frame: pd.DataFrame,
    stats: RunStats,
    families: pd.DataFrame,
    per_attack: pd.DataFrame,
    chance: float,
    identity: set[str],
    unscorable: Mapping[str, str],
) -> None:
    """Add to ``notes`` the mixed corpora (first), the defenses that change nothing, the
    missing outcomes, the loud caveats and the families the corpus cannot score."""
    undefended = set(with_labels(frame).loc[lambda f: f["defense"] == NONE, "label"])
    corpora = corpora_note(frame, undefended)
    if corpora:
        notes.insert(0, corpora)
    notes.extend(identity_notes(identity, undefended))
    if not stats.available:
        notes.append(NO_OUTCOMES_NOTE)
    notes.extend(verdict_notes(frame, stats, families, per_attack, chance))
    notes.extend(unscorable_notes(unscorable))


def _victims(stats: RunStats) -> dict[str, int]:
    """The victims (test documents) per family, where the results record them."""
    n_test = stats.frame.groupby("family")["n_test"].max() if "n_test" in stats.frame else None
    return {} if n_test is None else n_test.dropna().astype(int).to_dict()


def _doc_samples(
    frame: pd.DataFrame,
    outcomes: Outcomes | None,
    boot: Bootstrap,
    sets: AttackSets,
    chance: float,
) -> dict[tuple[str, str], np.ndarray]:
    """The ranking hypervolumes' resamples without the fit effects: the documents' share of
    each difference's variance, for the power lines (paired.FamilyPower)."""
    docs = run_stats(frame, outcomes or Outcomes(), boot)
    doc_samples = hv_by_label(family_points(docs, sets.restriction()), chance, docs)
    return {k: v for k, (_, v) in doc_samples.items()}


def _own_points(
    stats: RunStats, sets: AttackSets, chance: float
) -> dict[tuple[str, str], list[tuple[str, float, np.ndarray]]]:
    """Per (family, label), ``none`` included: each point's knob, its box (privacy × utility
    above chance, privacy on each attack's own scale, worst case over the attacks the family
    ranks on) and the box's resamples: what "beats the undefended release" tests
    (:data:`privaudit.leaderboard.verdict.BEATS_NONE`)."""
    pts = family_points(own_scale(stats), sets.restriction())
    t = pts.table
    if t.empty:
        return {}

    def box(x: np.ndarray, u: np.ndarray) -> np.ndarray:
        y = np.clip((np.asarray(u, float) - chance) / (1.0 - chance), 0.0, 1.0)
        area = np.clip(np.asarray(x, float), 0.0, 1.0) * y
        return np.where(np.isfinite(area), area, 0.0)

    point_box = box(t["privacy"].to_numpy(float), t["utility"].to_numpy(float))
    sample_box = box(pts.privacy, pts.utility)
    out: dict[tuple[str, str], list[tuple[str, float, np.ndarray]]] = {}
    for i, row in enumerate(t.itertuples(index=False)):
        key = (str(row.family), str(row.label))
        knob = "" if row.defense == NONE else knob_text_of(t.iloc[i])
        out.setdefault(key, []).append((knob, float(point_box[i]), sample_box[i]))
    return out


def check_difference(difference: float | None) -> None:
    """A difference to give the power lines for: a hypervolume difference in (0, 1]."""
    if difference is None:
        return
    if not (
        isinstance(difference, int | float) and math.isfinite(difference) and 0 < difference <= 1
    ):
        raise ValueError(
            f"difference must be a hypervolume difference in (0, 1], got {difference!r}; "
            "e.g. 0.05 (5 % of the privacy-utility box)."
        )


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
            rows.append(
                {
                    "attack": attack,
                    "attack_metric": metric,
                    "label": label,
                    "defense": group["defense"].iloc[0],
                    "hypervolume": hypervolume(
                        front["empirical_privacy"],
                        front["utility"],
                        chance=chance,
                        privacy_scale=scale,
                    ),
                    "n_points": len(group),
                    "n_frontier": len(front),
                    "privacy_scale": scale,
                }
            )
    per_attack = pd.DataFrame(rows)
    ranked = ~per_attack["defense"].isin(REFERENCES)
    score = per_attack["hypervolume"].round(12).where(ranked)
    same = per_attack["label"].isin(identity)
    per_attack["rank"] = pd.concat(
        [
            ranks_by_cost(-score[idx], same[idx])
            for idx in per_attack.groupby("attack").groups.values()
        ]
    ).reindex(per_attack.index)
    return per_attack
