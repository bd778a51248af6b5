"""Benchmark rules: every timed round computes.

``make bench`` repeats each round; with identical inputs a content memo would answer every
round after the first from cache (0.916 s, then 0.009 s) and a rate would be a lookup rate. So:

1. **Fresh inputs per round.** Every timed round gets a seed no other round used
   (:func:`benchmarks.honesty.fresh_seed`), and the noise, queries or CLI ``--seed`` come from
   it; an untimed ``setup(seed)`` builds the round's inputs.
2. **Memo bypassed and checked.** Every round runs inside
   :func:`privaudit.runtime.memo.memo_bypassed` (each ``ContentMemo`` — the nearest-neighbour
   query memo, the pooled-encoding memo — computes and stores nothing), and the benchmark asserts
   that the process-wide hit counter (:func:`~privaudit.runtime.memo.memo_stats`) did not move
   during its rounds.
3. **Rates under the matrix-multiply bound.** A benchmark that reports a GFLOP/s rate (the
   projection, and T2T's search flops counted per round) asserts it is at most 1.05 x the
   measured same-shape float32 ``q @ cand.T`` rate
   (:func:`benchmarks.honesty.assert_within_gemm_bound`, re-measured before failing, for a
   shared machine's load spikes): an exact search cannot beat the multiply it is made of, so a
   faster round did not compute.
4. **Every round's time is shown**, in ``extra_info["round_seconds"]`` and in the closing
   "benchmark rounds" summary, so a first-round-only cost cannot hide behind a mean.

What may be warm (set up once, untimed): state a steady-state run holds for its whole life and
that does not depend on the question asked — a loaded model or spaCy pipeline (``functools``
caches of ``backbone()``, ``spacy_pipeline()``, ``pos_vocabulary()``; the attacks' ``ObjectMemo``
of pre-trained models), the nearest-neighbour indices of a vocabulary, and the per-vocabulary
nearest-neighbour radii (``NearestNeighbourIndex.radius``: a pure function of the embedding
matrix, cached in memory and on disk by design, so a grid pays it once per vocabulary). What
must not be warm: anything keyed by the round's input — the memoised results of a query or an
encoding. The CLI benchmarks start a fresh process per round ("cold process") with the disk
caches (radii, POS vocabulary) filled by one untimed run first ("warm disk", a returning user's
state); that first run's figures are recorded in ``extra_info`` but not asserted. A CLI
benchmark reads its process's own peak RSS through a small launcher
(:func:`benchmarks.honesty.child_wall_and_rss`): Linux carries a forking parent's peak RSS into
the exec'd child. ``tests/test_bench_guard.py`` checks that the guards fail on a faked rate, a
memo hit and an inherited RSS.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def bench_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A private ``PRIVAUDIT_CACHE`` shared by every benchmark module of the session."""
    path = str(tmp_path_factory.mktemp("privaudit-cache"))
    os.environ["PRIVAUDIT_CACHE"] = path
    return path


def pytest_terminal_summary(terminalreporter) -> None:  # type: ignore[no-untyped-def]
    from benchmarks.honesty import ROUND_LOG

    if not ROUND_LOG:
        return
    terminalreporter.section("benchmark rounds (seconds, every round computed)")
    for label, seconds, note in ROUND_LOG:
        shown = ", ".join(f"{s:.3f}" for s in seconds)
        terminalreporter.write_line(f"{label}: [{shown}]{'  ' + note if note else ''}")
