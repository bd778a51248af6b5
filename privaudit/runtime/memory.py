"""This process's resident memory: handing freed memory back between components, and the
peak per component for the memory benchmark (``benchmarks/test_memory.py``).

**Freed memory goes back.** torch's CPU tensors come from glibc's ``malloc``, which raises its
mmap threshold (up to 32 MiB) after the first large free, so a training step's activations
then live in the heap, and the heap keeps the pages a step freed. A component left its
high-water mark resident for the rest of the grid (geia: 2.8 GB at its peak, 2.6 GB resident
after it, against 1.1 GB before), and the next component's peak came on top.
:func:`release_freed` (``malloc_trim``) returns those pages between components.

**Measured per component.** With ``PRIVAUDIT_MEMORY_LOG`` set to a file, every component a
cell runs (``privatize``, the service, each attack) appends one JSON line with the peak
resident set size it reached and the resident size it left behind. Linux only (the peak is
``VmHWM``, reset between components through ``/proc/self/clear_refs``); elsewhere, and
without the variable, nothing is measured or written."""

from __future__ import annotations

import contextlib
import copy
import ctypes
import functools
import gc
import json
import os
import re
import sys
import threading
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

ENV = "PRIVAUDIT_MEMORY_LOG"
_STATUS = Path("/proc/self/status")


def _status_mb(field: str) -> float | None:
    with contextlib.suppress(OSError, AttributeError, ValueError):
        found = re.search(rf"^{field}:\s+(\d+) kB", _STATUS.read_text(), re.MULTILINE)
        return int(found.group(1)) / 1024 if found else None  # type: ignore[union-attr]
    return None


def rss_mb() -> float | None:
    """Resident set size now, MiB (None where ``/proc`` is absent)."""
    return _status_mb("VmRSS")


def peak_mb() -> float | None:
    """Peak resident set size since the process started or :func:`reset_peak`, MiB."""
    return _status_mb("VmHWM")


@functools.cache
def _libc() -> Any:
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        return libc
    return None


def release_freed() -> None:
    """Free what a finished component left in reference cycles, then hand the heap's free
    pages back to the OS (glibc ``malloc_trim``; a no-op elsewhere): what a finished
    component freed stops counting as this process's memory.

    The collection comes first because Python's cycle collector runs on counts of allocated
    objects, not bytes: a component whose tensors sit in a cycle (a module and its closures)
    kept them until some later allocation count happened to trigger it. After RAPT η 100's
    service (quick corpus, one thread) 670 MB of tensors were still reachable that way and
    the process stayed at 1,574 MB; collected here, 0 MB and 890 MB.

    A full collection scans every tracked object (0.45 s each with a point's models loaded,
    one loaded thread: 7 s over a quick-grid point's 16 components), so it runs only when
    the resident set grew by :data:`COLLECT_GROWTH_MB` since the last one, which is where
    a large cycle can be (without ``/proc``: every time)."""
    rss = rss_mb()
    collect = rss is None or rss > _COLLECTED_AT[0] + COLLECT_GROWTH_MB
    if collect:
        gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
    if collect:  # the baseline moves only here: slow growth over components adds up
        _COLLECTED_AT[0] = rss_mb() or 0.0


