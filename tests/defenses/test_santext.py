"""SanText and SanText+: the exponential mechanism's distribution, the sensitive words, seeds
and bad input."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.defenses.santext import SanText, SanTextPlus
from privaudit.mechanisms.word_sampling import WordVocabulary, distances, exponential_choice
from tests.conftest import TINY

# Five words at known points: d(a, b) = 1, d(a, c) = 2, ...
TOY = WordVocabulary(
    ("a", "b", "c", "d", "e"),
    np.array([[0, 0], [1, 0], [0, 2], [3, 3], [-1, -1]], dtype=np.float32),
)
TEXTS = ["The food was great, said Sarah Jones in Paris.", "Terrible service; lost twice!"]


class ToySanText(SanText):
    def vocabulary(self) -> WordVocabulary:
        return TOY


class ToySanTextPlus(SanTextPlus):
    def vocabulary(self) -> WordVocabulary:
        return TOY


def frequencies(defense, word: str, n: int, seed: int = 0) -> np.ndarray:
    row = TOY.row[word]
    out = defense.replace([word] * n, TOY.vectors[[row] * n], np.random.default_rng(seed))
    return np.bincount([TOY.row[w] for w in out], minlength=len(TOY)) / n


def expected(eps: float, word: str, rows: np.ndarray | None = None) -> np.ndarray:
    rows = np.arange(len(TOY)) if rows is None else rows
    d = distances(TOY.vectors[[TOY.row[word]]], TOY.vectors[rows])[0]
    w = np.exp(-eps * d / 2)
    out = np.zeros(len(TOY))
    out[rows] = w / w.sum()
    return out


@pytest.mark.parametrize("eps", [0.5, 2.0, 5.0])
def test_probabilities_are_exp_minus_eps_d_over_2(eps: float) -> None:
    n = 40_000
    got = frequencies(ToySanText(epsilon=eps), "a", n)
    want = expected(eps, "a")
    # four binomial standard errors per word
    assert np.all(np.abs(got - want) <= 4 * np.sqrt(want * (1 - want) / n) + 1e-9), (got, want)
    exact = np.exp(ToySanText(epsilon=eps).replacement_log_probs(["a"])[0])
    assert np.allclose(exact, want)


def test_the_likelihood_ratio_is_within_the_claim() -> None:
    eps = 3.0
    logp = ToySanText(epsilon=eps).replacement_log_probs(list(TOY.words))
    d = distances(TOY.vectors, TOY.vectors)
    for i in range(len(TOY)):
        for j in range(len(TOY)):
            assert np.all(np.abs(logp[i] - logp[j]) <= eps * d[i, j] + 1e-9)


def test_inverse_cdf_draws_match_every_row() -> None:
    """Several distinct inputs in one call: each occurrence draws from its own row."""
    eps, n = 2.0, 20_000
    inverse = np.repeat([0, 1, 2], n)
    picked = exponential_choice(
        TOY.vectors[:3], TOY.vectors, eps, np.random.default_rng(1).random(3 * n), inverse=inverse
    )
    for q, word in enumerate(["a", "b", "c"]):
        got = np.bincount(picked[inverse == q], minlength=len(TOY)) / n
        assert np.abs(got - expected(eps, word)).max() < 0.02


def test_plus_keeps_non_sensitive_words_with_probability_one_minus_p() -> None:
    # unfitted: vocabulary order is the frequency order, so "a" (first) is the one
    # non-sensitive word of five at a sensitive share of 0.8
    plus = ToySanTextPlus(epsilon=1.0, p=0.3, sensitive_share=0.8)
    assert plus.sensitive().tolist() == [False, True, True, True, True]
    n = 40_000
    got = frequencies(plus, "a", n)
    assert abs(got[0] - 0.7) < 4 * np.sqrt(0.21 / n)
    # when replaced, "a" goes to a sensitive word by the mechanism over V_S
    want = 0.3 * expected(1.0, "a", np.arange(1, 5))
    assert np.abs(got[1:] - want[1:]).max() < 0.01
    # a sensitive word is always replaced within V_S
    assert frequencies(plus, "c", 5000)[0] == 0
    logp = plus.replacement_log_probs(["a", "c"])
    assert np.isclose(np.exp(logp[0, 0]), 0.7) and np.isclose(np.exp(logp[0]).sum(), 1.0)
    assert np.exp(logp[1, 0]) == 0 and np.isclose(np.exp(logp[1]).sum(), 1.0)


def test_plus_fit_counts_the_training_words() -> None:
    plus = ToySanTextPlus(sensitive_share=0.6).fit(["e e e d d", "e"])
    # e and d most frequent (fitted counts), then a, b, c in vocabulary order: the three
    # least frequent (60 %) are a, b and c
    assert plus.sensitive().tolist() == [True, True, True, False, False]


def test_same_seed_same_output() -> None:
    a = SanText(epsilon=30, backbone=TINY).privatize(TEXTS, rng=np.random.default_rng(3))
    b = SanText(epsilon=30, backbone=TINY).privatize(TEXTS, rng=np.random.default_rng(3))
    c = SanText(epsilon=30, backbone=TINY).privatize(TEXTS, rng=np.random.default_rng(4))
    assert a.texts == b.texts and a.texts != c.texts


def test_release_keeps_layout_and_reports_replaced_words() -> None:
    release = SanText(epsilon=1, backbone=TINY).privatize(TEXTS, rng=np.random.default_rng(0))
    for original, released, mask in zip(
        TEXTS, release.texts, release.audit["replaced"], strict=True
    ):
        assert len(released.split()) == len(original.split())
        assert [c for c in released if not c.isalpha()] == [c for c in original if not c.isalpha()]
        assert mask.dtype == bool and len(mask) == len(original.replace(";", " ").split())
    assert release.audit["unit"] == "word"
    assert (
        SanText(epsilon=float("inf"), backbone=TINY)
        .privatize(TEXTS, rng=np.random.default_rng(0))
        .texts
        == TEXTS
    )


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="epsilon"):
        SanText(epsilon=-1)
    with pytest.raises(ValueError, match="p"):
        SanTextPlus(p=1.5)
    with pytest.raises(TypeError, match="single string"):
        SanText(backbone=TINY).privatize("one text", rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="Generator"):
        SanText(backbone=TINY).privatize(["x"], rng=0)
    with pytest.raises(ValueError, match="not words of the candidate vocabulary"):
        ToySanText().replacement_log_probs(["zebra"])
