"""The author habits of ``synthetic-reviews`` under ``persona``: each author's pet phrase and
sign-off, appended to their reviews so that a review betrays *who* wrote it (for
re-identification; off by default).

:func:`add_personas` is called by :func:`privaudit.corpora.synthetic.synthetic_reviews` with
its own random stream, after the rest of the corpus is drawn, so the default corpus is
untouched. Each author's habits are picked from these tuples by index with that seeded rng, so
editing a table, or reordering one, changes every corpus generated with ``persona``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: An author's habits under ``persona``: one pet phrase and one sign-off each (400 pairs).
PERSONA_PHRASES = (
    "No joke.",
    "Honestly though.",
    "Make of that what you will.",
    "Just saying.",
    "Fair play.",
    "Mark my words.",
    "Go figure.",
    "Long story short.",
    "For what it's worth.",
    "Swings and roundabouts.",
    "Each to their own.",
    "Bob's your uncle.",
    "There you have it.",
    "Take it or leave it.",
    "Enough said.",
    "Lesson learned.",
    "Food for thought.",
    "Cards on the table.",
    "Watch this space.",
    "You heard it here first.",
)
PERSONA_SIGNOFFS = (
    "Cheers!",
    "Peace.",
    "Ta-ra.",
    "Over and out.",
    "Rant over.",
    "Toodles.",
    "Laters.",
    "Stay sane.",
    "Ciao for now.",
    "Happy hunting.",
    "Mind how you go.",
    "Onwards.",
    "That's me done.",
    "Be lucky.",
    "Keep well.",
    "Ta very much.",
    "Right, off I pop.",
    "Until next time.",
    "Chin up.",
    "Bye for now.",
)


def add_personas(
    rows: list[dict[str, Any]], n_authors: int, rate: float, rng: np.random.Generator
) -> None:
    """Append each author's pet phrase and sign-off to their reviews, each with probability
    ``rate`` (entity offsets stay valid: text is only added at the end)."""
    habits = [
        (
            PERSONA_PHRASES[int(rng.integers(len(PERSONA_PHRASES)))],
            PERSONA_SIGNOFFS[int(rng.integers(len(PERSONA_SIGNOFFS)))],
        )
        for _ in range(n_authors)
    ]
    for row in rows:
        phrase, signoff = habits[int(row["author"].split("-")[1])]
        tail = [t for t in (phrase, signoff) if rng.random() < rate]
        if tail:
            row["text"] = " ".join([row["text"], *tail])