class HeapTrimmer:
    """While open, a daemon thread hands the heap's free pages back every ``period`` seconds
    (glibc ``malloc_trim``; nothing elsewhere, or with ``period`` 0).

    Between components :func:`release_freed` does that, but a component's own peak is not
    only what it holds: the pages its earlier steps freed stay resident until the next
    trim, and with the heap fragmented by what earlier points left, fewer of them are
    reused. Over a whole quick grid, vec2text's peak climbed from 4.4 GB at the first point
    to 6.3 GB with the same work in it, while the resident size between components rose
    only 0.4 GB. Over seven points (one thread, side by side) the trims took the largest
    peak from 4,218 to 3,428 MB at 1.02× the wall time. Each trim makes a training loop
    fault its freed pages back in: the inverter's pre-training, one long loop, ran 1.24×
    slower trimmed every second, so it is trimmed every 10 s (1.03×, its peak 3.5 → 2.7 GiB;
    :data:`~privaudit.attacks._inverter.disk_cache.PRETRAIN_TRIM_S`). Trimming only at a
    new resident high did not stop the creep (the bar rises with each trim)."""

    def __init__(self, period: float | None = None) -> None:
        if period is None:
            period = float(os.environ.get("PRIVAUDIT_TRIM_PERIOD", TRIM_PERIOD_S))
        self.period = period
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        libc = _libc()
        while not self._stop.wait(self.period):
            libc.malloc_trim(0)

    def __enter__(self) -> HeapTrimmer:
        if self.period > 0 and _libc() is not None:
            self._thread = threading.Thread(target=self._run, name="malloc-trim", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class ComponentMemory:
    """Components that run one after another under one name (a grid point's privatize,
    service and attacks; the stages after the grid): while open, the heap is trimmed as
    they run (:class:`HeapTrimmer`); :meth:`start` first hands back what the previous one
    freed (:func:`release_freed`) and, with ``PRIVAUDIT_MEMORY_LOG``, logs each one's peak
    (:class:`ComponentPeaks`). The fit-noise refits once ran outside it, after the grid, in
    a process the grid had fragmented: the whole run's maximum (6.59 GB) came there, while
    no logged component passed 4.3 GB."""

    def __init__(self, point: str) -> None:
        self.peaks = component_peaks(point)
        self._trimmer = HeapTrimmer()

    def start(self, component: str) -> None:
        release_freed()  # the previous component's freed heap, before this one's peak
        if self.peaks is not None:
            self.peaks.start(component)

    def __enter__(self) -> ComponentMemory:
        self._trimmer.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._trimmer.__exit__(*exc)
        release_freed()
        if self.peaks is not None:
            self.peaks.close()


#: Seconds between the trims of :class:`HeapTrimmer`.
TRIM_PERIOD_S = 1.0
#: Resident growth (MiB) since the last cycle collection that makes release_freed collect.
COLLECT_GROWTH_MB = 256.0
_COLLECTED_AT = [0.0]  # the resident set (MiB) after the last collection


def live_tensor_mb() -> float | None:
    """MiB of CPU tensor storage that Python objects still reach (each storage once): what
    the process holds on purpose, against :func:`rss_mb`; None without torch loaded."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    seen: dict[int, int] = {}
    with warnings.catch_warnings():  # isinstance on torch's deprecated module aliases warns
        warnings.simplefilter("ignore")
        objects = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]
    for obj in objects:
        with contextlib.suppress(Exception):  # a half-built or exotic object: not counted
            if obj.device.type == "cpu":
                storage = obj.untyped_storage()
                seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values()) / 2**20


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def heap_mb() -> dict[str, float]:
    """glibc's own account of ``malloc`` (``mallinfo2``, glibc ≥ 2.33; empty elsewhere), MiB:
    ``heap_used_mb`` in live chunks, ``heap_free_mb`` in free ones (trimmed pages among them
    are not resident), ``mmap_mb`` in chunks mapped on their own. Beside the resident set it
    tells live memory that grows from memory freed but kept (fragmentation); Python's small
    objects (pymalloc's arenas) and the libraries' code are in neither."""
    libc = _libc()
    info = getattr(libc, "mallinfo2", None) if libc is not None else None
    if info is None:
        return {}
    info.restype = _Mallinfo2
    m = info()
    mib = 2**20
    return {
        "heap_used_mb": m.uordblks / mib,
        "heap_free_mb": m.fordblks / mib,
        "mmap_mb": m.hblkhd / mib,
    }


def reset_peak() -> bool:
    """Start a new peak (Linux ≥ 4.0: writing 5 to ``clear_refs``); False when not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class ComponentPeaks:
    """The peak and residual memory of each component of one point, appended as JSON lines
    to ``log`` (``{"point", "component", "peak_mb", "rss_mb", "tensors_mb"}`` and, with
    glibc, :func:`heap_mb`'s fields)."""

    def __init__(self, log: Path, point: str) -> None:
        self.log, self.point = log, point
        self.current: str | None = None

    def start(self, component: str) -> None:
        self.close()
        if reset_peak():
            self.current = component

    def close(self) -> None:
        if self.current is None:
            return
        line = {
            "point": self.point,
            "component": self.current,
            "peak_mb": peak_mb(),
            "rss_mb": rss_mb(),
            "tensors_mb": live_tensor_mb(),
            **heap_mb(),
        }
        self.current = None
        with contextlib.suppress(OSError), self.log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


def component_peaks(point: str) -> ComponentPeaks | None:
    """A :class:`ComponentPeaks` for ``point`` when ``PRIVAUDIT_MEMORY_LOG`` names a file."""
    log = os.environ.get(ENV)
    return ComponentPeaks(Path(log), point) if log else None


def copy_sharing_frozen(value: Any) -> Any:
    """A deep copy of ``value`` whose torch modules share their frozen parameters
    (``requires_grad`` False: read-only by construction, e.g. a decoder's backbone word
    embeddings, 47 MB) with the original instead of copying them. The memoised models of the
    generative inversions are copies of one pre-trained model (widened, then fine-tuned per
    point); each held its own copy of every frozen tensor (1.2 GB of tensors stayed reachable
    after geia's first cell). Modules are found in ``value`` and, three levels down, in its
    attributes, mappings and sequences."""
    torch = sys.modules.get("torch")
    memo: dict[int, Any] = {}
    if torch is not None:
        _frozen(value, torch, memo, 3)
    return copy.deepcopy(value, memo)


def _frozen(obj: Any, torch: Any, memo: dict[int, Any], depth: int) -> None:
    if isinstance(obj, torch.nn.Module):
        for p in obj.parameters():
            if not p.requires_grad:
                memo[id(p)] = p
        return
    if depth <= 0 or isinstance(obj, str | bytes | np.ndarray):
        return
    if isinstance(obj, Mapping):
        children: Iterable[Any] = obj.values()
    elif isinstance(obj, list | tuple):
        children = obj
    else:
        children = vars(obj).values() if hasattr(obj, "__dict__") else ()
    for child in children:
        _frozen(child, torch, memo, depth - 1)
