"""T2T throughput on the default backbone (all-MiniLM-L6-v2), against a naive reference and
the machine's matrix-multiply bound. Run with ``make bench``.

Targets (from the foundation issue):
- batched exact projection >= 20x the naive per-token reference (loop over tokens, argmin of
  distances to the whole vocabulary);
- full searches reach >= 60 % of the matrix-multiply rate for the same shapes;
- high-eta runs are faster than low-eta runs, because exact pruning skips provably unchanged
  tokens.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from privaudit.defenses.t2t import T2T
from privaudit.mechanisms import sample_dx_noise

LOW_ETA, HIGH_ETA = 50.0, 3000.0


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    import os

    os.environ["PRIVAUDIT_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    from privaudit.corpora.synthetic import synthetic_reviews
    from privaudit.resources import backbone

    bb = backbone()
    texts = synthetic_reviews(n_docs=400, seed=0).texts("train")[:200]
    words = sum(len(t.split()) for t in texts)
    ids = np.concatenate(bb.token_ids(texts))
    bb.index.radius(ids)  # warm the radius cache: steady-state, as in a grid run
    return bb, texts, words, ids


def _best_of(func, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        func()
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("eta", [LOW_ETA, HIGH_ETA], ids=["low-eta", "high-eta"])
def test_t2t_words_per_second(benchmark, setup, eta: float) -> None:
    _, texts, words, _ = setup
    defense = T2T(eta=eta)
    benchmark.pedantic(
        lambda: defense.privatize(texts, rng=np.random.default_rng(0)), rounds=3, iterations=1
    )
    benchmark.extra_info["words_per_second"] = words / benchmark.stats.stats.mean


def test_projection_vs_naive_and_matmul_bound(benchmark, setup) -> None:
    bb, _, _, ids = setup
    index = bb.index
    noise = sample_dx_noise(len(ids), bb.dim, LOW_ETA, np.random.default_rng(0))
    queries = bb.embeddings[ids] + noise

    # The exact projection, full search (no pruning possible at this eta).
    benchmark.pedantic(lambda: index.query(queries), rounds=3, iterations=1)
    fast = benchmark.stats.stats.min / len(ids)

    # The naive reference: one token at a time, distances to the whole candidate vocabulary.
    sample = queries[:64]
    cand = index.candidates

    def naive() -> None:
        for q in sample:
            int(np.argmin(np.linalg.norm(cand - q, axis=1)))

    slow = _best_of(naive, 2) / len(sample)

    # The matrix-multiply bound for the same shapes (queries x candidates^T, float32).
    q32 = np.ascontiguousarray(queries, dtype=np.float32)
    matmul = _best_of(lambda: q32 @ cand.T) / len(ids)

    speedup, fraction = slow / fast, matmul / fast
    flops = 2 * bb.dim * len(cand) / fast
    benchmark.extra_info |= {
        "tokens": len(ids),
        "speedup_vs_naive": speedup,
        "fraction_of_matmul_rate": fraction,
        "projection_gflops": flops / 1e9,
    }
    print(
        f"\nprojection: {1 / fast:,.0f} tokens/s ({flops / 1e9:.0f} GFLOP/s); naive: "
        f"{1 / slow:,.0f} tokens/s; speed-up {speedup:.0f}x; {fraction:.0%} of the matmul rate"
    )
    assert speedup >= 20
    assert fraction >= 0.60


def test_pruning_makes_high_eta_faster(setup) -> None:
    _bb, texts, words, _ = setup
    low = _best_of(lambda: T2T(eta=LOW_ETA).privatize(texts, rng=np.random.default_rng(0)))
    high = _best_of(lambda: T2T(eta=HIGH_ETA).privatize(texts, rng=np.random.default_rng(0)))
    print(
        f"\nT2T words/s: eta={LOW_ETA:g}: {words / low:,.0f}; eta={HIGH_ETA:g}: {words / high:,.0f}"
    )
    assert high < 0.5 * low
