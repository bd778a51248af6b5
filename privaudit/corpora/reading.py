"""Reading a corpus file into a pandas DataFrame, and reading its cells as plain values.

The format comes from ``fmt`` or the file's extension (compression suffixes skipped); csv/tsv
keep texts such as ``"NA"`` as text. Text formats are decoded with the corpus option
``encoding`` (default utf-8): a file that does not decode, or holds NUL bytes, is an error
that names the encoding, not the format. A csv/tsv whose columns are given as 0-based positions and
whose first row reads as data is read without a header row, with a warning
(:func:`read_with_header`). The cell helpers (:func:`plain_value`, :func:`is_missing`,
:func:`cell_key`, :func:`is_number`) are what the column mapping in
:mod:`privaudit.corpora.columns` compares and converts with; :func:`warn_once` is the loaders'
one warning per run.
"""

from __future__ import annotations

import codecs
import math
import numbers
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
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


# --------------------------------------------------------------------------------------------
# Cell values
# --------------------------------------------------------------------------------------------


def plain_value(value: Any) -> Any:
    """A numpy/pandas scalar as a plain Python value; integral floats as ints (1980.0 → 1980)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def is_missing(value: Any) -> bool:
    """Whether a cell is empty: None, NaN, NaT or pd.NA."""
    if value is None:
        return True
    try:
        return bool(value != value)  # NaN, NaT, pd.NA
    except (TypeError, ValueError):
        return False


def cell_key(value: Any) -> str:
    """A cell or a configured value as compared by ``where``/``label_map``/header detection:
    its plain string form, so a YAML ``4``, a CSV's ``4`` and a float column's ``4.0`` agree."""
    return str(plain_value(value)).strip()


def is_number(value: Any) -> bool:
    """Whether a cell holds a finite number, or text that reads as one (booleans do not)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, numbers.Number):
        return not is_missing(value)
    try:
        return math.isfinite(float(str(value)))
    except ValueError:
        return False


# --------------------------------------------------------------------------------------------
# Reading files
# --------------------------------------------------------------------------------------------


def infer_format(path: Path, fmt: str | None) -> str:
    """The file's format: ``fmt`` normalised, else read from the extension."""
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


def check_encoding(encoding: str) -> str:
    """The codec's canonical name; an unknown one is a one-line error."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise ValueError(
            f"Unknown encoding {encoding!r}; give a Python codec name such as utf-8, latin-1 "
            "or cp1252 (the corpus option encoding)."
        ) from None


def _check_text(path: Path, fmt: str, encoding: str) -> None:
    """A text format's file that holds NUL bytes is binary (unless its encoding is UTF-16 or
    UTF-32, whose text does): say so, not that the format might be wrong."""
    if fmt == "parquet" or any(s.lower() in _COMPRESSIONS for s in path.suffixes[-1:]):
        return
    if codecs.lookup(encoding).name.startswith(("utf-16", "utf-32")):
        return
    with path.open("rb") as fh:
        head = fh.read(8192)
    if b"\x00" in head:
        raise ValueError(
            f"{path} holds NUL bytes: it is binary, not {encoding} {fmt} text. Check the file, "
            "or set its encoding with the corpus option encoding (e.g. --map encoding=utf-16)."
        )


def _read(path: Path, fmt: str, header: bool, encoding: str = "utf-8") -> pd.DataFrame:
    import pandas as pd

    _check_text(path, fmt, encoding)
    # Only truly empty cells are missing: a review reading "NA" or "null" stays text.
    csv_opts: dict[str, Any] = {
        "header": 0 if header else None,
        "keep_default_na": False,
        "na_values": [""],
        "encoding": encoding,
    }
    json_opts: dict[str, Any] = {"dtype": False, "convert_dates": False, "encoding": encoding}
    try:
        if fmt in ("csv", "tsv"):
            return pd.read_csv(path, sep="," if fmt == "csv" else "\t", **csv_opts)
        if fmt == "jsonl":
            return pd.read_json(path, lines=True, **json_opts)
        if fmt == "json":
            try:
                return pd.read_json(path, **json_opts)
            except UnicodeDecodeError:
                raise
            except ValueError:  # a .json file holding one record per line
                return pd.read_json(path, lines=True, **json_opts)
        return pd.read_parquet(path)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} is empty: it has no header and no rows.") from None
    except UnicodeDecodeError as exc:  # the encoding is the problem, not the format
        raise ValueError(
            f"Could not read {path} as {encoding} text ({exc.reason}); set the file's encoding "
            "with the corpus option encoding (e.g. --map encoding=latin-1, or "
            "corpus.params.encoding: cp1252 in a grid config)."
        ) from None
    except (ValueError, pd.errors.ParserError, OSError) as exc:
        raise ValueError(
            f"Could not read {path} as {fmt}: {exc}. If the format is wrong, pass fmt= one of "
            f"{', '.join(FORMATS)}."
        ) from exc


def _positions(refs: Sequence[Any]) -> list[int]:
    """The column references given as 0-based positions (ints; not booleans)."""
    return [int(r) for r in refs if isinstance(r, numbers.Integral) and not isinstance(r, bool)]


def _first_row_is_data(df: pd.DataFrame) -> str | None:
    """Why a csv read without a header starts with a record rather than column names (or None):
    a number atop a column of numbers, or a value that recurs further down its own column (a
    label, an attribute). A header of ``0..n-1`` (pandas' default names) is a header."""
    first = df.iloc[0].tolist()
    if [cell_key(v) for v in first] == [str(i) for i in range(len(first))]:
        return None
    rest = df.iloc[1:]
    for j, cell in enumerate(first):
        if is_missing(cell):
            continue
        column = [v for v in rest.iloc[:, j].tolist() if not is_missing(v)]
        if not column:
            continue
        # Name the signal, not the row: its text column is a private document.
        if is_number(cell) and all(is_number(v) for v in column):
            return f"column {j} starts with the number {cell_key(cell)!r} atop numbers"
        if cell_key(cell) in {cell_key(v) for v in column}:
            return f"column {j} starts with {cell_key(cell)!r}, a value it holds again further down"
    return None


def read_with_header(
    path: Path, fmt: str, header: bool | None, refs: Sequence[Any], encoding: str = "utf-8"
) -> tuple[pd.DataFrame, bool]:
    """Read the file (text formats decoded with ``encoding``) and settle ``header``. ``None``
    means a header row, except that a csv/tsv whose columns are given as positions and whose
    first row reads as data is read without one (with a warning): its first row is a
    document, never silently a list of names."""
    if fmt not in ("csv", "tsv"):
        return _read(path, fmt, True, encoding), True
    if header is not None:
        return _read(path, fmt, header, encoding), header
    if not _positions(refs):
        return _read(path, fmt, True, encoding), True
    raw = _read(path, fmt, False, encoding)
    why = _first_row_is_data(raw) if len(raw) > 1 else None
    if why:
        warn_once(
            f"{path.name}: columns are given as positions and the first row reads as data, "
            f"not names ({why}), so the file is read without a header row; set header: true "
            "(--map header=true) if that row is a header."
        )
        return raw, False
    return _read(path, fmt, True, encoding), True


def warn_once(message: str) -> None:
    """Warn once per run: in the process that loads the corpus for the run, not again in each
    worker process that rebuilds it (they load the same file)."""
    import multiprocessing

    if multiprocessing.parent_process() is None:
        warnings.warn(message, UserWarning, stacklevel=3)
