"""runtime.memory: freed memory handed back, and the per-component log of the memory
benchmark (issue 50)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from privaudit.runtime import memory

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The memory log this test's components write to (``PRIVAUDIT_MEMORY_LOG``)."""
    path = tmp_path / "memory.jsonl"
    monkeypatch.setenv(memory.ENV, str(path))
    return path


@linux
def test_the_log_has_a_line_per_component_with_its_peak(log: Path) -> None:
    peaks = memory.component_peaks("t2t 50.0")
    assert peaks is not None
    peaks.start("privatize")
    held = bytearray(200 * 2**20)  # a component that peaks 200 MiB higher
    held[::4096] = b"x" * len(held[::4096])  # touched: resident
    del held  # freed before the next component: its peak starts lower
    peaks.start("geia")
    peaks.close()
    peaks.close()  # closing twice writes nothing more
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["point"], r["component"]) for r in lines] == [
        ("t2t 50.0", "privatize"),
        ("t2t 50.0", "geia"),
    ]
    assert lines[0]["peak_mb"] >= lines[0]["rss_mb"] - 1 and lines[0]["peak_mb"] > 200
    assert lines[1]["peak_mb"] < lines[0]["peak_mb"]  # the peak was reset between them
    if memory.heap_mb():  # glibc: malloc's own account beside the resident set
        assert {"heap_used_mb", "heap_free_mb", "mmap_mb"} <= set(lines[0])


def test_the_heap_account_sees_live_and_mapped_allocations() -> None:
    before = memory.heap_mb()
    if not before:
        pytest.skip("no mallinfo2 (not glibc ≥ 2.33)")
    big = bytearray(64 * 2**20)  # above the mmap threshold: a chunk of its own
    after = memory.heap_mb()
    assert after["mmap_mb"] - before["mmap_mb"] >= 63
    del big
    assert memory.heap_mb()["mmap_mb"] < after["mmap_mb"] - 63


@linux
def test_components_run_trimmed_and_each_one_is_logged_under_the_name(
    log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ComponentMemory: what a grid point's cells and the stages after the grid run in."""
    trims: list[int] = []

    class Libc:
        def malloc_trim(self, pad: int) -> int:
            trims.append(pad)
            return 1

    monkeypatch.setattr(memory, "_libc", lambda: Libc())
    with memory.ComponentMemory("after the grid") as parts:
        assert parts._trimmer._thread is not None and parts._trimmer._thread.is_alive()
        parts.start("results")
        parts.start("fit noise: geia")
    assert parts._trimmer._thread is not None and not parts._trimmer._thread.is_alive()
    assert len(trims) >= 3  # each start, and the exit
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["point"], r["component"]) for r in rows] == [
        ("after the grid", "results"),
        ("after the grid", "fit noise: geia"),
    ]


def test_without_the_variable_nothing_is_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(memory.ENV, raising=False)
    assert memory.component_peaks("none") is None
    memory.release_freed()  # always safe, with or without glibc


