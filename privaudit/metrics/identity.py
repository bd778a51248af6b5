"""The identity family: re-identification of each victim's author among known candidates.

Added through the open records (:mod:`privaudit.records`), from this module alone:

- truth field ``author`` (per victim, its author; None when unknown) and ``candidates``
  (shared: each candidate author's number of background documents, most frequent first);
- knowledge field ``background``: the corpus's ``background`` split (``text``, ``author``):
  documents of known authors, held-out *other* documents of the victims' authors among
  distractors' (synthpai). A document that is also a victim's (same text) is dropped, so an
  attacker is never handed a victim document. Candidates are its authors;
- prediction kind ``ranking``: per victim, candidate authors best first;
- metric ``reidentification_accuracy`` (family ``identity``).

Scoring is closed-world, as TRI's (Manzanares-Salor, Sánchez & Lison, DMKD 2024): only the
victims whose author is a candidate are scored (a person with one document has none left
for the background; ``n_not_candidates`` in the details says how many were left out). The
headline is top-1 accuracy (per-document hits: a ratio outcome, so intervals work like every
other row); ``top5`` and ``mrr`` (mean reciprocal rank, 0 when the author is not ranked) in
the details. Baseline: the candidates ranked by their prior, most background documents first
(ties by name), the same list for every victim. ``meta["variants"]`` (name → rankings) is
scored into the details as ``<name>_top1`` and ``<name>_mrr`` (the attack's second variant).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from privaudit.api import Predictions, Release
from privaudit.metrics.outcomes import Outcome
from privaudit.metrics.spec import Baseline, MetricSpec
from privaudit.metrics.truth import NotScorable, Truth
from privaudit.records import (
    KnowledgeField,
    PredictionKind,
    Source,
    TruthField,
    register_knowledge_field,
    register_prediction_kind,
    register_truth_field,
)

NO_BACKGROUND = (
    "the corpus has no background split (documents of known authors): re-identification has "
    "no candidates (synthpai has one)"
)


def _background(source: Source) -> Any:
    """The background split with ``text`` and ``author``, without any victim's document;
    None when the corpus has none (or it is empty, or has no authors)."""

    def make() -> Any:
        split = source.split("background")
        if split is None or len(split) == 0 or "author" not in split.column_names:
            return None
        victims = set(source.corpus.texts("test"))
        keep = [i for i, t in enumerate(split["text"]) if t not in victims]
        split = split.select(keep) if len(keep) < len(split) else split
        return split.select_columns(["text", "author"]) if len(split) else None

    return source.once("background", make)


def _authors(source: Source) -> list[Any] | None:
    test = source.split("test")
    if test is None or "author" not in test.column_names:
        return None
    return [None if a is None or a == "" else str(a) for a in test["author"]]


def _candidates(source: Source) -> dict[str, int] | None:
    background = _background(source)
    if background is None:
        return None
    counts = Counter(str(a) for a in background["author"] if a is not None and a != "")
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


AUTHOR = register_truth_field(
    TruthField("author", "per victim, its author (None: unknown)", _authors)
)
CANDIDATES = register_truth_field(
    TruthField(
        "candidates",
        "the background's authors, with their document counts, most first",
        _candidates,
        cut="shared",
        default=dict,
    )
)
RANKING = register_prediction_kind(
    PredictionKind("ranking", "per document, candidate authors best first")
)
BACKGROUND = register_knowledge_field(
    KnowledgeField(
        "background",
        "documents of known authors (text, author), never a victim's",
        _background,
        missing=NO_BACKGROUND,
        na_cause="truth",
    )
)


def rank_of(author: str, ranking: Sequence[Any]) -> int | None:
    """The 1-based rank of ``author`` in ``ranking``, or None when it is not ranked."""
    for r, candidate in enumerate(ranking, 1):
        if str(candidate) == author:
            return r
    return None


def ranking_scores(authors: Sequence[str], rankings: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """Per victim ``hit1``, ``hit5`` and ``rr`` (reciprocal rank, 0 when unranked) arrays, and
    their means ``top1``, ``top5``, ``mrr``."""
    ranks = [rank_of(a, r) for a, r in zip(authors, rankings, strict=True)]
    hit1 = np.asarray([r == 1 for r in ranks], dtype=np.float64)
    hit5 = np.asarray([r is not None and r <= 5 for r in ranks], dtype=np.float64)
    rr = np.asarray([0.0 if r is None else 1.0 / r for r in ranks], dtype=np.float64)
    mean = (lambda a: float(a.mean())) if len(ranks) else (lambda a: float("nan"))
    return {
        "hit1": hit1,
        "hit5": hit5,
        "rr": rr,
        "top1": mean(hit1),
        "top5": mean(hit5),
        "mrr": mean(rr),
    }


def _score_reidentification(
    spec: MetricSpec,
    predictions: Predictions,
    truth: Truth,
    details: dict[str, Any],
    release: Release | None,
) -> list[dict[str, Any]]:
    candidates: dict[str, int] = truth.get("candidates") or {}
    if not candidates:
        raise NotScorable(NO_BACKGROUND)
    authors: list[Any] = truth.get("author") or []
    if not authors or all(a is None for a in authors):
        raise NotScorable("no victim's author is known: re-identification has no truth")
    rankings = list(predictions.value or [])
    if len(rankings) != len(authors):
        raise ValueError(
            f"The attack returned {len(rankings)} rankings for {len(authors)} victims; return "
            "one ranking (candidate authors, best first) per victim."
        )
    scored = [d for d, a in enumerate(authors) if a is not None and a in candidates]
    if not scored:
        raise NotScorable(
            "no victim's author is a candidate (has a background document): re-identification "
            "has no truth to score"
        )
    who = [str(authors[d]) for d in scored]
    docs = truth.doc_indices()[scored]
    mine = ranking_scores(who, [rankings[d] for d in scored])
    prior = list(candidates)  # most background documents first
    guess = ranking_scores(who, [prior] * len(who))
    extra: dict[str, Any] = {
        "top5": mine["top5"],
        "mrr": mine["mrr"],
        "baseline_top5": guess["top5"],
        "baseline_mrr": guess["mrr"],
        "n_candidates": len(candidates),
        "n_scored": len(who),
        "n_not_candidates": len(authors) - len(scored),
    }
    for name, variant in dict(predictions.meta.get("variants", {})).items():
        v = ranking_scores(who, [list(variant)[d] for d in scored])
        extra |= {f"{name}_top1": v["top1"], f"{name}_mrr": v["mrr"]}
    return [
        spec.row(
            Outcome.ratio(mine["hit1"], 1.0, docs),
            details | extra,
            Outcome.ratio(guess["hit1"], 1.0, docs),
        )
    ]


REIDENTIFICATION_ACCURACY = MetricSpec(
    name="reidentification_accuracy",
    family="identity",
    higher_is_stronger=True,
    prediction_kind="ranking",
    needs=("author", "candidates"),
    reducer="ratio",
    scorer=_score_reidentification,
    baseline=Baseline("prior-guess attacker"),
    display="top-1 re-identification accuracy",
    description="share of victims whose author the attack ranks first among the candidates",
)
