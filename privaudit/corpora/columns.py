"""From a loaded table to a :class:`~privaudit.corpora.base.Corpus`: the column mapping.

:func:`corpus_from_frame` resolves each role's column (``text``, ``label``, ``attributes``,
``entities``, ``author``, a split column; by name or 0-based position) and fails with one message
naming every missing one; chooses rows (``where``) and derives labels (``label_map``,
``label_threshold``), counting each dropped row under its reason; normalises entity spans; and
splits by the split column or by a seeded random split by author. The file and hub loaders of
:mod:`privaudit.corpora.files` both end here.
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.corpora.base import SPLITS, Corpus, describe_dropped
from privaudit.corpora.reading import cell_key, is_missing, is_number, plain_value, warn_once
from privaudit.corpora.splits import assign_splits, corpus_features, hold_out_background

if TYPE_CHECKING:
    import datasets
    import pandas as pd

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

ColumnRef = str | int
LabelValue = str | int | float | bool  # a cell value as a config writes it


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


def _entities(cell: Any, text: str, row: int) -> list[dict[str, Any]]:
    """Normalise an entities cell (list of dicts/triples, or its JSON) to exact spans."""
    if isinstance(cell, np.ndarray):
        cell = cell.tolist()
    if cell is None or (not isinstance(cell, (list, str)) and is_missing(cell)):
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


def class_key(value: Any) -> str:
    """A label or attribute value as a class: values equal as numbers, or in their string
    form, are one class (``0``, ``"0"``, ``0.0`` and ``"0.0"`` are all ``"0"``), so a file
    that mixes types does not grow extra classes."""
    value = plain_value(value)
    if isinstance(value, str) and is_number(value):
        text = value.strip()
        try:
            value = int(text)  # exact, however large
        except ValueError:
            value = plain_value(float(text))
    return cell_key(value)


def _label_index(values: list[Any], order: Sequence[str] | None) -> tuple[list[int], list[str]]:
    if order is not None:  # a hub ClassLabel: values already index into its names
        return [int(v) for v in values], [str(n) for n in order]
    keys = [class_key(v) for v in values]
    distinct = set(keys)
    if all(is_number(k) for k in distinct):  # numeric classes in numeric order
        ordered = sorted(distinct, key=float)
    else:
        ordered = sorted(distinct)
    index = {k: i for i, k in enumerate(ordered)}
    return [index[k] for k in keys], ordered


def _where_match(values: list[Any], wanted: Any) -> np.ndarray:
    """Rows whose cell equals ``wanted`` (or one of a list of values), compared as strings."""
    options = wanted if isinstance(wanted, (list, tuple, set)) else [wanted]
    keys = {cell_key(w) for w in options}
    return np.array([not is_missing(v) and cell_key(v) in keys for v in values], dtype=bool)


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
        lookup = {cell_key(k): v for k, v in label_map.items()}
        for i, value in values.items():
            forms = (
                [cell_key(order[int(value)]), cell_key(value)]
                if order is not None
                else [cell_key(value)]
            )
            hit = next((f for f in forms if f in lookup), None)
            if hit is not None:
                out[i] = plain_value(lookup[hit])
        return out
    assert threshold is not None
    for i, value in values.items():
        if not is_number(value):
            raise ValueError(
                f"{source}: label_threshold={threshold:g} needs numbers in label column "
                f"{column!r}, but row {i} holds {value!r}; map the values with label_map "
                "instead, or drop such rows with where."
            )
        out[i] = f">={threshold:g}" if float(value) >= threshold else f"<{threshold:g}"
    return out


@dataclass(frozen=True)
class ColumnMapping:
    """Which columns play which role, and how rows and labels are chosen: ``text``,
    ``label``, ``attributes`` (a list of columns, or names to columns), ``entities``,
    ``author``, ``split_column``; ``where`` keeps matching rows; ``label_map`` or
    ``label_threshold`` derives the label; ``label_order`` fixes the classes' order."""

    text: ColumnRef
    label: ColumnRef
    attributes: Any = ()
    entities: ColumnRef | None = None
    author: ColumnRef | None = None
    split_column: ColumnRef | None = None
    where: Mapping[ColumnRef, Any] | None = None
    label_map: Mapping[Any, Any] | None = None
    label_threshold: float | None = None
    label_order: Sequence[str] | None = None

    def refs(self) -> list[ColumnRef]:
        """Every column the mapping names (None for a role it leaves out)."""
        attrs = self.attributes
        attributes = list(attrs.values()) if isinstance(attrs, Mapping) else list(attrs)
        fixed = [self.text, self.label, self.entities, self.author, self.split_column]
        return [*fixed, *(self.where or {}), *attributes]


