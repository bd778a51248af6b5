"""The unit of privacy: who a victim is, for counting and for resampling.

Privacy belongs to people. Where a person wrote several of the victim documents (SynthPAI's
62 people wrote its 1,000 victim comments), the documents are not independent draws: one
person's comments share their writer's attributes and habits, so an interval that resamples
documents as if each were a person is too narrow (3.3× for re-identification on SynthPAI).
The corpus declares its unit (:attr:`privaudit.corpora.base.Corpus.unit`): ``person`` when it
knows who wrote each document (``synthpai``, ``synthetic-reviews``, a ``file`` corpus with an
``author`` column), ``document`` otherwise. :class:`Units` holds, for every test document, the
index of its unit; the run's bootstrap (:class:`privaudit.metrics.stats.Bootstrap`) then draws
**units** with replacement and gives each of a drawn person's documents that person's
multiplicity (a cluster bootstrap: Davison & Hinkley, *Bootstrap Methods*, §2.4, the
"resample the clusters" scheme), so every interval, paired difference, worst case, rank, Holm
test and utility interval resamples people together with all their documents.

With one document per unit the cluster weights equal the document bootstrap's, draw for draw
(the same seeded stream over the same number of units), so a corpus without authors, or one
whose authors each wrote one document, gets exactly the intervals it had.

Stored beside the outcomes (``run.json``'s ``unit``) are the unit kind, the counts, and each
test document's unit as a **salted hash** (12 hex digits of SHA-256 over a random per-run salt
and the author's id, the salt never stored): enough to group documents again, never the name.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.metrics.outcomes import bootstrap_weights
from privaudit.records import DOCUMENT, PERSON, UnitKind, UnitKindSpec, unit_kind


@dataclass(frozen=True)
class Units:
    """Each test document's unit (``groups[d]`` in 0..M-1, numbered by first appearance) and
    what a unit is (``kind``)."""

    kind: UnitKind
    groups: tuple[int, ...]

    def __post_init__(self) -> None:
        unit_kind(self.kind)
        if any(g < 0 for g in self.groups):
            raise ValueError("Unit indices must be non-negative.")

    @classmethod
    def documents(cls, n: int) -> Units:
        """Every document its own unit."""
        return cls("document", tuple(range(int(n))))

    @classmethod
    def of_authors(cls, authors: Sequence[Any], kind: UnitKind = PERSON.name) -> Units:
        """Units from each document's author; a document with no author (None, "") is a unit
        of its own. A kind that is not ``grouped`` (``document``) ignores the authors."""
        if not unit_kind(kind).grouped:
            return cls("document" if kind == DOCUMENT.name else kind, tuple(range(len(authors))))
        index: dict[str, int] = {}
        groups = []
        for d, author in enumerate(authors):
            key = f"\x00doc{d}" if author is None or str(author) == "" else str(author)
            groups.append(index.setdefault(key, len(index)))
        return cls(kind, tuple(groups))

    @property
    def spec(self) -> UnitKindSpec:
        """What this kind of unit is (:func:`privaudit.records.unit_kinds`)."""
        return unit_kind(self.kind)

    @property
    def grouped(self) -> bool:
        """Whether the units group documents (people), so counts are stated in units."""
        return self.spec.grouped

    @property
    def n_documents(self) -> int:
        return len(self.groups)

    @property
    def n_units(self) -> int:
        return max(self.groups, default=-1) + 1

    @property
    def clustered(self) -> bool:
        """Whether some unit holds more than one document (the cluster weights differ)."""
        return self.n_units < self.n_documents

    def label(self) -> str:
        """``1,000 documents by 62 people`` (or ``1,000 documents`` for document units)."""
        docs = f"{self.n_documents:,} document{'s' if self.n_documents != 1 else ''}"
        if not self.grouped:
            return docs
        return f"{docs} by {self.n_units:,} {self.unit_name(self.n_units)}"

    def unit_name(self, n: int | None = None) -> str:
        """The unit's plural (or singular for ``n == 1``): ``people``, ``victims``."""
        return self.spec.one if n == 1 else self.spec.many

    def first_documents(self) -> np.ndarray:
        """Each unit's first document (M,): where a per-unit outcome row stands, since every
        document of a unit carries the unit's multiplicity."""
        g = np.asarray(self.groups, dtype=np.int64)
        _, first = np.unique(g, return_index=True)
        return first.astype(np.int64)

    def weights(self, resamples: int, seed: int) -> np.ndarray:
        """Document multiplicities (B, n) of ``resamples`` cluster resamples: units drawn with
        replacement (the run's seeded stream over ``n_units``), each document taking its
        unit's count."""
        return _cluster_weights(self.groups, self.n_units, int(resamples), int(seed))

    # -- storage -----------------------------------------------------------------------------

    def to_meta(self, authors: Sequence[Any] | None = None) -> dict[str, Any]:
        """``run.json``'s ``unit``: the kind, the counts and each document's salted unit id
        (from ``authors`` when given, else from the unit index); never a name."""
        salt = os.urandom(16)
        keys = (
            [f"\x00doc{d}" if a is None or str(a) == "" else str(a) for d, a in enumerate(authors)]
            if authors is not None and len(authors) == self.n_documents
            else [str(g) for g in self.groups]
        )
        ids = [
            hashlib.sha256(salt + k.encode("utf-8", "surrogatepass")).hexdigest()[:12] for k in keys
        ]
        return {
            "kind": self.kind,
            "documents": self.n_documents,
            "units": self.n_units,
            "label": self.label(),
            "ids": ids,
        }

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any] | None) -> Units | None:
        """The units ``run.json`` recorded, or None (an older run: documents)."""
        if not meta or "ids" not in meta:
            return None
        index: dict[str, int] = {}
        groups = tuple(index.setdefault(str(i), len(index)) for i in meta["ids"])
        return cls(str(meta.get("kind", PERSON.name)), groups)


@functools.lru_cache(maxsize=8)
def _cluster_weights(
    groups: tuple[int, ...], n_units: int, resamples: int, seed: int
) -> np.ndarray:
    w = bootstrap_weights(n_units, resamples, seed)[:, np.asarray(groups, dtype=np.int64)]
    w = w.astype(np.float64)
    w.setflags(write=False)
    return w
