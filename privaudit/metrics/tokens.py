"""Token recovery metrics: ``token_recovery`` (nn-, mlp-inversion), ``token_f1``
(optimization-inversion) and ``embedding_mse`` (ae-inversion), with their primitives.

Per-document statistics: (tokens recovered, tokens) → ratio; (multiset overlap, predicted,
true) → micro F1; (squared error, coordinates) of the aligned positions → ratio. Baselines:
the aux's most frequent token guessed everywhere; for the MSE, the aux tokens' mean embedding
at every position.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from privaudit.api import Predictions, Release
from privaudit.mechanisms.align import align_positions
from privaudit.metrics.multiset import multiset_counts, prf
from privaudit.metrics.outcomes import Outcome
from privaudit.metrics.spec import Baseline, MetricSpec
from privaudit.metrics.truth import NotScorable, Truth


def matched_tokens(truth: Sequence[int], guess: Sequence[int]) -> int:
    """Original tokens recovered: position by position when the lengths agree, else the matched
    blocks of a sequence alignment (released text may re-tokenize to a different length)."""
    if len(truth) == len(guess):
        return int(np.sum(np.asarray(truth) == np.asarray(guess)))
    matcher = difflib.SequenceMatcher(a=list(truth), b=list(guess), autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks())


def token_hits(
    truth: Sequence[Sequence[int]], predictions: Predictions
) -> tuple[np.ndarray, np.ndarray]:
    """Per victim, the tokens recovered (:func:`matched_tokens`) and the number of its
    tokens: the per-document statistics of :func:`token_recovery`."""
    if predictions.tokens is None:
        raise ValueError("Token predictions expected.")
    if len(predictions.tokens) != len(truth):
        raise ValueError(
            f"The attack returned {len(predictions.tokens)} documents for {len(truth)} victims."
        )
    hits = [matched_tokens(t, g) for t, g in zip(truth, predictions.tokens, strict=True)]
    return np.asarray(hits, dtype=np.float64), _lengths(truth)


def _lengths(truth: Sequence[Sequence[int]]) -> np.ndarray:
    return np.asarray([len(t) for t in truth], dtype=np.float64)


def token_recovery(truth: Sequence[Sequence[int]], predictions: Predictions) -> float:
    """Fraction of the victims' tokens recovered (micro: all tokens pooled); NaN when there
    are none."""
    hits, lengths = token_hits(truth, predictions)
    total = lengths.sum()
    return float(hits.sum() / total) if total else float("nan")


def frequency_hits(truth: Sequence[Sequence[int]], token: int) -> np.ndarray:
    """Per victim, how many of its tokens equal ``token``."""
    return np.asarray([np.sum(np.asarray(t) == token) for t in truth], dtype=np.float64)


def frequency_guess(truth: Sequence[Sequence[int]], token: int | None) -> float:
    """Token recovery (and token F1) of guessing ``token`` at every position: the level an
    inversion falls to when the release carries nothing about the originals."""
    total = sum(len(t) for t in truth)
    if token is None or total == 0:
        return float("nan")
    return float(frequency_hits(truth, token).sum() / total)


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


def _token_counts(truth: Sequence[Sequence[int]], guess: Sequence[Sequence[int]]) -> np.ndarray:
    if len(guess) != len(truth):
        raise ValueError(f"The attack returned {len(guess)} documents for {len(truth)} victims.")
    return multiset_counts(
        (Counter(np.asarray(t).tolist()), Counter(np.asarray(g).tolist()))
        for t, g in zip(truth, guess, strict=True)
    )


def token_f1(truth: Sequence[Sequence[int]], guess: Sequence[Sequence[int]]) -> dict[str, float]:
    """Bag-of-tokens precision, recall and F1 (Song & Raghunathan's inversion score):
    per document the multiset overlap of predicted and original ids, micro-averaged."""
    return prf(_token_counts(truth, guess))


# -------------------------------------------------------------------------------------------
# Embedding reconstruction error
# -------------------------------------------------------------------------------------------


def embedding_errors(
    truth: Truth, predictions: Predictions, guess: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Per victim: the summed squared error between reconstructed vectors and the embeddings
    of the original tokens they stand for (positions paired by :func:`align_positions` on
    ``meta["released_tokens"]``, else position by position), the number of coordinates
    compared, and, when a ``guess`` vector is given, the squared error of putting it at the
    same positions (the no-information baseline)."""
    if predictions.vectors is None or truth.embeddings is None:
        raise ValueError("embedding_mse needs predicted vectors and the backbone embeddings.")
    released = predictions.meta.get("released_tokens")
    if len(predictions.vectors) != len(truth.tokens):
        raise ValueError(
            f"The attack returned {len(predictions.vectors)} documents for "
            f"{len(truth.tokens)} victims."
        )
    n = len(truth.tokens)
    sq, count = np.zeros(n), np.zeros(n)
    base = None if guess is None else np.zeros(n)
    guess_vec = None if guess is None else np.asarray(guess, np.float32)
    for d, (orig, vecs) in enumerate(zip(truth.tokens, predictions.vectors, strict=True)):
        vecs = np.asarray(vecs, dtype=np.float32).reshape(len(vecs), -1)
        rel = released[d] if released is not None else np.arange(len(vecs))
        i, j = align_positions(orig, rel) if released is not None else _positional(orig, vecs)
        if len(i) == 0:
            continue
        target = truth.embeddings[np.asarray(orig)[i]]
        diff = vecs[j] - target
        sq[d] = float(np.sum(diff.astype(np.float64) ** 2))
        count[d] = diff.size
        if base is not None:
            base[d] = float(np.sum((guess_vec - target).astype(np.float64) ** 2))
    return sq, count, base


def embedding_mse(truth: Truth, predictions: Predictions) -> float:
    """Mean squared error per coordinate between reconstructed vectors and the embeddings of
    the original tokens they stand for (:func:`embedding_errors`, pooled over victims)."""
    sq, count, _ = embedding_errors(truth, predictions)
    return float(sq.sum() / count.sum()) if count.sum() else float("nan")


def _positional(orig: Sequence[int], vecs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    idx = np.arange(min(len(orig), len(vecs)))
    return idx, idx


# -------------------------------------------------------------------------------------------
# Entities and texts
# -------------------------------------------------------------------------------------------


def _need_tokens(truth: Truth) -> np.ndarray:
    lengths = _lengths(truth.tokens)
    if not lengths.sum():
        raise NotScorable("the victims have no tokens to recover (empty after tokenization)")
    return lengths


def _frequency_baseline(truth: Truth, details: dict[str, Any], f1: bool = False) -> Outcome | None:
    """Token metrics' baseline: guessing the aux's most frequent token everywhere (as a
    recovery ratio, or as the F1 of that guess, which has the same value)."""
    if truth.frequent_token is None:
        return None
    hits, lengths = frequency_hits(truth.tokens, truth.frequent_token), _lengths(truth.tokens)
    docs = truth.doc_indices()
    outcome = Outcome.f1(hits, lengths, lengths, docs) if f1 else Outcome.ratio(hits, lengths, docs)
    value = outcome.value()
    if np.isfinite(value):
        details["frequency_guess"] = value
    return outcome


def _score_token_recovery(
    spec: MetricSpec,
    predictions: Predictions,
    truth: Truth,
    details: dict[str, Any],
    release: Release | None,
) -> list[dict[str, Any]]:
    hits, lengths = token_hits(truth.tokens, predictions)
    _need_tokens(truth)
    baseline = _frequency_baseline(truth, details)
    outcome = Outcome.ratio(hits, lengths, truth.doc_indices())
    return [spec.row(outcome, details, baseline)]


def _score_token_f1(
    spec: MetricSpec,
    predictions: Predictions,
    truth: Truth,
    details: dict[str, Any],
    release: Release | None,
) -> list[dict[str, Any]]:
    counts = _token_counts(truth.tokens, predictions.tokens or [])
    _need_tokens(truth)
    baseline = _frequency_baseline(truth, details, f1=True)
    s = prf(counts)
    details |= {"precision": s["precision"], "recall": s["recall"]}
    details["token_recovery"] = token_recovery(truth.tokens, predictions)
    outcome = Outcome.f1(counts[:, 0], counts[:, 1], counts[:, 2], truth.doc_indices())
    return [spec.row(outcome, details, baseline)]


def _score_embedding_mse(
    spec: MetricSpec,
    predictions: Predictions,
    truth: Truth,
    details: dict[str, Any],
    release: Release | None,
) -> list[dict[str, Any]]:
    _need_tokens(truth)
    _frequency_baseline(truth, details)  # its token recovery, a detail
    guess = truth.mean_embedding
    if guess is None and truth.frequent_token is not None and truth.embeddings is not None:
        guess = truth.embeddings[int(truth.frequent_token)]
    sq, count, base = embedding_errors(truth, predictions, guess)
    if not count.sum():
        raise NotScorable("no reconstructed position lines up with a victim token")
    details["token_recovery"] = token_recovery(truth.tokens, predictions)
    docs = truth.doc_indices()
    baseline = None if base is None else Outcome.ratio(base, count, docs)
    return [spec.row(Outcome.ratio(sq, count, docs), details, baseline)]


TOKEN_RECOVERY = MetricSpec(
    name="token_recovery",
    family="text",
    higher_is_stronger=True,
    prediction_kind="tokens",
    needs=("tokens", "frequent_token"),
    reducer="ratio",
    scorer=_score_token_recovery,
    baseline=Baseline("frequent-token guess"),
    description="fraction of the victims' tokens recovered, position by position",
)
TOKEN_F1 = MetricSpec(
    name="token_f1",
    family="text",
    higher_is_stronger=True,
    prediction_kind="tokens",
    needs=("tokens", "frequent_token"),
    reducer="f1",
    scorer=_score_token_f1,
    baseline=Baseline("frequent-token guess"),
    description="micro F1 of the bags of predicted and original tokens",
)
EMBEDDING_MSE = MetricSpec(
    name="embedding_mse",
    family="text",
    higher_is_stronger=False,
    bounded=False,
    prediction_kind="tokens",
    needs=("tokens", "embeddings", "mean_embedding"),
    reducer="ratio",
    scorer=_score_embedding_mse,
    baseline=Baseline("mean-embedding guess"),
    display="embedding MSE",
    description="mean squared error per coordinate of the reconstructed input embeddings",
)
