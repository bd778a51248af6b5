"""Bring-your-own corpora: local files (``file``) and Hugging Face Hub datasets (``hf``).

``load_file`` reads csv / tsv / jsonl / json / parquet with pandas and maps your columns onto the
corpus columns (``text``, ``label``, ``attributes``, ``entities``, ``author``); header-less files
address columns by 0-based position. Splits come from a split column or from a seeded random split
by author (by document when there is no author column), so the attacker's ``aux`` split never
shares an author with ``train``/``test``. ``parse_mapping`` turns the command-line form
``"text=review,label=stars,attributes=gender|age"`` into keyword arguments for both loaders.
"""

from __future__ import annotations

import json
import math
import numbers
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.corpora.base import SPLITS, Corpus, describe_dropped
from privaudit.params import NonNegativeInt, checked

if TYPE_CHECKING:
    import datasets
    import pandas as pd

FORMATS = ("csv", "tsv", "jsonl", "json", "parquet")
_EXTENSIONS = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_COMPRESSIONS = (".gz", ".bz2", ".zip", ".xz", ".zst")
SPLIT_ALIASES = {
    "train": "train",
    "training": "train",
    "test": "test",
    "testing": "test",
    "validation": "test",
    "valid": "test",
    "val": "test",
    "dev": "test",
    "aux": "aux",
    "auxiliary": "aux",
}
_ENTITY_KEYS = ("start", "end", "type", "text")
_SPLIT_COL = "__privaudit_split__"  # internal column carrying given split names
HF_AUX_FRACTION = 0.25  # share of the hub's train split moved to aux when none is mapped there

ColumnRef = str | int
LabelValue = str | int | float | bool  # a cell value as a config writes it


# --------------------------------------------------------------------------------------------
# Helpers shared with the synthetic corpus
# --------------------------------------------------------------------------------------------


def check_fractions(value: Any, arg: str = "splits") -> tuple[float, float, float]:
    """Validate (train, test, aux) fractions: three positive numbers summing to 1."""
    try:
        fractions = tuple(float(f) for f in value)
    except (TypeError, ValueError):
        fractions = ()
    if (
        len(fractions) != 3
        or not all(math.isfinite(f) and f > 0 for f in fractions)
        or abs(sum(fractions) - 1.0) > 1e-6
    ):
        raise ValueError(
            f"{arg} must be three positive numbers (train, test, aux) summing to 1, got {value!r}."
        )
    return fractions  # type: ignore[return-value]