@dataclass(frozen=True)
class Splitting:
    """How rows without a split column are dealt: ``fractions`` of train/test/aux by author,
    seeded by ``seed``; ``background_share`` of each test author's documents held out."""

    fractions: tuple[float, float, float]
    seed: int
    background_share: float = 0.0


def corpus_from_frame(
    df: pd.DataFrame,
    columns: ColumnMapping,
    splitting: Splitting,
    *,
    name: str,
    source: str,
    header: bool,
    info: dict[str, Any] | None = None,
) -> Corpus:
    """The corpus a table makes under a column mapping (the steps in the module docstring)."""
    c = columns
    where, label_map, label_threshold = c.where, c.label_map, c.label_threshold
    label_order = c.label_order
    _check_label_rules(label_map, label_threshold, source)
    if len(df) == 0:
        raise ValueError(f"{source} has a header but no rows; there is nothing to audit.")
    attr_map = _attribute_map(c.attributes, df, header)
    roles = {"text": c.text, "label": c.label, "entities": c.entities, "author": c.author}
    cols = _check_columns(df, _roles(roles, c.split_column, attr_map, where), header, source)

    # Each row is counted once, under the first rule that drops it: where, then an empty
    # text, a missing label, then a label that label_map does not map.
    dropped: dict[str, int] = {}
    selected = _select_rows(df, cols, where, source, dropped)
    texts_raw = df[cols["text"]].tolist()
    labels_raw = [plain_value(v) for v in df[cols["label"]].tolist()]
    keep, n_empty, n_no_label = _usable_rows(selected, texts_raw, labels_raw, label_order, dropped)
    if label_map is not None or label_threshold is not None:
        keep, labels_raw = _derived_rows(
            keep,
            labels_raw,
            label_map,
            label_threshold,
            label_order,
            source,
            cols["label"],
            dropped,
        )
        label_order = None  # the derived values are the classes now
    if not keep:
        raise ValueError(
            f"{source}: no usable rows — all {len(df)} were dropped ("
            + ", ".join(f"{n} {why}" for why, n in dropped.items() if n)
            + f"; text column {cols['text']!r}, label column {cols['label']!r})."
        )
    label_ids, label_names = _label_index([labels_raw[i] for i in keep], label_order)
    col_values = {role: df[c].tolist() for role, c in cols.items() if role not in ("text", "label")}
    rows = _rows(keep, texts_raw, label_ids, list(attr_map), col_values)

    info = dict(info or {})
    seed, share = splitting.seed, splitting.background_share
    split_of = _split_of(rows, keep, cols, col_values, splitting.fractions, seed, source, info)
    if share:
        if "author" not in cols:
            raise ValueError(
                f"{source}: background_share holds out documents of the victims' authors for "
                "re-identification; map an author column (author=...), or drop it."
            )
        split_of = hold_out_background(rows, split_of, share, seed, info)
    splits = _datasets(rows, split_of, list(attr_map), source, info)
    info.update(_frame_info(df, cols, keep, dropped, n_empty, n_no_label, header, source))
    if info["dropped_rows"]:
        warn_once(f"{source}: {describe_dropped(info)}.")
    return Corpus(
        name=name,
        splits=splits,
        label_names=label_names,
        attribute_names=list(attr_map),
        info=info,
        unit="person" if "author" in cols else "document",
    )


