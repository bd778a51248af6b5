"""The Hide-and-Seek (HaS) entity protocol, shared by the defense and the attacks that read it.

What the ``has`` defense emits and what ``has-deanonymization`` and ``ner`` read is defined once
here, below both defenses and attacks (beside the models, not in ``mechanisms/``: its NER
runner loads the pipeline through :mod:`privaudit.models.pipelines`, which itself builds on
``mechanisms``):

- :func:`spacy_entities`: the spaCy NER runner (``(start, end, label)`` spans per text);
- :func:`word_pattern`: a string as a whole word, the unit HaS hides and searches;
- :func:`repeats` / :func:`propagate`: every further whole-word, verbatim occurrence of a
  detected entity string (HaS hides repeats, as an LLM hide model rewriting the prompt would);
- :data:`PLACEHOLDER` / :func:`placeholder`: the label-mode placeholder ``<TYPE_n>``;
- the hide model's surrogate vocabulary that its white-box attacker also knows
  (:data:`RELATIVE_DATES`, :func:`faker_first_names`, :func:`faker_countries`);
- the small word lists shared by the corpus generator, HaS and its attacker (:data:`MONTHS`,
  :data:`WEEKDAYS`, :data:`PERSON_TITLES`).

spaCy and faker are imported lazily, when a function needs them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from privaudit.models.pipelines import ner_pipeline

Span = tuple[int, int, str]  # (start, end, type): character offsets in the text it was found in

MONTHS: tuple[str, ...] = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS: tuple[str, ...] = (
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
)
PERSON_TITLES: frozenset[str] = frozenset(
    {"mr", "mrs", "ms", "miss", "dr", "prof", "sir", "dame", "lady", "lord"}
)

_BATCH_SIZE = 128  # measured: 128 is the fastest of 32/128/256 for en_core_web_sm on reviews
_CUTS = (re.compile(r"\n\s*"), re.compile(r"[.!?]\s+"), re.compile(r"\s+"))

# A label-mode placeholder, ``<PERSON_1>``: group 1 the type, group 2 the number. The type
# starts with a letter, as every OntoNotes label does. (The defense once matched
# ``<([A-Z_]+?)_(\d+)>``, which also takes a leading underscore, ``<_X_1>``; HaS never emits
# one, so the two agree on every mapping hide() returns. The attack scans whole released
# texts, whose unhidden words are the author's own, so only this stricter form keeps its
# output unchanged on an input that happens to contain ``<_X_1>``.)
PLACEHOLDER = re.compile(r"<([A-Z][A-Z_]*?)_(\d+)>")

# HaS's own relative-date surrogates; a white-box attacker knows this vocabulary too.
RELATIVE_DATES: tuple[str, ...] = (
    "last week",
    "last month",
    "two weeks ago",
    "a few days ago",
    "last spring",
    "last autumn",
    "earlier this year",
    "three months ago",
    "the other day",
    "last year",
    "a while back",
)


#: The type of an identifier found by pattern (:func:`identifier_spans`), not by the NER.
IDENTIFIER = "ID"
# Identifiers an NER misses (Presidio's pattern recognizers cover the same ground), most
# specific first; each match is one identifier. Application and case numbers as the ECHR
# writes them (36110/97, 2-123/2005), e-mail addresses, URLs, IBANs, phone numbers (7+
# digits in 3+ groups), codes that mix capitals and digits (AB123456, C-1234), and any run of
# 5+ digits (registration and file numbers; a year has 4).
IDENTIFIER_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(p)
    for p in (
        r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+",
        r"(?:https?://|www\.)[^\s<>\"]*[^\s<>\".,;:!?)\]]",
        r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){3,7}\b",
        r"(?<![\w/])(?:[A-Z]{1,4}[-‑]?)?\d+(?:[-‑.]\d+)*/\d{2,4}\b(?!/)",
        r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,4}(?:[ .-]\d{2,4}){2,4}(?![\w])",
        r"\b(?=[A-Z0-9-]*\d)(?=[A-Z0-9-]*[A-Z])[A-Z0-9](?:[A-Z0-9]|-(?=[A-Z0-9])){4,}\b",
        r"\b\d{5,}\b",
    )
)


def identifier_spans(text: str) -> list[Span]:
    """Identifiers found by :data:`IDENTIFIER_PATTERNS` (type :data:`IDENTIFIER`), sorted,
    none overlapping: an earlier pattern's match wins, then the longer one. A phone-number
    match needs 7 digits or more (so "12 May 2001" style numbers are left to the NER)."""
    taken = np.zeros(len(text) + 1, dtype=bool)
    out: list[Span] = []
    for k, pattern in enumerate(IDENTIFIER_PATTERNS):
        for m in pattern.finditer(text):
            if k == 4 and sum(c.isdigit() for c in m.group()) < 7:
                continue
            if not taken[m.start() : m.end()].any():
                taken[m.start() : m.end()] = True
                out.append((m.start(), m.end(), IDENTIFIER))
    return sorted(out)


def with_identifiers(text: str, ents: Iterable[Span]) -> list[Span]:
    """NER spans plus :func:`identifier_spans`; an NER span that overlaps an identifier gives
    way to it (spaCy reads 36110/97 as a DATE or CARDINAL, in part or whole)."""
    ids = identifier_spans(text)
    taken = np.zeros(len(text) + 1, dtype=bool)
    for s, e, _ in ids:
        taken[s:e] = True
    return sorted([x for x in ents if not taken[x[0] : x[1]].any()] + ids)


def placeholder(etype: str, n: int) -> str:
    """The ``n``-th placeholder of type ``etype``: ``placeholder("PERSON", 1) == "<PERSON_1>"``
    (:data:`PLACEHOLDER` reads it back)."""
    return f"<{etype}_{n}>"


def word_pattern(s: str, flags: int = 0) -> re.Pattern[str]:
    """``s`` as a whole word: no word character may touch a word-character edge."""
    head = r"(?<!\w)" if re.match(r"\w", s) else ""
    tail = r"(?!\w)" if re.search(r"\w$", s) else ""
    return re.compile(head + re.escape(s) + tail, flags)


def repeats(text: str, covered: Iterable[tuple[int, int]], types: Mapping[str, str]) -> list[Span]:
    """Every whole-word, verbatim occurrence in ``text`` of each string of ``types`` (string →
    type) that overlaps neither a ``covered`` ``(start, end)`` nor an occurrence found before
    it. Longest string first ("Sarah Jones" before "Sarah"), ties in the mapping's order."""
    taken = np.zeros(len(text) + 1, dtype=bool)
    for s, e in covered:
        taken[s:e] = True
    out: list[Span] = []
    for string in sorted(types, key=len, reverse=True):
        for m in word_pattern(string).finditer(text):
            if not taken[m.start() : m.end()].any():
                taken[m.start() : m.end()] = True
                out.append((m.start(), m.end(), types[string]))
    return out


