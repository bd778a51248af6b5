"""Empirical-privacy vs utility Pareto frontiers and their plots.

Every function takes the runner's results table (one row per defense point × attack, see
``privaudit.audit.runner.COLUMNS``). Only rows with ``status == "ok"`` and finite privacy and
utility enter a frontier; seeds are averaged per (attack, label, knob value) first, so a
frontier is drawn through mean points, not through the luckiest seed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.params import shown

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

NONE = "none"  # the undefended baseline's defense name and default label

# Columns seed_means() / frontier() return, in order.
POINT_COLUMNS = [
    "attack", "label", "defense", "knob", "knob_value", "empirical_privacy", "utility",
    "n_seeds", "attack_metric", "utility_metric", "guarantee", "on_frontier",
]  # fmt: skip


def pareto_mask(privacy: np.ndarray, utility: np.ndarray) -> np.ndarray:
    """True for points no other point beats on both axes (higher is better on both)."""
    privacy, utility = np.asarray(privacy, float), np.asarray(utility, float)
    keep = np.ones(len(privacy), dtype=bool)
    for i in range(len(privacy)):
        dominated = (
            (privacy >= privacy[i])
            & (utility >= utility[i])
            & ((privacy > privacy[i]) | (utility > utility[i]))
        )
        keep[i] = not dominated.any()
    return keep


def with_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy whose ``label`` column is filled from ``defense`` where missing (older runs)."""
    frame = frame.copy()
    fallback = frame["defense"] if "defense" in frame.columns else "?"
    if "label" not in frame.columns:
        frame["label"] = fallback
    else:
        frame["label"] = frame["label"].where(frame["label"].notna(), fallback)
    frame["label"] = frame["label"].astype(str)
    return frame


def seed_means(frame: pd.DataFrame) -> pd.DataFrame:
    """Every ok defense point per attack, privacy and utility averaged over seeds.

    One row per (attack, label, knob value) with the columns of :data:`POINT_COLUMNS`;
    ``on_frontier`` marks the points no other point *of the same label and attack* dominates.
    Raises ``ValueError`` when the table has no usable ok row.
    """
    import pandas as pd

    missing = {"attack", "status", "empirical_privacy", "utility"} - set(frame.columns)
    if missing:
        raise ValueError(
            f"The results table lacks the columns {sorted(missing)}; expected a results.csv/"
            "results.parquet written by `privaudit run`."
        )
    ok = with_labels(frame[frame["status"] == "ok"])
    ok = ok[np.isfinite(ok["empirical_privacy"].astype(float))]
    ok = ok[np.isfinite(ok["utility"].astype(float))]
    if ok.empty:
        counts = frame["status"].value_counts().to_dict() if len(frame) else {}
        raise ValueError(
            f"No cell with status 'ok' and finite privacy and utility (statuses: "
            f"{counts or 'no rows'}); there is no frontier to draw. See the `reason` column of "
            "the failed / n/a rows."
        )
    for col, default in (
        ("knob", None), ("knob_value", math.nan), ("attack_metric", "attack"),
        ("utility_metric", "utility"), ("guarantee", ""), ("defense", None),
    ):  # fmt: skip
        if col not in ok.columns:
            ok[col] = ok["label"] if col == "defense" else default
    keys = ["attack", "label", "knob_value"]
    grouped = ok.groupby(keys, dropna=False, sort=True)
    points = grouped[["empirical_privacy", "utility"]].mean()
    points["n_seeds"] = grouped.size()
    firsts = grouped[["defense", "knob", "attack_metric", "utility_metric", "guarantee"]].first()
    points = points.join(firsts).reset_index()
    points["on_frontier"] = False
    for _, idx in points.groupby(["attack", "label"], sort=False).groups.items():
        sub = points.loc[idx]
        points.loc[idx, "on_frontier"] = pareto_mask(
            sub["empirical_privacy"].to_numpy(), sub["utility"].to_numpy()
        )
    points = points.sort_values(["attack", "label", "empirical_privacy", "utility"])
    return pd.DataFrame(points[POINT_COLUMNS]).reset_index(drop=True)


def frontier(frame: pd.DataFrame) -> pd.DataFrame:
    """Per attack and per defense label, the non-dominated (empirical privacy, utility) points.

    Higher is better on both axes. Rows with ``status != "ok"`` are left out; seeds are averaged
    per (attack, label, knob value) before dominance is decided. Points are sorted by attack,
    label and increasing privacy (so along each frontier utility decreases).
    """
    points = seed_means(frame)
    return points[points["on_frontier"]].drop(columns="on_frontier").reset_index(drop=True)


