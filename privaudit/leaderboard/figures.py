"""The privacy–utility figures: per attack, and every attack's frontiers in one figure; the
worst case per attack family is :mod:`privaudit.leaderboard.family_figure`'s, drawn with the
styles, error bars, panel grid and legend of this module.

Every figure of a run draws a defense label with the same colour and marker: pass the same
``styles`` mapping (:func:`run_styles` of the whole results table) to each figure function.
``none`` (the undefended release) is always black. Where the table has confidence-interval
columns (:data:`~privaudit.leaderboard.frontier.CI_COLUMNS`), every point gets thin error bars
in its label's colour; tables without them (older runs) plot without. Each axis reads the
attack's declared metric (:class:`~privaudit.metrics.spec.MetricSpec`: its direction, whether it
is bounded, its baseline's label), never its name. Knob labels are placed by
:mod:`privaudit.leaderboard.labels`. Saving a figure to a run directory is the outputs
layer's (:mod:`privaudit.outputs.plots`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import CLEAN, NONE
from privaudit.leaderboard.frontier import CI_COLUMNS, seed_means
from privaudit.leaderboard.labels import KnobLabel, figure_renderer, freeze, knob_text, place_labels
from privaudit.metrics.spec import find_metric
from privaudit.metrics.stats import with_labels
from privaudit.numbers import shown

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# (colour, marker) of a label; NONE_STYLE is the undefended release's, in every figure.
Style = tuple[Any, str]
NONE_STYLE: Style = ("black", "*")


def privacy_axis_label(attack: str | None, metric: str) -> str:
    """The x-axis name: 1 − the attack's success metric, or an error metric itself (its
    declared :attr:`~privaudit.metrics.spec.MetricSpec.privacy_label`)."""
    against = f" vs {attack}" if attack else ""
    spec = find_metric(metric)
    unit = spec.privacy_label if spec is not None else f"1 − {metric}"
    return f"empirical privacy{against} ({unit})"


def _unbounded(metric: str) -> bool:
    """Whether the metric's privacy has no upper end (an error): its axis starts at 0."""
    spec = find_metric(metric)
    return spec is not None and not spec.bounded


def _privacy_of(metric: str, score: Any) -> Any:
    """Privacy of a score by the metric's declared direction (1 − score when unknown)."""
    spec = find_metric(metric)
    return spec.privacy(score) if spec is not None else 1.0 - score


# ---- styles ------------------------------------------------------------------------------


def label_styles(labels: Iterable[str]) -> dict[str, Style]:
    """A fixed (colour, marker) per defense label, so a defense looks the same in every panel.

    Styles follow the sorted set of ``labels``: build them once from *every* label of a run
    (:func:`run_styles`) and pass the mapping to each figure, or a label's colour depends on
    which other labels a figure happens to show. ``none`` always gets :data:`NONE_STYLE`;
    the format references (``clean``'s labels) get greys and a thin cross.
    """
    from matplotlib import colormaps

    names = sorted({str(label) for label in labels} - {NONE})
    # The format references (clean, by its default label) in greys with a cross, apart from
    # the defenses' colours.
    refs = [n for n in names if n == CLEAN or n.startswith(f"{CLEAN}[")]
    names = [n for n in names if n not in refs]
    cmap = colormaps["tab10" if len(names) <= 10 else "tab20"]
    markers = "osD^v<>phX8P"
    styles: dict[str, Style] = {
        name: (cmap(i % cmap.N), markers[i % len(markers)]) for i, name in enumerate(names)
    }
    greys = ("0.3", "0.55", "0.7")
    styles |= {name: (greys[i % len(greys)], "x") for i, name in enumerate(refs)}
    styles[NONE] = NONE_STYLE
    return styles


def run_styles(frame: pd.DataFrame) -> dict[str, Style]:
    """:func:`label_styles` over every label of a run's results table (any status), the one
    mapping that every plot of that run should be given."""
    labels = with_labels(frame)["label"] if len(frame) else []
    return label_styles(labels)


def styles_for(labels: Iterable[str], styles: Mapping[str, Style] | None) -> dict[str, Style]:
    """``styles`` completed for ``labels``: given styles are kept as they are; a label they
    lack (a caller's mistake) gets one from the styles of all labels seen, so it is drawn."""
    labels = [str(label) for label in labels]
    if styles is None:
        return label_styles(labels)
    missing = set(labels) - set(styles)
    if not missing:
        return {**styles, NONE: styles.get(NONE, NONE_STYLE)}
    return {**label_styles([*styles, *labels]), **styles}


