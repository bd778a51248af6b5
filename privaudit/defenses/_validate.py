"""Input checks shared by every defense's ``privatize``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def check_texts(texts: object) -> list[str]:
    """A list of strings, or a clear ``TypeError`` saying what arrived instead."""
    if isinstance(texts, str):
        raise TypeError(
            "privatize() takes a sequence of documents, got a single string; wrap it: [text]."
        )
    if not isinstance(texts, Sequence):
        raise TypeError(f"privatize() takes a sequence of strings, got {type(texts).__name__}.")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        i = bad[0]
        raise TypeError(
            f"Document {i} is a {type(texts[i]).__name__}, not a string "
            f"({len(bad)} non-string document(s) in all)."
        )
    return list(texts)


def check_rng(rng: object) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            "rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(0)), "
            f"got {type(rng).__name__}."
        )
    return rng
