"""A made-up metric in which a *lower* score means a *stronger* attack: the token edit
distance between the recovered and the original token sequences, per original token.

One module: the scorer and its declaration. Registering it is one call,
``privaudit.metrics.register_metric(TOKEN_EDIT_DISTANCE)``; nothing in the leaderboard,
the statistics or the plots names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from privaudit.api import Predictions, Release
from privaudit.metrics import MetricSpec, NotScorable, Outcome, Truth
from privaudit.metrics.spec import Baseline


def edit_distance(a: Sequence[int], b: Sequence[int]) -> int:
    """Levenshtein distance between two token sequences."""
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


def _distances(truth: Sequence[Sequence[int]], guess: Sequence[Sequence[int]]) -> np.ndarray:
    # At most one edit per original token: the score stays in [0, 1].
    return np.asarray(
        [min(edit_distance(list(t), list(g)), len(t)) for t, g in zip(truth, guess, strict=True)],
        dtype=np.float64,
    )


def _score(
    spec: MetricSpec,
    predictions: Predictions,
    truth: Truth,
    details: dict[str, Any],
    release: Release | None,
) -> list[dict[str, Any]]:
    lengths = np.asarray([len(t) for t in truth.tokens], dtype=np.float64)
    if not lengths.sum():
        raise NotScorable("the victims have no tokens")
    docs = truth.doc_indices()
    outcome = Outcome.ratio(_distances(truth.tokens, predictions.tokens or []), lengths, docs)
    baseline = None
    if truth.frequent_token is not None:  # the aux's most frequent token, everywhere
        guess = [[truth.frequent_token] * len(t) for t in truth.tokens]
        baseline = Outcome.ratio(_distances(truth.tokens, guess), lengths, docs)
    return [spec.row(outcome, details, baseline)]


TOKEN_EDIT_DISTANCE = MetricSpec(
    name="token_edit_distance",
    family="text",
    higher_is_stronger=False,
    prediction_kind="tokens",
    needs=("tokens", "frequent_token"),
    reducer="ratio",
    scorer=_score,
    baseline=Baseline("frequent-token guess"),
    display="token edit distance",
    description="edits per original token between the recovered and the original tokens",
)