def _roles(
    named: Mapping[str, ColumnRef | None],
    split_column: ColumnRef | None,
    attr_map: Mapping[str, ColumnRef],
    where: Mapping[ColumnRef, Any] | None,
) -> dict[str, ColumnRef | None]:
    """Every column a mapping names, by its role: ``named`` (text, label, entities, author),
    ``split_column``, ``attributes[<name>]`` and ``where[<column>]``."""
    roles: dict[str, ColumnRef | None] = {**named, "split_column": split_column}
    roles.update({f"attributes[{n}]": ref for n, ref in attr_map.items()})
    roles.update({f"where[{k}]": k for k in where or {}})
    return roles


def _check_label_rules(
    label_map: Mapping[Any, Any] | None, label_threshold: float | None, source: str
) -> None:
    """Refuse ``label_map`` together with ``label_threshold``, and an empty ``label_map``."""
    if label_map is not None and label_threshold is not None:
        raise ValueError(
            f"{source}: give label_map or label_threshold, not both (label_map={dict(label_map)!r}"
            f", label_threshold={label_threshold!r})."
        )
    if label_map is not None and not label_map:
        raise ValueError(f"{source}: label_map is empty; map at least two label values.")


def _select_rows(
    df: pd.DataFrame,
    cols: dict[str, Any],
    where: Mapping[ColumnRef, Any] | None,
    source: str,
    dropped: dict[str, int],
) -> np.ndarray:
    """The rows every ``where`` condition keeps; counts the rows each one drops first."""
    selected = np.ones(len(df), dtype=bool)
    for ref, wanted in (where or {}).items():
        match = _where_match(df[cols[f"where[{ref}]"]].tolist(), wanted)
        dropped[f"not matching where {ref}"] = int((selected & ~match).sum())
        selected &= match
        if not selected.any():
            seen = sorted({cell_key(v) for v in df[cols[f"where[{ref}]"]].tolist()})
            raise ValueError(
                f"{source}: where {dict(where or {})!r} keeps no rows; column "
                f"{cols[f'where[{ref}]']!r} holds {seen[:10]}{' ...' if len(seen) > 10 else ''}."
            )
    return selected


def _usable_rows(
    selected: np.ndarray,
    texts: list[Any],
    labels: list[Any],
    label_order: Sequence[str] | None,
    dropped: dict[str, int],
) -> tuple[list[int], int, int]:
    """The selected rows with a text and a label, and how many of the selected rows lack a
    text and how many (with a text) lack a label; counts both in ``dropped``."""
    empty = [
        bool(s) and (is_missing(t) or not str(t).strip())
        for s, t in zip(selected, texts, strict=True)
    ]
    # Hub ClassLabel uses -1 for "no label" (e.g. GLUE test splits).
    no_label = [
        s and not e and (is_missing(lab) or (label_order is not None and int(lab) < 0))
        for s, e, lab in zip(selected, empty, labels, strict=True)
    ]
    usable = [i for i in range(len(texts)) if selected[i] and not (empty[i] or no_label[i])]
    dropped["with an empty text"] = int(sum(empty))
    dropped["with a missing label"] = int(sum(no_label))
    return usable, int(sum(empty)), int(sum(no_label))


def _derived_rows(
    usable: list[int],
    labels: list[Any],
    label_map: Mapping[Any, Any] | None,
    label_threshold: float | None,
    label_order: Sequence[str] | None,
    source: str,
    column: Any,
    dropped: dict[str, int],
) -> tuple[list[int], list[Any]]:
    """The usable rows that get a derived label, and every row's derived label (None where
    none); counts the rows ``label_map`` does not map in ``dropped``."""
    derived = _derive_labels(
        {i: labels[i] for i in usable}, label_map, label_threshold, label_order, source, column
    )
    dropped["with a label not in label_map"] = len(usable) - len(derived)
    return [i for i in usable if i in derived], [derived.get(i) for i in range(len(labels))]