def test_what_a_component_left_in_a_reference_cycle_is_freed_between_components(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A module and its closure that point at each other (what a finished service left):
    Python's cycle collector runs by object counts, not bytes, so without a collection the
    tensor stayed; release_freed frees it before the next component starts."""
    import gc
    import weakref

    import torch

    def left_behind() -> weakref.ref[torch.Tensor]:
        module = torch.nn.Linear(4, 4)
        big = torch.ones(1024, 1024)  # 4 MiB, touched: resident
        module.keep = lambda: (module, big)  # type: ignore[assignment]  # the cycle
        return weakref.ref(big)

    gc.disable()  # no automatic collection may free it first
    try:
        memory.release_freed()
        gone = left_behind()
        assert gone() is not None  # only the cycle holds it
        memory.release_freed()  # 4 MiB more resident: below the growth that collects
        assert gone() is not None or not sys.platform.startswith("linux")
        # any resident size collects (a 4 MiB tensor may reuse freed heap: RSS need not grow)
        monkeypatch.setattr(memory, "COLLECT_GROWTH_MB", -math.inf)
        memory.release_freed()
        assert gone() is None
        # the baseline is the last collection's, not the last call's: growth adds up
        monkeypatch.setattr(memory, "COLLECT_GROWTH_MB", 256.0)
        monkeypatch.setattr(memory, "_COLLECTED_AT", [-math.inf])  # (a small process too)
        memory.release_freed()  # collects (any size is above the last) and records
        baseline = memory._COLLECTED_AT[0]
        held = bytearray(64 * 2**20)  # 64 MiB more resident, below the growth that collects
        held[::4096] = b"x" * len(held[::4096])
        memory.release_freed()  # no collection: the baseline stays, so growth adds up
        assert memory._COLLECTED_AT[0] == baseline or not sys.platform.startswith("linux")
        del held
    finally:
        gc.enable()


@linux
def test_live_tensors_count_each_storage_once() -> None:
    import torch

    before = memory.live_tensor_mb() or 0.0
    base = torch.zeros(256, 1024)  # 1 MiB
    views = [base[:10], base.T, base.view(-1)]
    assert memory.live_tensor_mb() == pytest.approx(before + 1.0, abs=0.05)
    assert len(views) == 3
    rss = memory.rss_mb()
    assert rss is not None and rss > 0


def test_a_copy_shares_frozen_parameters_and_owns_the_rest() -> None:
    import torch

    model = torch.nn.ModuleDict({"emb": torch.nn.Embedding(50, 8), "out": torch.nn.Linear(8, 50)})
    model["emb"].weight.requires_grad_(False)
    state = {"model": model, "notes": ["kept"], "scale": 2.0}
    twin = memory.copy_sharing_frozen(state)
    assert twin["model"]["emb"].weight is model["emb"].weight  # frozen: one tensor
    assert twin["model"]["out"].weight is not model["out"].weight  # trainable: its own
    with torch.no_grad():
        twin["model"]["out"].weight.add_(1.0)
    assert not torch.equal(twin["model"]["out"].weight, model["out"].weight)
    assert twin["notes"] == ["kept"] and twin["notes"] is not state["notes"]
    assert memory.copy_sharing_frozen([1, "a"]) == [1, "a"]


class _CountingLibc:
    def __init__(self) -> None:
        self.trims = 0

    def malloc_trim(self, pad: int) -> int:
        self.trims += 1
        return 1


def test_the_trimmer_trims_while_open_and_stops_on_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    libc = _CountingLibc()
    monkeypatch.setattr(memory, "_libc", lambda: libc)
    with memory.HeapTrimmer(0.01) as trimmer:
        time.sleep(0.2)
    assert libc.trims >= 3  # every period, with no call from the component
    assert trimmer._thread is not None and not trimmer._thread.is_alive()
    after = libc.trims
    time.sleep(0.05)
    assert libc.trims == after  # stopped with the block
    with memory.HeapTrimmer(0) as off:  # a period of 0: no thread
        time.sleep(0.05)
    assert off._thread is None and libc.trims == after
    monkeypatch.setenv("PRIVAUDIT_TRIM_PERIOD", "0.5")
    assert memory.HeapTrimmer().period == 0.5
    monkeypatch.setattr(memory, "_libc", lambda: None)  # no glibc: nothing to run
    with memory.HeapTrimmer(0.01) as none:
        pass
    assert none._thread is None


_HOLES = """
import json, time
from privaudit.runtime import memory
period = float(__import__("sys").argv[1])
with memory.HeapTrimmer(period):
    chunks = [bytearray(64 * 1024) for _ in range(3200)]  # 200 MiB of heap, touched
    pin = bytearray(64 * 1024)  # above them: the heap's top cannot shrink past it
    held = memory.rss_mb()  # before the holes: a trim may come at any moment after
    del chunks[::2]  # 100 MiB of 64 KiB holes between live chunks: resident, unusable
    more = [bytearray(96 * 1024) for _ in range(2134)]  # 200 MiB more, from the top
    time.sleep(0.5)
    print(json.dumps([held, memory.rss_mb()]))
"""


@linux
def test_freed_heap_pages_go_back_while_a_component_still_runs() -> None:
    """Chunks below the mmap threshold live in the heap; freed between live ones, glibc keeps
    them resident, and larger chunks cannot reuse them: they come from the heap's top. The
    trimmer hands the freed ones back while the component still runs. (In a fresh process:
    a test worker's own heap, after a thousand tests, is not a known layout.)"""
    import subprocess

    def grown(period: float) -> float:
        out = subprocess.run(
            [sys.executable, "-c", _HOLES, str(period)], capture_output=True, text=True, check=True
        )
        held, during = json.loads(out.stdout)
        return during - held

    assert grown(0) > 180  # untrimmed: the holes stay resident beside the 200 MiB more
    assert grown(0.02) < 150  # trimmed: they went back while it ran
