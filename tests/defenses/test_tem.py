"""TEM: the closed form equals the paper's Gumbel race, truncation at γ, seeds, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privaudit.defenses.tem import TEM
from privaudit.mechanisms.word_sampling import WordVocabulary, distances
from tests.conftest import TINY

TOY = WordVocabulary(
    ("a", "b", "c", "d", "e", "f"),
    np.array([[0, 0], [0.5, 0], [0, 1], [3, 3], [-4, 0], [0, -6]], dtype=np.float32),
)


class ToyTEM(TEM):
    def vocabulary(self) -> WordVocabulary:
        return TOY


def gumbel_race(eps: float, beta: float, word: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """The paper's Algorithm 1, literally: scores −d on L_w, ⊥ at −γ + 2 ln|L̂_w|/ε, Gumbel
    noise of scale 2/ε, ⊥ releases a uniform word of L̂_w."""
    gamma = 2 / eps * math.log((1 - beta) * len(TOY) / beta)
    d = distances(TOY.vectors[[word]], TOY.vectors)[0]
    inside, outside = np.flatnonzero(d <= gamma), np.flatnonzero(d > gamma)
    scores = np.r_[-d[inside], -gamma + 2 * math.log(len(outside)) / eps]
    noisy = scores + rng.gumbel(0, 2 / eps, size=(n, len(scores)))
    best = noisy.argmax(1)
    far = best == len(inside)
    out = np.where(far, 0, inside[np.minimum(best, len(inside) - 1)])
    out[far] = rng.choice(outside, size=int(far.sum()))
    return out


def test_closed_form_equals_the_gumbel_race() -> None:
    eps, beta, n = 2.0, 0.2, 60_000
    tem = ToyTEM(epsilon=eps, beta=beta)
    assert 1 < tem.gamma() < 4  # some words are beyond γ: the truncation is exercised
    race = (
        np.bincount(gumbel_race(eps, beta, 0, n, np.random.default_rng(0)), minlength=len(TOY)) / n
    )
    ours = tem.replace(["a"] * n, TOY.vectors[[0] * n], np.random.default_rng(1))
    ours = np.bincount([TOY.row[w] for w in ours], minlength=len(TOY)) / n
    exact = np.exp(tem.replacement_log_probs(["a"])[0])
    for got in (race, ours):
        assert np.all(np.abs(got - exact) <= 4 * np.sqrt(exact * (1 - exact) / n) + 1e-9)


def test_far_words_share_one_weight_and_the_claim_holds() -> None:
    eps, beta = 2.0, 0.2
    tem = ToyTEM(epsilon=eps, beta=beta)
    p = np.exp(tem.replacement_log_probs(list(TOY.words)))
    d = distances(TOY.vectors, TOY.vectors)
    far = d[0] > tem.gamma()
    assert far.sum() >= 2 and np.allclose(p[0, far], p[0, far][0])
    ratio = np.abs(np.log(p)[:, None, :] - np.log(p)[None, :, :]).max(-1)
    assert np.all(ratio <= eps * d + 1e-9)


def test_same_seed_same_output() -> None:
    texts = ["The staff in Leeds were friendly.", "Bad food."]
    a = TEM(epsilon=30, backbone=TINY).privatize(texts, rng=np.random.default_rng(5))
    b = TEM(epsilon=30, backbone=TINY).privatize(texts, rng=np.random.default_rng(5))
    c = TEM(epsilon=30, backbone=TINY).privatize(texts, rng=np.random.default_rng(6))
    assert a.texts == b.texts and a.texts != c.texts


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="beta"):
        TEM(beta=1.0)
    with pytest.raises(ValueError, match="epsilon"):
        TEM(epsilon=0)
    with pytest.raises(TypeError, match="single string"):
        TEM(backbone=TINY).privatize("text", rng=np.random.default_rng(0))
