"""TAB's evaluation protocol: how well an anonymizer masks what TAB's annotators masked.

A reimplementation of the measures of TAB's ``evaluation.py`` (Pilán et al., "The Text
Anonymization Benchmark (TAB)", Computational Linguistics 2022; repository
NorskRegnesentral/text-anonymization-benchmark, MIT), over the ``tab`` corpus
(:mod:`privaudit.corpora.tab`, its ``tab_gold`` column). The input is, per document, the
character spans the system masked (what ``evaluation.py`` reads), or the anonymizer's output
text, turned into such spans by :func:`masked_spans`.

Semantics, as in ``evaluation.py``:

- Entities are per annotator (``entity_id`` within one annotator's mentions). An entity needs
  masking when any of its mentions is DIRECT or QUASI; it is DIRECT when its FIRST mention is
  (so a NO_MASK-first entity with a DIRECT mention later counts as QUASI); NO_MASK-only
  entities are left out of every recall.
- A mention (or token) is masked when every character of it is masked, except characters of
  ignorable words and punctuation (:data:`IGNORED_WORDS`, :data:`IGNORED_CHARS`: "Mr", "of",
  "the", commas, spaces, ...) matched inside the mention's own text, case-insensitively. So a
  partly masked mention is NOT masked, and a token that is itself an ignorable word ("Mr",
  "of") counts as masked whatever the system did.
- Entity recall (DIRECT, QUASI separately): an entity is protected only if ALL its mentions
  that need masking are masked (its NO_MASK mentions may stay).
- Mention recall: over every mention of the entities that need masking (their NO_MASK
  mentions included, as ``evaluation.py`` iterates all of an entity's mentions).
- Token recall: the same mentions split into ``\\w+`` tokens; also per entity type.
- Precision (uniform weights): each system span is split into ``\\w+`` tokens (each span on
  its own, so overlapping spans count their tokens twice); a token scores one hit per
  annotator that has a to-be-masked mention fully covering it, out of the document's number
  of annotators (those with at least one mention, NO_MASK included). Mention-level precision
  does the same with each whole span. TAB's weighted precision (``--use_bert``) weighs each
  token by ``-log p`` under a BERT masked language model; that needs a language model, so
  only the uniform weighting (TAB's default, ``UniformTokenWeighting``) is offered.
- Several annotators: every measure is a micro-average over them (their entities pooled).
- An empty denominator scores 0, as in ``evaluation.py``; the counts (``n_*``) say when.

One departure, stated: ``evaluation.py`` refuses a document in which two annotators share an
``entity_id``; here entities are keyed by (annotator, entity_id), which gives the same scores
whenever ``evaluation.py`` accepts the file.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from privaudit.corpora.base import Corpus

Span = tuple[int, int]

#: Words TAB's recall ignores inside a mention (little content, inconsistently annotated).
IGNORED_WORDS: tuple[str, ...] = (
    "mr", "mrs", "ms", "and", "or", "from", "until", "to", "about", "after", "as", "at",
    "before", "between", "by", "during", "for", "in", "into", "of", "on", "over", "since",
    "with", "the", "a", "an", "no", "nr", "’s", "'s",
)  # fmt: skip
#: Characters TAB's recall ignores inside a mention (the space among them).
IGNORED_CHARS = ",.-;:/&()[]–'\" ’“”"
_SKIP = re.compile(
    "(?:"
    + "|".join(
        [rf"\b{re.escape(w)}\b" for w in IGNORED_WORDS] + list(map(re.escape, IGNORED_CHARS))
    )
    + ")",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+")  # TAB's token
REFINE_MAX = 4_000_000  # unit pairs of a gap the second alignment pass takes on (~1 s)
_ALIGN = re.compile(r"\w+|\s+|[^\w\s]")  # alignment units: words, whitespace runs, symbols


# --------------------------------------------------------------------------------------------
# Gold standard
# --------------------------------------------------------------------------------------------


@dataclass
class GoldEntity:
    """One annotator's entity: its mentions and each mention's own need for masking."""

    annotator: str
    entity_type: str
    direct: bool  # the first mention's identifier type is DIRECT
    mentions: list[Span] = field(default_factory=list)
    needs: list[bool] = field(default_factory=list)

    @property
    def need_masking(self) -> bool:
        return any(self.needs)


@dataclass
class GoldDocument:
    """A document's text and its annotators' entities (from the corpus's ``tab_gold``)."""

    doc_id: str
    text: str
    entities: list[GoldEntity]
    annotators: frozenset[str]

    @classmethod
    def from_mentions(
        cls, doc_id: str, text: str, mentions: Sequence[Mapping[str, Any]]
    ) -> GoldDocument:
        """Group mentions (in file order) into entities per (annotator, entity_id)."""
        by_id: dict[tuple[str, str], GoldEntity] = {}
        for m in mentions:
            who = str(m.get("annotator", ""))
            kind = str(m["identifier_type"])
            key = (who, str(m["entity_id"]))
            if key not in by_id:  # the first mention fixes type and DIRECT-ness
                by_id[key] = GoldEntity(who, str(m["type"]), kind == "DIRECT")
            by_id[key].mentions.append((int(m["start"]), int(m["end"])))
            by_id[key].needs.append(kind in ("DIRECT", "QUASI"))
        annotators = frozenset(e.annotator for e in by_id.values())
        return cls(doc_id, text, list(by_id.values()), annotators)

    def to_mask(self, direct: bool = True, quasi: bool = True) -> list[GoldEntity]:
        return [e for e in self.entities if e.need_masking and (direct if e.direct else quasi)]

    def covering(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per annotator, the (starts, ends) of the mentions it marked for masking."""
        spans: dict[str, list[Span]] = {a: [] for a in self.annotators}
        for e in self.entities:
            if e.need_masking:
                spans[e.annotator] += [
                    s for s, need in zip(e.mentions, e.needs, strict=True) if need
                ]
        return {
            a: (
                np.array([s for s, _ in v], dtype=np.int64),
                np.array([e for _, e in v], dtype=np.int64),
            )
            for a, v in spans.items()
        }


def gold_documents(corpus: Corpus, split: str | None = "test") -> list[GoldDocument]:
    """The gold documents of ``split`` (every split, in the corpus's order, for ``None``).
    A corpus without ``tab_gold`` (not loaded by ``load_tab``) is read from its ``entities``
    as one annotator's, which needs their ``identifier_type`` and ``entity_id``."""
    names = list(corpus.splits) if split is None else [split]
    out = []
    for name in names:
        ds = corpus.split(name)
        if "tab_gold" in ds.column_names:
            gold = ds["tab_gold"]
        elif "entities" in ds.column_names:
            gold = ds["entities"]
            if any(("identifier_type" not in m or "entity_id" not in m) for d in gold for m in d):
                raise ValueError(
                    f"Corpus {corpus.name!r} has no TAB annotations (load it with load_tab): its "
                    "entities lack identifier_type / entity_id."
                )
        else:
            raise ValueError(f"Corpus {corpus.name!r} has no TAB annotations; use load_tab.")
        authors = (
            ds["author"] if "author" in ds.column_names else [f"{name}-{i}" for i in range(len(ds))]
        )
        out += [
            GoldDocument.from_mentions(str(a), t, g or [])
            for a, t, g in zip(authors, ds["text"], gold, strict=True)
        ]
    return out


# --------------------------------------------------------------------------------------------
# Scoring masked spans
# --------------------------------------------------------------------------------------------


def _masked_array(text: str, spans: Sequence[Span]) -> np.ndarray:
    masked = np.zeros(len(text), dtype=bool)
    for s, e in spans:
        masked[s:e] = True
    return masked


def mention_masked(text: str, masked: np.ndarray, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` counts as masked: every character masked but for TAB's
    ignorable words and characters found in the span's own (lower-cased) text."""
    uncovered = ~masked[start:end]
    if not uncovered.any():
        return True
    for m in _SKIP.finditer(text[start:end].lower()):
        uncovered[m.start() : m.end()] = False
    return not uncovered.any()


def _tokens(text: str, start: int, end: int) -> list[Span]:
    return [(start + m.start(), start + m.end()) for m in _WORD.finditer(text[start:end])]


def _ratio(hits: float, total: float) -> float:
    return hits / total if total else 0.0  # evaluation.py: an empty denominator scores 0


def score_spans(gold: Sequence[GoldDocument], spans: Sequence[Sequence[Span]]) -> dict[str, Any]:
    """TAB's measures for ``spans[i]``, the system's masked (start, end) spans of ``gold[i]``."""
    if len(gold) != len(spans):
        raise ValueError(f"{len(spans)} span lists for {len(gold)} documents.")
    ent = {"direct": [0, 0], "quasi": [0, 0]}  # [masked, total]
    mention, token = [0, 0], [0, 0]
    by_type: dict[str, list[int]] = {}
    tp = {"token": 0.0, "mention": 0.0}
    den = {"token": 0.0, "mention": 0.0}
    n_system = {"token": 0, "mention": 0}
    for doc, doc_spans in zip(gold, spans, strict=True):
        text = doc.text
        checked = [_check_span(doc, s) for s in doc_spans]
        masked = _masked_array(text, checked)
        for e in doc.to_mask():
            kind = "direct" if e.direct else "quasi"
            done = [mention_masked(text, masked, s, t) for s, t in e.mentions]
            ent[kind][0] += all(d or not need for d, need in zip(done, e.needs, strict=True))
            ent[kind][1] += 1
            mention[0] += sum(done)
            mention[1] += len(done)
            counts = by_type.setdefault(e.entity_type, [0, 0])
            for s, t in e.mentions:
                toks = [mention_masked(text, masked, a, b) for a, b in _tokens(text, s, t)]
                token[0] += sum(toks)
                token[1] += len(toks)
                counts[0] += sum(toks)
                counts[1] += len(toks)
        cover = doc.covering()
        n_ann = len(doc.annotators)
        for level, units in (
            ("token", [tok for s, t in checked for tok in _tokens(text, s, t)]),
            ("mention", checked),
        ):
            for s, t in units:
                tp[level] += sum(bool(np.any((a <= s) & (b >= t))) for a, b in cover.values())
                den[level] += n_ann
            n_system[level] += len(units)
    return {
        "entity_recall_direct": _ratio(*ent["direct"]),
        "entity_recall_quasi": _ratio(*ent["quasi"]),
        "mention_recall": _ratio(*mention),
        "token_recall": _ratio(*token),
        "token_precision": _ratio(tp["token"], den["token"]),
        "mention_precision": _ratio(tp["mention"], den["mention"]),
        "token_recall_by_type": {k: _ratio(*v) for k, v in by_type.items() if v[1]},
        "n_documents": len(gold),
        "n_direct_entities": ent["direct"][1],
        "n_quasi_entities": ent["quasi"][1],
        "n_mentions": mention[1],
        "n_tokens": token[1],
        "n_system_tokens": n_system["token"],
        "n_system_spans": n_system["mention"],
        "weighting": "uniform",
    }


def _check_span(doc: GoldDocument, span: Any) -> Span:
    try:
        s, e = (int(x) for x in span)
    except (TypeError, ValueError):
        raise ValueError(
            f"Document {doc.doc_id!r}: a masked span must be a (start, end) pair, got {span!r}."
        ) from None
    if not 0 <= s <= e <= len(doc.text):
        raise ValueError(
            f"Document {doc.doc_id!r}: masked span [{s}, {e}) is outside its "
            f"{len(doc.text)}-character text."
        )
    return s, e


# --------------------------------------------------------------------------------------------
# From an anonymizer's output text to masked spans
# --------------------------------------------------------------------------------------------


def masked_spans(original: str, anonymized: str) -> list[Span]:
    """The spans of ``original`` that ``anonymized`` does not carry over verbatim.

    Both texts are cut into units (``\\w+`` words, single symbols, whitespace runs) and
    aligned with :class:`difflib.SequenceMatcher` in two passes (see :func:`_aligned`); every
    character of an original unit outside the matched blocks is masked, and adjacent masked
    units merge into one span. Whitespace runs compare equal whatever their content, so
    re-spacing or joined lines mask nothing.

    Limits: the unit is the word, so a word changed in part (``Canpolat's`` → ``<PERSON_1>'s``
    keeps ``'s``, but ``Smiths`` → ``<PERSON>s`` masks ``Smiths`` whole) is masked whole; a
    replacement that repeats the original's words (a surrogate date ``12 October 1999`` for
    ``15 October 2004``, a defense that only reorders words) leaves those words unmasked; a
    word deleted here and reinserted elsewhere (moved) counts as masked; and the alignment is a
    longest-matching-blocks heuristic, not a minimal edit script. A defense that reports its
    own spans (HaS's ``Release.audit["hidden_spans"]``) can be scored on those exactly.
    """
    a_units = [(m.start(), m.end()) for m in _ALIGN.finditer(original)]
    a_keys = [" " if original[s].isspace() else original[s:e] for s, e in a_units]
    b_keys = [" " if m.group()[0].isspace() else m.group() for m in _ALIGN.finditer(anonymized)]
    kept = _aligned(a_keys, b_keys)
    masked = _masked_array(original, [u for u, k in zip(a_units, kept, strict=True) if not k])
    return _runs(masked)


def _aligned(a: list[str], b: list[str]) -> np.ndarray:
    """Which units of ``a`` are matched in ``b``. A first pass with autojunk (fast: the
    frequent units of ``b`` start no match, though matches grow through them) finds the
    anchors; each gap between them is aligned again without autojunk, so short runs of
    frequent words between two replaced entities (``of the``) are matched too. A gap over
    :data:`REFINE_MAX` unit pairs (a text rewritten at length) is not refined: it stays
    masked but for what the first pass matched."""
    kept = np.zeros(len(a), dtype=bool)
    i0 = j0 = 0
    for i, j, n in difflib.SequenceMatcher(None, a, b).get_matching_blocks():
        if 0 < (i - i0) * (j - j0) <= REFINE_MAX:
            fine = difflib.SequenceMatcher(None, a[i0:i], b[j0:j], autojunk=False)
            for fi, _fj, fn in fine.get_matching_blocks():
                kept[i0 + fi : i0 + fi + fn] = True
        kept[i : i + n] = True
        i0, j0 = i + n, j + n
    return kept


def _runs(masked: np.ndarray) -> list[Span]:
    """The maximal runs of True in a boolean array, as (start, end) spans."""
    edges = np.diff(np.concatenate(([0], masked.astype(np.int8), [0])))
    return list(
        zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist(), strict=True)
    )


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------

TextsOrSpans = Sequence[str | Sequence[Span]] | Mapping[str, str | Sequence[Span]]


def score_anonymizer(
    corpus: Corpus, texts_or_spans: TextsOrSpans, *, split: str | None = "test"
) -> dict[str, Any]:
    """TAB's scores for an anonymizer's output on the TAB corpus ``corpus``.

    ``texts_or_spans``: one item per document of ``split`` (``None``: every split, in the
    corpus's order), in order, or a mapping doc_id → item that scores only the documents it
    names (as ``evaluation.py`` scores the documents of its masked-output file). An item is the
    anonymized text (aligned to masked spans by :func:`masked_spans`) or a list of masked
    (start, end) character spans of the original.
    """
    gold = gold_documents(corpus, split)
    if isinstance(texts_or_spans, Mapping):
        by_id = {d.doc_id: d for d in (gold if split is None else gold_documents(corpus, None))}
        unknown = [k for k in texts_or_spans if str(k) not in by_id]
        if unknown:
            raise ValueError(
                f"Document {unknown[0]!r} is not in corpus {corpus.name!r} ({len(unknown)} "
                "unknown doc_ids)."
            )
        gold = [by_id[str(k)] for k in texts_or_spans]
        items = list(texts_or_spans.values())
    else:
        items = list(texts_or_spans)
        if len(items) != len(gold):
            where = "all splits" if split is None else f"the {split} split"
            raise ValueError(
                f"{len(items)} anonymized documents for the {len(gold)} of {where}; give one "
                "per document, in order, or a mapping doc_id → text or spans."
            )
    spans = [
        masked_spans(d.text, x) if isinstance(x, str) else list(x)
        for d, x in zip(gold, items, strict=True)
    ]
    return score_spans(gold, spans)


_ROWS = (
    ("entity_recall_direct", "entity recall, DIRECT identifiers", "n_direct_entities"),
    ("entity_recall_quasi", "entity recall, QUASI identifiers", "n_quasi_entities"),
    ("mention_recall", "mention recall (DIRECT + QUASI)", "n_mentions"),
    ("token_recall", "token recall (DIRECT + QUASI)", "n_tokens"),
    ("token_precision", "token precision (uniform weights)", "n_system_tokens"),
    ("mention_precision", "mention precision (uniform weights)", "n_system_spans"),
)


def format_scores(scores: Mapping[str, Any], title: str = "") -> str:
    """TAB's scores as a small text table (what ``privaudit tab-score`` prints)."""
    lines = [title] if title else []
    lines.append(f"  {'measure':<38}{'score':>7}{'n':>8}")
    for key, label, n in _ROWS:
        lines.append(f"  {label:<38}{scores[key]:>7.3f}{scores[n]:>8d}")
    for etype, value in sorted(scores.get("token_recall_by_type", {}).items()):
        lines.append(f"    token recall, {etype:<24}{value:>7.3f}")
    return "\n".join(lines)