def privacy_axis_label(attack: str | None, metric: str) -> str:
    """The x-axis name: 1 − the attack's success metric, or the reconstruction MSE itself."""
    against = f" vs {attack}" if attack else ""
    if metric == "embedding_mse":  # reconstruction error: the privacy is the error itself
        return f"empirical privacy{against} (embedding MSE)"
    return f"empirical privacy{against} (1 − {metric})"


def pareto_figure(frame: pd.DataFrame, *, attack: str, chance: float | None = None) -> Figure:
    """The one-attack figure :func:`plot_pareto` saves (rows of one attack, status ok)."""
    from matplotlib.figure import Figure

    # A bare Figure (no pyplot) needs no global backend state and no plt.close().
    fig = Figure(figsize=(7.0, 5.0), dpi=120)
    ax = fig.subplots()
    frame = with_labels(frame) if len(frame) else frame
    metric = str(frame["attack_metric"].iloc[0]) if len(frame) else "attack"
    utility_metric = str(frame["utility_metric"].iloc[0]) if len(frame) else "utility"
    markers = "osD^v<>phX"
    by = "label" if "label" in frame.columns else "defense"
    for k, (name, group) in enumerate(sorted(frame.groupby(by), key=lambda g: g[0])):
        agg = (
            group.groupby("knob_value", dropna=False)[["empirical_privacy", "utility"]]
            .mean()
            .reset_index()
            .sort_values("empirical_privacy")
        )
        if name == NONE:
            x, y = agg["empirical_privacy"].iloc[0], agg["utility"].iloc[0]
            ax.axhline(y, color="0.35", ls="--", lw=1)
            ax.scatter(
                [x], [y], marker="*", s=260, color="black", zorder=5, label="none (undefended)"
            )
            continue
        line = ax.plot(
            agg["empirical_privacy"], agg["utility"], marker=markers[k % len(markers)],
            lw=1.6, ms=6, label=name,
        )[0]  # fmt: skip
        knob = group["knob"].iloc[0]
        for _, row in agg.iterrows():
            if np.isfinite(row["knob_value"]):
                ax.annotate(
                    f"{knob}={shown(row['knob_value'])}",
                    (row["empirical_privacy"], row["utility"]),
                    textcoords="offset points", xytext=(4, 5), fontsize=7,
                    color=line.get_color(),
                )  # fmt: skip
    has_baseline = "attack_baseline" in frame.columns and frame["attack_baseline"].notna().any()
    guessers = {
        "accuracy": "majority-guess attacker",
        "attribute_accuracy": "majority-guess attacker",
        "token_recovery": "frequent-token guess",
        "token_f1": "frequent-token guess",
    }
    if has_baseline and metric in guessers:
        # An attacker that ignores the release reaches this privacy, no further.
        ceiling = 1.0 - float(frame["attack_baseline"].dropna().mean())
        ax.axvline(ceiling, color="0.6", ls="-.", lw=1, label=guessers[metric])
    elif has_baseline:
        # Per point: the privacy an attacker gets by taking the release as it is.
        base = frame.dropna(subset=["attack_baseline"])
        base = base.groupby([by, "knob_value"], dropna=False)[["attack_baseline", "utility"]]
        base = base.mean()
        ax.scatter(
            1.0 - base["attack_baseline"], base["utility"], s=30, facecolors="none",
            edgecolors="0.55", label="the release as is (no attack)", zorder=1,
        )  # fmt: skip
    if chance is not None and np.isfinite(chance):
        ax.axhline(chance, color="0.6", ls=":", lw=1, label="majority class")
    ax.set_xlabel(privacy_axis_label(attack, metric))
    if metric == "embedding_mse":
        ax.set_xlim(left=0.0)
    else:
        xs = frame["empirical_privacy"].dropna()
        if has_baseline:  # keep the guess line / as-is markers in view
            xs = np.concatenate([xs, 1.0 - frame["attack_baseline"].dropna()])
        top = float(xs.max()) if len(xs) else 1.0
        # Zoom in when every point is far from 1, else the lines collapse onto the y axis.
        ax.set_xlim(-0.03, 1.03) if top > 0.5 else ax.set_xlim(-0.01, top * 1.2 + 0.01)
    ax.set_ylabel(f"utility ({utility_metric})")
    ax.set_title(f"Privacy–utility trade-off against {attack}")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return fig


def plot_pareto(frame: Any, path: str | Path, *, attack: str, chance: float | None = None) -> Path:
    """One panel: empirical privacy (x) vs utility (y), a line per defense through its privacy
    levels (labelled with the knob value), the undefended point marked with a star and a dashed
    line at its utility, and the majority-class chance level dotted."""
    return save_figure(pareto_figure(frame, attack=attack, chance=chance), Path(path))


