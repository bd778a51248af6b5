"""Bring-your-own corpora: local files (``file``) and Hugging Face Hub datasets (``hf``).

``load_file`` reads csv / tsv / jsonl / json / parquet with pandas and maps your columns onto the
corpus columns (``text``, ``label``, ``attributes``, ``entities``, ``author``); header-less files
address columns by 0-based position. Splits come from a split column or from a seeded random split
by author (by document when there is no author column), so the attacker's ``aux`` split never
shares an author with ``train``/``test``. ``parse_mapping`` turns the command-line form
``"text=review,label=stars,attributes=gender|age"`` into keyword arguments for both loaders.

The loaders are the entry points; the work is done beside them: reading a file into a table in
:mod:`privaudit.corpora.reading`, mapping its columns onto a corpus (row selection, derived
labels, dropped-row counts, entities, splits) in :mod:`privaudit.corpora.columns`, and the
author-level split assignment in :mod:`privaudit.corpora.splits`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.corpora.base import SPLITS, Corpus
from privaudit.corpora.columns import (
    ColumnMapping,
    ColumnRef,
    LabelValue,
    Splitting,
    corpus_from_frame,
)
from privaudit.corpora.reading import check_encoding, infer_format, read_with_header
from privaudit.corpora.splits import check_fractions
from privaudit.params import Fraction, NonNegativeInt, checked

if TYPE_CHECKING:
    import datasets
    import pandas as pd

_SPLIT_COL = "__privaudit_split__"  # internal column carrying given split names
HF_AUX_FRACTION = 0.25  # share of the hub's train split moved to aux when none is mapped there


# --------------------------------------------------------------------------------------------
# Public loaders
# --------------------------------------------------------------------------------------------


@checked
def load_file(
    path: str | Path,
    *,
    text: ColumnRef = "text",
    label: ColumnRef = "label",
    attributes: Sequence[ColumnRef] | Mapping[str, ColumnRef] = (),
    entities: ColumnRef | None = None,
    author: ColumnRef | None = None,
    header: bool | None = None,
    fmt: str | None = None,
    split_column: ColumnRef | None = None,
    splits: Sequence[float] = (0.6, 0.2, 0.2),
    seed: NonNegativeInt = 0,
    name: str | None = None,
    label_map: Mapping[LabelValue, str | int] | None = None,
    label_threshold: float | None = None,
    where: Mapping[ColumnRef, LabelValue | Sequence[LabelValue]] | None = None,
    encoding: str = "utf-8",
    background_share: Fraction = 0.0,
) -> Corpus:
    """Load a corpus from a csv / tsv / jsonl / json / parquet file.

    ``encoding`` decodes a text format (csv, tsv, jsonl, json): ``latin-1``, ``cp1252``,
    ``utf-16``, ... (any Python codec; default utf-8).

    Columns are named, or given as 0-based positions (``text=0, label=1``).
    ``attributes`` lists attribute columns, or maps attribute names to columns
    (``{"gender": 2, "age_bin": 3}`` for a header-less TP-UK style file).

    ``header`` (csv/tsv): ``True`` reads the first row as column names, ``False`` as a
    document. Left at ``None``, the first row is a header, unless columns are given as
    positions and that row reads as data (a number atop a numeric column, or a value that
    recurs in its own column, such as a label): then the file is read without a header and a
    warning says so. A row is never dropped silently to serve as names.

    Deriving the label and choosing rows (each dropped row is counted under its reason):

    - ``where={"location": "united_kingdom"}`` keeps the rows whose column equals the value, or
      one of a list of values (``{"location": ["uk", "ie"]}``); several columns must all match.
    - ``label_map={1: "negative", 2: "negative", 4: "positive", 5: "positive"}`` replaces
      label values (compared as text, so ``4``, ``"4"`` and ``4.0`` agree); rows whose value
      it does not map (3 stars) are dropped.
    - ``label_threshold=4`` makes a numeric label binary: ``>=4`` and ``<4``.

    Labels are then the distinct values, sorted, as ``0..k-1``. Rows with an empty text or a
    missing label are dropped too. ``info`` holds ``rows_read``, ``dropped_rows`` and
    ``dropped`` (reason → count), and a warning states them when any row was dropped. Without
    ``split_column`` the split is a seeded random one by author (by document without an
    ``author`` column).

    ``background_share`` (with an ``author`` column; default 0, off): hold out that share of
    each test author's documents as re-identification's known-author ``background``
    (:func:`~privaudit.corpora.splits.hold_out_background`; ``info["background"]`` counts
    them; unlike synthpai's, it holds no distractor authors).
    """
    path, fmt, encoding = _checked_file(path, fmt, encoding)
    fractions = check_fractions(splits)
    columns = ColumnMapping(
        text=text,
        label=label,
        attributes=attributes,
        entities=entities,
        author=author,
        split_column=split_column,
        where=where,
        label_map=label_map,
        label_threshold=label_threshold,
    )
    df, header = read_with_header(path, fmt, header, columns.refs(), encoding)
    return corpus_from_frame(
        df,
        columns,
        Splitting(fractions, int(seed), float(background_share)),
        name=name or path.name.split(".")[0],
        source=str(path),
        header=header,
        info={"format": fmt},
    )


def _checked_file(path: str | Path, fmt: str | None, encoding: str) -> tuple[Path, str, str]:
    """The corpus file's path, format and encoding, checked: it exists and is not empty."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"No such corpus file: {path}.")
    fmt = infer_format(path, fmt)
    encoding = check_encoding(encoding)
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is empty (0 bytes); there is nothing to audit.")
    return path, fmt, encoding


def is_network_error(exc: BaseException) -> bool:
    """Whether an exception (or one it wraps) means the hub could not be reached."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        kind = type(cur).__name__.lower()
        msg = str(cur).lower()
        if isinstance(cur, (ConnectionError, TimeoutError)) or any(
            w in kind for w in ("connect", "timeout", "offline", "network")
        ):
            return True
        if any(w in msg for w in ("offline", "couldn't reach", "connection", "resolve host")):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


@checked
def load_hf(
    name: str,
    *,
    config: str | None = None,
    text: ColumnRef = "text",
    label: ColumnRef = "label",
    attributes: Sequence[ColumnRef] | Mapping[str, ColumnRef] = (),
    split_map: Mapping[str, str] | None = None,
    seed: NonNegativeInt = 0,
    label_map: Mapping[LabelValue, str | int] | None = None,
    label_threshold: float | None = None,
    where: Mapping[ColumnRef, LabelValue | Sequence[LabelValue]] | None = None,
) -> Corpus:
    """Load a corpus from the Hugging Face Hub (needs the hub to be reachable).

    ``split_map`` maps hub split names to ``train``/``test``/``aux`` (default: train → train,
    test → test, or validation → test when there is no test split). When no split maps to
    ``aux``, a seeded :data:`HF_AUX_FRACTION` of the train rows becomes ``aux``. Hub datasets have
    no authors, so each document is its own author. ``where``, ``label_map`` and
    ``label_threshold`` choose rows and derive the label as in :func:`load_file` (a ClassLabel
    column is matched by class name or index).
    """
    loaded = _load_hub(name, config)
    split_map = _hub_split_map(loaded, split_map, name)
    df, label_order = _hub_frame(loaded, split_map, label, seed)
    columns = ColumnMapping(
        text,
        label,
        attributes,
        split_column=_SPLIT_COL,
        where=where,
        label_map=label_map,
        label_threshold=label_threshold,
        label_order=label_order,
    )
    return corpus_from_frame(
        df,
        columns,
        Splitting((0.6, 0.2, 0.2), seed),
        name=name,
        source=f"hf:{name}" + (f"/{config}" if config else ""),
        header=True,
        info={"hub_splits": dict(split_map), "config": config},
    )


def _load_hub(name: str, config: str | None) -> datasets.DatasetDict:
    """The hub dataset's splits (a lone split as ``train``); a failure is one ValueError line
    that says what to do, offline or not."""
    import datasets

    try:
        loaded = datasets.load_dataset(name, config)
    except Exception as exc:
        where = f"{name!r}" + (f" (config {config!r})" if config else "")
        if is_network_error(exc):
            raise ValueError(
                f"Cannot load {where}: the Hugging Face Hub is unreachable from here "
                f"({type(exc).__name__}: {exc}). Download the dataset where the hub is reachable, "
                "save it (e.g. dataset.to_parquet('corpus.parquet')) and use "
                "load_file('corpus.parquet', ...) (--corpus file) on the local copy instead."
            ) from exc
        raise ValueError(
            f"Cannot load {where} from the Hugging Face Hub: {type(exc).__name__}: {exc}. Check "
            "the name and config; if the hub is unreachable, use load_file on a local copy."
        ) from exc
    if isinstance(loaded, datasets.Dataset):
        loaded = datasets.DatasetDict({"train": loaded})
    return loaded


def _hub_split_map(
    loaded: datasets.DatasetDict, split_map: Mapping[str, str] | None, name: str
) -> Mapping[str, str]:
    """``split_map``, or the default one for the hub splits there are, checked."""
    available = list(loaded.keys())
    if split_map is None:
        default = {"train": "train"}
        if "test" in available:
            default["test"] = "test"
        elif "validation" in available:
            default["validation"] = "test"
        split_map = default
    bad_targets = {v for v in split_map.values() if v not in SPLITS}
    missing = [k for k in split_map if k not in available]
    if bad_targets or missing:
        raise ValueError(
            f"split_map {dict(split_map)!r} for {name!r} is invalid: "
            + (f"hub splits {missing} do not exist (it has {available}); " if missing else "")
            + (f"targets must be train/test/aux, got {sorted(bad_targets)}." if bad_targets else "")
        )
    return split_map


def _hub_frame(
    loaded: datasets.DatasetDict, split_map: Mapping[str, str], label: ColumnRef, seed: int
) -> tuple[pd.DataFrame, list[str] | None]:
    """The mapped hub splits as one table, each row's target split in :data:`_SPLIT_COL` (a
    seeded :data:`HF_AUX_FRACTION` of train moved to aux when no split maps there), and the
    label's ClassLabel names, if it is one."""
    import datasets
    import pandas as pd

    frames = []
    label_order: list[str] | None = None
    for hub_split, target in split_map.items():
        ds = loaded[hub_split]
        feat = ds.features.get(label) if isinstance(label, str) else None
        if isinstance(feat, datasets.ClassLabel):
            label_order = list(feat.names)
        frame = ds.to_pandas()
        frame[_SPLIT_COL] = target
        frames.append(frame)
    df = pd.concat(frames, ignore_index=True)
    if "aux" not in split_map.values():
        train_idx = np.flatnonzero(df[_SPLIT_COL].to_numpy() == "train")
        rng = np.random.default_rng(seed)
        n_aux = round(HF_AUX_FRACTION * len(train_idx))
        df.loc[rng.choice(train_idx, size=n_aux, replace=False), _SPLIT_COL] = "aux"
    return df, label_order


