"""Hide-and-Seek (HaS): anonymize named entities before a prompt leaves the client."""

from __future__ import annotations

import difflib
import functools
import itertools
import re
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

import numpy as np
from annotated_types import Ge, Le, MinLen, MultipleOf

from privaudit.api import Defense, Release
from privaudit.defenses._validate import check_rng, check_texts
from privaudit.lexicon import MONTHS, PERSON_TITLES, WEEKDAYS
from privaudit.mechanisms.seeding import seeded_torch
from privaudit.resources import ner_pipeline

if TYPE_CHECKING:
    from faker import Faker

# The 14 entity types HaS anonymizes (OntoNotes labels, as spaCy's English NER emits them).
HAS_TYPES: tuple[str, ...] = (
    "DATE", "MONEY", "PERCENT", "QUANTITY", "TIME", "GPE", "LOC", "PERSON", "WORK_OF_ART", "ORG",
    "NORP", "LAW", "FAC", "LANGUAGE",
)  # fmt: skip

# Privacy knob: each level hides a superset of the previous one (narrow → all).
PRESETS: dict[int, tuple[str, ...]] = {
    1: ("PERSON",),
    2: ("PERSON", "GPE", "LOC", "FAC"),
    3: ("PERSON", "GPE", "LOC", "FAC", "ORG", "NORP", "DATE", "TIME"),
    4: HAS_TYPES,
}
MODES: tuple[str, ...] = ("label", "generative")

EntityMap = list[dict[str, str]]  # one document's Hide mapping: original, replacement, type
Span = tuple[int, int, str]  # (start, end, type) in the original text's character offsets

_BATCH_SIZE = 128  # measured: 128 is the fastest of 32/128/256 for en_core_web_sm on reviews
_CHUNK = 100_000  # characters per spaCy call: keeps memory bounded, far below nlp.max_length
_SURROGATE_TRIES = 30
_PLACEHOLDER = re.compile(r"<([A-Z_]+?)_(\d+)>")
_RELATIVE_DATES = (
    "last week", "last month", "two weeks ago", "a few days ago", "last spring", "last autumn",
    "earlier this year", "three months ago", "the other day", "last year", "a while back",
)  # fmt: skip
_NORP = (
    "French", "German", "Canadian", "Brazilian", "Japanese", "Kenyan", "Norwegian", "Mexican",
    "Italian", "Egyptian", "Korean", "Spanish", "Dutch", "Swedish", "Polish", "Greek", "Chilean",
    "Nigerian", "Peruvian", "Turkish", "Vietnamese", "Australian", "Danish", "Finnish",
    "Portuguese", "Argentine", "Moroccan", "Austrian", "Hungarian", "Thai",
)  # fmt: skip
_LOC_NOUNS = ("Valley", "River", "Lake", "Bay", "Hills", "Forest", "Peninsula", "Highlands")
_FAC_NOUNS = ("Bridge", "Airport", "Stadium", "Hall", "Tower", "Centre", "Station", "Arena")
_UNITS = ("kilograms", "miles", "litres", "pounds", "metres", "feet", "acres", "tonnes", "grams")
_TYPE_WORDS = {  # how a hide model is told what to invent
    "DATE": "date", "MONEY": "amount of money", "PERCENT": "percentage", "QUANTITY": "quantity",
    "TIME": "time of day", "GPE": "city or country", "LOC": "location", "PERSON": "person's name",
    "WORK_OF_ART": "title of a book, film or song", "ORG": "company or organisation name",
    "NORP": "nationality or group", "LAW": "law", "FAC": "building or facility",
    "LANGUAGE": "language",
}  # fmt: skip


