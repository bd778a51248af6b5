"""Empirical-privacy vs utility Pareto frontiers and their plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


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


def plot_pareto(frame: Any, path: str | Path, *, attack: str, chance: float | None = None) -> Path:
    """One panel: empirical privacy (x) vs utility (y), a line per defense through its privacy
    levels (labelled with the knob value), the undefended point marked with a star and a dashed
    line at its utility, and the majority-class chance level dotted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    fig, ax = plt.subplots(figsize=(7.0, 5.0), dpi=120)
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
        if name == "none":
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
                    f"{knob}={row['knob_value']:g}",
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
    if metric == "embedding_mse":  # reconstruction error: the privacy is the error itself
        ax.set_xlabel(f"empirical privacy vs {attack} (embedding MSE)")
        ax.set_xlim(left=0.0)
    else:
        ax.set_xlabel(f"empirical privacy vs {attack} (1 − {metric})")
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
    fig.savefig(path)
    plt.close(fig)
    return path