def _rows(
    keep: list[int],
    texts: list[Any],
    label_ids: list[int],
    attribute_names: list[str],
    col_values: dict[str, list[Any]],
) -> list[dict[str, Any]]:
    """The corpus row of each kept table row: text, label index, attributes, entities, author."""
    rows: list[dict[str, Any]] = []
    for j, i in enumerate(keep):
        doc = str(texts[i])
        row: dict[str, Any] = {"text": doc, "label": label_ids[j]}
        if attribute_names:
            row["attributes"] = {
                n: (
                    None
                    if is_missing(v := plain_value(col_values[f"attributes[{n}]"][i]))
                    else class_key(v)  # 0, "0" and 0.0 are one value, as for labels
                )
                for n in attribute_names
            }
        ents = col_values["entities"][i] if "entities" in col_values else None
        row["entities"] = _entities(ents, doc, i)
        a = col_values["author"][i] if "author" in col_values else None
        # An anonymous row is its own author.
        row["author"] = f"row-{i}" if is_missing(a) else str(plain_value(a))
        rows.append(row)
    return rows


def _split_of(
    rows: list[dict[str, Any]],
    keep: list[int],
    cols: dict[str, Any],
    col_values: dict[str, list[Any]],
    fractions: tuple[float, float, float],
    seed: int,
    source: str,
    info: dict[str, Any],
) -> np.ndarray:
    """Each row's split: the split column's, else a seeded random split by author; notes how
    in ``info``."""
    if "split_column" in col_values:
        given = [col_values["split_column"][i] for i in keep]
        split_of = np.asarray(_normalise_splits(given, source), dtype=str)
        info["split"] = f"column {cols['split_column']!r}"
        _warn_author_overlap(rows, split_of, source, info)
        return split_of
    rng = np.random.default_rng(seed)
    authors = [r["author"] for r in rows]
    _, inverse, sizes = np.unique(authors, return_inverse=True, return_counts=True)
    # np.unique sorts ids, so the split depends on the seed and the data, not on row order.
    split_of = assign_splits(sizes, fractions, rng)[inverse]
    info["split"] = "random by author" if "author" in cols else "random by document"
    info["split_fractions"] = list(fractions)
    info["seed"] = seed
    return split_of


def _datasets(
    rows: list[dict[str, Any]],
    split_of: np.ndarray,
    attribute_names: list[str],
    source: str,
    info: dict[str, Any],
) -> dict[str, datasets.Dataset]:
    """The corpus splits: train and test (never empty), aux and background where they have
    rows."""
    import datasets

    features = corpus_features(attribute_names)
    splits = {}
    for split in (*SPLITS, "background"):
        if split == "background" and not (split_of == split).any():
            continue  # only with background_share
        members = [rows[i] for i in np.flatnonzero(split_of == split)]
        if not members and split != "aux":
            raise ValueError(
                f"{source}: the {split} split would be empty ({len(rows)} usable rows, "
                f"{info['split']}); a corpus needs documents in both train and test."
            )
        if not members:
            # A file without aux rows (or too few rows to draw any) simply has no aux split
            # (an empty Dataset cannot be built with features).
            continue
        splits[split] = datasets.Dataset.from_list(members, features=features)
    return splits


def _frame_info(
    df: pd.DataFrame,
    cols: dict[str, Any],
    keep: list[int],
    dropped: dict[str, int],
    n_empty: int,
    n_no_label: int,
    header: bool,
    source: str,
) -> dict[str, Any]:
    """What ``info`` records of the mapping: the source, columns and dropped-row counts."""
    return {
        "source": source,
        # JSON-friendly: names stay names, positions plain ints.
        "columns": {
            role: plain_value(c) if isinstance(c, (int, np.integer)) else str(c)
            for role, c in cols.items()
        },
        "rows_read": len(df),
        "dropped_rows": len(df) - len(keep),
        "dropped": {why: n for why, n in dropped.items() if n},
        "dropped_empty_text": n_empty,
        "dropped_missing_label": n_no_label,
        "header": header,
    }


def _normalise_splits(values: list[Any], source: str) -> list[str]:
    out, unknown = [], set()
    for v in values:
        key = "" if is_missing(v) else str(v).strip().lower()
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
        warn_once(
            f"{source}: {straddling} author(s) appear in more than one split, so the attacker's "
            "aux data is not author-disjoint from the victims; drop split_column to split by "
            "author instead."
        )