class HideAndSeek(Defense):
    """Hide-and-Seek: replace private entities locally, restore them in the service's answer.

    Paper: Chen, Li, Zhang, Chen, Liu, Wang, Zhang, "Hide and Seek (HaS): A Lightweight
    Framework for Prompt Privacy Protection", 2023 (arXiv:2309.03057).

    Threat model: the client runs *Hide* on its prompt and sends only the anonymized text; the
    service (and any attacker) sees that text and may know the mechanism. The client keeps the
    per-document mapping original ↔ replacement as a secret and runs *Seek* (:meth:`restore`)
    on the service's response locally to put the originals back.

    Hide, two modes:
    - ``mode="label"``: each entity of a chosen type becomes a type placeholder, unique per
      distinct entity string within a document (``<PERSON_1>``, ``<GPE_1>``, ``<PERSON_2>``);
      a repeated string gets the same placeholder.
    - ``mode="generative"``: each entity becomes a type-matched surrogate (``faker`` names,
      cities, countries, companies, dates, amounts, …), consistent within a document, never
      equal to its original, distinct for distinct originals. Surrogates are also chosen so
      they (and a PERSON surrogate's single names) occur nowhere in the original document,
      which keeps Seek exact. With ``consistent=True`` (default) the surrogate is a fixed
      function of the entity string and type (faker seeded by their hash; retried in order
      only when it clashes with the document), so the same entity gets the same surrogate in
      every document and call, as the paper's greedy-decoded hide LLM would: there is no
      secret, and an attacker who queries the hide model learns surrogate → original pairs.
      ``consistent=False`` draws surrogates afresh from ``rng`` per call (same seed, same
      output), a stronger mechanism than the paper's.
      With ``model`` (a Hugging Face seq2seq or causal LM id or local path, loaded lazily
      through ``transformers``) that model is prompted for each surrogate, sampling seeded
      from ``rng``; an answer that is empty, equal to the original or clashing with the
      document falls back to faker. A model that cannot be loaded is a ``ValueError``: the
      offline default is ``model=None`` (faker surrogates).

    Privacy knob: ``level`` (units: entity-type preset, 1 = narrowest … 4 = all 14 HaS types;
    see :data:`PRESETS`); an explicit ``entity_types`` overrides it. Guarantee: none; the
    anonymization is empirical, and whatever the NER misses is released verbatim.

    Deviations and choices:
    - The label-based hide model is spaCy NER (``en_core_web_sm``, only the ``ner`` pipe and
      what it listens to; the other pipes do not change its entities), not the paper's
      fine-tuned model.
    - The generative hide model is offline faker surrogate substitution instead of the paper's
      fine-tuned small LLM (or an optional HF ``model``, prompted per entity, not per prompt).
    - Every further verbatim, whole-word occurrence of a detected entity string in the same
      document is hidden too, as an LLM hide model rewriting the whole prompt would.
    - Seek is mapping-based string restoration, not a learned model. Exact for replacements
      that survive verbatim, in one left-to-right pass with the longest replacement first
      (so ``<PERSON_1>`` never eats ``<PERSON_10>`` and restored text is never rescanned).
      Best-effort fuzzy rules: placeholders with other case, spacing or brackets
      (``< person_1 >``, ``<PERSON 1>``, ``[PERSON_1]``, ``{PERSON_1}``, ``(PERSON_1)``,
      ``&lt;PERSON_1&gt;``, bare ``PERSON_1``); surrogates with other case or whitespace;
      a PERSON surrogate cut to its first or last name (restored to the original's first or
      last name, or the whole original if it is one word), when that name is unique in the
      mapping. Paraphrased, translated or inflected surrogates are not restored.
    """

    name: ClassVar[str] = "has"
    cost_prior: ClassVar[float] = 0.2  # s per 1,000 words (estimate)
    knob: ClassVar[str | None] = "level"
    guarantee: ClassVar[str] = "none (empirical anonymization)"
    # The knob is an entity-type preset: 1 = PERSON only … 4 = all 14 HaS types.
    levels: ClassVar[tuple[float, ...]] = (1, 4)  # the fewest and the most types
    variants: ClassVar[tuple[dict[str, Any], ...]] = ({"mode": "label"}, {"mode": "generative"})

    def __init__(
        self,
        mode: Literal["label", "generative"] = "label",
        level: Annotated[float, Ge(1), Le(4), MultipleOf(1)] = 4,
        entity_types: list[str] | tuple[str, ...] | None = None,
        model: Annotated[str, MinLen(1)] | None = None,
        spacy_model: Annotated[str, MinLen(1)] | None = None,
        consistent: bool = True,
    ) -> None:
        self.mode = mode
        self.consistent = consistent
        self.level = level
        self.entity_types = entity_types
        self.model = model
        self.spacy_model = spacy_model
        self._settings()  # cross-parameter rules: fail at construction rather than mid-grid

    # ---- parameters ---------------------------------------------------------------------
    def _settings(self) -> tuple[str, tuple[str, ...], int | None]:
        """``(mode, entity types, level)``; level is ``None`` when types are explicit. The
        declaration checks each parameter; this adds the rules that span two of them."""
        mode = str(self.mode)
        if self.model is not None and mode != "generative":
            raise ValueError(
                "model is the generative hide model and is only used with "
                f"mode='generative' (got mode={mode!r}); drop model or switch the mode."
            )
        if self.entity_types is not None:
            return mode, check_entity_types(self.entity_types), None
        level = int(self.level)
        return mode, PRESETS[level], level

    # ---- Hide ---------------------------------------------------------------------------
    def hide(
        self, texts: Sequence[str], *, rng: np.random.Generator
    ) -> tuple[list[str], list[EntityMap]]:
        """The anonymized texts and, per document, the secret mapping Seek needs."""
        hidden, mappings, _ = self._hide(texts, rng)
        return hidden, mappings

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        texts = check_texts(texts)
        mode, types, level = self._settings()
        hidden, mappings, spans = self._hide(texts, rng)
        return Release(
            "text",
            texts=hidden,
            meta={"defense": self.name, "mode": mode, "entity_types": list(types), "level": level},
            audit={
                "mappings": mappings,
                "replaced": [word_mask(t, s) for t, s in zip(texts, spans, strict=True)],
                "unit": "word",
                "hidden_spans": spans,
            },
        )

    def _hide(
        self, texts: Sequence[str], rng: np.random.Generator
    ) -> tuple[list[str], list[EntityMap], list[list[Span]]]:
        texts = check_texts(texts)
        check_rng(rng)
        mode, types, _ = self._settings()
        found = detect_entities(texts, frozenset(types), self.spacy_model)
        if mode == "label":
            choose: _Chooser = _placeholders
        else:
            from faker import Faker

            fake = Faker("en_US")  # instance-seeded: never touches faker's global state
            fake.seed_instance(int(rng.integers(2**32)))
            generator = _model_generator(self.model, rng) if self.model else None
            choose = functools.partial(
                _surrogates, fake=fake, model=generator, consistent=self.consistent
            )
        hidden: list[str] = []
        mappings: list[EntityMap] = []
        spans_out: list[list[Span]] = []
        for text, ents in zip(texts, found, strict=True):
            spans = _propagate(text, ents)
            firsts: dict[str, str] = {}  # distinct string → type, in order of first appearance
            for s, e, t in spans:
                firsts.setdefault(text[s:e], t)
            replacement = choose(text, list(firsts.items()))
            pieces, pos = [], 0
            for s, e, _t in spans:
                pieces += [text[pos:s], replacement[text[s:e]]]
                pos = e
            pieces.append(text[pos:])
            hidden.append("".join(pieces))
            mappings.append(
                [
                    {"original": o, "replacement": replacement[o], "type": t}
                    for o, t in firsts.items()
                ]
            )
            spans_out.append(spans)
        return hidden, mappings, spans_out

    # ---- Seek ---------------------------------------------------------------------------
    @staticmethod
    def restore(service_output: str, mapping: EntityMap) -> str:
        """Seek: put the originals back into one service response (see :func:`restore`)."""
        return restore(service_output, mapping)

    @staticmethod
    def restore_all(outputs: Sequence[str], mappings: Sequence[EntityMap]) -> list[str]:
        """Seek over a batch: ``outputs[i]`` is restored with ``mappings[i]``."""
        return restore_all(outputs, mappings)


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def check_entity_types(entity_types: object) -> tuple[str, ...]:
    """Upper-cased, de-duplicated types in HaS order; unknown names get a did-you-mean."""
    chosen: set[str] = set()
    for item in entity_types:  # type: ignore[attr-defined]
        name = item.strip().upper()
        if name not in HAS_TYPES:
            close = difflib.get_close_matches(name, HAS_TYPES, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"Unknown entity type {item!r}.{hint} Valid types are {list(HAS_TYPES)}."
            )
        chosen.add(name)
    if not chosen:
        raise ValueError(f"entity_types is empty; choose some of {list(HAS_TYPES)}.")
    return tuple(t for t in HAS_TYPES if t in chosen)


