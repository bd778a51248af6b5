"""Scoring attack predictions against the truth the runner holds.

Each scorer returns ``(metric, score, empirical_privacy)``; empirical privacy is 1 - success
for success-type metrics.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privaudit.api import Predictions


def matched_tokens(truth: Sequence[int], guess: Sequence[int]) -> int:
    """Original tokens recovered: position by position when the lengths agree, else the matched
    blocks of a sequence alignment (released text may re-tokenize to a different length)."""
    if len(truth) == len(guess):
        return int(np.sum(np.asarray(truth) == np.asarray(guess)))
    matcher = difflib.SequenceMatcher(a=list(truth), b=list(guess), autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks())


def token_recovery(truth: Sequence[Sequence[int]], predictions: Predictions) -> float:
    if predictions.tokens is None:
        raise ValueError("Token predictions expected.")
    if len(predictions.tokens) != len(truth):
        raise ValueError(
            f"The attack returned {len(predictions.tokens)} documents for {len(truth)} victims."
        )
    total = sum(len(t) for t in truth)
    if total == 0:
        return float("nan")
    hits = sum(matched_tokens(t, g) for t, g in zip(truth, predictions.tokens, strict=True))
    return hits / total


def replacement_rate(audits: Sequence[dict]) -> float:
    """Fraction of units (tokens or words) the mechanism changed, from the releases' audits."""
    changed = total = 0
    for audit in audits:
        masks = audit.get("replaced")
        if masks is None:
            return float("nan")
        for mask in masks:
            changed += int(np.sum(mask))
            total += len(mask)
    return changed / total if total else float("nan")


@dataclass
class Truth:
    """What the runner knows about the victims (never shown to an attack)."""

    tokens: list[np.ndarray]
    attributes: dict[str, list[Any]] = field(default_factory=dict)


def score_predictions(predictions: Predictions, truth: Truth) -> list[dict[str, Any]]:
    """One scored row per target: ``target`` ("" or the attribute), ``attack_score``,
    ``empirical_privacy`` and, where defined, ``attack_baseline`` and ``attack_macro_f1``."""
    if predictions.kind == "tokens":
        recovery = token_recovery(truth.tokens, predictions)
        return [{"target": "", "attack_score": recovery, "empirical_privacy": 1.0 - recovery}]
    if predictions.kind == "attributes":
        from privaudit.attacks.attribute_inference import score_attributes

        wanted = {k: v for k, v in truth.attributes.items() if k in (predictions.attributes or {})}
        rows = []
        for name, s in score_attributes(wanted, predictions).items():
            rows.append(
                {
                    "target": name,
                    "attack_score": s["accuracy"],
                    "empirical_privacy": 1.0 - s["accuracy"],
                    "attack_baseline": s["majority_accuracy"],
                    "attack_macro_f1": s["macro_f1"],
                }
            )
        return rows
    raise ValueError(f"No scorer for {predictions.kind!r} predictions yet.")
