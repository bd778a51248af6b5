"""The Corpus container shared by every loader.

A corpus is a set of named splits (``train``, ``test``, ``aux``), each a ``datasets.Dataset``
with the columns:

- ``text`` (str), ``label`` (int index into ``label_names``),
- ``attributes`` (dict name → str value, e.g. ``{"gender": "F", "age_bin": "1972-1978"}``),
- ``entities`` (list of ``{"start": int, "end": int, "type": str, "text": str}`` character spans),
- ``author`` (str; authors never straddle splits, so ``aux`` is disjoint from the victims).

A corpus may carry two more splits, same columns (``synthpai`` has both; ``Corpus.subset``,
``fingerprint`` and ``corpus.limits`` treat them like the others):

- ``public``: other people's text, authors disjoint from every other split, for an attacker's
  public pre-training; never victims and never the service's train data (the runner reads
  only ``train``, ``test`` and ``aux``).
- ``background``: for re-identification, known-author text: held-out *other* documents of the
  ``test`` authors plus distractor authors' documents; a document is in one split only, so no
  victim document is in it.

Ground truth (labels, attributes, entities) is read by the runner only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.records import DOCUMENT, UnitKind, unit_kind

if TYPE_CHECKING:
    import datasets

SPLITS = ("train", "test", "aux")
COLUMNS = ("text", "label", "attributes", "entities", "author")


def describe_dropped(info: dict[str, Any]) -> str:
    """A loader's dropped-row counts (``rows_read``, ``dropped_rows``, ``dropped``: reason →
    count) in words: ``dropped 12 of 80 rows: 3 with an empty text, 9 with a missing label``."""
    reasons = ", ".join(f"{n} {why}" for why, n in (info.get("dropped") or {}).items() if n)
    total = info.get("rows_read")
    head = f"dropped {info.get('dropped_rows', 0)}" + (f" of {total}" if total is not None else "")
    return f"{head} rows" + (f": {reasons}" if reasons else "")


@dataclass
class Corpus:
    name: str
    splits: dict[str, datasets.Dataset]
    label_names: list[str]
    attribute_names: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    #: The unit of privacy (:mod:`privaudit.metrics.units`): ``person`` when the loader knows
    #: who wrote each document (its ``author`` column names real people, who may recur), so
    #: the victims are counted, attacked and resampled as people; ``document`` when the
    #: ``author`` column is only a placeholder (one per document).
    unit: UnitKind = DOCUMENT.name

    def __post_init__(self) -> None:
        unit_kind(self.unit)  # a declared unit (privaudit.records), or one line naming them
        missing = [s for s in ("train", "test") if s not in self.splits]
        if missing:
            raise ValueError(
                f"Corpus {self.name!r} lacks the split(s) {missing}; a corpus needs at least "
                "'train' and 'test' (and 'aux' for attacks that learn from auxiliary data)."
            )
        for split, ds in self.splits.items():
            absent = {"text", "label"} - set(ds.column_names)
            if absent:
                raise ValueError(f"Split {split!r} of corpus {self.name!r} lacks columns {absent}.")

    def split(self, name: str) -> datasets.Dataset:
        if name not in self.splits:
            raise ValueError(
                f"Corpus {self.name!r} has no split {name!r}; it has {sorted(self.splits)}."
            )
        return self.splits[name]

    def texts(self, split: str) -> list[str]:
        return list(self.split(split)["text"])

    def labels(self, split: str) -> np.ndarray:
        return np.asarray(self.split(split)["label"], dtype=np.int64)

    def attribute(self, split: str, name: str) -> list[str]:
        ds = self.split(split)
        if "attributes" not in ds.column_names:
            raise ValueError(f"Corpus {self.name!r} has no private attributes.")
        values = [a.get(name) if a else None for a in ds["attributes"]]
        if all(v is None for v in values):
            raise ValueError(
                f"Corpus {self.name!r} has no attribute {name!r}; it has {self.attribute_names}."
            )
        return values

    def entities(self, split: str) -> list[list[dict[str, Any]]]:
        ds = self.split(split)
        if "entities" not in ds.column_names:
            return [[] for _ in range(len(ds))]
        return [list(e or []) for e in ds["entities"]]

    def sizes(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.splits.items()}

    def dropped(self) -> dict[str, Any]:
        """The rows the loader read and dropped, and why (for run.json and the report); empty
        for a corpus whose loader drops nothing."""
        keys = ("rows_read", "dropped_rows", "dropped")
        return {k: self.info[k] for k in keys if k in self.info}

    def check_labels(self) -> None:
        """Fail in one line, before any work, when the label column cannot make a utility task:
        one class overall, or one class in the train or test split (the probe cannot be trained,
        the chance level is 1)."""
        column = (self.info.get("columns") or {}).get("label", "label")
        fix = (
            "map another label column (corpus.params.label, --map label=<column>) or derive "
            "classes with label_map or label_threshold"
        )
        labels = {s: self.labels(s) for s in ("train", "test")}
        overall = np.unique(np.concatenate(list(labels.values())))
        if len(overall) < 2:
            only = self.label_names[overall[0]] if len(overall) else None
            raise ValueError(
                f"Corpus {self.name!r}: label column {column!r} has a single class ({only!r}) in "
                f"all {sum(map(len, labels.values()))} train and test documents; a utility task "
                f"needs at least two: {fix}."
            )
        split_by = str(self.info.get("split", ""))
        for split, y in labels.items():
            present = np.unique(y)
            if len(present) < 2:
                what = (
                    f"a single class ({self.label_names[present[0]]!r} for all {len(y)} "
                    f"documents) in label column {column!r}"
                    if len(present)
                    else "no documents"
                )
                more = (
                    f"put documents of another class in it ({split_by})"
                    if split_by.startswith("column")
                    else f"give it more documents (corpus.limits.{split}, corpus.params.splits) "
                    "or another corpus.params.seed"
                )
                raise ValueError(
                    f"Corpus {self.name!r}: the {split} split has {what}, so utility and the "
                    f"chance level are undefined; {more}, or {fix}."
                )

    def subset(self, limits: dict[str, int | None], rng: np.random.Generator) -> Corpus:
        """At most ``limits[split]`` documents per split, drawn without replacement."""
        splits = {}
        for name, ds in self.splits.items():
            n = limits.get(name)
            if n is not None and n < len(ds):
                idx = np.sort(rng.choice(len(ds), size=n, replace=False))
                ds = ds.select(idx.tolist())
            splits[name] = ds
        return Corpus(
            self.name, splits, self.label_names, self.attribute_names, dict(self.info), self.unit
        )

    def authors(self, split: str) -> list[str | None]:
        """Each document's author in ``split`` (None where unknown, or for every document of
        a corpus whose unit is the document)."""
        ds = self.split(split)
        if self.unit == "document" or "author" not in ds.column_names:
            return [None] * len(ds)
        return [None if a is None or a == "" else str(a) for a in ds["author"]]

    def fingerprint(self) -> str:
        """A short content hash over all splits (for cache keys and result rows)."""
        h = hashlib.sha256()
        h.update(json.dumps([self.name, self.label_names, self.attribute_names]).encode())
        for name in sorted(self.splits):
            ds = self.splits[name]
            h.update(name.encode())
            for text, label in zip(ds["text"], ds["label"], strict=True):
                h.update(text.encode("utf-8", "surrogatepass"))
                h.update(str(label).encode())
        return h.hexdigest()[:16]
