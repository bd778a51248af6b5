"""The board's notes: the caveats a reader must see beside the numbers (victims scored on a
subset, corpora mixed, attacker and evaluator randomness in the intervals, defenses that
change nothing, families the corpus cannot score, undefended utility near chance, attacks
with nothing to buy, families with nothing ranked, and where no defense beats the
undefended release)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from privaudit.api import NONE, REFERENCES
from privaudit.leaderboard.unscored import unscorable_families
from privaudit.leaderboard.verdict import BEATS_NONE, Verdict
from privaudit.metrics.outcomes import quiet_nan
from privaudit.metrics.spec import find_metric
from privaudit.metrics.stats import with_labels

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.leaderboard.stats import AttackSets
    from privaudit.metrics.stats import RunStats

#: Said when the runs have no per-document outcomes.
NO_OUTCOMES_NOTE = (
    "No per-document outcomes (a run written before they were stored, or merged runs "
    "without them): hypervolumes and ranks are point estimates, with no intervals."
)


def fit_effect_notes(
    available: bool, sds: Mapping[str, float], u_sds: Mapping[str, float]
) -> list[str]:
    """The note naming the fit effects the intervals include (the attacks' ``sds`` and the
    utility evaluators' non-zero ``u_sds``), when there are intervals and any effect."""
    if not (available and (sds or u_sds)):
        return []
    sources, effects = [], []
    if sds:
        shown = ", ".join(f"{a} {sd:.3g}" for a, sd in sorted(sds.items()))
        sources.append("attacker randomness")
        effects.append(
            "each learned attack cell an independent fit effect with the "
            f"attack's declared between-fit sd ({shown}; the others are "
            "deterministic)"
        )
    if u_sds:
        shown = ", ".join(f"{e} {sd:.3g}" for e, sd in sorted(u_sds.items()))
        sources.append("the utility evaluator's training randomness")
        effects.append(
            "each point's utility an independent fit effect with the "
            f"evaluator's declared between-fit sd ({shown})"
        )
    return [
        f"Intervals include {' and '.join(sources)} as well as the test documents: each "
        f"resample adds to {', and to '.join(effects)}."
    ]


def identity_notes(identity: set[str], undefended: set[str]) -> list[str]:
    """One note per defense whose releases are the original texts (``identity`` less the
    ``undefended`` labels: ``none @ corpus`` is none too)."""
    return [
        f"{label} changed no word at any privacy level (replacement rate 0): its releases "
        "are the original texts, so it protects nothing; it ranks below any defense it ties "
        "with."
        for label in sorted(identity - {NONE} - undefended)
    ]


def unscorable_notes(unscorable: Mapping[str, str]) -> list[str]:
    """Per family the corpus cannot score (with why): left out of the overall ranking."""
    return [
        f"{family}: left out of the overall ranking: this corpus has no truth to score its "
        f"attacks ({why}); they could read the releases, so it is the corpus, not the "
        "defenses, that cannot be judged here."
        for family, why in sorted(unscorable.items())
    ]


def calibrated_notes(rates: pd.DataFrame | None) -> list[str]:
    """The note naming the defenses whose knob values were target replacement rates."""
    if rates is None or not rates["target_rate"].notna().any():
        return []
    calibrated = sorted(set(rates.loc[rates["target_rate"].notna(), "label"]))
    return [
        f"{', '.join(calibrated)}: knob values were set as target replacement rates (η "
        "calibrated per rate on the train split, RAPT's protocol); the table 'at equal "
        "replacement rate' compares them rate for rate."
    ]


def subset_note(frame: pd.DataFrame) -> str | None:
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


def corpora_note(frame: pd.DataFrame, undefended: set[str]) -> str | None:
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


def attack_set_notes(sets: AttackSets) -> list[str]:
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


def beats_none_notes(verdict: Verdict) -> list[str]:
    """Per family with ranked defenses and none beating the undefended release: the note, from
    the verdict's own test (:data:`~privaudit.leaderboard.verdict.BEATS_NONE`), so the notes
    and the headline never disagree; not for a family undecided because of its attacker (a
    weak attacker is no evidence that privatizing buys nothing)."""
    if not verdict.available:
        return []
    return [
        f"{fv.family}: no defense beats the undefended release ({BEATS_NONE}): privatizing "
        "bought nothing on this family's attacks."
        for fv in verdict.families
        if fv.n_ranked and not (fv.beats_none or fv.unscorable or fv.undecided)
    ]


def verdict_notes(
    frame: pd.DataFrame,
    stats: RunStats,
    families: pd.DataFrame,
    per_attack: pd.DataFrame,
    chance: float,
) -> list[str]:
    """Loud caveats: undefended utility at or within its interval of chance; an attack with a
    measurable advantage on which no defense beats the undefended release; families where
    nothing could be ranked."""
    notes = [
        *_few_victims_notes(frame),
        *_objective_notes(frame),
        *_undefended_chance_notes(frame, stats, chance),
        *_idle_attack_notes(stats),
    ]
    notes += _nothing_to_buy_notes(stats, per_attack, notes)
    return notes + _unranked_family_notes(stats, families)


#: Below this many test documents (the victims every score is over) a board decides nothing:
#: one document moves a share by 5 % or more, and the paired bootstrap's intervals span any
#: difference between defenses. Said loudly, not refused (a small file is a fine first try).
#: Attacks that score a subset keep at least :data:`privaudit.api.MIN_VICTIMS` (300).
FEW_VICTIMS = 20


def _few_victims_notes(frame: pd.DataFrame) -> list[str]:
    """When the runs score fewer than :data:`FEW_VICTIMS` test documents."""
    if "n_test" not in frame.columns:
        return []
    sizes = frame["n_test"].astype(float).dropna()
    if sizes.empty or sizes.min() >= FEW_VICTIMS:
        return []
    n = int(sizes.min())
    return [
        f"WARNING: only {n} test document(s) (the victims) are scored: too few to decide "
        f"anything (fewer than {FEW_VICTIMS}): every score moves by 1/{max(n, 1)} per "
        "document and the intervals span any difference, so the ranking says nothing. Use "
        f"a corpus with more test documents (at least {FEW_VICTIMS}; hundreds to rank)."
    ]


def _objective_notes(frame: pd.DataFrame) -> list[str]:
    """Per defense whose service-side objective the utility evaluator did not train."""
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
    return notes


def _undefended_chance_notes(frame: pd.DataFrame, stats: RunStats, chance: float) -> list[str]:
    """Per undefended release (one per corpus), its utility at chance or within its interval
    of chance."""
    notes = []
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
    return notes


def _idle_attack_notes(stats: RunStats) -> list[str]:
    """Per attack without a measurable advantage on the undefended release: it sets no worst
    case."""
    notes = []
    f = stats.frame
    idle = f[(f["defense"] == NONE) & (f["status"] == "ok") & np.isnan(stats.normalised_point)]
    for _, row in idle.drop_duplicates("attack").iterrows():
        notes.append(
            f"{row['attack']}: against the undefended release it scores "
            f"{float(row['attack_score']):.3f} vs {float(row['attack_baseline']):.3f} for its "
            "no-information baseline, no measurable advantage (less than 0.02, or an interval "
            "that reaches 0): it sets no worst case."
        )
    return notes


def _nothing_to_buy_notes(
    stats: RunStats, per_attack: pd.DataFrame, said_before: list[str]
) -> list[str]:
    """Per attack on which no defense's raw-privacy hypervolume beats the undefended
    release's and that has no measurable advantage there, unless ``said_before`` says so."""
    notes: list[str] = []
    if len(per_attack):
        for attack, sub in per_attack.groupby("attack", sort=True):
            none = sub[sub["label"] == NONE]["hypervolume"]
            others = sub[~sub["defense"].isin(REFERENCES)]["hypervolume"]
            if len(none) and len(others) and float(others.max()) <= float(none.iloc[0]) + 1e-12:
                # Nothing to buy: the attack learns nothing measurable from the original.
                # Whether a defense beats none is the family's note (beats_none_notes, the
                # verdict's one definition), never another reading of the raw frontier.
                advantage = _undefended_advantage(stats, str(attack))
                said = any(
                    n.startswith(f"{attack}: against the undefended")
                    for n in [*said_before, *notes]
                )
                if advantage is not None and not said:
                    notes.append(
                        f"{attack}: the attack has no measurable advantage on the undefended "
                        f"release ({advantage}): there was no privacy to buy."
                    )
    return notes


def _unranked_family_notes(stats: RunStats, families: pd.DataFrame) -> list[str]:
    """Per scorable family where no defense is ranked, or every ranked hypervolume is 0."""
    notes = []
    if len(families):
        unscorable = unscorable_families(stats.frame)
        for family, sub in families.groupby("family"):
            ranked = sub[sub["rank"].notna()]
            if family in unscorable:
                continue  # its own note says why (leaderboard)
            if ranked.empty:
                notes.append(
                    f"{family}: no defense is ranked ({_common_reason(sub)}); it is "
                    "left out of the overall ranking."
                )
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


def _common_reason(rows: pd.DataFrame) -> str:
    """The reason most of a family's unranked labels give (their table's ``reason``)."""
    reasons = rows.loc[rows["reason"] != "", "reason"]
    if reasons.empty:
        return "no defense faced the whole family"
    return str(reasons.value_counts().index[0])
