"""Words as the bag-of-words and generation metrics count them, and the stop words set aside.

One definition serves the attacks that predict words (``bow-inversion``) or text (``geia``) and
the scorers that judge them, so that a prediction and its truth are always cut the same way:
NFKD-normalised, accents dropped, case-folded runs of letters and digits (``"Zoë's café"`` →
``["zoe", "s", "cafe"]``). Dropping accents and case matches what an uncased WordPiece
tokenizer (the default backbone's) can give back, so a decoded text is not penalised for case
or accents it could never produce.
"""

from __future__ import annotations

import functools
import re
import unicodedata

_WORD = re.compile(r"[^\W_]+")
# Fragments that splitting at apostrophes leaves ("I've" → "i", "ve"): function words too.
_CONTRACTION_PARTS = frozenset({"s", "t", "ve", "ll", "d", "m", "re", "nt"})


def normalise(text: str) -> str:
    """``text`` case-folded, NFKD-normalised and without combining marks (accents)."""
    decomposed = unicodedata.normalize("NFKD", str(text).casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def words(text: str) -> list[str]:
    """The words of ``text``, in order (see the module docstring)."""
    return _WORD.findall(normalise(text))


@functools.cache
def stop_words() -> frozenset[str]:
    """scikit-learn's English stop-word list (318 words) plus contraction fragments."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS) | _CONTRACTION_PARTS


def entity_words(entities: list[dict]) -> set[str]:
    """The content (non-stop) words of a document's named-entity spans (``{"text", ...}``)."""
    stop = stop_words()
    return {w for e in entities for w in words(str(e.get("text", ""))) if w not in stop}
