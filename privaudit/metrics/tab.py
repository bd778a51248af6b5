"""TAB's evaluation protocol: how well an anonymizer masks what TAB's annotators masked.

A reimplementation of the measures of TAB's ``evaluation.py`` (Pilán et al., "The Text
Anonymization Benchmark (TAB)", Computational Linguistics 2022; repository
NorskRegnesentral/text-anonymization-benchmark, MIT), over the ``tab`` corpus
(:mod:`privaudit.corpora.tab`, its ``tab_gold`` column). The input is, per document, the
character spans the system masked (what ``evaluation.py`` reads; a defense that knows what it
replaced reports them in ``Release.audit["masked_spans"]``), or the anonymizer's output text,
turned into such spans by :func:`~privaudit.metrics.tab_align.align` (which never counts
verbatim text as masked).

Semantics, as in ``evaluation.py``:

- Entities are per annotator (``entity_id`` within one annotator's mentions). An entity needs
  masking when any of its mentions is DIRECT or QUASI; it is DIRECT when its FIRST mention is
  (so a NO_MASK-first entity with a DIRECT mention later counts as QUASI); NO_MASK-only
  entities are left out of every recall.
- A mention (or token) is masked when every character of it is masked, except the characters
  TAB lets stay: those of a spaCy token of the DOCUMENT (tokenized and tagged whole) that
  overlaps the mention and is tagged ADP, PART, CCONJ or DET (:data:`IGNORED_POS`) or is one
  of the title words :data:`IGNORED_TOKENS` (mr, mrs, ms, no, nr, about; lower-cased), and the
  punctuation and space characters :data:`IGNORED_CHARS`. So the "'s" of "Price's" (PART) may
  stay, the "A" of "C.A. Whomersley" may not, and "every" of "every Monday" (DET) may. The
  spaCy pipeline is the shipped one (:func:`privaudit.models.pipelines.spacy_pipeline`,
  en_core_web_sm 3.8.0; TAB's script loads en_core_web_md, so a user comparing figures runs
  it with the same pipeline).
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
- An empty denominator scores 0, as in ``evaluation.py``; the counts (``n_*``) say when, and
  :func:`format_scores` prints such a score as undefined.

Departures, stated: ``evaluation.py`` refuses a document in which two annotators share an
``entity_id``; here entities are keyed by (annotator, entity_id), which gives the same scores
whenever ``evaluation.py`` accepts the file. Where spaCy's ``char_span`` finds no token for a
mention (it starts or ends in whitespace between tokens), ``evaluation.py`` fails with a
``TypeError``; here the tokens that overlap the mention are used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.metrics.tab_align import Span, align
from privaudit.models.pipelines import spacy_pipeline

if TYPE_CHECKING:
    from privaudit.corpora.base import Corpus

#: spaCy coarse tags whose tokens may stay unmasked inside a mention (evaluation.py).
IGNORED_POS = frozenset({"ADP", "PART", "CCONJ", "DET"})
#: Lower-cased spaCy tokens that may stay unmasked inside a mention (evaluation.py).
IGNORED_TOKENS = frozenset({"mr", "mrs", "ms", "no", "nr", "about"})
#: Characters that may stay unmasked inside a mention (the space among them; evaluation.py).
IGNORED_CHARS = frozenset(",.-;:/&()[]–'\" ’“”")
#: The shipped pipeline's components that POS tagging needs (tokens and ``pos_``).
TAGGER_PIPES = ("tok2vec", "tagger", "attribute_ruler")
_WORD = re.compile(r"\w+")  # TAB's token
#: The ``Release.audit`` key under which a defense reports, per document, the (start, end)
#: character spans of the original it replaced; ``tab-score`` scores those when present.
SPANS_KEY = "masked_spans"


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
    #: Characters TAB lets stay unmasked (:func:`excused_chars`), tagged on first scoring.
    excused: np.ndarray | None = field(default=None, repr=False, compare=False)

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


def excused_chars(texts: Sequence[str], spacy_model: str | None = None) -> list[np.ndarray]:
    """Per text, which characters TAB lets stay unmasked inside a mention: those of a spaCy
    token tagged :data:`IGNORED_POS` or equal (lower-cased) to one of :data:`IGNORED_TOKENS`,
    and the characters :data:`IGNORED_CHARS`. Each text is tagged whole, as evaluation.py
    tags each document."""

    out = [np.fromiter((c in IGNORED_CHARS for c in t), dtype=bool, count=len(t)) for t in texts]
    todo = [i for i, t in enumerate(texts) if t]
    if not todo:
        return out
    nlp = spacy_pipeline(spacy_model, pipes=None if spacy_model else TAGGER_PIPES)
    longest = max(len(texts[i]) for i in todo)
    if longest >= nlp.max_length:  # tagging needs no parser memory; raising the cap is safe
        nlp.max_length = longest + 1
    for i, doc in zip(todo, nlp.pipe(texts[i] for i in todo), strict=True):
        for tok in doc:
            if tok.pos_ in IGNORED_POS or tok.lower_ in IGNORED_TOKENS:
                out[i][tok.idx : tok.idx + len(tok)] = True
    return out


def _excused(gold: Sequence[GoldDocument]) -> None:
    """Tag every gold document that has not been tagged yet (once: a document keeps it)."""
    todo = [d for d in gold if d.excused is None]
    for d, ex in zip(todo, excused_chars([d.text for d in todo]), strict=True):
        d.excused = ex


def _masked_array(text: str, spans: Sequence[Span]) -> np.ndarray:
    masked = np.zeros(len(text), dtype=bool)
    for s, e in spans:
        masked[s:e] = True
    return masked


def mention_masked(masked: np.ndarray, excused: np.ndarray, start: int, end: int) -> bool:
    """Whether ``[start, end)`` counts as masked: every character masked but those TAB lets
    stay (``excused``, from :func:`excused_chars`)."""
    return bool((masked[start:end] | excused[start:end]).all())


def _tokens(text: str, start: int, end: int) -> list[Span]:
    return [(start + m.start(), start + m.end()) for m in _WORD.finditer(text[start:end])]


def _ratio(hits: float, total: float) -> float:
    return hits / total if total else 0.0  # evaluation.py: an empty denominator scores 0


def score_spans(gold: Sequence[GoldDocument], spans: Sequence[Sequence[Span]]) -> dict[str, Any]:
    """TAB's measures for ``spans[i]``, the system's masked (start, end) spans of ``gold[i]``."""
    if len(gold) != len(spans):
        raise ValueError(f"{len(spans)} span lists for {len(gold)} documents.")
    checked_all = [[_check_span(d, s) for s in ds] for d, ds in zip(gold, spans, strict=True)]
    _excused(gold)
    ent = {"direct": [0, 0], "quasi": [0, 0]}  # [masked, total]
    mention, token = [0, 0], [0, 0]
    by_type: dict[str, list[int]] = {}
    tp = {"token": 0.0, "mention": 0.0}
    den = {"token": 0.0, "mention": 0.0}
    n_system = {"token": 0, "mention": 0}
    for doc, checked in zip(gold, checked_all, strict=True):
        text, excused = doc.text, doc.excused
        assert excused is not None  # set by _excused above
        masked = _masked_array(text, checked)
        for e in doc.to_mask():
            kind = "direct" if e.direct else "quasi"
            done = [mention_masked(masked, excused, s, t) for s, t in e.mentions]
            ent[kind][0] += all(d or not need for d, need in zip(done, e.needs, strict=True))
            ent[kind][1] += 1
            mention[0] += sum(done)
            mention[1] += len(done)
            counts = by_type.setdefault(e.entity_type, [0, 0])
            for s, t in e.mentions:
                toks = [mention_masked(masked, excused, a, b) for a, b in _tokens(text, s, t)]
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
        "n_tokens_by_type": {k: v[1] for k, v in by_type.items() if v[1]},
        "weighting": "uniform",
    }


def _check_span(doc: GoldDocument, span: Any) -> Span:
    try:
        s, e = (int(x) for x in span[:2])
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
# Entry point
# --------------------------------------------------------------------------------------------

TextsOrSpans = Sequence[str | Sequence[Span]] | Mapping[str, str | Sequence[Span]]


def score_anonymizer(
    corpus: Corpus | Sequence[GoldDocument],
    texts_or_spans: TextsOrSpans,
    *,
    split: str | None = "test",
) -> dict[str, Any]:
    """TAB's scores for an anonymizer's output on the TAB corpus ``corpus`` (or its gold
    documents, from :func:`gold_documents`, which keep their spaCy tags between calls).

    ``texts_or_spans``: one item per document of ``split`` (``None``: every split, in the
    corpus's order), in order, or a mapping doc_id → item that scores only the documents it
    names (as ``evaluation.py`` scores the documents of its masked-output file). An item is a
    list of masked (start, end) character spans of the original, or the anonymized text
    (aligned by :func:`~privaudit.metrics.tab_align.align`; ``masks`` in the scores says
    which, and ``n_unaligned_chars`` how many characters could not be aligned and count as not
    masked).
    """
    if isinstance(corpus, Sequence):
        every = list(corpus)
        gold = every
    else:
        gold = gold_documents(corpus, split)
        every = gold if split is None else None  # type: ignore[assignment]
    if isinstance(texts_or_spans, Mapping):
        if every is None:
            every = gold_documents(corpus, None)  # type: ignore[arg-type]
        by_id = {d.doc_id: d for d in every}
        unknown = [k for k in texts_or_spans if str(k) not in by_id]
        if unknown:
            name = getattr(corpus, "name", "the gold documents")
            raise ValueError(
                f"Document {unknown[0]!r} is not in corpus {name!r} ({len(unknown)} "
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
    spans: list[Sequence[Span]] = []
    unaligned = 0
    texts = 0
    for d, x in zip(gold, items, strict=True):
        if isinstance(x, str):
            found, lost = align(d.text, x)
            spans.append(found)
            unaligned += lost
            texts += 1
        else:
            spans.append(list(x))
    scores = score_spans(gold, spans)
    scores["masks"] = "aligned" if texts == len(gold) else "reported" if not texts else "mixed"
    scores["n_unaligned_chars"] = unaligned
    return scores


_ROWS = (
    ("entity_recall_direct", "entity recall, DIRECT identifiers", "n_direct_entities"),
    ("entity_recall_quasi", "entity recall, QUASI identifiers", "n_quasi_entities"),
    ("mention_recall", "mention recall (DIRECT + QUASI)", "n_mentions"),
    ("token_recall", "token recall (DIRECT + QUASI)", "n_tokens"),
    ("token_precision", "token precision (uniform weights)", "n_system_tokens"),
    ("mention_precision", "mention precision (uniform weights)", "n_system_spans"),
)
UNDEFINED = "undefined"  # a score over nothing (n = 0): evaluation.py's 0 is no figure


def _cell(value: float, n: int, width: int = 7) -> str:
    return f"{value:>{width}.3f}" if n else f"{UNDEFINED:>{max(width, len(UNDEFINED) + 1)}}"


def format_scores(scores: Mapping[str, Any], title: str = "") -> str:
    """TAB's scores as a small text table (what ``privaudit tab-score`` prints); a score
    over nothing (its ``n`` is 0) is printed as undefined."""
    lines = [title] if title else []
    lines.append(f"  {'measure':<38}{'score':>10}{'n':>8}")
    for key, label, n in _ROWS:
        lines.append(f"  {label:<38}{_cell(scores[key], scores[n], 10)}{scores[n]:>8d}")
    n_by_type = scores.get("n_tokens_by_type", {})
    for etype, value in sorted(scores.get("token_recall_by_type", {}).items()):
        lines.append(
            f"    token recall, {etype:<22}{_cell(value, 1, 10)}{n_by_type.get(etype, 0):>8d}"
        )
    if scores.get("masks") == "aligned" or scores.get("n_unaligned_chars"):
        lines.append(
            f"  masks found by aligning the output text; {scores.get('n_unaligned_chars', 0)} "
            "character(s) could not be aligned and count as not masked"
        )
    return "\n".join(lines)


#: TAB's entity types, in the order of the TAB paper's tables.
TAB_TYPES = ("PERSON", "CODE", "LOC", "ORG", "DEM", "DATETIME", "QUANTITY", "MISC")


def scores_table(rows: Sequence[tuple[str, Mapping[str, Any]]], markdown: bool = True) -> str:
    """Several anonymizers' scores as one table in the TAB paper's layout: entity recall on
    direct and quasi identifiers, token recall overall and per entity type, and token and
    mention precision (uniform weights). Undefined scores (n = 0) are shown as such."""
    types = [t for t in TAB_TYPES if any(t in s.get("token_recall_by_type", {}) for _, s in rows)]
    types += sorted(
        {t for _, s in rows for t in s.get("token_recall_by_type", {}) if t not in TAB_TYPES}
    )
    head = [
        "anonymizer",
        "ER_di",
        "ER_qi",
        "token recall",
        *(f"R {t}" for t in types),
        "token precision",
        "mention precision",
        "masks",
    ]
    body = []
    for name, s in rows:

        def cell(key: str, n: str, s: Mapping[str, Any] = s) -> str:
            return f"{s[key]:.3f}" if s[n] else UNDEFINED

        by_type = s.get("token_recall_by_type", {})
        body.append(
            [
                name,
                cell("entity_recall_direct", "n_direct_entities"),
                cell("entity_recall_quasi", "n_quasi_entities"),
                cell("token_recall", "n_tokens"),
                *(f"{by_type[t]:.3f}" if t in by_type else UNDEFINED for t in types),
                cell("token_precision", "n_system_tokens"),
                cell("mention_precision", "n_system_spans"),
                str(s.get("masks", "reported")),
            ]
        )
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines)
    return "\n".join(",".join(r) for r in [head, *body])