# --------------------------------------------------------------------------------------------
# Detection
# --------------------------------------------------------------------------------------------


_CUTS = (re.compile(r"\n\s*"), re.compile(r"[.!?]\s+"), re.compile(r"\s+"))


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


def detect_entities(
    texts: Sequence[str], types: frozenset[str], spacy_model: str | None = None
) -> list[list[Span]]:
    """spaCy NER spans of the given types per text, whitespace-trimmed, in order."""
    out: list[list[Span]] = [[] for _ in texts]
    jobs = [
        (i, off, piece)
        for i, text in enumerate(texts)
        for off, piece in _chunks(text, _CHUNK)
        if piece.strip()  # nothing to find in empty or whitespace-only text
    ]
    if not jobs:
        return out
    nlp = ner_pipeline(spacy_model)
    # Only NER and what it listens to: identical entities, ~2.5x faster than the full pipeline.
    keep = {"ner"} | {
        name for name, pipe in nlp.pipeline if "ner" in getattr(pipe, "listening_components", ())
    }
    disable = [name for name in nlp.pipe_names if name not in keep]
    docs = nlp.pipe((p for _, _, p in jobs), batch_size=_BATCH_SIZE, disable=disable)
    for (i, off, piece), doc in zip(jobs, docs, strict=True):
        for ent in doc.ents:
            if ent.label_ not in types:
                continue
            s, e = ent.start_char, ent.end_char
            raw = piece[s:e]
            s += len(raw) - len(raw.lstrip())
            e -= len(raw) - len(raw.rstrip())
            if e > s:
                out[i].append((off + s, off + e, ent.label_))
    return out


