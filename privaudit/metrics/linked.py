"""Linked releases: which victim documents share a person, for person-level attacks and scores.

A service that receives a user's texts under one account can link them. The threat model's
**linkability** is declared here, once, as two records (:mod:`privaudit.records`):

- knowledge field ``links``: per victim document, an opaque account number (its person's
  index, :class:`~privaudit.metrics.units.Units`): which releases share an author, never who
  the author is. An attack that pools a person's releases names it in ``needs_knowledge``;
  on a corpus whose unit is the document (no declared authors) the field is missing and the
  cell is ``n/a`` with :data:`NO_LINKS`.
- truth field ``person``: the same index for the runner's scorers, so a person-level metric
  scores each person once (:func:`person_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from privaudit.metrics.units import Units
from privaudit.records import (
    KnowledgeField,
    Source,
    TruthField,
    register_knowledge_field,
    register_truth_field,
)

NO_LINKS = (
    "the corpus does not say who wrote each document (its unit is the document): a person-level "
    "attack needs to know which releases share an author (synthpai, synthetic-reviews, or a "
    "file corpus with an author column do)"
)

#: The threat model's linkability, as the board and report state it.
LINKABILITY = (
    "the service links a person's releases (one account): person-level attacks pool all of a "
    "victim's documents"
)


def _person_index(source: Source) -> list[int] | None:
    """Each test document's person (0..M-1), or None when the corpus's unit is the document."""
    corpus = source.corpus
    if getattr(corpus, "unit", "document") != "person" or source.split("test") is None:
        return None
    units = Units.of_authors(corpus.authors("test"), "person")
    return list(units.groups)


PERSON = register_truth_field(
    TruthField("person", "per victim, its person's index (the unit of privacy)", _person_index)
)
LINKS = register_knowledge_field(
    KnowledgeField(
        "links",
        "which victim releases share an author (an account number per release, never a name)",
        _person_index,
        missing=NO_LINKS,
        na_cause="truth",
    )
)


def person_rows(persons: Sequence[Any] | None, n: int) -> list[list[int]]:
    """The victims (positions 0..n-1) of each person, people in order of first appearance; a
    victim with no person is a person of its own. ``persons`` shorter than ``n`` (not built)
    makes every victim its own person."""
    if persons is None or len(persons) != n:
        return [[i] for i in range(n)]
    index: dict[Any, int] = {}
    groups: list[list[int]] = []
    for i, p in enumerate(persons):
        key = ("doc", i) if p is None else ("person", p)
        if key not in index:
            index[key] = len(groups)
            groups.append([])
        groups[index[key]].append(i)
    return groups


def person_means(x: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """The mean of each person's rows of ``x``: one row per group of ``groups``, in order."""
    x = np.asarray(x)
    if not groups:
        return np.zeros((0, *x.shape[1:]), dtype=x.dtype)
    return np.stack([x[list(g)].mean(axis=0) for g in groups])


def mode(values: Sequence[Any]) -> Any:
    """The most frequent of ``values`` (ties: the first seen), None when all are None."""
    known = [v for v in values if v is not None]
    if not known:
        return None
    keys = [str(v) for v in known]
    _, first, counts = np.unique(keys, return_index=True, return_counts=True)
    best = np.flatnonzero(counts == counts.max())
    return known[int(min(first[best]))]
