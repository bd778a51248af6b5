"""Hide-and-Seek (HaS): anonymize named entities before a prompt leaves the client.

This module holds the method: the defense, the label mode's placeholders and Seek. The
generative mode's surrogates are in :mod:`privaudit.defenses._has_surrogates`; the entity
protocol HaS shares with its attackers (the spaCy NER runner, propagation to repeats, the
placeholder format) is :mod:`privaudit.models.entities`.
"""

from __future__ import annotations

import difflib
import functools
import itertools
import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from annotated_types import Ge, Le, MinLen, MultipleOf

from privaudit.api import Defense, Release
from privaudit.defenses._has_surrogates import model_generator, surrogates
from privaudit.guarantees import Guarantee
from privaudit.mechanisms.inputs import check_rng, check_texts
from privaudit.models.entities import (
    PERSON_TITLES,
    PLACEHOLDER,
    Span,
    placeholder,
    propagate,
    spacy_entities,
    with_identifiers,
    word_pattern,
)

# The 14 entity types HaS anonymizes (OntoNotes labels, as spaCy's English NER emits them).
HAS_TYPES: tuple[str, ...] = (
    "DATE",
    "MONEY",
    "PERCENT",
    "QUANTITY",
    "TIME",
    "GPE",
    "LOC",
    "PERSON",
    "WORK_OF_ART",
    "ORG",
    "NORP",
    "LAW",
    "FAC",
    "LANGUAGE",
)

# Privacy knob: each level hides a superset of the previous one (narrow → all).
PRESETS: dict[int, tuple[str, ...]] = {
    1: ("PERSON",),
    2: ("PERSON", "GPE", "LOC", "FAC"),
    3: ("PERSON", "GPE", "LOC", "FAC", "ORG", "NORP", "DATE", "TIME"),
    4: HAS_TYPES,
}
MODES: tuple[str, ...] = ("label", "generative")

EntityMap = list[dict[str, str]]  # one document's Hide mapping: original, replacement, type
_CHUNK = 100_000  # characters per spaCy call: keeps memory bounded, far below nlp.max_length


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

    Identifier preset: ``identifiers=True`` also hides what an NER misses and a PII scrubber
    finds by pattern (:data:`privaudit.models.entities.IDENTIFIER_PATTERNS`): application and
    case numbers (``36110/97``), phone numbers, e-mail addresses, URLs, IBANs, codes mixing
    capitals and digits, runs of 5+ digits; type ``ID`` (``<ID_1>``, or a surrogate of the same
    shape, digits for digits and letters for letters). An NER span overlapping one gives way
    to it. An extension, not in the paper (whose hide model is an NER-like LLM); off by
    default, so the level alone is the paper's method.

    Reported spans: ``Release.audit["masked_spans"]`` (runner-only) holds, per document, the
    (start, end) character spans of the input it replaced, which ``privaudit tab-score``
    scores exactly (and ``hidden_spans`` the same with their types).

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
    calibrates_by_rate: ClassVar[bool] = False  # a discrete entity-type preset, not a rate
    guarantee: ClassVar[Guarantee] = Guarantee.none("empirical anonymization")
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
        identifiers: bool = False,
    ) -> None:
        self.mode = mode
        self.identifiers = identifiers
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
            meta={
                "defense": self.name,
                "mode": mode,
                "entity_types": list(types) + (["ID"] if self.identifiers else []),
                "level": level,
            },
            audit={
                "mappings": mappings,
                "replaced": [word_mask(t, s) for t, s in zip(texts, spans, strict=True)],
                "unit": "word",
                "hidden_spans": spans,
                "masked_spans": [[(s, e) for s, e, _ in doc] for doc in spans],
            },
        )

    def _hide(
        self, texts: Sequence[str], rng: np.random.Generator
    ) -> tuple[list[str], list[EntityMap], list[list[Span]]]:
        texts = check_texts(texts)
        check_rng(rng)
        mode, types, _ = self._settings()
        found = spacy_entities(texts, self.spacy_model, types=frozenset(types), chunk=_CHUNK)
        if mode == "label":
            choose: _Chooser = _placeholders
        else:
            from faker import Faker

            fake = Faker("en_US")  # instance-seeded: never touches faker's global state
            fake.seed_instance(int(rng.integers(2**32)))
            generator = model_generator(self.model, rng) if self.model else None
            choose = functools.partial(
                surrogates, fake=fake, model=generator, consistent=self.consistent
            )
        hidden: list[str] = []
        mappings: list[EntityMap] = []
        spans_out: list[list[Span]] = []
        for text, ents in zip(texts, found, strict=True):
            if self.identifiers:
                ents = with_identifiers(text, ents)
            spans = propagate(text, ents)
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
        n = next(counter)
        while f"{etype}_{n}" in upper:  # a literal "<PERSON_1>" in the input would confuse Seek
            n = next(counter)
        out[original] = placeholder(etype, n)
    return out


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
        alternatives.append((word_pattern(d["replacement"]).pattern, d["original"]))
    for d in by_length:
        m = PLACEHOLDER.fullmatch(d["replacement"])
        if m:
            alternatives.append((_fuzzy_placeholder(m.group(1), m.group(2)), d["original"]))
    for d in by_length:
        if PLACEHOLDER.fullmatch(d["replacement"]) is None and d["replacement"].strip():
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
        if d.get("type") != "PERSON" or len(words) < 2 or PLACEHOLDER.fullmatch(d["replacement"]):
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
