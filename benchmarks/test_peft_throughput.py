"""Training throughput (examples/s) of each utility method on the default backbone
(all-MiniLM-L6-v2), quick-profile shapes (batch 16, 96 tokens). Run with ``make bench``.

One epoch over 96 synthetic reviews per method; ``extra_info`` records examples/s and the
number of trainable parameters. Reference (2 cores, this project's CI machine): prompt tuning
(150 soft tokens) is the slowest per example because every sequence is 150 tokens longer.
Each round has a fresh seed and runs with the content memos bypassed (see
``benchmarks/conftest.py``).
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.honesty import bench_rounds, log_rounds
from privaudit.api import Release
from privaudit.utility.peft_tuning import METHODS, PeftUtility


@pytest.fixture(scope="module")
def data(bench_cache):
    from privaudit.corpora.synthetic import synthetic_reviews

    corpus = synthetic_reviews(n_docs=400, seed=0)
    texts, labels = corpus.texts("train")[:96], corpus.labels("train")[:96]
    tests, test_labels = corpus.texts("test")[:16], corpus.labels("test")[:16]
    return (
        Release("text", texts=list(texts)),
        labels,
        Release("text", texts=list(tests)),
        (test_labels),
    )


@pytest.mark.parametrize("method", METHODS)
def test_training_examples_per_second(benchmark, data, method: str) -> None:
    util = PeftUtility(method=method, epochs=1, progress=False)
    times = bench_rounds(
        benchmark,
        lambda seed: util.evaluate_releases(*data, rng=np.random.default_rng(seed)),
        rounds=1,
        label=f"peft {method}, one epoch of 96 examples",
    )
    rate = util.last_info["examples_per_second"]
    benchmark.extra_info["examples_per_second"] = rate
    benchmark.extra_info["trainable_params"] = util.last_info["trainable_params"]
    log_rounds(f"peft {method}, one epoch of 96 examples", times, f"{rate:,.1f} examples/s")
    assert rate > 0
