"""The run statistics' cost: every row of a quick-sized results table on 1,000 bootstrap
resamples (the issue's target: seconds, not minutes). Run with ``make bench``."""

from __future__ import annotations

from privaudit.leaderboard.stats import Bootstrap, run_stats
from tests.test_board_stats import Grid


def test_run_stats_of_a_quick_sized_grid(benchmark) -> None:
    g = Grid()
    for v in range(26):
        for a in range(10):
            g.add("t2t", v, f"a{a}", 0.5, 0.8)
    frame, outcomes = g.frame(), g.outcomes()
    stats = benchmark.pedantic(
        run_stats, args=(frame, outcomes, Bootstrap(resamples=1000)), rounds=3, iterations=1
    )
    assert stats.score.shape == (260, 1000)
    assert benchmark.stats.stats.max < 10.0  # seconds, with room for a shared CI machine