def save_figure(fig: Any, path: Path) -> Path:
    """Save atomically (a temporary file, then a rename): a crash or a full disk never leaves
    a truncated image. The format follows ``path``'s suffix (the temporary name has none)."""
    from privaudit.audit.store import write_atomic

    fmt = path.suffix.lstrip(".").lower() or "png"
    return write_atomic(path, lambda tmp: fig.savefig(tmp, format=fmt))


def label_styles(labels: list[str]) -> dict[str, tuple[Any, str]]:
    """A fixed (colour, marker) per defense label, so a defense looks the same in every panel."""
    from matplotlib import colormaps

    names = sorted(set(labels) - {NONE})
    cmap = colormaps["tab10" if len(names) <= 10 else "tab20"]
    markers = "osD^v<>phX8P"
    return {name: (cmap(i % cmap.N), markers[i % len(markers)]) for i, name in enumerate(names)}


def frontier_figure(frame: pd.DataFrame, *, chance: float | None = None) -> Figure:
    """The combined figure of :func:`plot_frontiers` (in the style of RAPT Figs. 7 and 10).

    One panel per attack in a grid; in each, one line per defense label through its frontier
    points, its dominated points faint, the undefended utility dashed, the chance level dotted,
    and one legend for the whole figure.
    """
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    points = seed_means(frame)
    attacks = sorted(points["attack"].unique())
    styles = label_styles(points["label"].tolist())
    ncols = min(3, len(attacks))
    nrows = math.ceil(len(attacks) / ncols)
    # At least 6.4 inches wide, so a one-panel figure still has room for the shared legend.
    fig = Figure(figsize=(max(6.4, 4.6 * ncols), 3.7 * nrows + 0.9), dpi=110)
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    none_all = with_labels(frame)
    none_all = none_all[
        (none_all["label"] == NONE) & np.isfinite(none_all["utility"].astype(float))
    ]
    handles: dict[str, Any] = {}
    for ax, attack in zip(axes, attacks, strict=False):
        sub = points[points["attack"] == attack]
        _frontier_panel(ax, sub, attack, styles, handles, none_all, chance)
    for ax in axes[len(attacks) :]:
        ax.set_axis_off()  # the grid's spare cells
    order = [name for name in sorted(styles) if name in handles]
    legend = [handles[name] for name in order]
    if NONE in handles:
        order.append("none (undefended)")
        legend.append(handles[NONE])
    if "chance" in handles:
        order.append("majority class")
        legend.append(handles["chance"])
    legend.append(Line2D([], [], color="0.5", marker="o", ls="", alpha=0.3))
    order.append("dominated point")
    # About 1.9 inches per legend entry: labels like has[mode=generative] must not be cut.
    ncol = max(1, min(len(order), int(fig.get_figwidth() / 1.9)))
    fig.legend(legend, order, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    # Leave room at the bottom for the shared legend: about a quarter inch per legend row.
    bottom = (0.25 + 0.25 * math.ceil(len(order) / ncol)) / fig.get_figheight()
    fig.tight_layout(rect=(0, bottom, 1, 1))
    return fig


def _frontier_panel(
    ax: Axes,
    sub: pd.DataFrame,
    attack: str,
    styles: dict[str, tuple[Any, str]],
    handles: dict[str, Any],
    none_rows: pd.DataFrame,
    chance: float | None,
) -> None:
    """One attack's panel of :func:`frontier_figure`; fills ``handles`` for the shared legend."""
    metric = str(sub["attack_metric"].iloc[0])
    for label, group in sub.groupby("label", sort=True):
        if label == NONE:
            continue
        colour, marker = styles[label]
        dominated = group[~group["on_frontier"]]
        ax.scatter(
            dominated["empirical_privacy"], dominated["utility"], color=colour, marker=marker,
            s=18, alpha=0.25, linewidths=0,
        )  # fmt: skip
        front = group[group["on_frontier"]].sort_values("empirical_privacy")
        (line,) = ax.plot(
            front["empirical_privacy"], front["utility"], color=colour, marker=marker,
            lw=1.6, ms=5,
        )  # fmt: skip
        handles.setdefault(label, line)
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
    if chance is not None and np.isfinite(chance):
        handles["chance"] = ax.axhline(chance, color="0.6", ls=":", lw=1)
    ax.set_xlabel(privacy_axis_label(None, metric), fontsize=8)
    ax.set_ylabel(f"utility ({sub['utility_metric'].iloc[0]})", fontsize=8)
    ax.set_title(attack, fontsize=10)
    ax.tick_params(labelsize=7)
    if metric == "embedding_mse":
        ax.set_xlim(left=0.0)
    ax.grid(alpha=0.3)


def plot_frontiers(frame: pd.DataFrame, path: str | Path, *, chance: float | None) -> Path:
    """Save one figure with a Pareto-frontier panel per attack (see :func:`frontier_figure`)."""
    return save_figure(frontier_figure(frame, chance=chance), Path(path))
