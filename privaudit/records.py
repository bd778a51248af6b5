"""Open records: what the scorer knows about the victims, what an attack returns and what an
attacker is given, each declared once, here, with how it is built from a corpus.

Four registries, below everything that reads them (``api``, ``metrics``, ``audit``; this
module imports nothing of privaudit, so every layer may read it):

- **truth fields** (:class:`TruthField`): what :class:`~privaudit.metrics.truth.Truth` holds
  about the victims (never shown to an attack). Each says how it is built from the corpus and
  the backbone (:class:`Source`) and how it is cut to a subset of victims (``cut``:
  ``victims``, one value per victim; ``victims_by_name``, a mapping of such lists, as the
  attributes; ``shared``, one value for all, kept whole). :meth:`Truth.subset` and
  :meth:`Truth.n_victims` read these declarations, and a metric's ``needs`` is checked
  against them. A run builds the ``always`` fields (what the release cut and every built-in
  scorer read) and, besides, only the fields its attacks' metrics declare they need.
- **prediction kinds** (:class:`PredictionKind`): what :class:`~privaudit.api.Predictions`
  may carry (``tokens``, ``attributes``, ``entities``, ``texts``, and any registered one, as
  ``ranking``); a metric's ``prediction_kind`` and every ``Predictions.kind`` must be one.
- **knowledge fields** (:class:`KnowledgeField`): what :class:`~privaudit.api.Knowledge`
  grants the attacker beyond its core (the backbone, queries to the mechanism at the point,
  the ``aux`` split, the declared guarantee): a field built from the corpus (``public`` text,
  ``background`` documents of known authors). An attack names the ones it needs
  (``Attack.needs_knowledge``); a run builds only those. When the corpus cannot provide a
  needed field, the cell is ``n/a`` with the field's ``missing`` reason and ``na_cause``
  (``truth``: the corpus, not the release, is what lacks it).

- **unit kinds** (:class:`UnitKindSpec`): what a victim is counted and resampled as
  (``document``; ``person``, several documents by one author): the corpus declares its unit
  (:attr:`privaudit.corpora.base.Corpus.unit`), :mod:`privaudit.metrics.units` groups and
  names by it. Another unit (a conversation, a session) is one more declaration here, with a
  truth field that gives each victim its unit (as ``person`` in :mod:`privaudit.metrics.linked`).

A new family registers its own fields and kind here (``register_truth_field``,
``register_prediction_kind``, ``register_knowledge_field``) from its own module: no edit to
``api/``, ``metrics/spec.py``, ``metrics/truth.py``, the runner or the leaderboard.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Cut = Literal["victims", "victims_by_name", "shared"]


@dataclass
class Source:
    """What a field is built from: the run's corpus (already cut to its limits) and the
    loaded backbone; ``memo`` holds work several fields share (the test tokenization)."""

    corpus: Any  # privaudit.corpora.base.Corpus
    backbone: Any = None  # privaudit.models.backbone.Backbone
    memo: dict[str, Any] = field(default_factory=dict)

    def once(self, key: str, make: Callable[[], Any]) -> Any:
        """``make()``, computed once per source."""
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def split(self, name: str) -> Any:
        """The corpus split ``name`` (a ``datasets.Dataset``), or None when it has none."""
        return getattr(self.corpus, "splits", {}).get(name)


@dataclass(frozen=True)
class TruthField:
    """One field of the victims' truth (see the module docstring)."""

    name: str
    description: str
    build: Callable[[Source], Any] | None = None
    cut: Cut = "victims"
    default: Callable[[], Any] = list
    always: bool = False  # built for every run (the release cut or every scorer reads it)

    def count(self, value: Any) -> int:
        """How many victims ``value`` covers (0 for a shared field)."""
        if self.cut == "shared" or value is None:
            return 0
        if self.cut == "victims_by_name":
            return max((len(v) for v in value.values()), default=0)
        return len(value)

    def subset(self, value: Any, idx: Sequence[int], n: int) -> Any:
        """``value`` for the victims ``idx`` (of ``n``), in that order; a per-victim field
        that does not cover every victim (not built) is kept as it is."""

        def pick(xs: Sequence[Any]) -> list[Any]:
            return [xs[i] for i in idx] if len(xs) == n else list(xs)

        if self.cut == "shared" or value is None:
            return value
        if self.cut == "victims_by_name":
            return {k: pick(v) for k, v in value.items()}
        return pick(value)