# ---- error bars and knob labels ----------------------------------------------------------


def point_text(knob: Any, value: float, rate: Any = None) -> str:
    """A point's label: its target replacement rate where the grid was set by rate (the η
    calibrated to it differs per corpus and says little), else the knob value."""
    try:
        rate = float(rate)
    except (TypeError, ValueError):
        rate = math.nan
    return f"rate={shown(rate)}" if np.isfinite(rate) else knob_text(knob, value)


def dominated_points(
    ax: Axes, group: pd.DataFrame, x: str, colour: Any, marker: str
) -> pd.DataFrame:
    """Draw ``group``'s points off the frontier faint, with their error bars; returns them."""
    dominated = group[~group["on_frontier"]]
    ax.scatter(
        dominated[x],
        dominated["utility"],
        color=colour,
        marker=marker,
        s=18,
        alpha=0.25,
        linewidths=0,
    )
    error_bars(ax, dominated, x=x, y="utility", colour=colour, alpha=0.2)
    return dominated


def error_bars(
    ax: Axes,
    table: pd.DataFrame,
    *,
    x: str,
    y: str,
    colour: Any,
    alpha: float = 0.5,
    zorder: float = 1.5,
) -> None:
    """Thin horizontal and vertical bars from ``{x,y}_ci_low`` to ``{x,y}_ci_high`` for each
    row where both bounds are finite; nothing when the table has no such columns. A bound on
    the wrong side of its point (possible when per-seed bounds are averaged) is drawn at the
    point rather than as a negative length."""
    for axis, col in (("x", x), ("y", y)):
        lo_col, hi_col = f"{col}_ci_low", f"{col}_ci_high"
        if lo_col not in table.columns or hi_col not in table.columns or not len(table):
            continue
        xs = table[x].to_numpy(float)
        ys = table[y].to_numpy(float)
        lo = table[lo_col].to_numpy(float)
        hi = table[hi_col].to_numpy(float)
        centre = xs if axis == "x" else ys
        keep = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(xs) & np.isfinite(ys)
        if not keep.any():
            continue
        err = np.vstack(
            [np.clip(centre[keep] - lo[keep], 0, None), np.clip(hi[keep] - centre[keep], 0, None)]
        )
        ax.errorbar(
            xs[keep],
            ys[keep],
            **{f"{axis}err": err},
            fmt="none",
            ecolor=colour,
            elinewidth=0.8,
            capsize=0,
            alpha=alpha,
            zorder=zorder,
            label="_nolegend_",
        )


def _baseline_privacy(rows: pd.DataFrame, metric: str) -> float | None:
    """The privacy an attacker reaches without the release, when the metric declares one
    baseline for every point (not HaS's per-point text as is) and the rows carry it."""
    spec = find_metric(metric)
    declared = spec.baseline if spec is not None else None
    if declared is None or declared.per_point or "attack_baseline" not in rows.columns:
        return None
    base = rows["attack_baseline"].astype(float).dropna()
    return float(_privacy_of(metric, float(base.mean()))) if len(base) else None


def attack_limits(
    rows: pd.DataFrame, metric: str, chance: float | None
) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """The (x, y) limits of one attack's plots, the same in its Pareto plot and in its panel
    of the combined figure, so the two views agree: every ok row's privacy and utility with
    their intervals, the privacy of the no-information baseline (a line or per-point
    markers) and the chance level, with 5 % margins. A bounded privacy stays within
    [−0.03, 1.03]; an error's axis starts at 0. None when there is nothing to show."""
    if "status" in rows.columns:
        rows = rows[rows["status"] == "ok"]

    def values(cols: list[str], extra: Iterable[float] = ()) -> np.ndarray:
        parts = [rows[c].to_numpy(float) for c in cols if c in rows.columns]
        out = np.concatenate([*parts, np.asarray(list(extra), float)])
        return out[np.isfinite(out)]

    xs = values(["empirical_privacy", "empirical_privacy_ci_low", "empirical_privacy_ci_high"])
    if "attack_baseline" in rows.columns:
        xs = np.concatenate([xs, values([], _privacy_of(metric, rows["attack_baseline"]))])
    ys = values(
        ["utility", "utility_ci_low", "utility_ci_high"], [chance] if chance is not None else []
    )
    if not len(xs) or not len(ys):
        return None

    def padded(v: np.ndarray) -> tuple[float, float]:
        lo, hi = float(v.min()), float(v.max())
        # 5 % of the span (an error's span may be 0.003); a single value gets some room.
        pad = 0.05 * (hi - lo) if hi > lo else max(0.05 * abs(hi), 0.01)
        return lo - pad, hi + pad

    x0, x1 = padded(xs)
    if _unbounded(metric):
        x0 = 0.0
    else:
        x0, x1 = max(x0, -0.03), min(x1, 1.03)
    return (x0, x1), padded(ys)


