"""The Vickrey mechanism: the choice between the two nearest words, its limits, seeds, bad
input."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.defenses.vickrey import Vickrey, vickrey_first
from privaudit.mechanisms.word_sampling import WordVocabulary
from tests.conftest import TINY

TOY = WordVocabulary(
    ("ant", "bee", "cat", "dog"),
    np.array([[0, 0], [1, 0], [0, 3], [5, 5]], dtype=np.float32),
)


class ToyVickrey(Vickrey):
    def vocabulary(self) -> WordVocabulary:
        return TOY


def test_selection_rule() -> None:
    d1, d2 = np.array([1.0, 0.0, 2.0]), np.array([3.0, 1.0, 2.0])
    assert np.allclose(vickrey_first(d1, d2, 0.5), [0.75, 1.0, 0.5])
    assert np.allclose(vickrey_first(d1, d2, 0.0), 1.0)
    assert np.allclose(vickrey_first(d1, d2, 1.0), 0.0)


def test_small_noise_releases_the_two_nearest_as_the_rule_says() -> None:
    """At negligible noise d1 ≈ 0: t < 1 keeps the word, t = 1 releases its neighbour."""
    n = 2000
    vectors = TOY.vectors[[0] * n]
    keep = ToyVickrey(epsilon=1e7, t=0.5).replace(["ant"] * n, vectors, np.random.default_rng(0))
    assert set(keep) == {"ant"}
    second = ToyVickrey(epsilon=1e7, t=1.0).replace(["ant"] * n, vectors, np.random.default_rng(0))
    assert set(second) == {"bee"}


def test_frequencies_match_the_rule_on_the_noisy_vectors() -> None:
    """Replaying the draws: the noise comes first, then one uniform per word."""
    n, eps, t = 20_000, 1.5, 0.6
    mech = ToyVickrey(epsilon=eps, t=t)
    out = mech.replace(["ant"] * n, TOY.vectors[[0] * n], np.random.default_rng(3))
    rng = np.random.default_rng(3)
    noisy = mech.noisy(TOY.vectors[[0] * n], rng)
    d = np.linalg.norm(noisy[:, None, :] - TOY.vectors[None], axis=-1)
    order = np.argsort(d, axis=1)[:, :2]
    p_first = vickrey_first(
        np.take_along_axis(d, order[:, :1], 1)[:, 0],
        np.take_along_axis(d, order[:, 1:2], 1)[:, 0],
        t,
    )
    replay = np.where(rng.random(n) < p_first, order[:, 0], order[:, 1])
    assert [TOY.words[i] for i in replay] == out


def test_same_seed_same_output() -> None:
    texts = ["The staff in Leeds were friendly.", "Bad food."]
    a = Vickrey(epsilon=300, backbone=TINY).privatize(texts, rng=np.random.default_rng(5))
    b = Vickrey(epsilon=300, backbone=TINY).privatize(texts, rng=np.random.default_rng(5))
    c = Vickrey(epsilon=300, backbone=TINY).privatize(texts, rng=np.random.default_rng(6))
    assert a.texts == b.texts and a.texts != c.texts


def test_guarantee_follows_the_noise() -> None:
    assert "Euclidean" in Vickrey(backbone=TINY).guarantee.metric
    assert "Mahalanobis" in Vickrey(lam=0.3, backbone=TINY).guarantee.metric


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="t"):
        Vickrey(t=1.2)
    with pytest.raises(TypeError, match="single string"):
        Vickrey(backbone=TINY).privatize("text", rng=np.random.default_rng(0))
