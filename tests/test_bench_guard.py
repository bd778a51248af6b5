"""The benchmarks' honesty guards (``benchmarks/honesty.py``, ``benchmarks/conftest.py``) and the
memo bypass they rely on: a faked rate above the matrix-multiply bound fails, a memo hit during
timed rounds fails, a bypassed memo computes every call and leaves the charge accounting right,
and a child's peak RSS is its own, not its parent's. Tiny shapes, fast."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from benchmarks.honesty import (
    GemmBound,
    assert_within_gemm_bound,
    child_wall_and_rss,
    counted_search_flops,
    gemm_gflops,
    honest_rounds,
)
from privaudit.mechanisms import NearestNeighbourIndex
from privaudit.runtime.memo import (
    ContentMemo,
    charged_seconds,
    memo_bypassed,
    memo_is_bypassed,
    memo_stats,
)


def test_a_rate_above_the_matmul_bound_fails() -> None:
    bound = gemm_gflops(64, 16, 128, repeat=2)
    assert bound > 0
    assert_within_gemm_bound(0.5 * bound, bound)  # an honest rate passes
    assert_within_gemm_bound(1.04 * bound, bound)  # timer noise within the slack passes
    with pytest.raises(AssertionError, match="did not compute"):
        assert_within_gemm_bound(1.06 * bound, bound)
    # A memo answer "timed" as a search: orders of magnitude over; re-measuring cannot save it.
    gemm = GemmBound(64, 16, 128, row_block=32, col_block=64, repeat=1)
    with pytest.raises(AssertionError, match="did not compute"):
        gemm.check(1000 * gemm.gflops, what="faked")
    assert len(gemm.measurements) == 6  # the first measurement and two re-measurements
    gemm.check(0.5 * gemm.gflops)


def test_bypassed_memo_computes_every_call_and_stores_nothing() -> None:
    memo = ContentMemo(size=4)
    calls: list[int] = []

    def compute() -> np.ndarray:
        calls.append(1)
        return np.full(2, len(calls), dtype=np.float32)

    memo.get("k", compute)
    before = memo_stats()
    with charged_seconds() as charge, memo_bypassed():
        assert memo_is_bypassed()
        with memo_bypassed():  # blocks nest
            assert (memo.get("k", compute) == 2).all()
        assert memo_is_bypassed()
        assert (memo.get("new", compute) == 3).all()
    assert not memo_is_bypassed()
    delta = memo_stats() - before
    assert (delta.hits, delta.misses, delta.bypassed) == (0, 0, 2)
    assert (charge.hits, charge.seconds) == (0, 0.0)  # a bypassed call is not a hit
    assert memo.bypassed == 2 and memo.seconds("new") is None  # nothing stored
    assert (memo.get("k", compute) == 1).all() and len(calls) == 3  # the old entry is intact
    assert (memo_stats() - before).hits == 1


def test_timed_rounds_fail_on_a_memo_hit_and_pass_when_they_compute() -> None:
    memo = ContentMemo()
    memo.get("same", lambda: np.zeros(1))
    honest_rounds(lambda seed: memo.get(str(seed), lambda: np.zeros(1)), rounds=2, label="ok")

    def cheat(seed: int) -> None:  # looks the answer up outside the bypass
        import privaudit.runtime.memo as m

        depth, m._bypass_depth = m._bypass_depth, 0
        try:
            memo.get("same", lambda: np.zeros(1))
        finally:
            m._bypass_depth = depth

    with pytest.raises(AssertionError, match="content-memo hit"):
        honest_rounds(cheat, rounds=2, label="cheat")


def test_search_flops_are_counted_only_when_a_search_runs() -> None:
    rng = np.random.default_rng(0)
    index = NearestNeighbourIndex(rng.normal(size=(50, 8)).astype(np.float32))
    q = rng.normal(size=(20, 8)).astype(np.float32)
    with counted_search_flops() as flops:
        index.query(q)
        index.query(q)  # a memo hit: no search, no flops
    assert flops == [2.0 * 20 * 8 * 50]
    with memo_bypassed(), counted_search_flops() as flops:
        index.query(q)
    assert flops == [2.0 * 20 * 8 * 50]


def test_child_peak_rss_is_the_childs_own() -> None:
    ballast = np.ones(40_000_000)  # 320 MB held by this (parent) process
    wall, rss, out = child_wall_and_rss(
        [sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], "hi"
    )
    assert out == "HI\n" and wall > 0
    assert 0 < rss < 150, rss  # a bare interpreter, not the parent's 320 MB
    del ballast
