"""The cell store: finished cells kept per machine, so that a run needing an identical cell
takes it instead of computing it again.

A grid's cells are pure functions of what their key hashes (the component, its version and
parameters, the corpus's content, the backbone, the seed, the device's precision: the audit
layer computes the key, :mod:`privaudit.audit.reuse`), so a repeat ``privaudit run`` with
nothing changed, or a second ``privaudit audit`` of a changed plugin beside the same
comparators, needs to compute only what changed. This module is the storage below that: a
content-addressed directory ``cells/`` beside the inverter cache in
:func:`privaudit.runtime.cache.cache_dir`, one JSON file per entry
(``cells/<key[:2]>/<key>.json``: ``{"format", "key", "meta", "record"}``), written
atomically.

- **What an entry holds.** The cell's record (scores, per-document outcome *statistics*
  indexed by document number, timings, the component's parameters) and a few facts to show it
  by (``meta``: corpus name, defense label, component). Never the corpus's text: the caller
  drops a record's examples and full failure messages before :meth:`CellStore.put`, and a
  failed record is never kept (it is computed again anyway).
- **Bounded.** At most :func:`max_bytes` (``$PRIVAUDIT_CELL_STORE_MAX``, e.g. ``500MB``;
  default :data:`DEFAULT_MAX_BYTES`); :meth:`CellStore.prune` removes the least recently used
  entries first (a hit touches its file's mtime), and a run prunes once at its end.
- **Never a failure.** A cache that cannot be read or written (read-only, full, gone) turns
  the store into a no-op for the rest of the process: a run computes what it cannot take, and
  keeps nothing.
- **Fresh.** :func:`fresh_cells` (``--fresh`` on ``run`` and ``audit``) makes every lookup
  miss while it is open; what is computed then replaces the stored entries.
- **Off.** ``PRIVAUDIT_CELL_STORE=off`` turns the store off altogether: nothing is taken or
  kept (the test suite runs so, as each test's grid must compute what it patches).
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit.runtime.cache import CacheUnusable, cache_dir

FORMAT = 1
CELLS_DIR = "cells"
#: The default bound on the store's size: a quick grid's 336 cells take about 20 MB.
DEFAULT_MAX_BYTES = 1 << 30
MAX_ENV = "PRIVAUDIT_CELL_STORE_MAX"
SWITCH_ENV = "PRIVAUDIT_CELL_STORE"
#: After pruning, the store is at most this share of its bound, so every run does not prune.
PRUNE_TO = 0.9

_UNITS = {
    "": 1,
    "B": 1,
    "K": 1 << 10,
    "KB": 1 << 10,
    "M": 1 << 20,
    "MB": 1 << 20,
    "G": 1 << 30,
    "GB": 1 << 30,
    "T": 1 << 40,
    "TB": 1 << 40,
}

_FRESH: contextvars.ContextVar[bool] = contextvars.ContextVar("fresh_cells", default=False)


def parse_size(text: str, what: str = "size") -> int:
    """``"500MB"``, ``"2G"``, ``"1048576"`` → bytes; a one-line ``ValueError`` otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?B?)\s*", str(text), re.IGNORECASE)
    if match is None:
        raise ValueError(f"{what} {text!r} is not a size; give bytes or e.g. 500MB, 2GB.")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def max_bytes() -> int:
    """The store's bound: ``$PRIVAUDIT_CELL_STORE_MAX`` (a size), else the default."""
    value = os.environ.get(MAX_ENV)
    return parse_size(value, MAX_ENV) if value else DEFAULT_MAX_BYTES


def shown_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"  # pragma: no cover - the loop returns


@contextlib.contextmanager
def fresh_cells(fresh: bool = True) -> Iterator[None]:
    """While open (and ``fresh``), every :meth:`CellStore.get` misses: the run recomputes its
    cells and what it computes replaces the stored entries."""
    token = _FRESH.set(bool(fresh) or _FRESH.get())
    try:
        yield
    finally:
        _FRESH.reset(token)


def is_fresh() -> bool:
    return _FRESH.get()