@dataclass(frozen=True)
class PredictionKind:
    """One kind of :class:`~privaudit.api.Predictions` (``name`` is also the field that holds
    it: ``predictions.ranking``)."""

    name: str
    description: str


@dataclass(frozen=True)
class KnowledgeField:
    """One thing the threat model may grant an attacker, built from the corpus (None when the
    corpus cannot provide it: ``missing`` says why, in one line an attack's n/a reason
    carries; ``na_cause`` says what lacks it, as the results' column does)."""

    name: str
    description: str
    build: Callable[[Source], Any] | None = None  # None: the runner grants it at each point
    missing: str = ""
    na_cause: Literal["truth", "release"] = "truth"


_TRUTH: dict[str, TruthField] = {}
_KINDS: dict[str, PredictionKind] = {}
_KNOWLEDGE: dict[str, KnowledgeField] = {}


def register_once(table: dict[str, Any], spec: Any, what: str) -> Any:
    """``spec`` into ``table`` by its name; the same object again is a no-op, another is refused."""
    existing = table.get(spec.name)
    if existing is not None and existing != spec:
        raise ValueError(f"A {what} named {spec.name!r} is already registered; pick another name.")
    table[spec.name] = spec
    return spec


def register_truth_field(spec: TruthField) -> TruthField:
    """Declare a truth field (once; the same object again is a no-op)."""
    return register_once(_TRUTH, spec, "truth field")


def register_prediction_kind(spec: PredictionKind) -> PredictionKind:
    """Declare a prediction kind (once; the same object again is a no-op)."""
    return register_once(_KINDS, spec, "prediction kind")


def register_knowledge_field(spec: KnowledgeField) -> KnowledgeField:
    """Declare a knowledge field (once; the same object again is a no-op)."""
    return register_once(_KNOWLEDGE, spec, "knowledge field")


#: A unit kind's name (one of :func:`unit_kinds`).
UnitKind = str


@dataclass(frozen=True)
class UnitKindSpec:
    """One kind of unit of privacy. ``one``/``many``: what a count of units is called;
    ``grouped``: several documents can share a unit (the corpus's ``author`` column says
    whose), so resampling draws units with all their documents and counts are stated in
    units."""

    name: str
    one: str
    many: str
    grouped: bool


_UNITS: dict[str, UnitKindSpec] = {}


def register_unit_kind(spec: UnitKindSpec) -> UnitKindSpec:
    """Declare a unit kind (once; the same object again is a no-op)."""
    return register_once(_UNITS, spec, "unit kind")


def unit_kinds() -> dict[str, UnitKindSpec]:
    """Every declared unit kind, by name."""
    return dict(_UNITS)


def unit_kind(name: str) -> UnitKindSpec:
    """The declared unit kind ``name``; a one-line error naming the known ones otherwise."""
    if name not in _UNITS:
        raise ValueError(f"Unknown unit {name!r}; a unit is one of {tuple(_UNITS)}.")
    return _UNITS[name]


DOCUMENT = register_unit_kind(UnitKindSpec("document", "victim", "victims", grouped=False))
PERSON = register_unit_kind(UnitKindSpec("person", "person", "people", grouped=True))


