"""The train/test/aux splits every corpus shares, generated or loaded.

``check_fractions`` validates the (train, test, aux) fractions, ``assign_splits`` deals whole
authors to the splits so that ``aux`` never shares an author with the victims (both take other
split names too: SynthPAI deals people to train/test/aux/public/distractors), and
``corpus_features`` is the ``datasets`` schema of a split, and ``hold_out_background`` moves a
share of each test author's documents to re-identification's ``background``. Used by the
synthetic generator (:mod:`privaudit.corpora.synthetic`), SynthPAI and the column mapping of
the file and hub loaders (:mod:`privaudit.corpora.columns`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.corpora.base import SPLITS

if TYPE_CHECKING:
    import datasets


def check_fractions(
    value: Any, arg: str = "splits", names: Sequence[str] = SPLITS
) -> tuple[float, ...]:
    """Validate one fraction per split in ``names`` (train, test, aux by default): positive
    numbers summing to 1."""
    try:
        fractions = tuple(float(f) for f in value)
    except (TypeError, ValueError):
        fractions = ()
    if (
        len(fractions) != len(names)
        or not all(math.isfinite(f) and f > 0 for f in fractions)
        or abs(sum(fractions) - 1.0) > 1e-6
    ):
        count = {3: "three", 4: "four", 5: "five"}.get(len(names), str(len(names)))
        raise ValueError(
            f"{arg} must be {count} positive numbers ({', '.join(names)}) summing to 1, "
            f"got {value!r}."
        )
    return fractions


def assign_splits(
    group_sizes: Sequence[int],
    fractions: Sequence[float],
    rng: np.random.Generator,
    strata: Sequence[str] | None = None,
    names: Sequence[str] = SPLITS,
) -> np.ndarray:
    """Assign whole groups (authors) to the splits ``names`` (train/test/aux by default) so
    document counts track ``fractions`` (one per name).

    Each group goes to the split furthest below its share of the documents dealt so far,
    visiting groups in random order. With ``strata`` (one label per group, e.g. the author's
    attributes) the visit goes stratum by stratum, strata and groups within them shuffled: the
    greedy rule takes turns in proportion, so each stratum is spread like the whole (systematic
    sampling) while the totals stay as exact as whole groups allow. The first groups seed one
    split each, so no split stays empty when there are at least as many groups as splits.
    """
    sizes = np.asarray(group_sizes, dtype=np.int64)
    n = len(sizes)
    noise = rng.random(n)
    if strata is None:
        order = np.argsort(noise, kind="stable")
    else:
        labels = np.asarray(strata, dtype=str)
        if len(labels) != n:
            raise ValueError(f"strata has {len(labels)} labels for {n} groups.")
        uniq, codes = np.unique(labels, return_inverse=True)
        block = rng.permutation(len(uniq))[codes]  # random order of the strata
        order = np.lexsort((noise, block))
    frac = np.asarray(fractions, dtype=np.float64)
    if len(frac) != len(names):
        raise ValueError(f"{len(frac)} fractions for {len(names)} splits {tuple(names)}.")
    filled = np.zeros(len(names))
    out = np.empty(n, dtype=object)
    seeds = rng.permutation(n)[: len(names)] if n >= len(names) else []
    for s, g in enumerate(seeds):  # one random group per split first
        out[g] = names[s]
        filled[s] += sizes[g]
    for g in order:
        if out[g] is not None:
            continue
        # Deficit against the share of what has been dealt so far (not the final target), so
        # the splits take turns in proportion throughout and every stratum is spread alike.
        s = int(np.argmax(frac * (filled.sum() + sizes[g]) - filled))
        out[g] = names[s]
        filled[s] += sizes[g]
    return out.astype(str)


def corpus_features(attribute_names: Sequence[str]) -> datasets.Features:
    """The datasets schema of a corpus split (no ``attributes`` column when there are none)."""
    import datasets

    string = datasets.Value("string")
    feats: dict[str, Any] = {"text": string, "label": datasets.Value("int64")}
    if attribute_names:
        feats["attributes"] = {name: string for name in attribute_names}
    feats["entities"] = datasets.List(
        {
            "start": datasets.Value("int64"),
            "end": datasets.Value("int64"),
            "type": string,
            "text": string,
        }
    )
    feats["author"] = string
    return datasets.Features(feats)


def hold_out_background(
    rows: list[dict[str, Any]],
    split_of: np.ndarray,
    share: float,
    seed: int,
    info: dict[str, Any],
) -> np.ndarray:
    """``split_of`` with ``share`` of each test author's documents moved to ``background``
    (at least one, and at least one left as a victim): the known-author documents of
    re-identification, as synthpai's. An author with a single document keeps it as a victim
    and is no candidate (the identity metric leaves such victims out, and says how many)."""
    out = split_of.astype(object)
    rng = np.random.default_rng([seed, 36])  # its own stream: the split above is unchanged
    test = [i for i in range(len(rows)) if out[i] == "test"]
    by_author: dict[str, list[int]] = {}
    for i in test:
        by_author.setdefault(rows[i]["author"], []).append(i)
    single = 0
    for author in sorted(by_author):
        docs = by_author[author]
        if len(docs) < 2:
            single += 1
            continue
        k = min(len(docs) - 1, max(1, round(share * len(docs))))
        for i in rng.choice(docs, size=k, replace=False):
            out[int(i)] = "background"
    info["background"] = {
        "share": share,
        "candidates": len(by_author) - single,
        "single_document_authors": single,
    }
    return out.astype(str)
