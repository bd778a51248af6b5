"""Entity and text metrics: ``entity_f1`` (ner) and ``text_similarity``
(has-deanonymization), with their primitives.

Per-document statistics: (overlap, predicted, true) of (normalised text, type) multisets →
micro F1; (difflib ratio, 1) → the mean over victims. ``text_similarity``'s baseline is the
anonymized text taken as it is (it depends on the defense point).
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from privaudit.api import Predictions, Release
from privaudit.metrics.multiset import multiset_counts, prf
from privaudit.metrics.outcomes import Outcome
from privaudit.metrics.spec import Baseline, MetricSpec
from privaudit.metrics.truth import NotScorable, Truth


def _norm_entity(text: str) -> str:
    return " ".join(str(text).casefold().split()).strip(" .,;:!?'\"")


def entity_counts(
    truth: Sequence[Sequence[dict[str, Any]]], guess: Sequence[Sequence[dict[str, Any]]]
) -> np.ndarray:
    """Per document, (overlap, predicted, true) of (normalised text, type) multisets; predicted
    types that the truth annotation never uses are ignored (see :func:`entity_f1`)."""
    if len(guess) != len(truth):
        raise ValueError(f"The attack returned {len(guess)} documents for {len(truth)} victims.")
    types = {e["type"] for doc in truth for e in doc}
    return multiset_counts(
        (
            Counter((_norm_entity(e["text"]), e["type"]) for e in t),
            Counter((_norm_entity(e["text"]), e["type"]) for e in g if e["type"] in types),
        )
        for t, g in zip(truth, guess, strict=True)
    )


def entity_f1(
    truth: Sequence[Sequence[dict[str, Any]]], guess: Sequence[Sequence[dict[str, Any]]]
) -> dict[str, float]:
    """Micro precision/recall/F1 of (normalised text, type) multisets per document. Predicted
    types that the truth annotation never uses are ignored (a corpus annotated with PERSON,
    GPE, ORG and DATE cannot judge a predicted CARDINAL). Recall and F1 are NaN when no
    document has an annotation."""
    return prf(entity_counts(truth, guess))


def similarity_ratios(originals: Sequence[str], recovered: Sequence[str]) -> np.ndarray:
    """Per document, the difflib ratio between the original and its reconstruction."""
    if len(recovered) != len(originals):
        raise ValueError(
            f"The attack returned {len(recovered)} documents for {len(originals)} victims."
        )
    return np.asarray(
        [
            difflib.SequenceMatcher(None, o, r, autojunk=False).ratio()
            for o, r in zip(originals, recovered, strict=True)
        ],
        dtype=np.float64,
    )


def _entity_strings_found(
    entities: Sequence[Sequence[dict[str, Any]]], texts: Sequence[str]
) -> np.ndarray:
    """Per document (of ``texts``), (entity strings found verbatim, entity strings)."""
    rows = np.zeros((len(texts), 2))
    for d, (ents, text) in enumerate(zip(entities, texts, strict=False)):
        rows[d] = (sum(int(e["text"] in text) for e in ents), len(ents))
    return rows


def text_similarity(
    originals: Sequence[str],
    recovered: Sequence[str],
    entities: Sequence[Sequence[dict[str, Any]]] = (),
) -> dict[str, float]:
    """Mean difflib ratio between each original and its reconstruction (HaS §3.3's measure:
    privacy is 1 - ratio), and the fraction of original entity strings found verbatim."""
    ratios = similarity_ratios(originals, recovered)
    found = _entity_strings_found(entities, recovered).sum(0)
    return {
        "similarity": float(ratios.mean()) if len(ratios) else float("nan"),
        "entity_recovery": float(found[0] / found[1]) if found[1] else float("nan"),
    }


# -------------------------------------------------------------------------------------------
# Words (bow-inversion, geia)
# -------------------------------------------------------------------------------------------


def _score_entity_f1(
    spec: MetricSpec,
    predictions: Predictions,
    truth: Truth,
    details: dict[str, Any],
    release: Release | None,
) -> list[dict[str, Any]]:
    counts = entity_counts(truth.entities, predictions.entities or [])
    if not counts[:, 2].sum():
        raise NotScorable(
            "no victim has an entity annotation: the corpus gives entity recovery no truth "
            "(an F1 of 0 would read as perfect privacy)"
        )
    s = prf(counts)
    details |= {"precision": s["precision"], "recall": s["recall"]}
    outcome = Outcome.f1(counts[:, 0], counts[:, 1], counts[:, 2], truth.doc_indices())
    return [spec.row(outcome, details)]


def _score_text_similarity(
    spec: MetricSpec,
    predictions: Predictions,
    truth: Truth,
    details: dict[str, Any],
    release: Release | None,
) -> list[dict[str, Any]]:
    recovered = predictions.texts or []
    ratios = similarity_ratios(truth.texts, recovered)
    if not len(ratios):
        raise NotScorable("the truth holds no victim texts to compare with")
    found = _entity_strings_found(truth.entities, recovered).sum(0)
    details["entity_recovery"] = float(found[0] / found[1]) if found[1] else float("nan")
    docs = truth.doc_indices()
    baseline = None
    if release is not None and release.texts is not None:
        # What the attacker gets by doing nothing: the anonymized text as it is.
        baseline = Outcome.ratio(similarity_ratios(truth.texts, release.texts), 1.0, docs)
    return [spec.row(Outcome.ratio(ratios, 1.0, docs), details, baseline)]


ENTITY_F1 = MetricSpec(
    name="entity_f1",
    family="entity",
    higher_is_stronger=True,
    prediction_kind="entities",
    needs=("entities",),
    reducer="f1",
    scorer=_score_entity_f1,
    description="micro F1 of the victims' (entity text, type) pairs recovered",
)
TEXT_SIMILARITY = MetricSpec(
    name="text_similarity",
    family="entity",
    higher_is_stronger=True,
    prediction_kind="texts",
    needs=("texts", "entities"),
    reducer="ratio",
    scorer=_score_text_similarity,
    baseline=Baseline("the release as is (no attack)", per_point=True),
    description="mean difflib ratio between each original and its recovery (HaS §3.3)",
)