def _word_pattern(s: str, flags: int = 0) -> re.Pattern[str]:
    """``s`` as a whole word: no word character may touch a word-character edge."""
    head = r"(?<!\w)" if re.match(r"\w", s) else ""
    tail = r"(?!\w)" if re.search(r"\w$", s) else ""
    return re.compile(head + re.escape(s) + tail, flags)


def _propagate(text: str, ents: list[Span]) -> list[Span]:
    """NER spans plus every further whole-word, verbatim occurrence of a detected string."""
    spans = sorted(ents)
    taken = np.zeros(len(text) + 1, dtype=bool)
    for s, e, _ in spans:
        taken[s:e] = True
    types: dict[str, str] = {}
    for s, e, t in spans:
        types.setdefault(text[s:e], t)
    for string in sorted(types, key=len, reverse=True):  # longest first: "Sarah Jones" > "Sarah"
        for m in _word_pattern(string).finditer(text):
            if not taken[m.start() : m.end()].any():
                taken[m.start() : m.end()] = True
                spans.append((m.start(), m.end(), types[string]))
    return sorted(spans)


def word_mask(text: str, spans: Sequence[Span]) -> np.ndarray:
    """Per whitespace-split word of ``text``: does it overlap a hidden span?"""
    bounds = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    if not bounds:
        return np.zeros(0, dtype=bool)
    covered = np.zeros(len(text), dtype=np.int64)
    for s, e, _ in spans:
        covered[s:e] = 1
    cum = np.concatenate([[0], np.cumsum(covered)])
    starts, ends = np.asarray(bounds).T
    return (cum[ends] - cum[starts]) > 0


