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

from privaudit.corpora.base import SPLITS, Corpus
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
        example = ",".join(f"{r.split('=')[0].split('[')[0]}=<column>" for r in missing)
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
) -> Corpus:
    import datasets

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
    cols = _check_columns(df, roles, header, source)

    texts_raw = df[cols["text"]].tolist()
    labels_raw = [_plain(v) for v in df[cols["label"]].tolist()]
    empty = [_missing(t) or not str(t).strip() for t in texts_raw]
    # Hub ClassLabel uses -1 for "no label" (e.g. GLUE test splits).
    no_label = [
        not e and (_missing(lab) or (label_order is not None and int(lab) < 0))
        for e, lab in zip(empty, labels_raw, strict=True)
    ]
    keep = [i for i in range(len(df)) if not (empty[i] or no_label[i])]
    if not keep:
        raise ValueError(
            f"{source}: no usable rows — all {len(df)} have an empty text or a missing label "
            f"(text column {cols['text']!r}, label column {cols['label']!r})."
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
            "dropped_rows": len(df) - len(keep),
            "dropped_empty_text": int(sum(empty)),
            "dropped_missing_label": int(sum(no_label)),
        }
    )
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
        warnings.warn(
            f"{source}: {straddling} author(s) appear in more than one split, so the attacker's "
            "aux data is not author-disjoint from the victims; drop split_column to split by "
            "author instead.",
            stacklevel=3,
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
    header: bool = True,
    fmt: str | None = None,
    split_column: ColumnRef | None = None,
    splits: Sequence[float] = (0.6, 0.2, 0.2),
    seed: NonNegativeInt = 0,
    name: str | None = None,
) -> Corpus:
    """Load a corpus from a csv / tsv / jsonl / json / parquet file.

    Columns are named (or, with ``header=False`` or anywhere, given as 0-based positions).
    ``attributes`` lists attribute columns, or maps attribute names to columns
    (``{"gender": 2, "age_bin": 3}`` for a header-less TP-UK style file). Labels are the label
    column's distinct values, sorted, as ``0..k-1``. Rows with an empty text or a missing label
    are dropped and counted in ``info["dropped_rows"]``. Without ``split_column`` the split is a
    seeded random one by author (by document without an ``author`` column).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"No such corpus file: {path}.")
    fmt = _infer_format(path, fmt)
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is empty (0 bytes); there is nothing to audit.")
    fractions = check_fractions(splits)
    df = _read(path, fmt, header)
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
) -> Corpus:
    """Load a corpus from the Hugging Face Hub (needs the hub to be reachable).

    ``split_map`` maps hub split names to ``train``/``test``/``aux`` (default: train → train,
    test → test, or validation → test when there is no test split). When no split maps to
    ``aux``, a seeded :data:`HF_AUX_FRACTION` of the train rows becomes ``aux``. Hub datasets have
    no authors, so each document is its own author.
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
    )


# --------------------------------------------------------------------------------------------
# Command-line mapping strings
# --------------------------------------------------------------------------------------------

_LIST_KEYS = {"attributes", "splits", "split_map"}
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
    ``splits`` and ``split_map`` are always lists; items written ``name:column`` make a dict
    (``attributes=gender:2|age_bin:3``, ``split_map=validation:test``).
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
            pairs = {}
            for item in items:
                k, _, v = (s.strip() for s in item.partition(":"))
                if not k or (":" in item and not v):
                    raise ValueError(f"Bad item {item!r} in {key}={value!r}; write name:column.")
                pairs[k] = _scalar(v if v else k)
            out[key] = pairs
        else:
            out[key] = [_scalar(item) for item in items]
    if "splits" in out and isinstance(out["splits"], list):
        out["splits"] = tuple(out["splits"])
    return out
