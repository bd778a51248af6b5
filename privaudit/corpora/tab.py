"""TAB, the Text Anonymization Benchmark, as a corpus (``tab``).

TAB (Pilán, Lison, Øvrelid, Papadopoulou, Sánchez, Batet, "The Text Anonymization Benchmark
(TAB): A Dedicated Corpus and Evaluation Framework for Text Anonymization", Computational
Linguistics 2022; MIT licence) is 1,268 ECHR court cases with stand-off annotations: a JSON
list of documents, each with ``doc_id``, ``text``, ``dataset_type`` (train / dev / test),
``meta`` (year, legal_branch, articles, countries, applicant), ``task`` and ``annotations``:
annotator → ``{"entity_mentions": [...]}``, each mention with ``entity_type``,
``entity_mention_id``, ``start_offset``, ``end_offset``, ``span_text``, ``identifier_type``
(DIRECT / QUASI / NO_MASK), ``entity_id``, ``confidential_status``.

What the corpus holds (choices):

- ``text``: the case text; ``author``: the ``doc_id`` (each case is its own author, so aux
  never shares one with the victims).
- ``label``: a ``meta`` field a service could learn, by default ``countries`` (the respondent
  state, e.g. ``TUR``: stated in every case's first paragraph and left unmasked by TAB's
  annotators, so an anonymizer that keeps utility keeps it). ``label="legal_branch"``,
  ``"year"`` or ``"articles"`` (the first article listed) work too. Fewer than two classes is
  an error. ``label=None`` is for scoring alone (``privaudit tab-score``): no label is read
  (every document gets class 0), and an empty split is no warning.
- Splits: TAB's ``train`` → ``train`` (the service's), ``dev`` → ``aux`` (the attacker's),
  ``test`` → ``test`` (the victims, and what TAB's own figures are reported on); ``split_map``
  changes this. A TAB split missing from the input leaves its corpus split empty, with a
  warning (enough for ``privaudit tab-score``; an audit needs train and test).
- ``entities``: ONE annotator's spans that need masking (identifier_type DIRECT or QUASI),
  with ``start``/``end`` character offsets, ``type`` (TAB's entity_type), ``text``, and
  ``identifier_type``, ``entity_id``, ``mention_id``. The annotator is the first one listed in
  the document's ``quality_checked`` (whose annotation another annotator revised), else the
  first in ``annotations``; ``annotator=NAME`` picks that one where it annotated. This is what
  attacks' entity metrics read as the victims' secrets.
- ``tab_gold``: every mention of every annotator (NO_MASK included), each with its
  ``annotator``, in file order. TAB's evaluation uses all annotators (a micro-average over
  them) and needs the NO_MASK mentions of entities that need masking, and the first mention of
  each entity (which fixes its DIRECT/QUASI kind), so the scorer
  (:mod:`privaudit.metrics.tab`) reads this column. The shared corpus schema
  (:func:`~privaudit.corpora.splits.corpus_features`: entities with four keys) stays as it is:
  TAB's splits carry their own schema (:func:`tab_features`), a superset of it.

Input checks, each one line: a missing file, a file that is not JSON or not TAB's layout (the
first document or mention lacking a key names the key), an identifier type outside DIRECT /
QUASI / NO_MASK, offsets outside the text (refused, as TAB's evaluation.py refuses them, with
the count and the first one), a duplicated ``doc_id``. A ``span_text`` that differs from the
text at its offsets is counted and warned about (the offsets are what TAB scores);
``strict_spans=True`` refuses instead. Documents with an empty text are dropped and counted.
Nothing is downloaded: ``path`` is a JSON file, a folder of them (``echr_train.json``,
``echr_dev.json``, ``echr_test.json``), a list of files, or ``hf:NAME`` where a Hugging Face
Hub is reachable.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.corpora.base import SPLITS, Corpus, describe_dropped
from privaudit.corpora.files import is_network_error
from privaudit.corpora.reading import warn_once
from privaudit.corpora.splits import corpus_features
from privaudit.params import checked

if TYPE_CHECKING:
    import datasets

IDENTIFIER_TYPES = ("DIRECT", "QUASI", "NO_MASK")
TO_MASK = frozenset({"DIRECT", "QUASI"})
DOC_KEYS = ("doc_id", "text", "annotations", "dataset_type")  # what evaluation.py requires
MENTION_KEYS = ("entity_id", "identifier_type", "start_offset", "end_offset", "entity_type")
DEFAULT_SPLIT_MAP: dict[str, str] = {"train": "train", "dev": "aux", "test": "test"}
LABELS = ("countries", "legal_branch", "year", "articles")
_FILES = ("echr_train.json", "echr_dev.json", "echr_test.json")


def tab_features() -> datasets.Features:
    """The schema of a TAB split: the corpus schema, entities with TAB's keys, ``tab_gold``."""
    import datasets

    string, int64 = datasets.Value("string"), datasets.Value("int64")
    feats = corpus_features([])
    mention = {
        "start": int64,
        "end": int64,
        "type": string,
        "identifier_type": string,
        "entity_id": string,
        "mention_id": string,
    }
    feats["entities"] = datasets.List({**mention, "text": string})
    feats["tab_gold"] = datasets.List({**mention, "annotator": string})
    return feats