# --------------------------------------------------------------------------------------------
# Replacements
# --------------------------------------------------------------------------------------------

_Chooser = Callable[[str, list[tuple[str, str]]], dict[str, str]]


def _placeholders(text: str, entities: list[tuple[str, str]]) -> dict[str, str]:
    """``<TYPE_n>`` per distinct string, numbered per type; skips tags the text already holds."""
    upper = text.upper()
    counters: dict[str, itertools.count[int]] = {}
    out: dict[str, str] = {}
    for original, etype in entities:
        counter = counters.setdefault(etype, itertools.count(1))
        tag = f"{etype}_{next(counter)}"
        while tag in upper:  # a literal "<PERSON_1>" in the input would confuse Seek
            tag = f"{etype}_{next(counter)}"
        out[original] = f"<{tag}>"
    return out


def _clashes(
    candidate: str, etype: str, text_cf: str, originals_cf: list[str], used: set[str]
) -> bool:
    """Would this surrogate leak an original or make Seek ambiguous?"""
    c = candidate.casefold()
    if not c.strip() or c in used or c in text_cf or "<" in c:
        return True
    if any(o in c for o in originals_cf):  # "East London" would re-release "London"
        return True
    # A PERSON surrogate's single names drive a fuzzy Seek rule; keep them unseen too.
    words = [w for w in c.split() if w.rstrip(".") not in PERSON_TITLES]
    return (
        etype == "PERSON"
        and len(c.split()) > 1
        and any(re.search(r"(?<!\w)" + re.escape(w) + r"(?!\w)", text_cf) for w in words)
    )


def _surrogates(
    text: str,
    entities: list[tuple[str, str]],
    *,
    fake: Faker,
    model: Callable[[str, str], str | None] | None,
    consistent: bool = False,
) -> dict[str, str]:
    text_cf = text.casefold()
    originals_cf = [o.casefold() for o, _ in entities]
    used: set[str] = set()
    out: dict[str, str] = {}
    for n, (original, etype) in enumerate(entities, 1):
        chosen = None
        if model is not None:
            answer = model(original, etype)
            if answer and not _clashes(answer, etype, text_cf, originals_cf, used):
                chosen = answer
        if consistent and chosen is None:
            # A deterministic hide model: the entity alone picks its surrogate (no secret).
            fake.seed_instance(zlib.crc32(f"{etype}|{original}".encode()))
        for _ in range(_SURROGATE_TRIES if chosen is None else 0):
            candidate = _fake_like(fake, original, etype)
            if not _clashes(candidate, etype, text_cf, originals_cf, used):
                chosen = candidate
                break
        if chosen is None:  # exhausted (e.g. every nationality is in the text): a placeholder
            k = n
            while f"{etype}_{k}".casefold() in text_cf:
                k += 1
            chosen = f"<{etype}_{k}>"
        used.add(chosen.casefold())
        out[original] = chosen
    return out


