"""What the board says about the service that trains above the release (issue 26): one
evaluator per board, the warning when the service learns less than the frozen probe, RAPT's
comparison (its Table II) and CAPE's adversary, measured.

Every interval here is the run's: utility samples on the run's bootstrap resamples over test
documents (:func:`privaudit.metrics.stats.run_stats`), so a difference between two defenses'
utilities at one level is **paired** (the same resampled documents on both sides).

Which representation privacy refers to: the board's privacy is always the **release**'s (what
the client sends; every attack reads it). The service-side readout of a private attribute
(``attribute_readout``: how well it can be read from the representation the service trained,
with and without the defense's adversarial objective) is the defense's own evaluation (CAPE's),
shown beside the release-level attack and never ranked.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from privaudit.api import NONE
from privaudit.leaderboard.tables import Table, fmt_number, html_table, knob_text_of, markdown_table
from privaudit.metrics.outcomes import quiet_nan

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.metrics.stats import RunStats

#: RAPT's Table II compares it with these two, at equal η and at equal replacement rate.
RAPT, RAPT_RIVALS = "rapt", ("pct2t", "t2t")
#: The service may trail the frozen probe by this much on the undefended release (noise).
PROBE_SLACK = 0.01
#: Release-level attacks whose score stands beside the service-side readout.
ATTRIBUTE_ATTACK = "attribute-inference"

PRIVACY_REFERS_TO = (
    "The board's privacy refers to the RELEASE: what the client sends, which every attack "
    "reads. The attribute readout of the representation the service trained (with and without "
    "the defense's adversarial objective) is CAPE's own evaluation, shown beside the "
    "release-level attack; it sets no privacy level and no rank."
)
RAPT_CAPTION = (
    "Utility (balanced accuracy, {level} bootstrap interval over the victims: people where the "
    "corpus has them) of t2t, "
    "pct2t and rapt at each level all three were run at; the differences are paired (the same "
    "resampled documents on both sides; seeds averaged). RAPT's Table II comparison, with the "
    "service's objective trained."
)
ADVERSARY_CAPTION = (
    "Per point of a defense whose service-side objective targets a private attribute: the "
    "balanced accuracy with which that attribute is read (3-fold cross-validated logistic "
    "regression on the training split) from the representation the service trained with the "
    "objective and without it, their difference (negative: the objective removed it), and the "
    "release-level attribute-inference attack's score at the same point with its interval. "
)


@dataclass(frozen=True)
class Comparison:
    """RAPT against its rivals at one kind of level: ``by`` (``eta``, ``target rate``)."""

    by: str
    table: Table
    sentence: str


@dataclass(frozen=True)
class ServiceView:
    """The board's service sections: RAPT's comparisons (empty when t2t, pct2t or rapt is
    missing) and the adversary table (None when no point has an attribute readout)."""

    rapt: tuple[Comparison, ...] = ()
    adversary: Table | None = None
    level: float = 0.95

    def sections(self) -> list[tuple[str, Table, str]]:
        """(title, table, caption) in reading order; the finding sentence leads the caption."""
        level = f"{100 * self.level:.0f} %"
        out = [
            (
                f"RAPT's comparison at equal {c.by} (RAPT Table II)",
                c.table,
                f"{c.sentence} {RAPT_CAPTION.format(level=level)}",
            )
            for c in self.rapt
        ]
        if self.adversary is not None:
            out.append(
                (
                    "CAPE's adversary, measured (service representation)",
                    self.adversary,
                    ADVERSARY_CAPTION + PRIVACY_REFERS_TO,
                )
            )
        return out


def check_one_evaluator(frame: pd.DataFrame) -> None:
    """Refuse a results table whose points got their utility from different evaluators
    (merged run directories): their utilities are not on one scale."""
    if "utility_evaluator" not in frame.columns:
        return
    names = sorted({str(v) for v in frame["utility_evaluator"].dropna().unique()})
    if len(names) > 1:
        raise ValueError(
            f"These results mix utility evaluators ({', '.join(names)}), so their utilities "
            "are not comparable on one board: rank each run separately, or re-run the grids "
            "with one evaluator (utility: service)."
        )


def probe_warning(frame: pd.DataFrame) -> str | None:
    """The line that opens the notes when the service learned less than the frozen probe on
    the undefended release (seeds averaged; each corpus's own on a board of several), else
    None."""
    if "utility_lower_bound" not in frame.columns or "utility" not in frame.columns:
        return None
    refs = frame[frame["defense"] == NONE]
    by = "label" if "label" in refs.columns else "defense"  # `none @ corpus`: one per corpus
    for label, ref in refs.groupby(by, sort=True, dropna=False):
        if "seed" in ref.columns:
            ref = ref.drop_duplicates("seed")  # utility repeats on every attack row of a point
        u = ref["utility"].astype(float).to_numpy()
        p = ref["utility_lower_bound"].astype(float).to_numpy()
        if not (np.isfinite(u).any() and np.isfinite(p).any()):
            continue
        u_mean, p_mean = float(np.nanmean(u)), float(np.nanmean(p))
        if u_mean >= p_mean - PROBE_SLACK:
            continue
        where = "the undefended release" if label == NONE else str(label)
        return (
            f"The service evaluator reached {u_mean:.3f} on {where}, below the "
            f"frozen probe's {p_mean:.3f}: raise its epochs or lr (utility: {{name: service, "
            "params: {epochs: 40}}), or use utility: probe."
        )
    return None


def service_view(stats: RunStats) -> ServiceView:
    """RAPT's comparisons and the adversary table from the board's run statistics."""
    return ServiceView(
        rapt=rapt_comparisons(stats), adversary=adversary_table(stats), level=stats.level
    )


# --- RAPT's comparison ------------------------------------------------------------------------


def _chosen_labels(frame: pd.DataFrame) -> dict[str, str] | None:
    """One label per compared defense (the label equal to its name when there are several,
    else the first); None when one of them is missing."""
    chosen = {}
    for name in (RAPT, *RAPT_RIVALS):
        labels = sorted(set(frame.loc[frame["defense"] == name, "label"]))
        if not labels:
            return None
        chosen[name] = name if name in labels else labels[0]
    return chosen


@dataclass(frozen=True)
class _Level:
    """One defense's utility at one level: point estimate (seeds averaged), its resamples,
    the measured replacement rate and the knob text."""

    utility: float
    samples: np.ndarray
    rate: float
    knob: str


def _levels(stats: RunStats, label: str, by: str) -> dict[float, _Level]:
    f = stats.frame
    rows = f[(f["label"] == label) & np.isfinite(f["utility"].astype(float))]
    rows = rows[np.isfinite(rows[by].astype(float))] if by in rows.columns else rows.iloc[:0]
    rows = rows.drop_duplicates(_point_keys(rows))  # utility repeats on every attack row
    out = {}
    for value, g in rows.groupby(by, sort=True):
        samples = stats.utility[g.index.to_numpy()]
        with np.errstate(all="ignore"), quiet_nan():
            mean_samples = np.nanmean(samples, axis=0)
        rate = g["replacement_rate"].astype(float) if "replacement_rate" in g else None
        out[float(value)] = _Level(
            utility=float(g["utility"].astype(float).mean()),
            samples=mean_samples,
            rate=float(rate.mean()) if rate is not None and rate.notna().any() else math.nan,
            knob=knob_text_of(g.iloc[0]),
        )
    return out


def rapt_comparisons(stats: RunStats) -> tuple[Comparison, ...]:
    """RAPT against PCT2T and T2T at each η all three were run at, and at each target
    replacement rate where the grid calibrated by rate; empty when one of them is missing."""
    chosen = _chosen_labels(stats.frame)
    if chosen is None:
        return ()
    out = []
    rated = "target_rate" in stats.frame.columns
    for by in ("knob_value", *(["target_rate"] if rated else [])):
        levels = {name: _levels(stats, label, by) for name, label in chosen.items()}
        if by == "target_rate" and not any(levels.values()):
            continue  # the grid gave η values, not target rates
        common = sorted(set.intersection(*(set(v) for v in levels.values())))
        out.append(_comparison(stats, chosen, levels, common, by))
    # A grid calibrated by rate has no common η: its rate table alone, not an empty one.
    found = tuple(c for c in out if c.table.rows)
    return found or tuple(out[:1])


def _point_keys(rows: pd.DataFrame) -> list[str]:
    """The columns that identify one defense point's row among its attack rows."""
    return [c for c in ("label", "knob_value", "target_rate", "seed") if c in rows.columns]


def _comparison(
    stats: RunStats,
    chosen: dict[str, str],
    levels: dict[str, dict[float, _Level]],
    common: Sequence[float],
    by: str,
) -> Comparison:
    names = (*reversed(RAPT_RIVALS), RAPT)  # t2t, pct2t, rapt: the paper's column order
    knob = "η" if by == "knob_value" else "target rate"
    rated = by == "target_rate"
    headers = [
        knob,
        *([f"measured rate ({' / '.join(names)})"] if rated else []),
        *(chosen[n] for n in names),
        *(f"{chosen[RAPT]} − {chosen[r]}" for r in RAPT_RIVALS),
    ]
    rows, above, below = [], dict.fromkeys(RAPT_RIVALS, 0), dict.fromkeys(RAPT_RIVALS, 0)
    for value in common:
        at = {n: levels[n][value] for n in names}
        row = [fmt_number(value, ".4g")]
        if rated:
            row.append(" / ".join(fmt_number(at[n].rate) for n in names))
        for n in names:
            lo, hi = stats.ci(at[n].samples)
            row.append(_with_interval(at[n].utility, lo, hi, ".3f"))
        for rival in RAPT_RIVALS:
            diff = at[RAPT].utility - at[rival].utility
            lo, hi = stats.ci(at[RAPT].samples - at[rival].samples)
            row.append(_with_interval(diff, lo, hi, "+.3f"))
            above[rival] += bool(lo > 0)
            below[rival] += bool(hi < 0)
        rows.append(row)
    return Comparison(
        knob,
        Table(headers, rows),
        _sentence(chosen, knob, len(common), above, below, stats.available),
    )


def _sentence(
    chosen: dict[str, str],
    knob: str,
    n: int,
    above: dict[str, int],
    below: dict[str, int],
    available: bool,
) -> str:
    """What the table finds, whichever way it goes."""
    rapt = chosen[RAPT]
    if n == 0:
        return (
            f"No {knob} was run for all of {', '.join(chosen.values())}: nothing to compare "
            f"at equal {knob}."
        )
    if not available:
        return (
            f"No per-document outcomes: the differences at {n} {knob} are point estimates "
            f"and none of them is said with confidence."
        )

    def count(k: int) -> str:
        return "none" if k == 0 else f"{k} of {n}"

    first, *rest = RAPT_RIVALS
    lines = [
        f"{rapt}'s utility is above {chosen[first]}'s at {count(above[first])} {knob} with "
        f"confidence; below at {count(below[first])}"
    ]
    lines += [
        f"Against {chosen[r]}: above at {count(above[r])}; below at {count(below[r])}" for r in rest
    ]
    return ". ".join(lines) + " (paired intervals; elsewhere tied)."


def _with_interval(value: float, lo: float, hi: float, spec: str) -> str:
    """``value [lo, hi]``, or the value alone when the interval is unknown."""
    text = fmt_number(value, spec)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return text
    return f"{text} [{fmt_number(lo, spec)}, {fmt_number(hi, spec)}]"


# --- CAPE's adversary -------------------------------------------------------------------------


def _attribute(params: object) -> str | None:
    """The private attribute a defense's parameters name (CAPE's ``attribute``), if any."""
    try:
        value = json.loads(params).get("attribute") if isinstance(params, str) else None
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def adversary_table(stats: RunStats) -> Table | None:
    """One row per point (seeds averaged) with an attribute readout: readout with and
    without the objective, their difference, and the release-level attribute-inference
    attack on the attribute the objective targets (every such attack when the parameters do
    not name one) at the same point; None when no point has a readout."""
    f = stats.frame
    cols = ("attribute_readout", "attribute_readout_no_objective")
    if not set(cols) <= set(f.columns):
        return None
    read = f[np.isfinite(f["attribute_readout"].astype(float))]
    if read.empty:
        return None
    attacks = f[f["attack"].astype(str).str.startswith(ATTRIBUTE_ATTACK) & (f["status"] == "ok")]
    headers = [
        "defense",
        "knob",
        "readout with objective",
        "readout without",
        "difference",
        "release attack",
        "attack score",
        "no-information baseline",
    ]
    rows = []
    for (label, value), g in read.groupby(["label", "knob_value"], sort=True, dropna=False):
        one = g.drop_duplicates(_point_keys(g))
        with_obj = float(one[cols[0]].astype(float).mean())
        without = float(one[cols[1]].astype(float).mean())
        head = [
            str(label),
            knob_text_of(g.iloc[0]),
            fmt_number(with_obj),
            fmt_number(without),
            fmt_number(with_obj - without, "+.3f"),
        ]
        attribute = _attribute(g["defense_params"].iloc[0]) if "defense_params" in g else None
        same = attacks["knob_value"].astype(float)
        here = attacks[
            (attacks["label"] == label)
            & ((same == float(value)) | (same.isna() & math.isnan(float(value))))
        ]
        if attribute is not None:
            here = here[here["attack"] == f"{ATTRIBUTE_ATTACK}[{attribute}]"]
        if here.empty:
            rows.append([*head, "—", "—", "—"])
        for attack, a in here.groupby("attack", sort=True):
            with np.errstate(all="ignore"), quiet_nan():
                lo, hi = stats.ci(np.nanmean(stats.score[a.index.to_numpy()], axis=0))
            score = float(a["attack_score"].astype(float).mean())
            base = float(a["attack_baseline"].astype(float).mean())
            rows.append(
                [*head, str(attack), _with_interval(score, lo, hi, ".3f"), fmt_number(base)]
            )
    return Table(headers, rows)


# --- rendering --------------------------------------------------------------------------------


def markdown(view: ServiceView | None) -> str:
    """The service sections as Markdown (nothing when there are none)."""
    if view is None:
        return ""
    return "".join(
        f"## {title}\n\n{caption}\n\n{markdown_table(table)}\n\n"
        for title, table, caption in view.sections()
    )


def html_fragment(view: ServiceView | None, *, heading: str = "h3") -> str:
    """The service sections as an HTML fragment (nothing when there are none)."""
    if view is None:
        return ""
    return "".join(
        f"<{heading}>{html.escape(title)}</{heading}>\n"
        f'<p class="note">{html.escape(caption)}</p>\n{html_table(table)}\n'
        for title, table, caption in view.sections()
    )
