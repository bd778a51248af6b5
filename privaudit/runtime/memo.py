"""A small content-keyed memo for pure, costly computations on large inputs.

A grid asks the same question many times: every CAPE level encodes the same clean texts, and the
token inversions at one defense point (nn, mlp, ae) each look up the nearest vocabulary token of
the same released vectors. The answer depends only on the input's *content*, so the key is a
digest of the bytes (BLAKE2b, 0.8 GB/s on two cores: 30 ms for 16k 384-d vectors), never an
object's identity, and a hit is exactly the result a fresh call would give. Entries are few
(least recently used first out) and results are returned as copies, so a caller that writes
into its result cannot change the next one's.

**Who uses it.** ``NearestNeighbourIndex.query`` (which also searches each distinct row once:
a text release's tokens repeat, 1.6k distinct of 38k) and the backbone's encodings
(``Backbone.pooled``, ``pooled_from_word_embeddings``, ``pooled_from_layer``). The service
evaluator's frozen pass seeds ``pooled`` (text) and ``pooled_from_word_embeddings`` (token
embeddings) with what it computed (``remember_pooled*``), so the attacks do not encode the
victims' release again. A :class:`RowMemo` keeps the rows of ``pooled``'s latest encodings by
text: a call on a subset of one (the 300 of the 1,000 victims that geia, vec2text and
optimization-inversion score) reads those rows.

**Charged cost.** A memo makes the second question cheap, which would make a cost per 1,000
words depend on the order of the grid: CAPE's first ε encodes the clean texts (18 s on the
quick grid), every later ε finds them memoised (0.016 s) and would look a thousand times
cheaper, although each level's release needs that encoding just the same. So every entry
remembers the seconds its computation took (its wall time, plus what the hits *inside* it were
charged, so a memoised result built on another memoised result carries both), and
:func:`charged_seconds` adds, during a block, the stored seconds of every hit in any
:class:`ContentMemo` — what the memo saved. The runner wraps a point's privatization in it and
reports measured + charged seconds: each point is charged the full cost of producing its
release, whatever ran before it. A miss is not charged (its time is already in the measured
wall time). Blocks nest: each open block sees every hit while it is open, so an outer block
includes its inner blocks' charges. The open blocks are shared by the threads of the process
(a lock keeps the sums right; a grid runs one point at a time per worker process). The
:class:`ObjectMemo` (below) caches an attack's own model, not a
privatization cost, and is not charged.

**Bypass and counters (benchmarks).** A benchmark that repeats a round must time a computation,
not a lookup: with identical inputs every round after the first is a hit. :func:`memo_bypassed`
turns every :class:`ContentMemo` of the process off while it is open (every call computes; the
result is neither looked up nor stored, so the block leaves each memo as it found it), and
:func:`memo_stats` reads process-wide ``hits`` / ``misses`` / ``bypassed`` counters, so a
benchmark asserts that its timed rounds made no hit (``(memo_stats() - before).hits == 0``). The
charged seconds stay right: a bypassed call is not a hit, so it charges nothing, and its time is
in the block's measured wall time like a miss's. The bypass covers the content memos only, not
the caches of loaded models (``functools`` caches, ``ObjectMemo``) nor the nearest-neighbour
radii, which are per-vocabulary constants a steady-state run has warm (see
``benchmarks/conftest.py`` for the rule of what a benchmark may keep warm).
"""

from __future__ import annotations

import hashlib
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.runtime.memory import copy_sharing_frozen


def digest(parts: Iterable[Any]) -> str:
    """A digest of arrays (dtype, shape and bytes), strings and other ``repr``-able values."""
    h = hashlib.blake2b(digest_size=20)
    for part in parts:
        if isinstance(part, np.ndarray):
            arr = np.ascontiguousarray(part)
            h.update(f"{arr.dtype.str}{arr.shape}".encode())
            if arr.size:  # an empty array's view cannot be cast; its shape says it all
                h.update(memoryview(arr).cast("B"))
        elif isinstance(part, str):
            h.update(b"s%d:" % len(part))
            h.update(part.encode("utf-8", "surrogatepass"))
        else:
            h.update(repr(part).encode())
        h.update(b"\x00")
    return h.hexdigest()


