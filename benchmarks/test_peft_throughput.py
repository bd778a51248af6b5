"""Training throughput (examples/s) of each utility method on the default backbone
(all-MiniLM-L6-v2), quick-profile shapes (batch 16, 96 tokens). Run with ``make bench``.

One epoch over 96 synthetic reviews per method; ``extra_info`` records examples/s and the
number of trainable parameters. Reference (2 cores, this project's CI machine): prompt tuning
(150 soft tokens) is the slowest per example because every sequence is 150 tokens longer.
"""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.api import Release
from privaudit.utility.peft_tuning import METHODS, PeftUtility


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    import os

    os.environ["PRIVAUDIT_CACHE"] = str(tmp_path_factory.mktemp("cache"))
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
    benchmark.pedantic(
        lambda: util.evaluate_releases(*data, rng=np.random.default_rng(0)), rounds=1, iterations=1
    )
    benchmark.extra_info["examples_per_second"] = util.last_info["examples_per_second"]
    benchmark.extra_info["trainable_params"] = util.last_info["trainable_params"]
    assert util.last_info["examples_per_second"] > 0
