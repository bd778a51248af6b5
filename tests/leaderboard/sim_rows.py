"""One results row of a simulated board, shared by the null-board builders
(``claims_boards.py``, ``people_boards.py``, ``test_verdicts_hold.py``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def simulated_row(
    label: str,
    value: float,
    attack: str,
    *,
    family: str,
    seed: int,
    hits: np.ndarray,
    utility: float,
    key: str,
    point: str,
    baseline: float,
) -> dict[str, Any]:
    """The row a grid would write for one (defense point, attack) cell with these outcomes."""
    return {
        "defense": label.split("[")[0],
        "label": label,
        "knob": None if label == "none" else "eta",
        "knob_value": math.nan if label == "none" else float(value),
        "attack": attack,
        "seed": seed,
        "status": "ok",
        "reason": "",
        "attack_metric": "token_recovery",
        "family": family,
        "attack_score": float(hits.mean()),
        "empirical_privacy": 1 - float(hits.mean()),
        "attack_baseline": baseline,
        "utility": utility,
        "utility_metric": "balanced_accuracy",
        "cell_key": key,
        "point": point,
        "n_test": len(hits),
        "guarantee": "g",
        "privatize_seconds": 1.0,
        "n_words": 1000.0,
        "defense_params": "{}",
    }