@dataclass
class Charge:
    """What a :func:`charged_seconds` block was charged: the stored compute ``seconds`` of the
    memo ``hits`` made while it was open."""

    seconds: float = 0.0
    hits: int = 0


_open_charges: list[Charge] = []
_charge_lock = threading.Lock()


@contextmanager
def charged_seconds() -> Iterator[Charge]:
    """A block that sums the stored compute seconds of every :class:`ContentMemo` hit made
    while it is open (see the module docstring); read ``.seconds`` after the block."""
    charge = Charge()
    with _charge_lock:
        _open_charges.append(charge)
    try:
        yield charge
    finally:
        with _charge_lock:
            # By identity: two blocks with equal sums are still two blocks.
            del _open_charges[next(i for i, c in enumerate(_open_charges) if c is charge)]


def _charge(seconds: float) -> None:
    """Add one hit of ``seconds`` to every open block."""
    with _charge_lock:
        for charge in _open_charges:
            charge.seconds += seconds
            charge.hits += 1


@dataclass(frozen=True)
class MemoStats:
    """Process-wide :class:`ContentMemo` counters: lookups answered by an entry (``hits``),
    computed and stored (``misses``), computed inside :func:`memo_bypassed` (``bypassed``).
    Subtract two snapshots to count what a block did."""

    hits: int = 0
    misses: int = 0
    bypassed: int = 0

    def __sub__(self, other: MemoStats) -> MemoStats:
        return MemoStats(
            self.hits - other.hits, self.misses - other.misses, self.bypassed - other.bypassed
        )


_stats = {"hits": 0, "misses": 0, "bypassed": 0}
_bypass_depth = 0
_stats_lock = threading.Lock()


def memo_stats() -> MemoStats:
    """A snapshot of the process-wide :class:`ContentMemo` counters (see the module docstring)."""
    with _stats_lock:
        return MemoStats(**_stats)


def _count(what: str) -> None:
    with _stats_lock:
        _stats[what] += 1


@contextmanager
def memo_bypassed() -> Iterator[None]:
    """A block in which every :class:`ContentMemo` of the process computes every call: no
    lookup, nothing stored (see the module docstring). Blocks nest; the bypass is shared by the
    threads of the process, like :func:`charged_seconds`."""
    global _bypass_depth
    with _stats_lock:
        _bypass_depth += 1
    try:
        yield
    finally:
        with _stats_lock:
            _bypass_depth -= 1


def memo_is_bypassed() -> bool:
    """Whether a :func:`memo_bypassed` block is open."""
    return _bypass_depth > 0