# ---- the per-attack figure ---------------------------------------------------------------


def pareto_figure(
    frame: pd.DataFrame,
    *,
    attack: str,
    chance: float | None = None,
    styles: Mapping[str, Style] | None = None,
) -> Figure:
    """The one-attack figure :func:`plot_pareto` saves (rows of one attack, status ok).

    ``styles``: the run's label styles (:func:`run_styles` of the *whole* results table), so
    a defense has the colour and marker it has in every other figure of the run; without
    them, styles are made from this frame's labels alone.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # A bare Figure (no pyplot) needs no global backend state and no plt.close().
    fig = Figure(figsize=(7.0, 5.0), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    frame = with_labels(frame) if len(frame) else frame
    metric = str(frame["attack_metric"].iloc[0]) if len(frame) else "attack"
    utility_metric = str(frame["utility_metric"].iloc[0]) if len(frame) else "utility"
    by = "label" if "label" in frame.columns else "defense"
    styles = styles_for(frame[by].astype(str) if len(frame) else [], styles)
    values = ["empirical_privacy", "utility", *(c for c in CI_COLUMNS if c in frame.columns)]
    values += ["target_rate"] if "target_rate" in frame.columns else []
    knob_labels, markers = _pareto_curves(ax, frame, by, styles, values)
    markers.extend(_pareto_baseline(ax, frame, metric, by))
    _pareto_axes(
        ax, frame, attack=attack, metric=metric, utility_metric=utility_metric, chance=chance
    )
    fig.tight_layout()
    legend_box = freeze(ax, figure_renderer(fig))
    place_labels(ax, knob_labels, markers=markers, obstacles=legend_box)
    return fig


def _pareto_curves(
    ax: Axes,
    frame: pd.DataFrame,
    by: str,
    styles: Mapping[str, Style],
    values: list[str],
) -> tuple[list[KnobLabel], list[tuple[float, float]]]:
    """Each label's points (seeds averaged per knob value) as a curve with error bars, the
    undefended release as one large marker; returns the knob labels to place and the
    markers they must avoid."""
    knob_labels: list[KnobLabel] = []
    markers: list[tuple[float, float]] = []
    for name, group in sorted(frame.groupby(by), key=lambda g: str(g[0])):
        name = str(name)
        colour, marker = styles[name]
        agg = (
            group.groupby("knob_value", dropna=False)[values]
            .mean()
            .reset_index()
            .sort_values("empirical_privacy")
        )
        if name == NONE:
            x, y = agg["empirical_privacy"].iloc[0], agg["utility"].iloc[0]
            ax.axhline(y, color="0.35", ls="--", lw=1)
            ax.scatter(
                [x], [y], marker=marker, s=260, color=colour, zorder=5, label="none (undefended)"
            )
            error_bars(ax, agg.head(1), x="empirical_privacy", y="utility", colour=colour)
            markers.append((float(x), float(y)))
            continue
        ax.plot(
            agg["empirical_privacy"],
            agg["utility"],
            marker=marker,
            color=colour,
            lw=1.6,
            ms=6,
            label=name,
        )
        error_bars(ax, agg, x="empirical_privacy", y="utility", colour=colour)
        knob = group["knob"].iloc[0] if "knob" in group.columns else None
        for _, row in agg.iterrows():
            if np.isfinite(row["knob_value"]):
                text = point_text(knob, float(row["knob_value"]), row.get("target_rate"))
                knob_labels.append(
                    KnobLabel(
                        float(row["empirical_privacy"]), float(row["utility"]), text, colour, name
                    )
                )
    return knob_labels, markers


def _pareto_baseline(
    ax: Axes, frame: pd.DataFrame, metric: str, by: str
) -> list[tuple[float, float]]:
    """The attack's no-information baseline: a vertical line where the metric declares one,
    else one hollow marker per point (the release taken as is); returns those markers."""
    markers: list[tuple[float, float]] = []
    has_baseline = "attack_baseline" in frame.columns and frame["attack_baseline"].notna().any()
    spec = find_metric(metric)
    declared = spec.baseline if spec is not None else None
    ceiling = _baseline_privacy(frame, metric)
    if ceiling is not None and declared is not None:
        # An attacker that ignores the release reaches this privacy, no further.
        ax.axvline(ceiling, color="0.6", ls="-.", lw=1, label=declared.label)
    elif has_baseline:
        # Per point (HaS's anonymized text as it is): the privacy of taking the release as is.
        base = frame.dropna(subset=["attack_baseline"])
        base = base.groupby([by, "knob_value"], dropna=False)[["attack_baseline", "utility"]]
        base = base.mean()
        as_is = _privacy_of(metric, base["attack_baseline"])
        label = declared.label if declared is not None else "the release as is (no attack)"
        ax.scatter(
            as_is,
            base["utility"],
            s=30,
            facecolors="none",
            edgecolors="0.55",
            label=label,
            zorder=1,
        )
        markers.extend(zip(as_is, base["utility"], strict=True))
    return markers


def _pareto_axes(
    ax: Axes,
    frame: pd.DataFrame,
    *,
    attack: str,
    metric: str,
    utility_metric: str,
    chance: float | None,
) -> None:
    """The chance line, axis labels and limits, title, grid and legend."""
    if chance is not None and np.isfinite(chance):
        ax.axhline(chance, color="0.6", ls=":", lw=1, label="chance")
    ax.set_xlabel(privacy_axis_label(attack, metric))
    limits = attack_limits(frame, metric, chance) if len(frame) else None
    if limits is not None:  # zoomed to the points, as in the combined figure's panel
        ax.set_xlim(*limits[0])
        ax.set_ylim(*limits[1])
    ax.set_ylabel(f"utility ({utility_metric})")
    ax.set_title(f"Privacy–utility trade-off against {attack}")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)


# ---- the combined figure -----------------------------------------------------------------


def shared_legend(
    fig: Figure,
    handles: dict[str, Any],
    styles: Mapping[str, Style],
) -> None:
    """One legend for a multi-panel figure, below the panels; the layout leaves room for it."""
    from matplotlib.lines import Line2D

    order = [name for name in sorted(styles) if name in handles and name != NONE]
    legend = [handles[name] for name in order]
    if NONE in handles:
        # The undefended release: its utility dashed across each panel, its point a star.
        colour, marker = styles.get(NONE, NONE_STYLE)
        order.append("none (undefended)")
        legend.append(
            Line2D(
                [], [], color="0.2", ls="--", lw=1.1, marker=marker, ms=9, mfc=colour, mec=colour
            )
        )
    if "chance" in handles:
        order.append("chance")
        legend.append(handles["chance"])
    if "baseline" in handles:
        order.append("no-information baseline")
        legend.append(handles["baseline"])
    legend.append(Line2D([], [], color="0.5", marker="o", ls="", alpha=0.3))
    order.append("dominated point")
    # About 1.9 inches per legend entry: labels like has[mode=generative] must not be cut.
    ncol = max(1, min(len(order), int(fig.get_figwidth() / 1.9)))
    fig.legend(legend, order, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    # Leave room at the bottom for the shared legend: about a quarter inch per legend row.
    bottom = (0.25 + 0.25 * math.ceil(len(order) / ncol)) / fig.get_figheight()
    fig.tight_layout(rect=(0, bottom, 1, 1))


def panel_grid(fig: Figure, n: int) -> np.ndarray:
    """``n`` panels in a grid of at most 3 columns; spare cells are switched off."""
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    for ax in axes[n:]:
        ax.set_axis_off()
    return axes[:n]


def frontier_figure(
    frame: pd.DataFrame,
    *,
    chance: float | None = None,
    styles: Mapping[str, Style] | None = None,
) -> Figure:
    """The combined figure of :func:`plot_frontiers` (in the style of RAPT Figs. 7 and 10).

    One panel per attack in a grid; in each, one line per defense label through its frontier
    points, its dominated points faint, the undefended utility dashed, the chance level dotted,
    the no-information baseline dash-dotted, and one legend for the whole figure; each panel
    has its attack's Pareto plot's axes (:func:`attack_limits`). Styles come from every label
    of ``frame`` (or the given ``styles``), so a label looks the same in every panel.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    points = seed_means(frame)
    attacks = sorted(points["attack"].unique())
    styles = styles_for(points["label"], styles if styles is not None else run_styles(frame))
    ncols = min(3, len(attacks))
    nrows = math.ceil(len(attacks) / ncols)
    # At least 6.4 inches wide, so a one-panel figure still has room for the shared legend.
    fig = Figure(figsize=(max(6.4, 4.6 * ncols), 3.7 * nrows + 0.9), dpi=110)
    FigureCanvasAgg(fig)
    axes = panel_grid(fig, len(attacks))
    none_all = with_labels(frame)
    none_all = none_all[
        (none_all["label"] == NONE) & np.isfinite(none_all["utility"].astype(float))
    ]
    handles: dict[str, Any] = {}
    rows = frame[frame["status"] == "ok"]
    for ax, attack in zip(axes, attacks, strict=True):
        sub = points[points["attack"] == attack]
        _frontier_panel(ax, sub, attack, styles, handles, none_all, chance)
        metric, own = str(sub["attack_metric"].iloc[0]), rows[rows["attack"] == attack]
        ceiling = _baseline_privacy(own, metric)
        if ceiling is not None:  # as in the attack's own Pareto plot
            handles["baseline"] = ax.axvline(ceiling, color="0.6", ls="-.", lw=1)
        limits = attack_limits(own, metric, chance)
        if limits is not None:  # the same axes as the attack's own Pareto plot
            ax.set_xlim(*limits[0])
            (y0, y1), top = limits[1], float(none_all["utility"].astype(float).mean())
            if np.isfinite(top):  # an attack with no none row: keep the dashed line in view
                y0, y1 = min(y0, top - 0.01), max(y1, top + 0.01)
            ax.set_ylim(y0, y1)
    shared_legend(fig, handles, styles)
    return fig


