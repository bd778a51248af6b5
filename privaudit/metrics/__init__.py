"""Metrics, attack families, per-document outcomes and the per-run statistics over them.

Below both the runner (:mod:`privaudit.audit`) and the leaderboard: each metric is one
declared :class:`MetricSpec` (:mod:`privaudit.metrics.spec`), its scorer lives with its family
(:mod:`.tokens`, :mod:`.entities`, :mod:`.words`, :mod:`.attributes`), the truth and its cuts in
:mod:`.truth`, the one scoring entry point in :mod:`.scoring`, per-document outcomes in
:mod:`.outcomes` and the run's bootstrap, intervals and normalised privacy in :mod:`.stats`.

Importing any of it registers the built-in families and metrics (:mod:`.builtin`, imported
here), so a lookup in :mod:`.spec` always sees them.
"""

from privaudit.metrics import builtin  # noqa: F401  (registers the built-ins)
from privaudit.metrics.attributes import score_attributes
from privaudit.metrics.entities import entity_f1, similarity_ratios, text_similarity
from privaudit.metrics.multiset import multiset_counts, prf
from privaudit.metrics.outcomes import Outcome, bootstrap_weights, interval
from privaudit.metrics.scoring import score_predictions
from privaudit.metrics.spec import (
    Baseline,
    FamilySpec,
    MetricSpec,
    families,
    family_of,
    find_metric,
    metric_spec,
    metrics,
    register_family,
    register_metric,
    unregister_metric,
)
from privaudit.metrics.tokens import (
    embedding_mse,
    frequency_guess,
    matched_tokens,
    replacement_rate,
    token_f1,
    token_recovery,
)
from privaudit.metrics.truth import NotScorable, Truth, released_token_counts
from privaudit.metrics.words import (
    generation_counts,
    generation_scores,
    word_set_counts,
    word_set_scores,
)

__all__ = [
    "Baseline",
    "FamilySpec",
    "MetricSpec",
    "NotScorable",
    "Outcome",
    "Truth",
    "bootstrap_weights",
    "embedding_mse",
    "entity_f1",
    "families",
    "family_of",
    "find_metric",
    "frequency_guess",
    "generation_counts",
    "generation_scores",
    "interval",
    "matched_tokens",
    "metric_spec",
    "metrics",
    "multiset_counts",
    "prf",
    "register_family",
    "register_metric",
    "released_token_counts",
    "replacement_rate",
    "score_attributes",
    "score_predictions",
    "similarity_ratios",
    "text_similarity",
    "token_f1",
    "token_recovery",
    "unregister_metric",
    "word_set_counts",
    "word_set_scores",
]
