"""Micro precision, recall and F1 of per-document multisets: the counting shared by the token,
word and entity metrics."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import numpy as np


def multiset_counts(docs: Iterable[tuple[Counter, Counter]]) -> np.ndarray:
    """Per document (truth, guess) multisets → (overlap, predicted, true) counts, (n, 3)."""
    rows = [(sum((ct & cg).values()), sum(cg.values()), sum(ct.values())) for ct, cg in docs]
    return np.asarray(rows, dtype=np.float64).reshape(-1, 3)


def prf(counts: np.ndarray) -> dict[str, float]:
    """Micro precision, recall and F1 of per-document (overlap, predicted, true) ``counts``
    summed over documents: precision 0 when nothing was predicted; recall and F1 NaN when
    there was nothing to find; F1 = 2·overlap / (predicted + true), which equals
    2PR / (P + R) whenever both are defined and is 0 when nothing was found."""
    hit, n_pred, n_true = (float(x) for x in np.asarray(counts, np.float64).reshape(-1, 3).sum(0))
    return {
        "precision": hit / n_pred if n_pred else 0.0,
        "recall": hit / n_true if n_true else float("nan"),
        "f1": 2 * hit / (n_pred + n_true) if n_true else float("nan"),
    }