class ContentMemo:
    """Least-recently-used memo of ``key -> numpy array`` with at most ``size`` entries; each
    entry keeps the seconds its computation took, charged to open :func:`charged_seconds`
    blocks on every hit."""

    def __init__(self, size: int = 8) -> None:
        if size < 1:
            raise ValueError(f"A memo holds at least one entry, got size={size}.")
        self.size = size
        self._entries: OrderedDict[str, tuple[np.ndarray, float]] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.bypassed = 0

    def get(self, key: str, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """The memoised result for ``key`` (a copy), computing and storing it on a miss;
        inside :func:`memo_bypassed`, always computed and never stored."""
        if _bypass_depth > 0:
            self.bypassed += 1
            _count("bypassed")
            return np.asarray(compute())
        if key in self._entries:
            self._entries.move_to_end(key)
            self.hits += 1
            _count("hits")
            value, seconds = self._entries[key]
            _charge(seconds)
            return value.copy()
        self.misses += 1
        _count("misses")
        t0 = time.perf_counter()
        with charged_seconds() as inner:  # hits inside the computation are part of its cost
            value = np.asarray(compute())
        seconds = time.perf_counter() - t0 + inner.seconds
        self._entries[key] = (value.copy(), seconds)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return value

    def seconds(self, key: str) -> float | None:
        """The stored compute seconds of ``key``'s entry (None when it is not memoised)."""
        entry = self._entries.get(key)
        return None if entry is None else entry[1]


class RowMemo:
    """The rows of the latest ``size`` results of a per-item computation (one output row per
    input item, each row a function of its item alone), by item: a call whose items all sit in
    one earlier call's is answered from its rows. An attack that scores a declared subset of
    the victims (``max_victims``) then reads the pooled vectors the service computed for all
    of them instead of encoding its 300 again.

    A lookup charges open :func:`charged_seconds` blocks the stored share of the computation
    (its seconds × the rows taken / its rows), so a point still pays for its release whatever
    ran before; inside :func:`memo_bypassed` nothing is found. Rows come back as a copy. A row
    computed in another batch may differ from a fresh call's in float rounding (padding and
    batch composition), as a :class:`ContentMemo` entry stored by a caller that ran the
    computation for another purpose may."""

    def __init__(self, size: int = 4) -> None:
        if size < 1:
            raise ValueError(f"A memo holds at least one entry, got size={size}.")
        self.size = size
        # (scope, item -> row, rows, seconds per row), latest last; the oldest drops out
        self._entries: deque[tuple[Any, dict[str, int], np.ndarray, float]] = deque(maxlen=size)

    def store(self, scope: Any, items: Sequence[str], rows: np.ndarray, seconds: float) -> None:
        """Keep ``rows`` (one per item) computed in ``seconds``, under ``scope`` (what else the
        rows depend on: settings, device)."""
        rows = np.asarray(rows)
        if len(items) != len(rows) or not len(items) or _bypass_depth > 0:
            return
        index = {item: i for i, item in enumerate(items)}
        self._entries.append((scope, index, rows.copy(), float(seconds) / len(rows)))

    def lookup(self, scope: Any, items: Sequence[str]) -> np.ndarray | None:
        """The rows of ``items`` from the latest entry of ``scope`` that holds every one of
        them (a copy), else None."""
        if _bypass_depth > 0 or not len(items):
            return None
        for kept, index, rows, per_row in reversed(self._entries):
            if kept != scope:
                continue
            try:
                picked = [index[item] for item in items]
            except KeyError:
                continue
            _charge(per_row * len(picked))
            return rows[picked].copy()
        return None


class ObjectMemo:
    """A small in-process LRU memo of Python objects (deep copies in and out; a module's
    frozen parameters are shared, not copied:
    :func:`privaudit.runtime.memory.copy_sharing_frozen`).

    ``per_point``: the entries serve the cells of one defense point only (a model fine-tuned
    on that point's release), so :func:`end_point`, which the runner calls when a point's
    cells are done, drops them: held on, they sat in memory through the next point's
    privatization and service training, where the grid's peak is."""

    def __init__(self, size: int = 8, *, per_point: bool = False) -> None:
        self.size = size
        self._entries: OrderedDict[str, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0
        if per_point:
            _PER_POINT.add(self)

    def get(self, key: str, compute: Callable[[], Any]) -> Any:
        if key in self._entries:
            self._entries.move_to_end(key)
            self.hits += 1
            return copy_sharing_frozen(self._entries[key])
        self.misses += 1
        value = compute()
        self._entries[key] = copy_sharing_frozen(value)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        self._entries.clear()
        self.hits = self.misses = 0


_PER_POINT: weakref.WeakSet[ObjectMemo] = weakref.WeakSet()


def end_point() -> None:
    """Drop the entries of every ``per_point`` :class:`ObjectMemo`: the point whose cells
    they served is done (hit counters are kept)."""
    for memo in list(_PER_POINT):
        memo._entries.clear()
