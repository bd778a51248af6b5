"""What a white-box ``has-deanonymization`` knows of the hide model, as candidate filters.

HaS's behaviour turned into rules: a replacement's candidates exclude strings left verbatim
elsewhere in the document (the hide model would have hidden them too) and keep the shape a
faker surrogate copies from its original (:func:`surrogate_shape`); the hide model's surrogate
vocabulary (its relative dates, faker en_US city and company formats) finds surrogates the NER
misses (:func:`vocabulary_spans`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from privaudit.attacks._has_spans import Ner, ReplacedSpan
from privaudit.models.entities import (
    MONTHS,
    PERSON_TITLES,
    PLACEHOLDER,
    RELATIVE_DATES,
    WEEKDAYS,
    faker_countries,
    faker_first_names,
    word_pattern,
)


def blank_out(text: str, spans: Sequence[ReplacedSpan]) -> str:
    chars = list(text)
    for sp in spans:
        chars[sp.start : sp.end] = [" "] * (sp.end - sp.start)
    return "".join(chars)


def not_used(sp: ReplacedSpan, used: set[str]) -> Callable[[str], bool]:
    released = sp.released.casefold()

    def allowed(candidate: str) -> bool:
        c = candidate.casefold()
        return c not in used and c != released and (sp.placeholder or c not in released)

    return allowed


def white_filter(sp: ReplacedSpan, outside: str, used: set[str]) -> Callable[[str], bool]:
    """Candidates the hide model's behaviour allows for this replacement."""
    base = not_used(sp, used)
    shape = None if sp.placeholder else surrogate_shape(sp.released, sp.type)

    def allowed(candidate: str) -> bool:
        if not base(candidate):
            return False
        if word_pattern(candidate).search(outside):  # a verbatim original would be hidden too
            return False
        return shape is None or surrogate_shape(candidate, sp.type) == shape

    return allowed


def surrogate_shape(s: str, etype: str) -> tuple[Any, ...] | None:
    """The form a faker surrogate keeps from its original (as HaS's generative hide model
    shapes it: ``privaudit.defenses._has_surrogates._fake_like``)."""
    words = s.split()
    if etype == "PERSON":
        if len(words) >= 2 and words[0].rstrip(".").lower() in PERSON_TITLES:
            return ("title", words[0])
        if len(words) == 1:
            return ("first",) if s.casefold() in faker_first_names() else ("last",)
        return ("full",)
    if etype == "GPE":
        return ("country",) if s.casefold().removeprefix("the ") in faker_countries() else ("city",)
    if etype == "DATE":
        has_month = any(m in s for m in MONTHS)
        has_year = re.search(r"\b(1[89]|20)\d\d\b", s) is not None
        has_day = re.search(r"\b\d{1,2}(st|nd|rd|th)?\b", s) is not None
        if has_month and has_year and has_day:
            return ("mdy", s[:1].isalpha())
        if has_month:
            return ("my",) if has_year else ("md", has_day)
        if has_year:
            return ("y",)
        if any(w in s for w in WEEKDAYS):
            return ("weekday",)
        return ("digits",) if re.search(r"\d", s) else ("relative",)
    return None


@functools.cache
def _vocabulary_patterns() -> dict[str, re.Pattern[str]]:
    """Per type, what the hide model's faker surrogates look like (en_US formats)."""
    try:
        from faker.providers.address.en_US import Provider as Address
        from faker.providers.company.en_US import Provider as Company
        from faker.providers.person.en_US import Provider as Person
    except ImportError:  # pragma: no cover - faker is a dependency of the defense
        return {}

    def alt(words: Sequence[str]) -> str:
        return "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))

    firsts, lasts = alt(list(Person.first_names)), alt(list(Person.last_names))
    prefix, suffix = alt(Address.city_prefixes), alt(Address.city_suffixes)
    company = alt(Company.company_suffixes)
    return {
        "GPE": re.compile(
            rf"\b(?:(?:{prefix}) (?:{firsts})(?:{suffix})?|(?:{firsts}|{lasts})(?:{suffix}))\b"
        ),
        "ORG": re.compile(
            rf"\b(?:(?:{lasts}), (?:{lasts}) and (?:{lasts})|(?:{lasts})-(?:{lasts})"
            rf"|(?:{lasts}) (?:{company}))\b"
        ),
        "DATE": re.compile(rf"\b(?:{alt(RELATIVE_DATES)})\b"),
    }


def vocabulary_spans(
    text: str, spans: Sequence[Ner], types: frozenset[str]
) -> list[tuple[int, int, str, str]]:
    """``(start, end, type, family)`` of hide-vocabulary strings outside ``spans``."""
    taken = np.zeros(len(text) + 1, dtype=bool)
    for st, en, _ in spans:
        taken[st:en] = True
    for m in PLACEHOLDER.finditer(text):
        taken[m.start() : m.end()] = True
    out = []
    for etype, pattern in _vocabulary_patterns().items():
        if etype not in types:
            continue
        for m in pattern.finditer(text):
            if not taken[m.start() : m.end()].any():
                taken[m.start() : m.end()] = True
                family = m.group(0) if etype == "DATE" else etype
                out.append((m.start(), m.end(), etype, family))
    return sorted(out)