def unregister(name: str) -> None:
    """Forget a truth field, prediction kind or knowledge field named ``name`` (tests that add
    a made-up family and take it away again). Built-ins cannot be removed."""
    if name in BUILTIN_NAMES:
        raise ValueError(f"{name!r} is a built-in record and cannot be unregistered.")
    for table in (_TRUTH, _KINDS, _KNOWLEDGE):
        table.pop(name, None)


def truth_fields() -> dict[str, TruthField]:
    """Every declared truth field, by name (built-ins first)."""
    return dict(_TRUTH)


def prediction_kinds() -> dict[str, PredictionKind]:
    """Every declared prediction kind, by name."""
    return dict(_KINDS)


def knowledge_fields() -> dict[str, KnowledgeField]:
    """Every declared knowledge field, by name."""
    return dict(_KNOWLEDGE)


def check_names(names: Sequence[str], table: Mapping[str, Any], what: str, owner: str) -> None:
    """Fail with one line when ``names`` holds one that ``table`` does not declare."""
    unknown = sorted(set(names) - set(table))
    if unknown:
        raise ValueError(
            f"{owner} needs unknown {what}s {unknown}; the declared ones are "
            f"{', '.join(sorted(table))} (privaudit.records.register_{what.replace(' ', '_')} "
            "adds one)."
        )


def build_truth(source: Source, wanted: Sequence[str] = ()) -> dict[str, Any]:
    """The truth fields a run needs, built from ``source``: the ``always`` ones and those in
    ``wanted`` (a metric's ``needs``). A field without a builder, or whose builder gives
    None, takes its default (the scorer then says what it lacks)."""
    check_names(wanted, _TRUTH, "truth field", "The run's metrics")
    out: dict[str, Any] = {}
    for name, spec in _TRUTH.items():
        if not (spec.always or name in wanted):
            continue
        value = spec.build(source) if spec.build is not None else None
        out[name] = spec.default() if value is None else value
    return out


def build_knowledge(source: Source, wanted: Sequence[str]) -> dict[str, Any]:
    """The knowledge fields in ``wanted`` (the run's attacks' ``needs_knowledge``) that are
    built from the corpus, built from ``source``; one the corpus cannot provide is None. The
    fields the runner grants at each point (no ``build``) are left to it."""
    check_names(wanted, _KNOWLEDGE, "knowledge field", "The run's attacks")
    built = [n for n in dict.fromkeys(wanted) if _KNOWLEDGE[n].build is not None]
    return {name: _KNOWLEDGE[name].build(source) for name in built}  # type: ignore[misc]


# -------------------------------------------------------------------------------------------
# The results schema
# -------------------------------------------------------------------------------------------

#: The results table's columns, in order (``results.csv``, ``privaudit.audit.store``), each
#: with whether the leaderboard reads it (``privaudit.leaderboard.board`` keeps only those).
#: ``na_cause``: why a row is n/a: "release" (the attack cannot read it), "truth" (the corpus
#: cannot score it: metrics.truth.NotScorable, or a knowledge field the corpus lacks); empty
#: otherwise.
RESULT_COLUMNS: tuple[tuple[str, bool], ...] = (
    ("defense", True),
    ("knob", True),
    ("knob_value", True),
    ("attack", True),
    ("seed", True),
    ("status", True),
    ("reason", True),
    ("attack_metric", True),
    ("attack_score", True),
    ("empirical_privacy", True),
    ("utility_metric", True),
    ("utility", True),
    ("utility_macro_f1", False),
    ("replacement_rate", True),
    ("seconds", False),
    ("privatize_seconds", True),
    ("utility_seconds", False),
    ("attack_seconds", True),
    ("guarantee", True),
    ("defense_params", True),
    ("attack_params", False),
    ("utility_evaluator", True),
    ("corpus", False),
    ("corpus_fingerprint", True),
    ("backbone", False),
    ("n_train", False),
    ("n_test", True),
    ("privaudit_version", False),
    ("cell_key", True),
    ("target_rate", True),
    ("label", True),
    ("attack_baseline", True),
    ("attack_macro_f1", False),
    ("attack_details", False),
    ("n_words", True),
    ("cell", False),
    ("point", True),
    ("family", True),
    ("utility_accuracy", False),
    ("objective", True),
    ("utility_lower_bound", True),
    ("attribute_readout", True),
    ("attribute_readout_no_objective", True),
    ("release", True),
    ("normalised_privacy", False),
    ("utility_ci_low", True),
    ("utility_ci_high", True),
    ("attack_score_ci_low", False),
    ("attack_score_ci_high", False),
    ("empirical_privacy_ci_low", False),
    ("empirical_privacy_ci_high", False),
    ("normalised_privacy_ci_low", False),
    ("normalised_privacy_ci_high", False),
    ("na_cause", True),
)