@checked
def load_tab(
    path: str | Path | Sequence[str | Path],
    *,
    label: str | None = "countries",
    split_map: Mapping[str, str] | None = None,
    annotator: str | None = None,
    strict_spans: bool = False,
    name: str = "tab",
) -> Corpus:
    """Load TAB from its JSON file(s) (see the module docstring for what the corpus holds)."""
    docs, source = _read(path)
    if not docs:
        raise ValueError(
            f"{source} has no documents (an empty list); give TAB's echr_test.json (or the "
            f"folder with {', '.join(_FILES)})."
        )
    split_map = dict(DEFAULT_SPLIT_MAP if split_map is None else split_map)
    bad = sorted({v for v in split_map.values() if v not in SPLITS})
    if bad:
        raise ValueError(f"split_map targets must be train/test/aux, got {bad}.")
    rows: dict[str, list[dict[str, Any]]] = {s: [] for s in SPLITS}
    seen: set[str] = set()
    mismatched: list[str] = []
    empty = 0
    for i, doc in enumerate(docs):
        row, split, bad_spans = _document(doc, i, source, label, split_map, annotator)
        if row["author"] in seen:
            raise ValueError(f"{source}: doc_id {row['author']!r} appears twice.")
        seen.add(row["author"])
        mismatched += bad_spans
        if not row["text"].strip():
            empty += 1  # nothing to privatize or score
            continue
        rows[split].append(row)
    if mismatched:
        msg = (
            f"{source}: {len(mismatched)} mention(s) whose span_text differs from the text at "
            f"their offsets (first: {mismatched[0]})"
        )
        if strict_spans:
            raise ValueError(msg + "; fix the offsets or load with strict_spans=False.")
        warn_once(msg + "; the offsets are used, as TAB's evaluation does.")
    values = sorted({r["label"] for split_rows in rows.values() for r in split_rows})
    if label is not None and len(values) < 2:
        raise ValueError(
            f"{source}: meta.{label} has {len(values)} distinct value(s) "
            f"({', '.join(map(repr, values))}); a utility label needs at least two: choose "
            f"another label ({', '.join(x for x in LABELS if x != label)})."
        )
    splits = _datasets(rows, values, source, split_map, scoring_only=label is None)
    info = {
        "source": source,
        "label": None if label is None else f"meta.{label}",
        "split": f"TAB dataset_type via {split_map}",
        "annotator_rule": annotator or "first quality_checked, else first listed",
        "rows_read": len(docs),
        "dropped_rows": empty,
        "dropped": {"with an empty text": empty} if empty else {},
        "span_text_mismatches": len(mismatched),
    }
    if empty:
        warn_once(f"{source}: {describe_dropped(info)}.")
    return Corpus(name=name, splits=splits, label_names=values, info=info)


