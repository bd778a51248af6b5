"""Input checks shared by every defense's ``privatize`` and every attack that reads texts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def check_texts(texts: object, name: str | None = None) -> list[str]:
    """A list of strings, or a clear ``TypeError`` saying what arrived instead.

    ``name``: the attack reading a text release's texts, named in its errors; None (a
    defense's ``privatize()`` input) keeps the messages about ``privatize()``."""
    who = "privatize()" if name is None else f"{name}: a text release"
    prefix = "" if name is None else f"{name}: "
    if isinstance(texts, str):
        raise TypeError(
            f"{who} takes a sequence of documents, got a single string; wrap it: [text]."
        )
    if not isinstance(texts, Sequence):
        raise TypeError(f"{who} takes a sequence of strings, got {type(texts).__name__}.")
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        i = bad[0]
        raise TypeError(
            f"{prefix}Document {i} is a {type(texts[i]).__name__}, not a string "
            f"({len(bad)} non-string document(s) in all)."
        )
    return list(texts)


def check_rng(rng: object) -> np.random.Generator:
    """``rng`` itself if it is a numpy ``Generator``, else a ``TypeError`` naming the fix."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            "rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(0)), "
            f"got {type(rng).__name__}."
        )
    return rng
