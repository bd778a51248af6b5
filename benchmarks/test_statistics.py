"""The run statistics' cost: every row of a quick-sized results table on 1,000 bootstrap
resamples (the issue's target: seconds, not minutes). Run with ``make bench``; each round has
its own bootstrap seed, so the cached resample weights (``_weights``, keyed by seed) are drawn
afresh every round (see ``benchmarks/conftest.py``)."""

from __future__ import annotations

from benchmarks.honesty import bench_rounds, log_rounds
from privaudit.metrics.stats import Bootstrap, run_stats
from tests.leaderboard.test_board_stats import Grid


def test_run_stats_of_a_quick_sized_grid(benchmark) -> None:
    g = Grid()
    for v in range(26):
        for a in range(10):
            g.add("t2t", v, f"a{a}", 0.5, 0.8)
    frame, outcomes = g.frame(), g.outcomes()
    results = []

    def run(seed: int) -> None:
        results.append(run_stats(frame, outcomes, Bootstrap(resamples=1000, seed=seed)))

    times = bench_rounds(benchmark, run, rounds=3, label="run_stats, 260 rows x 1,000 resamples")
    log_rounds("run_stats, 260 rows x 1,000 resamples", times)
    assert all(stats.score.shape == (260, 1000) for stats in results)
    assert max(times) < 10.0  # seconds, with room for a shared CI machine
