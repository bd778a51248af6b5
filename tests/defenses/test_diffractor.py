"""1-Diffractor: the greedy list, the two-sided geometric shift, ε·d on positions, seeds and
bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privaudit.defenses.diffractor import OneDiffractor, greedy_order
from privaudit.mechanisms.nearest import NearestNeighbourIndex
from privaudit.mechanisms.word_sampling import WordVocabulary
from tests.conftest import TINY

# Words on a line, shuffled: the greedy walk must put them back in order.
X = np.array([0.0, 5.0, 1.0, 4.0, 2.0, 3.0, 6.0], dtype=np.float32)
TOY = WordVocabulary(("ant", "fig", "bee", "elk", "cat", "dog", "gnu"), np.c_[X, np.zeros_like(X)])


class ToyDiffractor(OneDiffractor):
    def vocabulary(self) -> WordVocabulary:
        return TOY

    def index(self) -> NearestNeighbourIndex:
        return NearestNeighbourIndex(TOY.vectors)

    def order(self) -> np.ndarray:
        knn = self.index().k_nearest(TOY.vectors, int(self.k))[0]
        return greedy_order(knn)


def test_greedy_order_walks_the_line() -> None:
    order = ToyDiffractor(k=3).order()
    assert [TOY.words[i] for i in order] == ["ant", "bee", "cat", "dog", "elk", "fig", "gnu"]
    # a neighbour table with nothing new falls back to the first unlisted row
    assert greedy_order(np.array([[0], [1], [2]])).tolist() == [0, 1, 2]


@pytest.mark.parametrize("eps", [0.3, 1.0])
def test_shift_is_two_sided_geometric(eps: float) -> None:
    n = 60_000
    mech = ToyDiffractor(epsilon=eps, k=3)
    out = mech.replace(["dog"] * n, TOY.vectors[[5] * n], np.random.default_rng(0))
    got = np.bincount([TOY.row[w] for w in out], minlength=len(TOY)) / n
    want = np.exp(mech.replacement_log_probs(["dog"])[0])
    assert np.isclose(want.sum(), 1.0)
    assert np.all(np.abs(got - want) <= 4 * np.sqrt(want * (1 - want) / n) + 1e-9)
    # inside the list: P(shift = s) = (1 − q)/(1 + q) q^|s|
    q = np.exp(-eps)
    assert np.isclose(want[TOY.row["dog"]], (1 - q) / (1 + q))
    assert np.isclose(want[TOY.row["elk"]], (1 - q) / (1 + q) * q)


def test_the_claim_holds_exactly_on_positions() -> None:
    eps = 0.7
    mech = ToyDiffractor(epsilon=eps, k=3)
    logp = mech.replacement_log_probs(list(TOY.words))
    pos = mech.audit_points()[:, 0]
    for i, j in itertools.combinations(range(len(TOY)), 2):
        # tight: equal at the ends of the list (float32 positions: 1e-6)
        assert np.abs(logp[i] - logp[j]).max() <= eps * abs(pos[i] - pos[j]) + 1e-6


def test_same_seed_same_output_and_bad_input() -> None:
    texts = ["The staff in Leeds were friendly.", "Bad food."]
    a = OneDiffractor(epsilon=0.5, backbone=TINY).privatize(texts, rng=np.random.default_rng(5))
    b = OneDiffractor(epsilon=0.5, backbone=TINY).privatize(texts, rng=np.random.default_rng(5))
    c = OneDiffractor(epsilon=0.5, backbone=TINY).privatize(texts, rng=np.random.default_rng(6))
    assert a.texts == b.texts and a.texts != c.texts
    with pytest.raises(ValueError, match="epsilon"):
        OneDiffractor(epsilon=0)
    with pytest.raises(TypeError, match="single string"):
        OneDiffractor(backbone=TINY).privatize("text", rng=np.random.default_rng(0))


def test_the_audit_sees_neighbours_in_the_list_at_distance_one() -> None:
    """The audit's own pair search (float32) on the declared points and pool."""
    from privaudit.audit.guarantee_audit.dx import word_pairs

    kernel = OneDiffractor(epsilon=1.0, backbone=TINY).word_kernel()
    pairs = word_pairs(kernel.points, kernel.pool, np.random.default_rng(0))
    assert len(kernel.pool) == OneDiffractor.AUDIT_WINDOW
    assert pairs and all(d == 1.0 for _, _, d in pairs)