def _fake_like(fake: Faker, original: str, etype: str) -> str:
    """A faker surrogate of the same type, shaped like the original where that is cheap."""
    pick = fake.random_element
    words = original.split()
    if etype == "PERSON":
        if len(words) >= 2 and words[0].rstrip(".").lower() in PERSON_TITLES:
            return f"{words[0]} {fake.last_name()}"  # "Mr Smith" → "Mr Hughes"
        if len(words) == 1:  # "Smith" → a surname, "Sarah" → a first name
            return fake.first_name() if _is_first_name(original) else fake.last_name()
        return f"{fake.first_name()} {fake.last_name()}"
    if etype == "GPE":
        return fake.country() if _is_country(original) else fake.city()
    if etype == "ORG":
        return fake.company()
    if etype == "DATE":
        return _fake_date(fake, original)
    if etype == "TIME":
        h, m = fake.random_int(1, 12), fake.random_int(0, 59)
        if re.search(r"\d", original) is None:
            return pick(("this morning", "this afternoon", "tonight", "that evening"))
        if re.search(r"[ap]\.?m\.?", original, re.IGNORECASE):
            return f"{h}:{m:02d} {pick(('am', 'pm'))}"
        return f"{h + 12 * fake.random_int(0, 1) - 1:02d}:{m:02d}"
    if etype == "MONEY":
        # spaCy often leaves the symbol outside the span ("$" + "20"): add one only if inside.
        symbol = next((c for c in "£€$" if c in original), "")
        word = re.search(r"(?i)\b(dollars?|pounds?|euros?|quid|bucks)\b", original)
        amount = f"{symbol}{fake.random_int(2, 9999):,}"
        return f"{amount} {word.group(0)}" if word else amount
    if etype == "PERCENT":
        unit = "%" if "%" in original else " percent"
        return f"{fake.random_int(1, 99)}{unit}"
    if etype == "QUANTITY":
        return f"{fake.random_int(2, 500)} {pick(_UNITS)}"
    if etype == "NORP":
        return pick(_NORP)
    if etype == "LANGUAGE":
        return fake.language_name()
    if etype == "WORK_OF_ART":
        return "The " + " ".join(w.capitalize() for w in fake.words(2))
    if etype == "LAW":
        return f"the {fake.last_name()} Act of {fake.random_int(1950, 2020)}"
    if etype == "LOC":
        return f"{fake.last_name()} {pick(_LOC_NOUNS)}"
    if etype == "FAC":
        return f"{fake.last_name()} {pick(_FAC_NOUNS)}"
    return f"{fake.last_name()} {etype.title()}"  # not reached for the 14 HaS types


@functools.cache
def _first_names() -> frozenset[str]:
    from faker.providers.person.en_US import Provider

    return frozenset(n.casefold() for n in getattr(Provider, "first_names", ()))


def _is_first_name(name: str) -> bool:
    return name.casefold() in _first_names()


@functools.cache
def _countries() -> frozenset[str]:
    from faker.providers.address.en_US import Provider

    return frozenset(c.casefold() for c in getattr(Provider, "countries", ()))


def _is_country(name: str) -> bool:
    return name.casefold().removeprefix("the ") in _countries()


def _fake_date(fake: Faker, original: str) -> str:
    """A date phrase of the original's shape; fixed ranges, so never depends on today."""
    year = fake.random_int(1990, 2024)
    month = MONTHS[fake.random_int(0, 11)]
    day = fake.random_int(1, 28)
    has_month = any(m in original for m in MONTHS)
    has_year = re.search(r"\b(1[89]|20)\d\d\b", original) is not None
    has_day = re.search(r"\b\d{1,2}(st|nd|rd|th)?\b", original) is not None
    if has_month and has_year and has_day:
        return f"{month} {day}, {year}" if original[:1].isalpha() else f"{day} {month} {year}"
    if has_month and has_year:
        return f"{month} {year}"
    if has_month:
        return f"{day} {month}" if has_day else month
    if has_year:
        return str(year)
    weekday = next((w for w in WEEKDAYS if w in original), None)
    if weekday is not None:  # "last Tuesday" → "last Friday"
        return original.replace(weekday, fake.random_element(WEEKDAYS))
    if re.search(r"\d", original):
        return f"{day} {month} {year}"
    return fake.random_element(_RELATIVE_DATES)


# --------------------------------------------------------------------------------------------
# Optional HF hide model
# --------------------------------------------------------------------------------------------