def assign_splits(
    group_sizes: Sequence[int],
    fractions: Sequence[float],
    rng: np.random.Generator,
    strata: Sequence[str] | None = None,
) -> np.ndarray:
    """Assign whole groups (authors) to train/test/aux so document counts track ``fractions``.

    Each group goes to the split furthest below its share of the documents dealt so far,
    visiting groups in random order. With ``strata`` (one label per group, e.g. the author's
    attributes) the visit goes stratum by stratum, strata and groups within them shuffled: the
    greedy rule takes turns in proportion, so each stratum is spread like the whole (systematic
    sampling) while the totals stay as exact as whole groups allow. The first three groups seed
    one split each, so no split stays empty when there are at least three groups.
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
    filled = np.zeros(len(SPLITS))
    out = np.empty(n, dtype=object)
    seeds = rng.permutation(n)[: len(SPLITS)] if n >= len(SPLITS) else []
    for s, g in enumerate(seeds):  # one random group per split first
        out[g] = SPLITS[s]
        filled[s] += sizes[g]
    for g in order:
        if out[g] is not None:
            continue
        # Deficit against the share of what has been dealt so far (not the final target), so
        # the splits take turns in proportion throughout and every stratum is spread alike.
        s = int(np.argmax(frac * (filled.sum() + sizes[g]) - filled))
        out[g] = SPLITS[s]
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
        {"start": datasets.Value("int64"), "end": datasets.Value("int64"), "type": string,
         "text": string}
    )  # fmt: skip
    feats["author"] = string
    return datasets.Features(feats)


# --------------------------------------------------------------------------------------------
# Reading files
# --------------------------------------------------------------------------------------------


def _infer_format(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        fmt = fmt.lower().lstrip(".")
        fmt = {"ndjson": "jsonl", "pq": "parquet", "tab": "tsv"}.get(fmt, fmt)
        if fmt not in FORMATS:
            raise ValueError(f"Unknown format {fmt!r}; use one of {', '.join(FORMATS)}.")
        return fmt
    suffixes = [s.lower() for s in path.suffixes]
    while suffixes and suffixes[-1] in _COMPRESSIONS:
        suffixes.pop()
    ext = suffixes[-1] if suffixes else ""
    if ext not in _EXTENSIONS:
        raise ValueError(
            f"Cannot tell the format of {path.name} from its extension {ext or '(none)'!r}; "
            f"pass fmt= one of {', '.join(FORMATS)}."
        )
    return _EXTENSIONS[ext]


def _read(path: Path, fmt: str, header: bool) -> pd.DataFrame:
    import pandas as pd

    # Only truly empty cells are missing: a review reading "NA" or "null" stays text.
    csv_opts: dict[str, Any] = {
        "header": 0 if header else None,
        "keep_default_na": False,
        "na_values": [""],
    }
    try:
        if fmt in ("csv", "tsv"):
            return pd.read_csv(path, sep="," if fmt == "csv" else "\t", **csv_opts)
        if fmt == "jsonl":
            return pd.read_json(path, lines=True, dtype=False, convert_dates=False)
        if fmt == "json":
            try:
                return pd.read_json(path, dtype=False, convert_dates=False)
            except ValueError:  # a .json file holding one record per line
                return pd.read_json(path, lines=True, dtype=False, convert_dates=False)
        return pd.read_parquet(path)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} is empty: it has no header and no rows.") from None
    except (ValueError, pd.errors.ParserError, OSError) as exc:
        raise ValueError(
            f"Could not read {path} as {fmt}: {exc}. If the format is wrong, pass fmt= one of "
            f"{', '.join(FORMATS)}."
        ) from exc


def _positions(refs: Sequence[Any]) -> list[int]:
    """The column references given as 0-based positions (ints; not booleans)."""
    return [int(r) for r in refs if isinstance(r, numbers.Integral) and not isinstance(r, bool)]


def _key(value: Any) -> str:
    """A cell or a configured value as compared by ``where``/``label_map``/header detection:
    its plain string form, so a YAML ``4``, a CSV's ``4`` and a float column's ``4.0`` agree."""
    return str(_plain(value)).strip()


def _is_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, numbers.Number):
        return not _missing(value)
    try:
        return math.isfinite(float(str(value)))
    except ValueError:
        return False


def _first_row_is_data(df: pd.DataFrame) -> str | None:
    """Why a csv read without a header starts with a record rather than column names (or None):
    a number atop a column of numbers, or a value that recurs further down its own column (a
    label, an attribute). A header of ``0..n-1`` (pandas' default names) is a header."""
    first = df.iloc[0].tolist()
    if [_key(v) for v in first] == [str(i) for i in range(len(first))]:
        return None
    rest = df.iloc[1:]
    for j, cell in enumerate(first):
        if _missing(cell):
            continue
        column = [v for v in rest.iloc[:, j].tolist() if not _missing(v)]
        if not column:
            continue
        # Name the signal, not the row: its text column is a private document.
        if _is_number(cell) and all(_is_number(v) for v in column):
            return f"column {j} starts with the number {_key(cell)!r} atop numbers"
        if _key(cell) in {_key(v) for v in column}:
            return f"column {j} starts with {_key(cell)!r}, a value it holds again further down"
    return None


def _read_with_header(
    path: Path, fmt: str, header: bool | None, refs: Sequence[Any]
) -> tuple[pd.DataFrame, bool]:
    """Read the file and settle ``header``. ``None`` means a header row, except that a csv/tsv
    whose columns are given as positions and whose first row reads as data is read without
    one (with a warning): its first row is a document, never silently a list of names."""
    if fmt not in ("csv", "tsv"):
        return _read(path, fmt, True), True
    if header is not None:
        return _read(path, fmt, header), header
    if not _positions(refs):
        return _read(path, fmt, True), True
    raw = _read(path, fmt, False)
    why = _first_row_is_data(raw) if len(raw) > 1 else None
    if why:
        _say(
            f"{path.name}: columns are given as positions and the first row reads as data, "
            f"not names ({why}), so the file is read without a header row; set header: true "
            "(--map header=true) if that row is a header."
        )
        return raw, False
    return _read(path, fmt, True), True


def _say(message: str) -> None:
    """Warn once per run: in the process that loads the corpus for the run, not again in each
    worker process that rebuilds it (they load the same file)."""
    import multiprocessing

    if multiprocessing.parent_process() is None:
        warnings.warn(message, UserWarning, stacklevel=3)


def _resolve(df: pd.DataFrame, ref: ColumnRef, header: bool) -> Any | None:
    """The DataFrame column a user reference points at, or None."""
    cols = list(df.columns)
    if isinstance(ref, str) and not header and ref.isdigit():
        ref = int(ref)
    if isinstance(ref, bool):
        return None
    if isinstance(ref, numbers.Integral):
        if ref in cols and not header:
            return ref
        return cols[int(ref)] if 0 <= int(ref) < len(cols) else None
    return ref if ref in cols else None


def _attribute_map(attributes: Any, df: pd.DataFrame, header: bool) -> dict[str, ColumnRef]:
    """Normalise ``attributes`` (names, positions or a name → column map) to name → column."""
    if attributes is None:
        return {}
    if isinstance(attributes, Mapping):
        return {str(k): v for k, v in attributes.items()}
    if isinstance(attributes, (str, int)):  # a lone column, not a sequence of characters
        attributes = [attributes]
    out: dict[str, ColumnRef] = {}
    for ref in attributes:
        if isinstance(ref, numbers.Integral) and not isinstance(ref, bool):
            col = _resolve(df, int(ref), header)
            name = f"col{int(ref)}" if (col is None or not header) else str(col)
            out[name] = int(ref)
        else:
            out[str(ref)] = ref
    return out


def _plain(value: Any) -> Any:
    """A numpy/pandas scalar as a plain Python value; integral floats as ints (1980.0 → 1980)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN, NaT, pd.NA
    except (TypeError, ValueError):
        return False


def _entities(cell: Any, text: str, row: int) -> list[dict[str, Any]]:
    """Normalise an entities cell (list of dicts/triples, or its JSON) to exact spans."""
    if isinstance(cell, np.ndarray):
        cell = cell.tolist()
    if cell is None or (not isinstance(cell, (list, str)) and _missing(cell)):
        return []
    if isinstance(cell, str):
        if not cell.strip():
            return []
        try:
            cell = json.loads(cell)
        except json.JSONDecodeError as exc:
            raise ValueError(f"Row {row}: entities cell is not valid JSON ({exc}).") from None
    out = []
    for ent in cell:
        if isinstance(ent, Mapping):
            start, end = ent.get("start"), ent.get("end")
            etype = ent.get("type", ent.get("label"))  # spaCy-style "label" accepted
        elif isinstance(ent, (list, tuple)) and len(ent) >= 3:
            start, end, etype = ent[0], ent[1], ent[2]
        else:
            raise ValueError(
                f"Row {row}: an entity must be {{'start','end','type'}} or [start, end, type], "
                f"got {ent!r}."
            )
        try:
            start, end = int(start), int(end)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ValueError(f"Row {row}: entity {ent!r} lacks integer start/end.") from None
        if not 0 <= start <= end <= len(text):
            raise ValueError(
                f"Row {row}: entity span [{start}, {end}) lies outside its text "
                f"({len(text)} characters)."
            )
        given = ent.get("text") if isinstance(ent, Mapping) else (ent[3] if len(ent) > 3 else None)
        if given is not None and str(given) != text[start:end]:
            raise ValueError(
                f"Row {row}: entity text {given!r} does not match its span [{start}, {end}), "
                f"which reads {text[start:end]!r}; spans are 0-based, end-exclusive characters."
            )
        out.append({"start": start, "end": end, "type": str(etype), "text": text[start:end]})
    return out


def _check_columns(
    df: pd.DataFrame, roles: dict[str, ColumnRef | None], header: bool, source: str
) -> dict[str, Any]:
    """Resolve every role's column or fail with one message naming all the missing ones."""
    resolved: dict[str, Any] = {}
    missing: list[str] = []
    for role, ref in roles.items():
        if ref is None:
            continue
        col = _resolve(df, ref, header)
        if col is None:
            missing.append(f"{role}={ref!r}")
        resolved[role] = col
    if missing:
        cols = list(df.columns)
        how = (
            "this file was read without a header, so columns are 0-based positions "
            f"0..{len(cols) - 1}"
            if not header
            else "pass header=False (--map header=false) if the file has no header row"
        )
        roles_missing = [r.split("=")[0].split("[")[0] for r in missing]
        example = ",".join(
            f"{r}=<column>:<value>" if r == "where" else f"{r}=<column>" for r in roles_missing
        )
        call = "load_hf(name, " if source.startswith("hf:") else "load_file(path, "
        raise ValueError(
            f"{source}: column(s) not found for {', '.join(missing)}. Available columns: {cols}. "
            f"Map yours with keyword arguments (e.g. {call}text='review', label='stars', "
            f"attributes=['gender'])) or on the command line with --map {example}; {how}."
        )
    return resolved


def _label_index(values: list[Any], order: Sequence[str] | None) -> tuple[list[int], list[str]]:
    if order is not None:  # a hub ClassLabel: values already index into its names
        return [int(v) for v in values], [str(n) for n in order]
    distinct = set(values)
    try:
        ordered = sorted(distinct)
    except TypeError:  # mixed types: order by their string forms
        ordered = sorted(distinct, key=str)
    index = {v: i for i, v in enumerate(ordered)}
    return [index[v] for v in values], [str(v) for v in ordered]


def _where_match(values: list[Any], wanted: Any) -> np.ndarray:
    """Rows whose cell equals ``wanted`` (or one of a list of values), compared as strings."""
    options = wanted if isinstance(wanted, (list, tuple, set)) else [wanted]
    keys = {_key(w) for w in options}
    return np.array([not _missing(v) and _key(v) in keys for v in values], dtype=bool)


def _derive_labels(
    values: dict[int, Any],
    label_map: Mapping[Any, Any] | None,
    threshold: float | None,
    order: Sequence[str] | None,
    source: str,
    column: Any,
) -> dict[int, Any]:
    """Row → derived label: ``label_map``'s value (rows it does not map are left out), or
    ``>=t``/``<t`` against ``threshold``. A hub ClassLabel is matched by class name or index."""
    out: dict[int, Any] = {}
    if label_map is not None:
        lookup = {_key(k): v for k, v in label_map.items()}
        for i, value in values.items():
            forms = [_key(order[int(value)]), _key(value)] if order is not None else [_key(value)]
            hit = next((f for f in forms if f in lookup), None)
            if hit is not None:
                out[i] = _plain(lookup[hit])
        return out
    assert threshold is not None
    for i, value in values.items():
        if not _is_number(value):
            raise ValueError(
                f"{source}: label_threshold={threshold:g} needs numbers in label column "
                f"{column!r}, but row {i} holds {value!r}; map the values with label_map "
                "instead, or drop such rows with where."
            )
        out[i] = f">={threshold:g}" if float(value) >= threshold else f"<{threshold:g}"
    return out


def _corpus_from_frame(
    df: pd.DataFrame,
    *,
    name: str,
    source: str,
    text: ColumnRef,
    label: ColumnRef,
    attributes: Any,
    entities: ColumnRef | None,
    author: ColumnRef | None,
    header: bool,
    split_column: ColumnRef | None,
    fractions: tuple[float, float, float],
    seed: int,
    label_order: Sequence[str] | None = None,
    info: dict[str, Any] | None = None,
    label_map: Mapping[Any, Any] | None = None,
    label_threshold: float | None = None,
    where: Mapping[ColumnRef, Any] | None = None,
) -> Corpus:
    import datasets

    if label_map is not None and label_threshold is not None:
        raise ValueError(
            f"{source}: give label_map or label_threshold, not both (label_map={dict(label_map)!r}"
            f", label_threshold={label_threshold!r})."
        )
    if label_map is not None and not label_map:
        raise ValueError(f"{source}: label_map is empty; map at least two label values.")
    if len(df) == 0:
        raise ValueError(f"{source} has a header but no rows; there is nothing to audit.")
    attr_map = _attribute_map(attributes, df, header)
    roles: dict[str, ColumnRef | None] = {
        "text": text,
        "label": label,
        "entities": entities,
        "author": author,
        "split_column": split_column,
    }
    roles.update({f"attributes[{n}]": ref for n, ref in attr_map.items()})
    roles.update({f"where[{k}]": k for k in where or {}})
    cols = _check_columns(df, roles, header, source)

    # Each row is counted once, under the first rule that drops it: where, then an empty
    # text, a missing label, then a label that label_map does not map.
    dropped: dict[str, int] = {}
    selected = np.ones(len(df), dtype=bool)
    for ref, wanted in (where or {}).items():
        match = _where_match(df[cols[f"where[{ref}]"]].tolist(), wanted)
        dropped[f"not matching where {ref}"] = int((selected & ~match).sum())
        selected &= match
        if not selected.any():
            seen = sorted({_key(v) for v in df[cols[f"where[{ref}]"]].tolist()})
            raise ValueError(
                f"{source}: where {dict(where or {})!r} keeps no rows; column "
                f"{cols[f'where[{ref}]']!r} holds {seen[:10]}{' ...' if len(seen) > 10 else ''}."
            )

    texts_raw = df[cols["text"]].tolist()
    labels_raw = [_plain(v) for v in df[cols["label"]].tolist()]
    empty = [
        bool(s) and (_missing(t) or not str(t).strip())
        for s, t in zip(selected, texts_raw, strict=True)
    ]
    # Hub ClassLabel uses -1 for "no label" (e.g. GLUE test splits).
    no_label = [
        s and not e and (_missing(lab) or (label_order is not None and int(lab) < 0))
        for s, e, lab in zip(selected, empty, labels_raw, strict=True)
    ]
    usable = [i for i in range(len(df)) if selected[i] and not (empty[i] or no_label[i])]
    dropped["with an empty text"] = int(sum(empty))
    dropped["with a missing label"] = int(sum(no_label))
    if label_map is not None or label_threshold is not None:
        derived = _derive_labels(
            {i: labels_raw[i] for i in usable}, label_map, label_threshold, label_order,
            source, cols["label"],
        )  # fmt: skip
        dropped["with a label not in label_map"] = len(usable) - len(derived)
        labels_raw = [derived.get(i) for i in range(len(df))]
        label_order = None  # the derived values are the classes now
        keep = [i for i in usable if i in derived]
    else:
        keep = usable
    if not keep:
        raise ValueError(
            f"{source}: no usable rows — all {len(df)} were dropped ("
            + ", ".join(f"{n} {why}" for why, n in dropped.items() if n)
            + f"; text column {cols['text']!r}, label column {cols['label']!r})."
        )
    label_ids, label_names = _label_index([labels_raw[i] for i in keep], label_order)

    rows: list[dict[str, Any]] = []
    col_values = {role: df[c].tolist() for role, c in cols.items() if role not in ("text", "label")}
    for j, i in enumerate(keep):
        doc = str(texts_raw[i])
        row: dict[str, Any] = {"text": doc, "label": label_ids[j]}
        if attr_map:
            row["attributes"] = {
                n: (None if _missing(v := _plain(col_values[f"attributes[{n}]"][i])) else str(v))
                for n in attr_map
            }
        ents = col_values["entities"][i] if "entities" in col_values else None
        row["entities"] = _entities(ents, doc, i)
        a = col_values["author"][i] if "author" in col_values else None
        row["author"] = f"row-{i}" if _missing(a) else str(_plain(a))  # anonymous: own author
        rows.append(row)

    info = dict(info or {})
    if "split_column" in col_values:
        given = [col_values["split_column"][i] for i in keep]
        split_of = np.asarray(_normalise_splits(given, source), dtype=str)
        info["split"] = f"column {cols['split_column']!r}"
        _warn_author_overlap(rows, split_of, source, info)
    else:
        rng = np.random.default_rng(seed)
        authors = [r["author"] for r in rows]
        _, inverse, sizes = np.unique(authors, return_inverse=True, return_counts=True)
        # np.unique sorts ids, so the split depends on the seed and the data, not on row order.
        split_of = assign_splits(sizes, fractions, rng)[inverse]
        info["split"] = "random by author" if "author" in cols else "random by document"
        info["split_fractions"] = list(fractions)
        info["seed"] = seed

    features = corpus_features(list(attr_map))
    splits = {}
    for split in SPLITS:
        members = [rows[i] for i in np.flatnonzero(split_of == split)]
        if not members and split != "aux":
            raise ValueError(
                f"{source}: the {split} split would be empty ({len(rows)} usable rows, "
                f"{info['split']}); a corpus needs documents in both train and test."
            )
        if not members and "split_column" in col_values:
            continue  # a file without aux rows simply has no aux split
        splits[split] = datasets.Dataset.from_list(members, features=features)
    info.update(
        {
            "source": source,
            # JSON-friendly: names stay names, positions plain ints.
            "columns": {
                role: _plain(c) if isinstance(c, (int, np.integer)) else str(c)
                for role, c in cols.items()
            },
            "rows_read": len(df),
            "dropped_rows": len(df) - len(keep),
            "dropped": {why: n for why, n in dropped.items() if n},
            "dropped_empty_text": int(sum(empty)),
            "dropped_missing_label": int(sum(no_label)),
            "header": header,
        }
    )
    if info["dropped_rows"]:
        _say(f"{source}: {describe_dropped(info)}.")
    return Corpus(
        name=name,
        splits=splits,
        label_names=label_names,
        attribute_names=list(attr_map),
        info=info,
    )


def _normalise_splits(values: list[Any], source: str) -> list[str]:
    out, unknown = [], set()
    for v in values:
        key = "" if _missing(v) else str(v).strip().lower()
        if key in SPLIT_ALIASES:
            out.append(SPLIT_ALIASES[key])
        else:
            unknown.add(str(v))
            out.append("")
    if unknown:
        raise ValueError(
            f"{source}: unknown split name(s) {sorted(unknown)} in the split column; use train, "
            "test or aux (validation/dev count as test), or drop split_column for a random split."
        )
    return out


def _warn_author_overlap(
    rows: list[dict[str, Any]], split_of: np.ndarray, source: str, info: dict[str, Any]
) -> None:
    seen: dict[str, set[str]] = {}
    for row, split in zip(rows, split_of, strict=True):
        seen.setdefault(row["author"], set()).add(str(split))
    straddling = sum(len(s) > 1 for s in seen.values())
    if straddling:
        info["authors_across_splits"] = straddling
        _say(
            f"{source}: {straddling} author(s) appear in more than one split, so the attacker's "
            "aux data is not author-disjoint from the victims; drop split_column to split by "
            "author instead."
        )


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
) -> Corpus:
    """Load a corpus from a csv / tsv / jsonl / json / parquet file.

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
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"No such corpus file: {path}.")
    fmt = _infer_format(path, fmt)
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is empty (0 bytes); there is nothing to audit.")
    fractions = check_fractions(splits)
    refs = [text, label, entities, author, split_column, *(where or {})]
    refs += list(attributes.values()) if isinstance(attributes, Mapping) else list(attributes)
    df, header = _read_with_header(path, fmt, header, refs)
    return _corpus_from_frame(
        df,
        name=name or path.name.split(".")[0],
        source=str(path),
        text=text,
        label=label,
        attributes=attributes,
        entities=entities,
        author=author,
        header=header,
        split_column=split_column,
        fractions=fractions,
        seed=int(seed),
        info={"format": fmt},
        label_map=label_map,
        label_threshold=label_threshold,
        where=where,
    )


def _is_network_error(exc: BaseException) -> bool:
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
    import datasets
    import pandas as pd

    try:
        loaded = datasets.load_dataset(name, config)
    except Exception as exc:
        where = f"{name!r}" + (f" (config {config!r})" if config else "")
        if _is_network_error(exc):
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
    available = list(loaded.keys())
    if split_map is None:
        split_map = {"train": "train"}
        if "test" in available:
            split_map["test"] = "test"
        elif "validation" in available:
            split_map["validation"] = "test"
    bad_targets = {v for v in split_map.values() if v not in SPLITS}
    missing = [k for k in split_map if k not in available]
    if bad_targets or missing:
        raise ValueError(
            f"split_map {dict(split_map)!r} for {name!r} is invalid: "
            + (f"hub splits {missing} do not exist (it has {available}); " if missing else "")
            + (f"targets must be train/test/aux, got {sorted(bad_targets)}." if bad_targets else "")
        )

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
    return _corpus_from_frame(
        df,
        name=name,
        source=f"hf:{name}" + (f"/{config}" if config else ""),
        text=text,
        label=label,
        attributes=attributes,
        entities=None,
        author=None,
        header=True,
        split_column=_SPLIT_COL,
        fractions=(0.6, 0.2, 0.2),
        seed=seed,
        label_order=label_order,
        info={"hub_splits": dict(split_map), "config": config},
        label_map=label_map,
        label_threshold=label_threshold,
        where=where,
    )


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
