"""The keyword lexicon that gives each SynthPAI comment its utility label, a coarse topic.

SynthPAI has no topic field, so :func:`topic_of` derives one: each topic's words are counted in
the lower-cased comment (whole words; an entry ending in ``*`` also matches the words it
starts), the topic with the most hits wins, a tie goes to the topic listed first in
:data:`TOPIC_WORDS`, and a comment with no hit is ``other``. The lexicon is fixed data, so the
label is a deterministic function of the text. Words that name a private attribute's value
outright ("married", "divorced", "phd", "salary") are left out on purpose, so the topic is what
the comment talks about, not who its author is; topics and attributes still correlate (a
comment about the family is more often by someone married), as any real forum's would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

OTHER = "other"

#: Each topic's words, specific topics first (a tie goes to the earlier one): the fixed lexicon
#: in ``privaudit/data/synthpai/topic_words.json``, our own data (not SynthPAI's).
TOPIC_WORDS: dict[str, tuple[str, ...]] = {
    topic: tuple(words)
    for topic, words in json.loads(
        (Path(__file__).parent.parent / "data" / "synthpai" / "topic_words.json").read_text(
            encoding="utf-8"
        )
    ).items()
}

_WORD = re.compile(r"[\w'’-]+")  # a word, apostrophes and hyphens kept ("in-laws", "kid's")


def _pattern(words: Sequence[str]) -> re.Pattern[str]:
    """One regex for a topic: exact words, and prefixes for entries ending in ``*``."""
    parts = [re.escape(w[:-1]) + r"[\w'’-]*" if w.endswith("*") else re.escape(w) for w in words]
    return re.compile(r"(?<![\w'’-])(?:" + "|".join(parts) + r")(?![\w'’-])")


_PATTERNS = {topic: _pattern(words) for topic, words in TOPIC_WORDS.items()}


def topic_hits(texts: Sequence[str]) -> pd.DataFrame:
    """Each text's count of each topic's words (one column per topic, in lexicon order)."""
    import pandas as pd  # lazy: `privaudit list` imports synthpai, never pandas

    lowered = pd.Series(list(texts), dtype=object).str.lower()
    return pd.DataFrame({t: lowered.str.count(p) for t, p in _PATTERNS.items()})


def topic_of(texts: Sequence[str]) -> np.ndarray:
    """Each text's topic: the most hits, a tie to the earlier topic, ``other`` with none."""
    hits = topic_hits(texts)
    best = hits.to_numpy().argmax(axis=1)  # argmax takes the first maximum: the tie rule
    topics = np.asarray(list(TOPIC_WORDS), dtype=object)[best]
    return np.where(hits.to_numpy().max(axis=1) > 0, topics, OTHER).astype(str)