def _datasets(
    rows: dict[str, list[dict[str, Any]]],
    values: list[Any],
    source: str,
    split_map: Mapping[str, str],
    *,
    scoring_only: bool,
) -> dict[str, Any]:
    """The splits as datasets, each row's label as its index in ``values``; an empty aux is
    left out, an empty train or test kept (empty) with a warning unless ``scoring_only``."""
    import datasets

    index = {v: k for k, v in enumerate(values)}
    features = tab_features()
    splits = {}
    for split, split_rows in rows.items():
        if not split_rows and split == "aux":
            continue
        if not split_rows and not scoring_only:  # scoring alone needs no train split
            warn_once(
                f"{source}: no TAB document maps to the {split} split (split_map {split_map}); "
                "it is empty: enough for tab-score, but an audit needs train and test "
                f"(give the folder with {', '.join(_FILES)})."
            )
        data = [{**r, "label": index[r["label"]]} for r in split_rows]
        splits[split] = (
            datasets.Dataset.from_list(data, features=features)
            if data  # from_list cannot type an empty list
            else datasets.Dataset.from_dict({k: [] for k in features}, features=features)
        )
    return splits


# --------------------------------------------------------------------------------------------
# Reading and checking
# --------------------------------------------------------------------------------------------


def _read(path: str | Path | Sequence[str | Path]) -> tuple[list[Any], str]:
    """The documents of every input, and a name for messages."""
    if isinstance(path, str) and path.startswith("hf:"):
        return _read_hub(path[3:]), path
    if isinstance(path, (str, Path)):
        p = Path(path).expanduser()
        if p.is_dir():
            files = [p / f for f in _FILES if (p / f).is_file()] or sorted(p.glob("*.json"))
            if not files:
                raise FileNotFoundError(f"No TAB JSON file ({', '.join(_FILES)}) in {p}.")
        else:
            files = [p]
    else:
        files = [Path(f).expanduser() for f in path]
        if not files:
            raise ValueError("No TAB file given.")
    docs: list[Any] = []
    for f in files:
        docs += _read_file(f)
    return docs, str(path if isinstance(path, (str, Path)) else ", ".join(map(str, files)))


def _read_file(path: Path) -> list[Any]:
    if not path.is_file():
        raise FileNotFoundError(f"No such TAB file: {path}.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not a TAB file: not UTF-8 JSON ({exc}).") from None
    if not isinstance(data, list):
        raise ValueError(
            f"{path} is not TAB format: expected a JSON list of documents, got "
            f"{type(data).__name__}."
        )
    return data


def _read_hub(name: str) -> list[Any]:
    """TAB documents from a Hugging Face Hub dataset with TAB's fields (all its splits)."""
    import datasets

    try:
        loaded = datasets.load_dataset(name)
    except Exception as exc:
        if is_network_error(exc):
            raise ValueError(
                f"Cannot load {name!r}: the Hugging Face Hub is unreachable from here "
                f"({type(exc).__name__}: {exc}). Download TAB's {', '.join(_FILES)} (github.com/"
                "NorskRegnesentral/text-anonymization-benchmark) and give their folder instead."
            ) from exc
        raise ValueError(
            f"Cannot load {name!r} from the Hugging Face Hub: {type(exc).__name__}: {exc}."
        ) from exc
    parts = loaded.values() if isinstance(loaded, datasets.DatasetDict) else [loaded]
    return [row for ds in parts for row in ds.to_list()]


