"""What a defense reaches, read off its worst-case points: the best utility at each matched
privacy level, and the text defenses' points at equal replacement rate."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from privaudit.api import NONE, REFERENCES
from privaudit.leaderboard.stats import MATCHED_LEVELS
from privaudit.leaderboard.tables import fmt_number, knob_text_of
from privaudit.metrics.stats import with_labels

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.leaderboard.stats import FamilyPoints


def matched_table(points: FamilyPoints, chance: float) -> pd.DataFrame:
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
    columns = [
        "family",
        "label",
        "level",
        "utility",
        "utility_ci_low",
        "utility_ci_high",
        "privacy",
        "knob",
        "knob_value",
        "at_chance",
    ]
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
            row = {
                "family": family,
                "label": label,
                "level": level,
                "utility": np.nan,
                "utility_ci_low": np.nan,
                "utility_ci_high": np.nan,
                "privacy": np.nan,
                "knob": None,
                "knob_value": np.nan,
                "at_chance": "",
            }
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


def rates_table(frame: pd.DataFrame, points: FamilyPoints) -> pd.DataFrame | None:
    """The points of defenses that replace words (a finite, non-zero replacement rate
    somewhere), with utility and worst-case text privacy, ordered by replacement rate."""
    f = with_labels(frame)
    if "replacement_rate" not in f.columns:
        return None
    f = f[(f["defense"] != NONE) & np.isfinite(f["replacement_rate"].astype(float))]
    if "target_rate" not in f.columns:
        f = f.assign(target_rate=np.nan)
    keys = ["label", "knob", "knob_value"]
    by = (
        f.groupby(keys, dropna=False, sort=False)
        .agg(
            replacement_rate=("replacement_rate", "mean"),
            target_rate=("target_rate", "first"),
            defense=("defense", "first"),
        )
        .reset_index()
    )
    by = by[by.groupby("label")["replacement_rate"].transform("max") > 0]
    if by.empty:
        return None
    t = points.table
    text = t[t["family"] == "text"] if len(t) else t
    cols = [
        "utility",
        "utility_ci_low",
        "utility_ci_high",
        "privacy",
        "privacy_ci_low",
        "privacy_ci_high",
    ]
    if len(text):
        by = by.merge(text[["label", "knob_value", *cols]], on=["label", "knob_value"], how="left")
    else:
        by = by.assign(**{c: np.nan for c in cols})
    return by.sort_values(["replacement_rate", "label"]).reset_index(drop=True)
