"""Empirical-privacy vs utility Pareto frontiers: seed means, dominance, the frontier.

Every function takes the runner's results table (one row per defense point × attack, see
``privaudit.audit.store.COLUMNS``). Only rows with ``status == "ok"`` and finite privacy and
utility enter a frontier; seeds are averaged per (attack, label, knob value) first, so a
frontier is drawn through mean points, not through the luckiest seed.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from privaudit.metrics.stats import with_labels

if TYPE_CHECKING:
    import pandas as pd


# Percentile-bootstrap interval bounds the runner writes beside privacy and utility. seed_means
# carries them through (NaN when the results have none): with several seeds, each bound is the
# mean of the per-seed bounds (seeds without a bound are left out of that mean).
CI_COLUMNS = [
    "empirical_privacy_ci_low",
    "empirical_privacy_ci_high",
    "utility_ci_low",
    "utility_ci_high",
]

# Columns seed_means() / frontier() return, in order.
POINT_COLUMNS = [
    "attack",
    "label",
    "defense",
    "knob",
    "knob_value",
    "empirical_privacy",
    "empirical_privacy_ci_low",
    "empirical_privacy_ci_high",
    "utility",
    "utility_ci_low",
    "utility_ci_high",
    "n_seeds",
    "attack_metric",
    "utility_metric",
    "guarantee",
    "on_frontier",
]


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


def seed_means(frame: pd.DataFrame) -> pd.DataFrame:
    """Every ok defense point per attack, privacy and utility averaged over seeds.

    One row per (attack, label, knob value) with the columns of :data:`POINT_COLUMNS`;
    ``on_frontier`` marks the points no other point *of the same label and attack* dominates.
    The interval bounds of :data:`CI_COLUMNS` are averaged over seeds like the values (each
    bound the mean of the per-seed bounds; NaN when the results have no such column, as older
    runs do). Raises ``ValueError`` when the table has no usable ok row.
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
        ("knob", None),
        ("knob_value", math.nan),
        ("attack_metric", "attack"),
        ("utility_metric", "utility"),
        ("guarantee", ""),
        ("defense", None),
    ):
        if col not in ok.columns:
            ok[col] = ok["label"] if col == "defense" else default
    for col in CI_COLUMNS:
        ok[col] = pd.to_numeric(ok[col], errors="coerce") if col in ok.columns else math.nan
    keys = ["attack", "label", "knob_value"]
    grouped = ok.groupby(keys, dropna=False, sort=True)
    points = grouped[["empirical_privacy", "utility", *CI_COLUMNS]].mean()
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