# --------------------------------------------------------------------------------------------
# Command-line mapping strings
# --------------------------------------------------------------------------------------------

_LIST_KEYS = {"attributes", "splits", "split_map", "label_map", "where"}
_INT = re.compile(r"\d+")
_FLOAT = re.compile(r"\d*\.\d+|\d+\.\d*")


def _scalar(value: str) -> Any:
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def parse_mapping(spec: str) -> dict[str, Any]:
    """Parse ``"text=review,label=stars,attributes=gender|age"`` into loader keyword arguments.

    ``,`` separates entries, ``=`` a key from its value, ``|`` list items; all-digit values become
    ints (column positions), ``true``/``false`` booleans, decimals floats. ``attributes``,
    ``splits``, ``split_map``, ``label_map`` and ``where`` are always lists; items written
    ``name:column`` make a dict (``attributes=gender:2|age_bin:3``, ``split_map=validation:test``,
    ``label_map=1:neg|2:neg|4:pos|5:pos``); ``where`` collects a column named twice into a list
    of values (``where=location:uk|location:ie``).
    """
    if not isinstance(spec, str):
        raise TypeError(f"A column mapping must be a string, got {type(spec).__name__}.")
    hint = "expected key=value entries separated by commas, e.g. 'text=review,label=stars'"
    if not spec.strip():
        raise ValueError(f"Empty column mapping; {hint}.")
    out: dict[str, Any] = {}
    for entry in spec.split(","):
        entry = entry.strip()
        if not entry:
            raise ValueError(
                f"Empty entry in mapping {spec!r} (a doubled or trailing comma?); {hint}."
            )
        key, sep, value = (s.strip() for s in entry.partition("="))
        if not sep:
            raise ValueError(f"Entry {entry!r} in mapping {spec!r} has no '='; {hint}.")
        if not key.isidentifier():
            raise ValueError(f"Bad key {key!r} in mapping {spec!r}: keys are names like 'text'.")
        if key in out:
            raise ValueError(f"Key {key!r} appears twice in mapping {spec!r}.")
        if not value:
            raise ValueError(f"Key {key!r} has no value in mapping {spec!r}; {hint}.")
        if "=" in value:
            raise ValueError(
                f"Value {value!r} for {key!r} contains '='; separate entries with commas: {hint}."
            )
        if key not in _LIST_KEYS and "|" not in value:
            out[key] = _scalar(value)
            continue
        items = [s.strip() for s in value.split("|")]
        if not all(items):
            raise ValueError(f"Empty list item in {key}={value!r}; separate items with single '|'.")
        if any(":" in item for item in items):
            pairs: dict[Any, Any] = {}
            for item in items:
                k, _, v = (s.strip() for s in item.partition(":"))
                if not k or (":" in item and not v):
                    raise ValueError(f"Bad item {item!r} in {key}={value!r}; write name:column.")
                ref, val = _scalar(k) if key == "where" else k, _scalar(v if v else k)
                if key == "where" and ref in pairs:  # a column named twice: one of its values
                    prev = pairs[ref]
                    pairs[ref] = [*(prev if isinstance(prev, list) else [prev]), val]
                else:
                    pairs[ref] = val
            out[key] = pairs
        else:
            out[key] = [_scalar(item) for item in items]
    if "splits" in out and isinstance(out["splits"], list):
        out["splits"] = tuple(out["splits"])
    return out