def _frontier_panel(
    ax: Axes,
    sub: pd.DataFrame,
    attack: str,
    styles: Mapping[str, Style],
    handles: dict[str, Any],
    none_rows: pd.DataFrame,
    chance: float | None,
) -> None:
    """One attack's panel of :func:`frontier_figure`; fills ``handles`` for the shared legend."""
    metric = str(sub["attack_metric"].iloc[0])
    for label, group in sub.groupby("label", sort=True):
        if label == NONE:
            continue
        colour, marker = styles[str(label)]
        dominated_points(ax, group, "empirical_privacy", colour, marker)
        front = group[group["on_frontier"]].sort_values("empirical_privacy")
        (line,) = ax.plot(
            front["empirical_privacy"],
            front["utility"],
            color=colour,
            marker=marker,
            lw=1.6,
            ms=5,
        )
        error_bars(ax, front, x="empirical_privacy", y="utility", colour=colour)
        handles.setdefault(str(label), line)
    # The undefended utility: this attack's none point, else none's utility from any row.
    own = sub[sub["label"] == NONE]
    none_utility = (
        float(own["utility"].mean())
        if len(own)
        else float(none_rows["utility"].mean())
        if len(none_rows)
        else math.nan
    )
    if np.isfinite(none_utility):
        handles[NONE] = ax.axhline(none_utility, color="0.2", ls="--", lw=1.1)
    if len(own):
        colour, marker = styles[NONE]
        ax.scatter(
            own["empirical_privacy"], own["utility"], marker=marker, s=90, color=colour, zorder=5
        )
        error_bars(ax, own, x="empirical_privacy", y="utility", colour=colour)
    if chance is not None and np.isfinite(chance):
        handles["chance"] = ax.axhline(chance, color="0.6", ls=":", lw=1)
    ax.set_xlabel(privacy_axis_label(None, metric), fontsize=8)
    ax.set_ylabel(f"utility ({sub['utility_metric'].iloc[0]})", fontsize=8)
    ax.set_title(attack, fontsize=10)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
