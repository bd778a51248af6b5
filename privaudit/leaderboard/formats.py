"""Format and mechanism: how much of a vector defense's privacy its release format gives it.

A vector release (token embeddings, a split model's hidden states, a pooled vector) is harder
to read than text even with no noise at all, so part of a vector defense's measured privacy is
the format's, not its mechanism's (on a real corpus CAPE at ε = 10⁶ scored the same gender
privacy as at ε = 100). The ``clean`` defense (:mod:`privaudit.defenses.clean`) releases the
original text in each vector format with no mechanism. Per family, every point of a defense
whose release (the results' ``release`` column) is not text is set beside the clean reference
in the same format: the reference's worst-case privacy is the **format's share**, the
difference the **mechanism's share**. Both worst cases are taken over the attacks both
faced (an attack that reads only the defense's declared guarantee, such as bayes-inversion,
would otherwise lower the defense's side alone), with
:func:`privaudit.leaderboard.stats.family_points`, and the difference is paired: computed on
the same bootstrap resamples of the run on both sides.

Hidden states are matched by layer: the results record the space, not the layer, so a
defense's layer is read from its ``split_layer`` or ``layer`` parameter and the reference's
from its ``layer``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import CLEAN, REFERENCES, Space
from privaudit.leaderboard.stats import family_points
from privaudit.leaderboard.tables import Table, knob_text_of, with_ci
from privaudit.metrics.outcomes import interval

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.metrics.stats import RunStats

#: Without intervals (no outcomes), a mechanism's share this small is no share at all.
FORMAT_SLACK = 0.02

FORMAT_CAPTION = (
    "Per point of a defense that releases vectors: its worst-case normalised privacy, the "
    "clean reference's in the same format (the original text released as those vectors, no "
    "mechanism: the format's share) and their difference (the mechanism's share), each the "
    "worst case over the attacks both faced, with {level} bootstrap intervals; the difference "
    "is paired (the same resampled documents on both sides). 'format' marks a point whose "
    "mechanism adds no privacy the interval can tell from 0: its privacy is the format's."
)
HEADERS = ["defense", "release", "point", "privacy", "format (clean)", "mechanism", "reading"]


@dataclass(frozen=True)
class FormatView:
    """The board's format-and-mechanism split. ``table``: one row per (family, defense label,
    knob value) of a vector-releasing defense with a clean reference in its format: family,
    label, release, knob, knob_value, reference, attacks (both faced), privacy,
    privacy_ci_low/high, format, format_ci_low/high, mechanism, mechanism_ci_low/high and
    ``format_only`` (the mechanism's share not told from 0). ``notes``: the defenses whose
    privacy is the format's, and those with no reference in their format."""

    table: pd.DataFrame
    notes: tuple[str, ...] = ()
    level: float = 0.95
    paired: bool = True  # False: no outcomes, point estimates only
    tables: dict[str, Table] = field(default_factory=dict)  # per family, for display

    def format_only(self) -> dict[str, set[str]]:
        """Per family, the defense labels whose privacy is the format's at every point
        compared (the mechanism's share never told from 0): the verdict says so."""
        if self.table.empty:
            return {}
        every = self.table.groupby(["family", "label"])["format_only"].all()
        out: dict[str, set[str]] = {}
        for (family, label), only in every.items():
            if only:
                out.setdefault(str(family), set()).add(str(label))
        return out

    @property
    def caption(self) -> str:
        text = FORMAT_CAPTION.format(level=f"{100 * self.level:.0f} %")
        if not self.paired:
            text += (
                " This run has no per-document outcomes: point estimates only, and 'format' "
                f"means a mechanism's share of at most {FORMAT_SLACK:g}."
            )
        return text


def release_of(frame: pd.DataFrame) -> dict[str, str]:
    """Each label's release format (the ``release`` column's most common value over its
    rows); labels without one (older runs, failed points) are left out."""
    if "release" not in frame.columns:
        return {}
    known = frame.dropna(subset=["release"])
    return {
        str(label): str(g["release"].mode().iloc[0])
        for label, g in known.groupby("label", sort=True)
    }


def format_view(stats: RunStats) -> FormatView:
    """The format-and-mechanism split of every vector-releasing defense of ``stats`` (the
    board's run statistics) against the clean reference in its format."""
    import pandas as pd

    f = stats.frame
    formats = release_of(f)
    defense_of = f.groupby("label")["defense"].first().astype(str).to_dict()
    layer_of = _layers(f)
    clean = sorted(lb for lb in formats if defense_of.get(lb) == CLEAN)
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    for label in sorted(formats):
        release = formats[label]
        if defense_of.get(label) in REFERENCES or release == Space.TEXT:
            continue
        refs = [
            c
            for c in clean
            if formats[c] == release
            and (release != Space.HIDDEN_STATES or layer_of.get(c) == layer_of.get(label))
        ]
        if not refs:
            notes.append(_missing(label, release, layer_of.get(label)))
            continue
        for family in sorted(set(f.loc[f["label"] == label, "family"].dropna())):
            rows.extend(_split(stats, str(family), label, refs[0], release))
    columns = [
        "family",
        "label",
        "release",
        "knob",
        "knob_value",
        "reference",
        "attacks",
        "privacy",
        "privacy_ci_low",
        "privacy_ci_high",
        "format",
        "format_ci_low",
        "format_ci_high",
        "mechanism",
        "mechanism_ci_low",
        "mechanism_ci_high",
        "format_only",
    ]
    table = pd.DataFrame(rows, columns=columns)
    notes = [*_format_notes(table, stats.level, stats.available), *notes]
    shown = {str(family): _display(sub) for family, sub in table.groupby("family", sort=True)}
    return FormatView(table, tuple(notes), stats.level, stats.available, shown)


def _layers(f: pd.DataFrame) -> dict[str, int]:
    """Each label's hidden-state layer, from its ``split_layer`` or ``layer`` parameter."""
    out: dict[str, int] = {}
    if "defense_params" not in f.columns:
        return out
    for label, raw in f.groupby("label")["defense_params"].first().items():
        try:
            params = json.loads(raw) if isinstance(raw, str) else {}
        except ValueError:
            continue
        value = params.get("split_layer", params.get("layer")) if isinstance(params, dict) else None
        if isinstance(value, int) and not isinstance(value, bool):
            out[str(label)] = value
    return out


def _missing(label: str, release: str, layer: int | None) -> str:
    params = f"release: {release}" + (f", layer: {layer}" if release == Space.HIDDEN_STATES else "")
    return (
        f"{label} releases {release}{f' after layer {layer}' if layer else ''}, but the run has "
        "no clean reference in that format, so its privacy is not split into the format's and "
        f"the mechanism's: add {{name: {CLEAN}, params: {{{params}}}}} to the defenses."
    )


def _split(
    stats: RunStats, family: str, label: str, ref: str, release: str
) -> list[dict[str, Any]]:
    """The rows of one defense label in one family against its reference ``ref``."""
    f = stats.frame
    ok = (f["status"] == "ok").to_numpy() & np.isfinite(stats.normalised_point)
    fam = (f["family"] == family).to_numpy() & ok
    faced = [set(f.loc[fam & (f["label"] == lb).to_numpy(), "attack"]) for lb in (label, ref)]
    common = tuple(sorted(faced[0] & faced[1]))
    if not common:
        return []
    # Only the two labels' rows of this family: family_points reads nothing else of them.
    rows_of = np.flatnonzero((f["family"] == family).to_numpy() & f["label"].isin([label, ref]))
    points = family_points(_rows(stats, rows_of), {family: common})
    t = points.table
    mine = np.flatnonzero((t["family"] == family) & (t["label"] == label))
    theirs = np.flatnonzero((t["family"] == family) & (t["label"] == ref))
    if not len(mine) or not len(theirs):
        return []
    r = int(theirs[0])  # a reference has one point (no knob)
    rows = []
    for i in mine:
        diff = points.privacy[i] - points.privacy[r]  # paired: the same resamples
        lo, hi = interval(diff, stats.level) if stats.available else (math.nan, math.nan)
        point = float(t["privacy"].iloc[i] - t["privacy"].iloc[r])
        format_only = bool(lo <= 0.0) if np.isfinite(lo) else point <= FORMAT_SLACK
        rows.append(
            {
                "family": family,
                "label": label,
                "release": release,
                "knob": t["knob"].iloc[i],
                "knob_value": t["knob_value"].iloc[i],
                "reference": ref,
                "attacks": ", ".join(common),
                "privacy": float(t["privacy"].iloc[i]),
                "privacy_ci_low": float(t["privacy_ci_low"].iloc[i]),
                "privacy_ci_high": float(t["privacy_ci_high"].iloc[i]),
                "format": float(t["privacy"].iloc[r]),
                "format_ci_low": float(t["privacy_ci_low"].iloc[r]),
                "format_ci_high": float(t["privacy_ci_high"].iloc[r]),
                "mechanism": point,
                "mechanism_ci_low": float(lo),
                "mechanism_ci_high": float(hi),
                "format_only": format_only,
            }
        )
    return rows


def _rows(stats: RunStats, idx: np.ndarray) -> RunStats:
    """``stats`` restricted to the rows ``idx`` (the same resamples): every per-row array."""
    n = len(stats.frame)
    per_row = {
        f.name: value[idx]
        for f in dataclasses.fields(stats)
        if isinstance(value := getattr(stats, f.name), np.ndarray) and value.shape[:1] == (n,)
    }
    frame = stats.frame.iloc[idx].reset_index(drop=True)
    return dataclasses.replace(stats, frame=frame, **per_row)


def _format_notes(table: pd.DataFrame, level: float, paired: bool) -> list[str]:
    """Per (family, label) with points whose privacy is the format's: which, and how much."""
    notes = []
    how = f"with {100 * level:.0f} % confidence" if paired else f"within {FORMAT_SLACK:g}"
    for (family, label), g in table.groupby(["family", "label"], sort=True):
        only = g[g["format_only"]]
        if only.empty:
            continue
        ref = g.iloc[0]
        shown = with_ci(ref["format"], ref["format_ci_low"], ref["format_ci_high"])
        clean = f"the clean {ref['release']} release ({ref['reference']}: {shown})"
        if len(only) == len(g):
            notes.append(
                f"{family}: {label}'s privacy is the release format's, not its mechanism's: at "
                f"every point it is no higher than {clean} {how}."
            )
        else:
            at = ", ".join(knob_text_of(r) for _, r in only.iterrows())
            notes.append(
                f"{family}: at {at}, {label}'s privacy is the release format's: no higher than "
                f"{clean} {how}; its mechanism adds privacy only at its other points."
            )
    return notes


def _display(sub: pd.DataFrame) -> Table:
    """One family's rows for display, by defense and knob value."""
    sub = sub.sort_values(["label", "knob_value"])
    rows = [
        [
            str(r["label"]),
            str(r["release"]),
            knob_text_of(r),
            with_ci(r["privacy"], r["privacy_ci_low"], r["privacy_ci_high"]),
            with_ci(r["format"], r["format_ci_low"], r["format_ci_high"]),
            with_ci(r["mechanism"], r["mechanism_ci_low"], r["mechanism_ci_high"]),
            "format" if r["format_only"] else "mechanism adds privacy",
        ]
        for _, r in sub.iterrows()
    ]
    return Table(HEADERS, rows)
