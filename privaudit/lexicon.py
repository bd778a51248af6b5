"""Small word lists shared by the corpus generator, Hide-and-Seek and its attacker (one copy)."""

from __future__ import annotations

MONTHS: tuple[str, ...] = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
WEEKDAYS: tuple[str, ...] = (
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
)  # fmt: skip
PERSON_TITLES: frozenset[str] = frozenset(
    {"mr", "mrs", "ms", "miss", "dr", "prof", "sir", "dame", "lady", "lord"}
)