@functools.cache
def _load_hide_model(name: str) -> tuple[Any, Any, bool]:
    """``(tokenizer, model, is_seq2seq)``, loaded once per process."""
    try:
        from transformers import (
            AutoConfig,
            AutoModelForCausalLM,
            AutoModelForSeq2SeqLM,
            AutoTokenizer,
        )

        config = AutoConfig.from_pretrained(name)
        seq2seq = bool(getattr(config, "is_encoder_decoder", False))
        auto = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = auto.from_pretrained(name)
    except Exception as exc:  # any loading failure: user input, so a ValueError with the fix
        raise ValueError(
            f"Cannot load the generative hide model {name!r}: {str(exc).rstrip('.')}. "
            "Give a local model "
            "directory or a Hugging Face id reachable from this machine; the offline default "
            "is model=None (faker surrogate substitution)."
        ) from exc
    model.eval()
    return tokenizer, model, seq2seq


def _model_generator(name: str, rng: np.random.Generator) -> Callable[[str, str], str | None]:
    """Asks the HF model for one surrogate per entity; sampling is seeded from ``rng``."""
    tokenizer, model, seq2seq = _load_hide_model(name)
    seed = int(rng.integers(2**31))

    def generate(original: str, etype: str) -> str | None:
        import torch

        kind = _TYPE_WORDS.get(etype, etype.lower())
        prompt = (
            f'Replace the {kind} "{original}" with a different, realistic {kind}. '
            "Answer with the replacement only."
        )
        if not seq2seq:
            prompt += "\nReplacement:"
        from privaudit.devices import torch_device

        device = torch_device()  # the current device: the hide model generates there
        model.to(device)
        enc = tokenizer(prompt, return_tensors="pt").to(device)
        pad = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        # crc32, not hash(): str hashes change between processes.
        with (
            seeded_torch(seed + zlib.crc32(f"{etype}|{original}".encode())),
            torch.inference_mode(),
        ):
            ids = model.generate(
                **enc, max_new_tokens=12, do_sample=True, top_p=0.9, pad_token_id=pad
            )
        new = ids[0] if seq2seq else ids[0, enc["input_ids"].shape[1] :]
        answer = tokenizer.decode(new, skip_special_tokens=True).strip().split("\n")[0]
        answer = answer.strip(" \"'.,;:")
        # A rambling answer is not a surrogate; faker takes over.
        return answer if 0 < len(answer) <= 60 else None

    return generate


# --------------------------------------------------------------------------------------------
# Seek
# --------------------------------------------------------------------------------------------


def _check_mapping(mapping: object) -> EntityMap:
    if not isinstance(mapping, Sequence) or isinstance(mapping, str):
        raise TypeError(f"mapping must be a list of dicts from hide(), got {mapping!r}.")
    for item in mapping:
        if not (
            isinstance(item, dict)
            and isinstance(item.get("original"), str)
            and isinstance(item.get("replacement"), str)
        ):
            raise TypeError(
                "each mapping entry must be a dict with string 'original' and 'replacement' "
                f"(as hide() returns), got {item!r}."
            )
    return list(mapping)


def _fuzzy_placeholder(tag: str, number: str) -> str:
    """``<PERSON_1>`` with other case, spacing, brackets, HTML escaping, or bare ``PERSON_1``."""
    core = re.escape(tag).replace("_", r"[\s_\-]*") + r"[\s_\-]*" + number
    bracketed = rf"(?:<|&lt;|\[|\{{|\()\s*{core}\s*(?:>|&gt;|\]|\}}|\))"
    bare = rf"(?<![\w<]){re.escape(tag)}_{number}(?!\w)"
    return f"(?i:{bracketed}|{bare})"


