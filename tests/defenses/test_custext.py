"""CusText and CusText+: the customized mapping, the normalised exponential mechanism, ε-LDP
within an output set, stop words, seeds and bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privaudit.defenses.custext import CusText, custext_probs
from privaudit.mechanisms.word_sampling import WordVocabulary
from tests.conftest import TINY

# Two clusters far apart, and "the" (a stop word) inside the first.
TOY = WordVocabulary(
    ("the", "ant", "ape", "asp", "bee", "bat", "boa", "bug"),
    np.array(
        [[0.1, 0], [0, 0], [1, 0], [0, 1.5], [50, 50], [51, 50], [50, 52], [53, 53]],
        dtype=np.float32,
    ),
)


class ToyCusText(CusText):
    def vocabulary(self) -> WordVocabulary:
        return TOY

    def neighbours(self) -> np.ndarray:  # exact, without the backbone's disk cache
        d = np.linalg.norm(TOY.vectors[:, None] - TOY.vectors[None], axis=-1)
        return np.argsort(d, axis=1, kind="stable")[:, : int(self.k)]


class ToyCusTextPlus(ToyCusText):
    skips_stop_words = True


def test_mapping_groups_words_by_their_anchor() -> None:
    anchor = ToyCusText(k=4).anchors()
    # "the" comes first (vocabulary order, unfitted): its 4 nearest form the first set
    assert anchor[:4].tolist() == [0, 0, 0, 0]
    assert len(set(anchor[4:].tolist())) == 1 and anchor[4] != 0
    fitted = ToyCusText(k=4).fit(["boa boa boa ant"])  # boa is the most frequent: first anchor
    assert fitted.anchors()[6] == 6


def test_probabilities_follow_the_normalised_score() -> None:
    eps, n = 3.0, 40_000
    custext = ToyCusText(epsilon=eps, k=4)
    out = custext.replace(["ape"] * n, TOY.vectors[[2] * n], np.random.default_rng(0))
    got = np.bincount([TOY.row[w] for w in out], minlength=len(TOY)) / n
    sets = custext.output_sets(["ape"], TOY.vectors[[2]])[0]
    d = np.linalg.norm(TOY.vectors[sets] - TOY.vectors[2], axis=1)
    u = -(d - d.min()) / (d.max() - d.min())
    want = np.zeros(len(TOY))
    want[sets] = np.exp(eps * u / 2) / np.exp(eps * u / 2).sum()
    assert np.all(np.abs(got - want) <= 4 * np.sqrt(want * (1 - want) / n) + 1e-9)
    assert np.allclose(np.exp(custext.replacement_log_probs(["ape"])[0]), want)
    assert np.allclose(custext_probs(TOY.vectors[[2]], TOY.vectors[sets][None], eps)[0], want[sets])


def test_epsilon_ldp_within_an_output_set() -> None:
    eps = 2.0
    custext = ToyCusText(epsilon=eps, k=4)
    logp = custext.replacement_log_probs(list(TOY.words))
    anchor = custext.anchors()
    for i, j in itertools.combinations(range(len(TOY)), 2):
        if anchor[i] == anchor[j]:  # one output set: the same support, ratios within e^ε
            support = np.isfinite(logp[i])
            assert (support == np.isfinite(logp[j])).all()
            assert np.abs(logp[i, support] - logp[j, support]).max() <= eps + 1e-9
        else:  # different sets: distinguishable (no claim)
            assert np.isinf(np.abs(logp[i] - logp[j])).any()


def test_plus_keeps_stop_words() -> None:
    plus = ToyCusTextPlus(epsilon=1.0, k=3)
    out = plus.replace(
        ["the"] * 200 + ["ant"] * 200, TOY.vectors[[0] * 200 + [1] * 200], np.random.default_rng(0)
    )
    assert set(out[:200]) == {"the"} and len(set(out[200:])) > 1
    assert plus.anchors()[0] == -1 and plus.guarantee.selected
    assert np.exp(plus.replacement_log_probs(["the"])[0, 0]) == 1.0


def test_same_seed_same_output() -> None:
    texts = ["The staff in Leeds were friendly.", "Bad food."]
    a = CusText(epsilon=1, backbone=TINY).privatize(texts, rng=np.random.default_rng(5))
    b = CusText(epsilon=1, backbone=TINY).privatize(texts, rng=np.random.default_rng(5))
    c = CusText(epsilon=1, backbone=TINY).privatize(texts, rng=np.random.default_rng(6))
    assert a.texts == b.texts and a.texts != c.texts


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="k"):
        CusText(k=0)
    with pytest.raises(ValueError, match="epsilon"):
        CusText(epsilon=-2)
    with pytest.raises(TypeError, match="Generator"):
        CusText(backbone=TINY).privatize(["text"], rng=None)