def _document(
    doc: Any,
    i: int,
    source: str,
    label: str | None,
    split_map: Mapping[str, str],
    annotator: str | None,
) -> tuple[dict[str, Any], str, list[str]]:
    """One TAB document as a corpus row (label still a value), its split, and its mentions
    whose span_text differs from the text."""
    where = f"{source}: document {i}"
    if not isinstance(doc, Mapping):
        raise ValueError(f"{where} is not TAB format: a document is a JSON object.")
    for key in DOC_KEYS:
        if key not in doc:
            raise ValueError(f"{where} is not TAB format: it lacks the key {key!r}.")
    doc_id, text = str(doc["doc_id"]), doc["text"]
    where = f"{source}: document {doc_id!r}"
    if not isinstance(text, str):
        raise ValueError(f"{where}: text is {type(text).__name__}, not a string.")
    split = split_map.get(str(doc["dataset_type"]))
    if split is None:
        raise ValueError(
            f"{where}: dataset_type {doc['dataset_type']!r} is not in split_map {dict(split_map)}."
        )
    meta = doc.get("meta")
    value = "" if label is None else meta.get(label) if isinstance(meta, Mapping) else None
    if isinstance(value, list):  # articles: the first one listed
        value = value[0] if value else None
    if label is not None and (value is None or str(value).strip() == ""):
        raise ValueError(f"{where} has no meta.{label} for the label; choose another label.")
    annotations = doc["annotations"]
    if not isinstance(annotations, Mapping):
        raise ValueError(f"{where} is not TAB format: annotations is not an object.")
    gold, mismatched = _gold_mentions(annotations, text, doc_id, where)
    chosen = _annotator(doc, annotations, annotator)
    entities = [
        {**{k: v for k, v in g.items() if k != "annotator"}, "text": text[g["start"] : g["end"]]}
        for g in gold
        if g["annotator"] == chosen and g["identifier_type"] in TO_MASK
    ]
    row = {
        "text": text,
        "label": str(value),
        "entities": entities,
        "author": doc_id,
        "tab_gold": gold,
    }
    return row, split, mismatched


def _gold_mentions(
    annotations: Mapping[str, Any], text: str, doc_id: str, where: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """Every annotator's mentions, checked, as ``tab_gold`` rows in file order, and the
    mentions whose span_text differs from the text at their offsets."""
    gold: list[dict[str, Any]] = []
    mismatched: list[str] = []
    out_of_range: list[str] = []
    for who, ann in annotations.items():
        if not isinstance(ann, Mapping) or "entity_mentions" not in ann:
            raise ValueError(
                f"{where} is not TAB format: annotator {who!r} lacks the key 'entity_mentions'."
            )
        for m in ann["entity_mentions"]:
            missing = [k for k in MENTION_KEYS if not isinstance(m, Mapping) or k not in m]
            if missing:
                raise ValueError(
                    f"{where} is not TAB format: a mention of {who!r} lacks the key {missing[0]!r}."
                )
            kind = m["identifier_type"]
            if kind not in IDENTIFIER_TYPES:
                raise ValueError(
                    f"{where}: identifier_type {kind!r} of mention "
                    f"{m.get('entity_mention_id')!r} is not one of {', '.join(IDENTIFIER_TYPES)}."
                )
            start, end = m["start_offset"], m["end_offset"]
            if not (
                isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)
            ):
                out_of_range.append(f"[{start}, {end}) of {who!r}")
                continue
            span = m.get("span_text")
            if span is not None and span != text[start:end]:
                mismatched.append(f"{doc_id} [{start}, {end}) {span!r} vs {text[start:end]!r}")
            gold.append(
                {
                    "start": start,
                    "end": end,
                    "type": str(m["entity_type"]),
                    "identifier_type": kind,
                    "entity_id": str(m["entity_id"]),
                    "mention_id": str(m.get("entity_mention_id", "")),
                    "annotator": str(who),
                }
            )
    if out_of_range:
        raise ValueError(
            f"{where}: {len(out_of_range)} mention(s) with offsets outside its "
            f"{len(text)}-character text (first: {out_of_range[0]}); TAB's evaluation refuses "
            "them too."
        )
    return gold, mismatched


def _annotator(doc: Mapping[str, Any], annotations: Mapping[str, Any], wanted: str | None) -> str:
    """The annotator whose spans make ``entities`` (see the module docstring)."""
    if wanted is not None and wanted in annotations:
        return wanted
    checked_by = doc.get("quality_checked") or []
    for who in checked_by if isinstance(checked_by, list) else []:
        if who in annotations:
            return str(who)
    return str(next(iter(annotations), ""))
