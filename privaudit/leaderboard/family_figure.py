"""The worst-case figure: one panel per attack family, each defense label's frontier of
normalised worst-case privacy against utility (:func:`family_figure`, the leaderboard's
``points``).

It draws with the helpers of :mod:`privaudit.leaderboard.figures` (styles, error bars, the
panel grid and the shared legend), so a label looks the same here as in the run's other
figures; knob labels are placed by :mod:`privaudit.leaderboard.labels`. Saving it to a run
directory is the outputs layer's (:func:`privaudit.outputs.plots.plot_families`).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import NONE
from privaudit.leaderboard.figures import (
    Style,
    dominated_points,
    error_bars,
    panel_grid,
    point_text,
    shared_legend,
    styles_for,
)
from privaudit.leaderboard.labels import KnobLabel, figure_renderer, freeze, place_labels

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# The x axis of family_figure (wrapped to the panel's width when drawn).
FAMILY_PRIVACY_LABEL = (
    "worst-case normalised privacy over every attack faced (1 = attacker at its "
    "no-information baseline, 0 = as against the undefended text)"
)

# Columns family_figure reads; the interval columns may be missing or NaN (no error bars).
FAMILY_COLUMNS = ["family", "label", "knob_value", "privacy", "utility", "on_frontier"]


def _family_order(family: str) -> tuple[int, str]:
    """text first, then entity, then the attribute families by name, then anything else."""
    rank = {"text": 0, "entity": 1}.get(family, 2 if family.startswith("attribute") else 3)
    return rank, family


def family_figure(
    points: pd.DataFrame,
    *,
    chance: float | None,
    styles: Mapping[str, Style] | None = None,
) -> Figure:
    """The leaderboard's worst-case view: one panel per attack family (column ``family``).

    ``points`` has one row per (family, label, knob value) with ``privacy`` (normalised
    worst-case privacy over every attack of the family that read the label's release, the
    board's ``points``, not the ranking's common subset; in [0, 1]), ``utility``, ``on_frontier``
    (bool), optionally ``knob`` and the interval bounds ``privacy_ci_low/high`` and
    ``utility_ci_low/high`` (error bars where finite). In each panel, one line per label
    through its frontier points (labelled with their knob values), its dominated points faint,
    the undefended utility dashed when a ``none`` label is present, the chance level dotted;
    one legend for the figure. Pass the run's ``styles``
    (:func:`~privaudit.leaderboard.figures.run_styles`) so colours agree with the run's other
    figures. Raises ``ValueError`` when ``points`` is empty or lacks a column of
    :data:`FAMILY_COLUMNS`.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    missing = set(FAMILY_COLUMNS) - set(points.columns)
    if missing:
        raise ValueError(f"The family points lack the columns {sorted(missing)}.")
    points = points[
        np.isfinite(points["privacy"].astype(float)) & np.isfinite(points["utility"].astype(float))
    ].copy()
    if points.empty:
        raise ValueError("No family point with finite privacy and utility; nothing to draw.")
    points["label"] = points["label"].astype(str)
    points["on_frontier"] = points["on_frontier"].astype(bool)
    families = sorted(points["family"].astype(str).unique(), key=_family_order)
    styles = styles_for(points["label"], styles)
    ncols = min(3, len(families))
    nrows = math.ceil(len(families) / ncols)
    fig = Figure(figsize=(max(6.4, 5.0 * ncols), 4.0 * nrows + 0.9), dpi=110)
    FigureCanvasAgg(fig)
    axes = panel_grid(fig, len(families))
    # Wrap the long axis name to the panel's width (about 0.075 inch per character at 8 pt).
    xlabel = textwrap.fill(FAMILY_PRIVACY_LABEL, width=int(5.0 / 0.075))
    handles: dict[str, Any] = {}
    panels: list[tuple[Axes, list[KnobLabel], list[tuple[float, float]]]] = []
    for ax, family in zip(axes, families, strict=True):
        sub = points[points["family"].astype(str) == family]
        knob_labels, markers = _family_panel(ax, sub, styles, handles, chance)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.set_ylabel("utility", fontsize=8)
        ax.set_title(family, fontsize=10)
        panels.append((ax, knob_labels, markers))
    shared_legend(fig, handles, styles)
    renderer = figure_renderer(fig)
    for ax, knob_labels, markers in panels:
        freeze(ax, renderer)
        place_labels(ax, knob_labels, markers=markers)
    return fig


def _family_panel(
    ax: Axes,
    sub: pd.DataFrame,
    styles: Mapping[str, Style],
    handles: dict[str, Any],
    chance: float | None,
) -> tuple[list[KnobLabel], list[tuple[float, float]]]:
    """One family's panel of :func:`family_figure`: returns the knob labels of its frontier
    points and every other drawn point (for :func:`place_labels`)."""
    knob_labels: list[KnobLabel] = []
    markers: list[tuple[float, float]] = []
    for label, group in sub.groupby("label", sort=True):
        label = str(label)
        colour, marker = styles[label]
        group = group.sort_values(["privacy", "utility"])
        if label == NONE:
            ax.scatter(
                group["privacy"], group["utility"], marker=marker, s=140, color=colour, zorder=5
            )
            error_bars(ax, group, x="privacy", y="utility", colour=colour)
            handles[NONE] = ax.axhline(float(group["utility"].mean()), color="0.2", ls="--", lw=1.1)
            markers.extend(zip(group["privacy"], group["utility"], strict=True))
            continue
        dominated = dominated_points(ax, group, "privacy", colour, marker)
        markers.extend(zip(dominated["privacy"], dominated["utility"], strict=True))
        front = group[group["on_frontier"]]
        (line,) = ax.plot(
            front["privacy"], front["utility"], color=colour, marker=marker, lw=1.6, ms=5
        )
        error_bars(ax, front, x="privacy", y="utility", colour=colour)
        handles.setdefault(label, line)
        knob = front["knob"] if "knob" in front.columns else [None] * len(front)
        for (_, row), name in zip(front.iterrows(), knob, strict=True):
            if np.isfinite(float(row["knob_value"])):
                text = point_text(name, float(row["knob_value"]), row.get("target_rate"))
                knob_labels.append(
                    KnobLabel(float(row["privacy"]), float(row["utility"]), text, colour, label)
                )
    if chance is not None and np.isfinite(chance):
        handles["chance"] = ax.axhline(chance, color="0.6", ls=":", lw=1)
    ax.set_xlim(-0.03, 1.03)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    return knob_labels, markers
