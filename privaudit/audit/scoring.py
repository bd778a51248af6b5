"""Scoring attack predictions against the truth the runner holds.

Each scorer returns ``(metric, score, empirical_privacy)``; empirical privacy is 1 - success
for success-type metrics.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

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


def score_predictions(
    predictions: Predictions, *, truth_tokens: Sequence[Sequence[int]]
) -> tuple[float, float]:
    """``(attack_score, empirical_privacy)`` for any supported prediction kind."""
    if predictions.kind == "tokens":
        recovery = token_recovery(truth_tokens, predictions)
        return recovery, 1.0 - recovery
    raise ValueError(f"No scorer for {predictions.kind!r} predictions yet.")
