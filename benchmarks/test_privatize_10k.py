"""Privatizing 10,000 words: PCT2T in-process, and the ``privaudit privatize`` CLI from a cold
process (t2t and pct2t at their default knob). Run with ``make bench``; every round computes
(fresh seed, memo bypassed, no hit; see ``benchmarks/conftest.py``).

Targets (issue 18):
- ``PCT2T(eta=50).privatize`` of 10,000 words in-process: <= 0.5 s (spaCy pipeline, POS
  vocabulary and category indices loaded; their radii warm);
- ``privaudit privatize --defense t2t`` on 10,000 words from standard input, a fresh process:
  <= 3 s wall and <= 500 MB peak RSS; ``--defense pct2t``: <= 4 s and <= 600 MB. The disk caches
  (radii, POS vocabulary) are filled by one untimed run first; its figures are recorded in
  ``extra_info["first_run"]`` but not asserted.

The wall-time targets were set on a machine whose GEMM ran at 208 GFLOP/s; on a slower one
they are held at ``target x (208 / this machine's GEMM GFLOP/s)`` (never looser on a faster
one; :func:`benchmarks.honesty.machine_slowdown`), and both figures are printed. Peak RSS is
held to the target as stated.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from benchmarks.honesty import (
    bench_rounds,
    child_wall_and_rss,
    fresh_seed,
    log_rounds,
    machine_slowdown,
    privaudit_command,
    ten_thousand_words,
)

PCT2T_SECONDS = 0.5
CLI_TARGETS = {"t2t": (3.0, 500.0), "pct2t": (4.0, 600.0)}  # wall seconds, peak RSS MB
ROUNDS = 3
CLI_ROUNDS = 2


@pytest.fixture(scope="module")
def slowdown() -> tuple[float, float]:
    return machine_slowdown()


@pytest.fixture(scope="module")
def texts(bench_cache) -> list[str]:
    out = ten_thousand_words()
    assert sum(len(t.split()) for t in out) >= 10_000
    return out


def test_pct2t_10k_words_in_process(benchmark, texts, slowdown) -> None:
    from privaudit.defenses.pct2t import PCT2T

    defense = PCT2T(eta=50)
    # Warm-up (untimed): spaCy pipeline, POS vocabulary, category indices and the radii of the
    # words of this input; its seed is used by no timed round.
    defense.privatize(texts, rng=np.random.default_rng(fresh_seed()))
    times = bench_rounds(
        benchmark,
        lambda seed: defense.privatize(texts, rng=np.random.default_rng(seed)),
        rounds=ROUNDS,
        label="pct2t eta=50, 10k words in-process",
    )
    words = sum(len(t.split()) for t in texts)
    factor, gemm = slowdown
    target = PCT2T_SECONDS * factor
    benchmark.extra_info |= {
        "words": words,
        "target_seconds": PCT2T_SECONDS,
        "gemm_gflops": gemm,
        "target_here": target,
    }
    log_rounds(
        "pct2t eta=50, 10k words in-process",
        times,
        f"{words:,} words; median {np.median(times):.3f} s (target <= {PCT2T_SECONDS} s; "
        f"<= {target:.2f} s on this machine, GEMM {gemm:.0f} GFLOP/s)",
    )
    assert np.median(times) <= target


@pytest.mark.parametrize("defense", list(CLI_TARGETS))
def test_cli_privatize_10k_words_cold_process(benchmark, texts, slowdown, defense: str) -> None:
    max_wall, max_rss = CLI_TARGETS[defense]
    factor, gemm = slowdown
    stdin = "\n".join(texts) + "\n"
    env = dict(os.environ)  # the session's PRIVAUDIT_CACHE and offline hub

    def run(seed: int) -> tuple[float, float]:
        args = [*privaudit_command(), "privatize", "--defense", defense, "--seed", str(seed)]
        wall, rss, out = child_wall_and_rss(args, stdin, env=env)
        assert len(out.splitlines()) == len(texts)
        walls.append(wall)
        rss_by_round.append(rss)
        return wall, rss

    walls: list[float] = []
    rss_by_round: list[float] = []
    first_wall, first_rss = run(fresh_seed())  # untimed: fills the disk caches
    walls.clear()
    rss_by_round.clear()
    times = bench_rounds(
        benchmark, run, rounds=CLI_ROUNDS, label=f"cli privatize --defense {defense}"
    )
    benchmark.extra_info |= {
        "child_wall_seconds": walls,
        "peak_rss_mb": rss_by_round,
        "first_run": {"wall_seconds": first_wall, "peak_rss_mb": first_rss},
        "targets": {"wall_seconds": max_wall, "peak_rss_mb": max_rss},
    }
    shown_walls = ", ".join(f"{w:.2f}" for w in walls)
    shown_rss = ", ".join(f"{r:,.0f}" for r in rss_by_round)
    log_rounds(
        f"cli privatize --defense {defense}, 10k words, cold process",
        times,
        f"child wall {shown_walls} s, peak RSS {shown_rss} MB (targets <= {max_wall:g} s, "
        f"<= {max_rss:g} MB; <= {max_wall * factor:.2f} s on this machine, GEMM "
        f"{gemm:.0f} GFLOP/s); disk-cold first run {first_wall:.2f} s, {first_rss:,.0f} MB",
    )
    assert max(rss_by_round) <= max_rss
    assert np.median(walls) <= max_wall * factor
