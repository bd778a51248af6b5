"""A made-up attack family added through the open records alone: *how long was it?*

One module declares everything the family needs, with no edit to ``privaudit/api/``,
``privaudit/metrics/spec.py``, ``privaudit/metrics/truth.py``, the runner or the leaderboard:
a truth field ``n_words`` (each victim's word count), a knowledge field ``aux_lengths`` (the
word counts of the attacker's aux documents, built from the corpus), a prediction kind
``lengths``, a family ``length``, a lower-is-stronger metric ``length_error`` and an attack
``length-reader`` that counts the released words. :func:`register` adds them all.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

import numpy as np

from privaudit.api import Attack, Knowledge, Predictions, Release, Space
from privaudit.metrics import MetricSpec, NotScorable, Outcome, Truth
from privaudit.metrics.spec import FamilySpec, register_family
from privaudit.records import (
    KnowledgeField,
    PredictionKind,
    Source,
    TruthField,
    register_knowledge_field,
    register_prediction_kind,
    register_truth_field,
)


def _victim_lengths(source: Source) -> list[int]:
    return [len(t.split()) for t in source.corpus.texts("test")]


def _aux_lengths(source: Source) -> list[int] | None:
    if source.split("aux") is None:
        return None
    return [len(t.split()) for t in source.corpus.texts("aux")]


N_WORDS = TruthField("n_words", "per victim, its number of words", _victim_lengths)
AUX_LENGTHS = KnowledgeField(
    "aux_lengths",
    "the word counts of the attacker's aux documents",
    _aux_lengths,
    missing="the corpus has no aux split",
)
LENGTHS = PredictionKind("lengths", "per document, its predicted number of words")
LENGTH = FamilySpec("length", "recovery of each victim's document length")
# The records first: a metric's declaration is checked against them when it is built.
register_truth_field(N_WORDS)
register_knowledge_field(AUX_LENGTHS)
register_prediction_kind(LENGTHS)


def _score(
    spec: MetricSpec,
    predictions: Predictions,
    truth: Truth,
    details: dict[str, Any],
    release: Release | None,
) -> list[dict[str, Any]]:
    true = np.asarray(truth.n_words, dtype=np.float64)  # the declared field, by attribute
    if not len(true):
        raise NotScorable("no victim's length is known")
    guess = np.asarray(predictions.lengths, dtype=np.float64)
    error = np.minimum(np.abs(guess - true) / np.maximum(true, 1.0), 1.0)
    return [spec.row(Outcome.ratio(error, 1.0, truth.doc_indices()), details)]


LENGTH_ERROR = MetricSpec(
    name="length_error",
    family="length",
    higher_is_stronger=False,
    prediction_kind="lengths",
    needs=("n_words",),
    reducer="ratio",
    scorer=_score,
    display="length error",
    description="relative error of the predicted word count, capped at 1",
)


class LengthReader(Attack):
    """Counts the released words; an empty release gets the aux median (made up, for tests)."""

    name: ClassVar[str] = "length-reader"
    accepts: ClassVar[frozenset[Space]] = frozenset({Space.TEXT})
    metric: ClassVar[str] = "length_error"
    needs_knowledge: ClassVar[frozenset[str]] = frozenset({"aux_lengths"})

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        self._median = float(np.median(knowledge.aux_lengths))
        return self

    def attack(self, release: Release) -> Predictions:
        counts = [len(t.split()) or self._median for t in release.content_texts()]
        return Predictions.of("lengths", counts)


def register() -> None:
    """Declare the records, the family and the metric (the attack is registered by name)."""
    from privaudit.metrics import register_metric

    register_truth_field(N_WORDS)
    register_knowledge_field(AUX_LENGTHS)
    register_prediction_kind(LENGTHS)
    register_family(LENGTH)
    register_metric(LENGTH_ERROR)