def enabled() -> bool:
    """False when ``$PRIVAUDIT_CELL_STORE`` is ``off`` (or ``0``, ``no``, ``false``)."""
    return os.environ.get(SWITCH_ENV, "on").strip().lower() not in ("off", "0", "no", "false")


@dataclass(frozen=True)
class Entry:
    """One stored cell as ``privaudit cache`` lists it."""

    key: str
    path: Path
    size: int
    used: float  # last use (mtime): written or taken
    meta: dict[str, Any]


class CellStore:
    """The machine's cell store under ``root`` (default: ``cells/`` of the cache directory).
    Every method swallows the file system's errors: reading misses, writing stops."""

    def __init__(self, root: Path | None = None) -> None:
        if root is None and enabled():
            try:
                root = cache_dir() / CELLS_DIR
            except (CacheUnusable, OSError):
                root = None
        self.root: Path | None = root
        self.writable = root is not None
        self.hits = 0
        self.kept = 0

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, *, touch: bool = True) -> dict[str, Any] | None:
        """The stored record of ``key`` (its use time touched, a hit counted, unless not
        ``touch``: a look that takes nothing), or None: absent, unreadable, another format,
        or :func:`fresh_cells` open."""
        if self.root is None or is_fresh():
            return None
        path = self._path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
            return None
        record = data.get("record")
        if not isinstance(record, dict) or record.get("status") == "failed":
            return None
        if touch:
            with contextlib.suppress(OSError):  # least recently used goes first; read-only: fine
                os.utime(path)
            self.hits += 1
        return record

    def put(self, key: str, record: dict[str, Any], meta: dict[str, Any] | None = None) -> bool:
        """Keep ``record`` under ``key`` (atomically); False when it was not kept (a failed
        record, or a cache that cannot be written: the store stops trying)."""
        if self.root is None or not self.writable or record.get("status") == "failed":
            return False
        path = self._path(key)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        blob = {"format": FORMAT, "key": key, "meta": meta or {}, "record": record}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(blob, default=_plain), encoding="utf-8")
            os.replace(tmp, path)
        except (OSError, TypeError, ValueError):  # read-only, full, or gone: keep nothing more
            self.writable = False
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            return False
        self.kept += 1
        return True

    def entries(self, *, meta: bool = True) -> list[Entry]:
        """Every stored entry, least recently used first; with its ``meta`` (read from each
        file; empty for an unreadable one) unless not ``meta`` (sizes and use times only)."""
        if self.root is None or not self.root.is_dir():
            return []
        out = []
        for path in self.root.glob("*/*.json"):
            try:
                stat = path.stat()
            except OSError:  # removed meanwhile (another run pruned it)
                continue
            shown: Any = {}
            if meta:
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    shown = json.loads(path.read_text(encoding="utf-8")).get("meta") or {}
            out.append(Entry(path.stem, path, stat.st_size, stat.st_mtime, dict(shown)))
        return sorted(out, key=lambda e: e.used)

    def empty(self) -> bool:
        """Whether the store holds no entry (looked up without reading any)."""
        if self.root is None or not self.root.is_dir():
            return True
        return next(self.root.glob("*/*.json"), None) is None

    def size(self) -> int:
        return sum(e.size for e in self.entries(meta=False))

    def prune(self, limit: int | None = None, *, to: float = PRUNE_TO) -> tuple[int, int]:
        """Above ``limit`` bytes (default :func:`max_bytes`), remove the least recently used
        entries until the store is at most ``to`` × ``limit``. Returns (entries, bytes)
        removed."""
        limit = max_bytes() if limit is None else int(limit)
        entries = self.entries(meta=False)
        total = sum(e.size for e in entries)
        if total <= limit:
            return 0, 0
        removed, freed, target = 0, 0, int(limit * to)
        for entry in entries:
            if total - freed <= target:
                break
            try:
                entry.path.unlink()
            except OSError:
                continue
            removed, freed = removed + 1, freed + entry.size
        return removed, freed

    def clear(self) -> tuple[int, int]:
        """Remove every entry. Returns (entries, bytes) removed."""
        return self.prune(0, to=0.0)


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as plain JSON (records hold a few)."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", 1) == 0:
        return item()
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return str(value)