def result_columns() -> list[str]:
    """The results table's columns, in order."""
    return [name for name, _ in RESULT_COLUMNS]


def board_columns() -> frozenset[str]:
    """The results columns the leaderboard reads."""
    return frozenset(name for name, board in RESULT_COLUMNS if board)


# -------------------------------------------------------------------------------------------
# The built-in records: what the text-recovery, entity and attribute families read
# -------------------------------------------------------------------------------------------


def token_layout(
    bb: Any, texts: list[str], tokens: list[np.ndarray]
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per text, the piece position ([UNK] counted, specials not) and the character end of
    each token of ``tokens`` (``bb.token_ids(texts)``): what the scorer needs to cut a
    victim's truth where a truncated release ends. Empty lists when the tokenizer gives no
    offsets or its pieces do not reproduce ``tokens`` (then truncated releases cut tokens by
    count and leave texts whole)."""
    if not texts:
        return [], []
    try:
        enc = bb.tokenizer(
            list(texts),
            add_special_tokens=False,
            truncation=False,
            verbose=False,
            return_offsets_mapping=True,
        )
    except (NotImplementedError, TypeError, ValueError):  # a slow tokenizer has no offsets
        return [], []
    unk = bb.tokenizer.unk_token_id
    pieces, ends = [], []
    for ids, offsets, want in zip(enc["input_ids"], enc["offset_mapping"], tokens, strict=True):
        keep = [p for p, i in enumerate(ids) if i != unk]
        if [ids[p] for p in keep] != np.asarray(want).tolist():
            return [], []
        pieces.append(np.asarray(keep, dtype=np.int64))
        ends.append(np.asarray([offsets[p][1] for p in keep], dtype=np.int64))
    return pieces, ends


def aux_token_counts(bb: Any, texts: list[str]) -> np.ndarray:
    """How often each backbone token occurs in the aux texts."""
    ids = [np.asarray(t, np.int64) for t in bb.token_ids(texts)]
    return np.bincount(np.concatenate([np.zeros(0, np.int64), *ids]), minlength=0)


def most_frequent_token(counts: np.ndarray) -> int | None:
    return int(counts.argmax()) if counts.size and counts.sum() else None


def mean_embedding(bb: Any, counts: np.ndarray) -> np.ndarray | None:
    """The aux tokens' mean input embedding (the least-squares constant guess)."""
    if not counts.size or not counts.sum():
        return None
    emb = np.asarray(bb.embeddings[: len(counts)], np.float64)
    return (counts @ emb / counts.sum()).astype(np.float32)


def _test_texts(source: Source) -> list[str]:
    return source.once("test_texts", lambda: list(source.corpus.texts("test")))


def _tokens(source: Source) -> list[np.ndarray]:
    return source.once("tokens", lambda: source.backbone.token_ids(_test_texts(source)))


def _layout(source: Source) -> tuple[list[np.ndarray], list[np.ndarray]]:
    return source.once(
        "layout", lambda: token_layout(source.backbone, _test_texts(source), _tokens(source))
    )


def _aux_counts(source: Source) -> np.ndarray:
    def count() -> np.ndarray:
        aux = source.split("aux")
        if aux is None:
            return np.zeros(0, np.int64)
        return aux_token_counts(source.backbone, source.corpus.texts("aux"))

    return source.once("aux_counts", count)


def _attributes(source: Source) -> dict[str, list[Any]]:
    corpus = source.corpus
    return {a: corpus.attribute("test", a) for a in corpus.attribute_names}


_BUILTIN_TRUTH = (
    TruthField(
        "tokens", "per victim, its WordPiece ids (no specials, no [UNK])", _tokens, always=True
    ),
    TruthField(
        "attributes",
        "per private attribute, each victim's value (None: unknown)",
        _attributes,
        cut="victims_by_name",
        default=dict,
        always=True,
    ),
    TruthField("texts", "per victim, its original text", _test_texts, always=True),
    TruthField(
        "entities",
        "per victim, its annotated entities ({text, type, ...})",
        lambda s: s.corpus.entities("test"),
        always=True,
    ),
    TruthField(
        "embeddings",
        "the backbone's input-embedding matrix (for MSE)",
        lambda s: s.backbone.embeddings,
        cut="shared",
        default=lambda: None,
        always=True,
    ),
    TruthField(
        "frequent_token",
        "the aux split's most frequent token (a baseline guess)",
        lambda s: most_frequent_token(_aux_counts(s)),
        cut="shared",
        default=lambda: None,
    ),
    TruthField(
        "mean_embedding",
        "the aux tokens' mean input embedding (the MSE baseline)",
        lambda s: mean_embedding(s.backbone, _aux_counts(s)),
        cut="shared",
        default=lambda: None,
    ),
    TruthField(
        "piece_positions",
        "per victim, each token's index among the pieces with [UNK]",
        lambda s: _layout(s)[0],
        always=True,
    ),
    TruthField(
        "token_ends",
        "per victim, the character offset where each token ends",
        lambda s: _layout(s)[1],
        always=True,
    ),
)
_BUILTIN_KINDS = (
    PredictionKind("tokens", "per document, the predicted original token ids"),
    PredictionKind("attributes", "per attribute name, one predicted value per document"),
    PredictionKind("entities", 'per document, a list of {"text", "type"} dicts'),
    PredictionKind("texts", "per document, the reconstructed original text"),
)


def _public_split(source: Source) -> Any:
    name = getattr(source.corpus, "public_split", None) or "public"
    return source.split(str(name))


_BUILTIN_KNOWLEDGE = (
    # The core, granted by the runner at each point (Knowledge's own attributes).
    KnowledgeField("white_box", "whether the attacker may read the backbone's internals"),
    KnowledgeField("backbone", "the public backbone's name"),
    KnowledgeField("query_mechanism", "queries to the public mechanism at the victims' level"),
    KnowledgeField("guarantee", "the mechanism's declared guarantee"),
    KnowledgeField("plan", "what the attack's plan-time hook resolved from the run's corpus"),
    KnowledgeField(
        "aux",
        "the attacker's own labelled split (never the victims')",
        lambda s: s.split("aux"),
        missing="the corpus has no aux split",
        na_cause="release",
    ),
    KnowledgeField(
        "public",
        "other people's text (never victims'), for an attacker's public pre-training",
        _public_split,
        missing="the corpus has no public split (other people's text for pre-training)",
    ),
)
for _spec in _BUILTIN_TRUTH:
    register_truth_field(_spec)
for _kind in _BUILTIN_KINDS:
    register_prediction_kind(_kind)
for _field in _BUILTIN_KNOWLEDGE:
    register_knowledge_field(_field)
#: The built-in names (they cannot be unregistered).
BUILTIN_NAMES: frozenset[str] = frozenset(
    s.name for s in (*_BUILTIN_TRUTH, *_BUILTIN_KINDS, *_BUILTIN_KNOWLEDGE)
)