def propagate(text: str, ents: Iterable[Span]) -> list[Span]:
    """NER spans plus every further whole-word, verbatim occurrence of a detected string (its
    type: that of the string's first detection), sorted."""
    spans = sorted(ents)
    types: dict[str, str] = {}
    for s, e, t in spans:
        types.setdefault(text[s:e], t)
    return sorted(spans + repeats(text, [(s, e) for s, e, _ in spans], types))


def _chunks(text: str, size: int) -> list[tuple[int, str]]:
    """``(offset, piece)`` pieces of at most ``size`` characters. Cut after the last line
    break, else sentence end, else whitespace in the window, so entities are rarely split."""
    out, pos = [], 0
    while len(text) - pos > size:
        cut = pos + size  # no whitespace at all: a hard cut is all there is
        for pattern in _CUTS:
            ends = [m.end() for m in pattern.finditer(text, pos, pos + size) if m.end() > pos]
            if ends:
                cut = ends[-1]
                break
        out.append((pos, text[pos:cut]))
        pos = cut
    out.append((pos, text[pos:]))
    return out


def spacy_entities(
    texts: Sequence[str],
    spacy_model: str | None = None,
    *,
    types: frozenset[str] | None = None,
    chunk: int | None = None,
) -> list[list[Span]]:
    """spaCy NER spans ``(start, end, label)`` per text, whitespace-trimmed, in order.

    ``types``: keep only these labels (all if None). ``chunk``: run spaCy on pieces of at most
    that many characters (cut at a line break, sentence end or whitespace; offsets are the
    text's), which bounds memory on long texts; None runs each text whole. Only the ``ner``
    pipe and the components it listens to run (identical entities, ~2.5x faster than the full
    pipeline); texts go through ``nlp.pipe`` in batches; empty or whitespace-only texts (and
    pieces) are skipped."""
    out: list[list[Span]] = [[] for _ in texts]
    jobs = [
        (i, off, piece)
        for i, text in enumerate(texts)
        for off, piece in (_chunks(text, chunk) if chunk is not None else [(0, text)])
        if piece.strip()  # nothing to find in empty or whitespace-only text
    ]
    if not jobs:
        return out
    nlp = ner_pipeline(spacy_model)
    keep = {"ner"} | {
        name for name, pipe in nlp.pipeline if "ner" in getattr(pipe, "listening_components", ())
    }
    disable = [name for name in nlp.pipe_names if name not in keep]
    longest = max(len(piece) for _, _, piece in jobs)
    if longest >= nlp.max_length:  # NER needs no parser memory; raising the cap is safe
        nlp.max_length = longest + 1
    docs = nlp.pipe((p for _, _, p in jobs), batch_size=_BATCH_SIZE, disable=disable)
    for (i, off, piece), doc in zip(jobs, docs, strict=True):
        for ent in doc.ents:
            if types is not None and ent.label_ not in types:
                continue
            s, e = ent.start_char, ent.end_char
            raw = piece[s:e]
            s += len(raw) - len(raw.lstrip())
            e -= len(raw) - len(raw.rstrip())
            if e > s:
                out[i].append((off + s, off + e, ent.label_))
    return out


def _faker_words(provider: str, attribute: str) -> frozenset[str]:
    """A faker en_US provider's word list, case-folded (a generative surrogate's source);
    empty without faker."""
    import importlib

    try:
        module = importlib.import_module(f"faker.providers.{provider}.en_US")
    except ImportError:  # pragma: no cover - faker is a dependency of the defense
        return frozenset()
    return frozenset(w.casefold() for w in getattr(module.Provider, attribute, ()))


@functools.cache
def faker_first_names() -> frozenset[str]:
    """faker en_US first names, case-folded."""
    return _faker_words("person", "first_names")


@functools.cache
def faker_countries() -> frozenset[str]:
    """faker en_US countries, case-folded."""
    return _faker_words("address", "countries")
