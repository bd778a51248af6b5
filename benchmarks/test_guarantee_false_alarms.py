"""The guarantee audit's false-alarm rate: each correct built-in audited at its quick levels
over 20 seeds must be flagged in at most α of its points, within sampling error (the issue's
acceptance check; ``tests/audit/test_guarantee_audit.py`` runs 3 seeds of four of them).

The backbone is the tiny test model (hidden 32): the audit's validity (exact bounds, held-out
event, Bonferroni) does not depend on the mechanism, and the kernels are the built-ins' own
code, so a cheap backbone checks the statistics over many seeds; the real backbone's table is
what ``privaudit audit-guarantee`` prints. Run with ``make bench``; a round is the 20 seeds
of one defense, from a fresh base seed, inside the memo bypass (``benchmarks/conftest.py``).
"""

from __future__ import annotations

import math

import pytest

from benchmarks.honesty import bench_rounds, log_rounds
from privaudit.audit.guarantee_audit import VIOLATED, Sizes, audit_levels

TINY = "tiny-random-bert"
SEEDS = 20
ALPHA = 0.05
SIZES = Sizes(release=300, noise=20_000, laplace=2000)
FORMAL = ["t2t", "pct2t", "rapt", "embedding-dx", "sap", "sap-cti", "cape", "dpnr"]


@pytest.mark.parametrize("name", FORMAL)
def test_false_alarm_rate_of_a_correct_builtin(benchmark, bench_cache: str, name: str) -> None:
    counts: dict[str, int] = {}

    def run(base: int) -> None:
        flagged = points = 0
        for seed in range(base, base + SEEDS):
            for result in audit_levels(name, backbone=TINY, seed=seed, alpha=ALPHA, sizes=SIZES):
                points += 1
                flagged += result.verdict == VIOLATED
        counts.update(flagged=flagged, points=points)

    label = f"guarantee audit of {name}, {SEEDS} seeds"
    times = bench_rounds(benchmark, run, rounds=1, label=label)
    log_rounds(label, times)
    rate = counts["flagged"] / counts["points"]
    benchmark.extra_info.update(counts, false_alarm_rate=rate)
    print(f"\n{name}: {counts['flagged']} of {counts['points']} points flagged ({rate:.3f})")
    # ≤ α within sampling error: two binomial standard errors of the points audited.
    assert rate <= ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / counts["points"])