def restore(service_output: str, mapping: EntityMap) -> str:
    """Seek: replace every replacement found in ``service_output`` by its original.

    One left-to-right pass over an alternation in priority order: exact replacements (longest
    first, whole words for surrogates), fuzzy placeholders, surrogates with other case or
    whitespace, then a PERSON surrogate's single first or last name. Restored text is never
    rescanned, so an original that looks like another replacement stays intact.
    """
    if not isinstance(service_output, str):
        raise TypeError(f"service_output must be a string, got {type(service_output).__name__}.")
    entries = _check_mapping(mapping)
    if not entries or not service_output:
        return service_output
    alternatives: list[tuple[str, str]] = []  # (regex, original) in priority order
    by_length = sorted(entries, key=lambda d: len(d["replacement"]), reverse=True)
    for d in by_length:
        alternatives.append((_word_pattern(d["replacement"]).pattern, d["original"]))
    for d in by_length:
        m = _PLACEHOLDER.fullmatch(d["replacement"])
        if m:
            alternatives.append((_fuzzy_placeholder(m.group(1), m.group(2)), d["original"]))
    for d in by_length:
        if _PLACEHOLDER.fullmatch(d["replacement"]) is None and d["replacement"].strip():
            words = [re.escape(w) for w in d["replacement"].split()]
            loose = r"\s+".join(words)
            head = r"(?<!\w)" if re.match(r"\w", d["replacement"].strip()) else ""
            tail = r"(?!\w)" if re.search(r"\w$", d["replacement"].strip()) else ""
            alternatives.append((f"{head}(?i:{loose}){tail}", d["original"]))
    alternatives += _name_parts(entries)
    combined = re.compile("|".join(f"(?P<g{i}>{rx})" for i, (rx, _) in enumerate(alternatives)))
    originals = [orig for _, orig in alternatives]

    def put_back(m: re.Match[str]) -> str:
        return originals[int(m.lastgroup[1:])] if m.lastgroup else m.group(0)

    return combined.sub(put_back, service_output)


def _name_parts(entries: EntityMap) -> list[tuple[str, str]]:
    """PERSON surrogate "John Smith" → "John" ↦ original first name, "Smith" ↦ last name."""
    candidates: dict[str, list[str]] = {}
    for d in entries:
        words = d["replacement"].split()
        if d.get("type") != "PERSON" or len(words) < 2 or _PLACEHOLDER.fullmatch(d["replacement"]):
            continue
        if words[0].rstrip(".").lower() in PERSON_TITLES:
            words = words[1:]
        core = d["original"].split()
        if len(core) > 1 and core[0].rstrip(".").lower() in PERSON_TITLES:
            core = core[1:]  # "Mr Smith": "Hughes" alone stands for "Smith"
        if not words or not core:
            continue
        first = core[0] if len(core) > 1 else " ".join(core)
        last = core[-1] if len(core) > 1 else " ".join(core)
        if len(words) > 1:
            candidates.setdefault(words[0], []).append(first)
        candidates.setdefault(words[-1], []).append(last)
    # A single name shared by two surrogates is ambiguous: leave it alone.
    all_words = [w for d in entries for w in d["replacement"].split()]
    out = []
    for part, origs in sorted(candidates.items(), key=lambda kv: -len(kv[0])):
        if len(origs) == 1 and all_words.count(part) == 1 and len(part) >= 2 and part[0].isupper():
            out.append((r"(?<!\w)" + re.escape(part) + r"(?!\w)", origs[0]))
    return out


def restore_all(outputs: Sequence[str], mappings: Sequence[EntityMap]) -> list[str]:
    """Seek over a batch: ``outputs[i]`` is restored with ``mappings[i]``."""
    if isinstance(outputs, str):
        raise TypeError("restore_all() takes a list of service outputs; use restore() for one.")
    if len(outputs) != len(mappings):
        raise ValueError(
            f"restore_all() needs one mapping per output, got {len(outputs)} outputs and "
            f"{len(mappings)} mappings."
        )
    return [restore(o, m) for o, m in zip(outputs, mappings, strict=True)]
