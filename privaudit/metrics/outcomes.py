"""Per-document outcomes and the bootstrap over test documents.

Every score privaudit reports (utility, an attack's score, its no-information baseline) is a
function of sums over the victims (test documents) of small per-document vectors: hits and
totals for a recovery rate, (hits, predicted, true) for a micro F1, per-class counts for
balanced accuracy or macro-F1. An :class:`Outcome` keeps those vectors, one row per document,
and the ``reducer`` that turns their sum into the score. Any statistic over documents can then
be recomputed without re-running a cell; in particular a **bootstrap resample** is a vector of
document multiplicities ``w`` (how often each test document was drawn), and the resampled
score is ``reducer(w @ stats)``: B resamples of every cell of a run are one matrix product.

One set of resamples per run (:func:`bootstrap_weights`, seeded from the run) is shared by
every cell, so two defenses' scores on resample b are computed on the same documents:
differences between them, ranks, and minima over attacks get *paired* intervals.

Reducers (``sums`` has the statistics summed over documents, last axis ``k``):

- ``ratio``: ``sums[0] / sums[1]`` (recovery = hits / tokens, mean = value / 1, MSE =
  squared error / coordinates);
- ``f1``: ``2·hit / (n_pred + n_true)`` from (hit, n_pred, n_true): micro F1 (0 when nothing
  was predicted and something was there; NaN when there was nothing to find);
- ``balanced_accuracy``: per-class (correct, count) pairs → the mean recall over the classes
  present;
- ``macro_f1``: per-class (tp, fp, fn) triples → the mean F1 over the classes that occur in the
  truth or the predictions (scikit-learn's ``average="macro"`` with ``zero_division=0``).

Intervals are percentile intervals (:func:`interval`, ``numpy.nanpercentile``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

Reducer = Literal["ratio", "f1", "balanced_accuracy", "macro_f1"]
REDUCERS: tuple[str, ...] = ("ratio", "f1", "balanced_accuracy", "macro_f1")

#: Default number of bootstrap resamples.
N_BOOTSTRAP = 1000
#: Default interval level.
LEVEL = 0.95


def reduce(reducer: str, sums: np.ndarray) -> np.ndarray:
    """The score of summed statistics ``sums`` (..., k), vectorised over leading axes."""
    s = np.asarray(sums, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        if reducer == "ratio":
            return np.where(s[..., 1] > 0, s[..., 0] / s[..., 1], np.nan)
        if reducer == "f1":
            hit, pred, true = s[..., 0], s[..., 1], s[..., 2]
            f1 = np.where(pred + true > 0, 2 * hit / (pred + true), 0.0)
            return np.where(true > 0, f1, np.nan)
        if reducer == "balanced_accuracy":
            pairs = s.reshape(*s.shape[:-1], -1, 2)
            correct, count = pairs[..., 0], pairs[..., 1]
            present = count > 0
            recall = np.where(present, correct / np.where(present, count, 1), 0.0)
            n = present.sum(axis=-1)
            return np.where(n > 0, recall.sum(axis=-1) / np.maximum(n, 1), np.nan)
        if reducer == "macro_f1":
            trip = s.reshape(*s.shape[:-1], -1, 3)
            tp, fp, fn = trip[..., 0], trip[..., 1], trip[..., 2]
            seen = (tp + fp + fn) > 0
            f1 = np.where(seen, 2 * tp / np.where(seen, 2 * tp + fp + fn, 1), 0.0)
            n = seen.sum(axis=-1)
            return np.where(n > 0, f1.sum(axis=-1) / np.maximum(n, 1), np.nan)
    raise ValueError(f"Unknown reducer {reducer!r}; the reducers are {', '.join(REDUCERS)}.")


@dataclass(frozen=True)
class Outcome:
    """Per-document sufficient statistics of one score (see the module docstring).

    ``stats`` is (n, k), one row per scored document; ``docs`` the test-document index of each
    row (an attack that ran on a subset scores fewer documents than the test split).
    """

    reducer: str
    stats: np.ndarray
    docs: np.ndarray

    def __post_init__(self) -> None:
        if self.reducer not in REDUCERS:
            raise ValueError(f"Unknown reducer {self.reducer!r}; use one of {REDUCERS}.")
        stats = np.asarray(self.stats, dtype=np.float64)
        if stats.ndim != 2:
            raise ValueError(f"Outcome stats must be 2-D (documents × k), got {stats.shape}.")
        docs = np.asarray(self.docs, dtype=np.int64).reshape(-1)
        if len(docs) != len(stats):
            raise ValueError(f"{len(docs)} document indices for {len(stats)} rows of stats.")
        object.__setattr__(self, "stats", stats)
        object.__setattr__(self, "docs", docs)

    # -- constructors --------------------------------------------------------------------

    @classmethod
    def ratio(
        cls,
        numerator: Sequence[float],
        denominator: Sequence[float] | float = 1.0,
        docs: Sequence[int] | None = None,
    ) -> Outcome:
        """Sum of ``numerator`` over sum of ``denominator`` (a mean when it is 1)."""
        num = np.asarray(numerator, dtype=np.float64).reshape(-1)
        den = np.broadcast_to(np.asarray(denominator, dtype=np.float64), num.shape)
        return cls("ratio", np.stack([num, den], axis=1), _docs(docs, len(num)))

    @classmethod
    def f1(
        cls,
        hit: Sequence[float],
        n_pred: Sequence[float],
        n_true: Sequence[float],
        docs: Sequence[int] | None = None,
    ) -> Outcome:
        """Micro F1 from per-document hits, predicted and true counts."""
        stats = np.stack([np.asarray(a, np.float64).reshape(-1) for a in (hit, n_pred, n_true)], 1)
        return cls("f1", stats, _docs(docs, len(stats)))

    @classmethod
    def classes(
        cls,
        y_true: Sequence[Any],
        y_pred: Sequence[Any],
        reducer: Literal["balanced_accuracy", "macro_f1"] = "balanced_accuracy",
        docs: Sequence[int] | None = None,
    ) -> Outcome:
        """Per-class one-hot statistics of a classification: balanced accuracy (per class
        correct and count) or macro-F1 (per class tp, fp, fn)."""
        t = [str(v) for v in y_true]
        p = [str(v) for v in y_pred]
        if len(t) != len(p):
            raise ValueError(f"{len(p)} predictions for {len(t)} true values.")
        labels = sorted(set(t) | set(p))
        index = {v: i for i, v in enumerate(labels)}
        ti = np.asarray([index[v] for v in t], dtype=np.int64)
        pi = np.asarray([index[v] for v in p], dtype=np.int64)
        n, c = len(t), max(len(labels), 1)
        hit = ti == pi
        if reducer == "balanced_accuracy":
            stats = np.zeros((n, c, 2))
            stats[np.arange(n), ti, 0] = hit
            stats[np.arange(n), ti, 1] = 1.0
        elif reducer == "macro_f1":
            stats = np.zeros((n, c, 3))
            stats[np.arange(n)[hit], ti[hit], 0] = 1.0
            stats[np.arange(n)[~hit], pi[~hit], 1] = 1.0
            stats[np.arange(n)[~hit], ti[~hit], 2] = 1.0
        else:
            raise ValueError(
                f"Outcome.classes takes balanced_accuracy or macro_f1, not {reducer!r}."
            )
        return cls(reducer, stats.reshape(n, -1), _docs(docs, n))

    # -- values --------------------------------------------------------------------------

    def value(self) -> float:
        """The score over every scored document."""
        return float(reduce(self.reducer, self.stats.sum(axis=0)))

    def resample(self, weights: np.ndarray) -> np.ndarray:
        """The score under each bootstrap resample: ``weights`` (B, n_test) are document
        multiplicities over the whole test split; this outcome's documents pick their
        columns. Returns (B,)."""
        w = np.asarray(weights)
        if self.docs.size and int(self.docs.max()) >= w.shape[1]:
            raise ValueError(
                f"Outcome documents go up to {int(self.docs.max())} but the resamples cover "
                f"{w.shape[1]} test documents."
            )
        n = len(self.docs)
        if (
            n == w.shape[1]
            and n
            and self.docs[0] == 0
            and self.docs[-1] == n - 1
            and bool(np.all(np.diff(self.docs) == 1))
        ):
            picked = w  # every document in order: no copy
        else:
            picked = w[:, self.docs]
        return reduce(self.reducer, picked @ self.stats)

    # -- storage -------------------------------------------------------------------------

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready form (integers stay integers, so a cell record stays small)."""
        stats = self.stats
        integral = bool(np.all(stats == np.round(stats)))
        values = stats.astype(np.int64).tolist() if integral else np.round(stats, 7).tolist()
        n = len(self.docs)
        contiguous = n == 0 or bool(np.array_equal(self.docs, np.arange(n)))
        return {
            "reducer": self.reducer,
            "docs": None if contiguous else self.docs.tolist(),
            "stats": values,
            "k": int(stats.shape[1]),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Outcome:
        stats = np.asarray(record["stats"], dtype=np.float64).reshape(-1, int(record["k"]))
        docs = record.get("docs")
        return cls(record["reducer"], stats, _docs(docs, len(stats)))


def _docs(docs: Sequence[int] | None, n: int) -> np.ndarray:
    return np.arange(n, dtype=np.int64) if docs is None else np.asarray(docs, dtype=np.int64)


def bootstrap_weights(n_docs: int, n_resamples: int = N_BOOTSTRAP, seed: int = 0) -> np.ndarray:
    """Document multiplicities of ``n_resamples`` bootstrap resamples of ``n_docs`` test
    documents (each row sums to ``n_docs``), (B, n) ``uint16``: the run's one set of
    resamples, the same for every cell."""
    if n_docs < 1:
        raise ValueError(f"A bootstrap needs at least one document, got {n_docs}.")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}.")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xB007]))
    idx = rng.integers(0, n_docs, size=(n_resamples, n_docs))
    weights = np.zeros((n_resamples, n_docs), dtype=np.uint16)
    np.add.at(weights, (np.arange(n_resamples)[:, None], idx), 1)
    return weights


def interval(samples: np.ndarray, level: float = LEVEL, axis: int = 0) -> tuple[Any, Any]:
    """The percentile interval of bootstrap ``samples`` along ``axis`` (NaN samples ignored;
    NaN when every sample is)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}.")
    a = np.asarray(samples, dtype=np.float64)
    tail = (1 - level) / 2 * 100
    with np.errstate(invalid="ignore"), quiet_nan():
        lo, hi = np.nanpercentile(a, [tail, 100 - tail], axis=axis)
    return (float(lo), float(hi)) if np.ndim(lo) == 0 else (lo, hi)


class quiet_nan:
    """Silence numpy's all-NaN slice warning (an all-NaN column has a NaN interval)."""

    def __enter__(self) -> None:
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)
