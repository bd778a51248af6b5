"""SAP and SAP-CTI on the tiny random BERT: split continuation, noise, budgets, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privaudit.api import Knowledge
from privaudit.attacks.nn_inversion import NNInversion
from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.defenses.sap import SAP, SAPCTI
from privaudit.metrics import replacement_rate, token_recovery
from privaudit.utility.probe import Probe
from tests.conftest import TINY

TEXTS = ["The pasta was perfect.", "Awful phone, broke in a week.", "", "😀 fine"]


@pytest.fixture(scope="module")
def corpus():
    return synthetic_reviews(n_docs=300, seed=0)


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_no_noise_equals_the_unsplit_model(tiny, layer: int) -> None:
    texts = TEXTS[:2]  # no [UNK]: the text path keeps it, a k=0 release drops it
    release = SAP(eta=math.inf, split_layer=layer, backbone=TINY).privatize(
        texts, rng=np.random.default_rng(0)
    )
    assert release.layer == layer and release.space == (
        "token_embeddings" if layer == 0 else "hidden_states"
    )
    np.testing.assert_allclose(
        Probe(backbone=TINY).features(release), tiny.pooled(texts), atol=1e-4
    )


def test_layer0_release_is_projected_embeddings(tiny) -> None:
    release = SAP(eta=300, split_layer=0, backbone=TINY).privatize(
        TEXTS * 5, rng=np.random.default_rng(0)
    )
    rows = np.concatenate(release.vectors or [])
    # Every released vector is exactly some vocabulary embedding (paper Eq. 4).
    assert np.isin(tiny.index.query(rows), tiny.candidate_ids).all()
    np.testing.assert_allclose(tiny.embeddings[tiny.index.query(rows)], rows)
    attack = NNInversion(backbone=TINY).fit(Knowledge(backbone=TINY), rng=np.random.default_rng(0))
    recovery = token_recovery(tiny.token_ids(TEXTS * 5), attack.attack(release.public()))
    assert recovery == pytest.approx(1 - replacement_rate([release.audit]), abs=1e-9)


def test_deeper_releases_are_noisy_hidden_states_and_not_nn_invertible(tiny) -> None:
    clean = SAP(eta=math.inf, split_layer=1, backbone=TINY).privatize(
        TEXTS, rng=np.random.default_rng(0)
    )
    noisy = SAP(eta=50, split_layer=1, backbone=TINY).privatize(TEXTS, rng=np.random.default_rng(0))
    assert clean.vectors[0].shape == noisy.vectors[0].shape == (7, tiny.dim)  # with CLS/SEP
    norms = np.linalg.norm(np.concatenate(noisy.vectors) - np.concatenate(clean.vectors), axis=1)
    assert norms.mean() == pytest.approx(tiny.dim / 50, rel=0.2)
    reason = NNInversion().applicable(noisy, Knowledge())
    assert reason is not None and "not hidden_states" in reason


def test_noise_lowers_utility(corpus) -> None:
    probe = Probe(backbone=TINY)
    args = (
        corpus.texts("train"),
        corpus.labels("train"),
        corpus.texts("test"),
        corpus.labels("test"),
    )
    clean = probe.evaluate(SAP(eta=math.inf, backbone=TINY), *args, rng=np.random.default_rng(0))
    noisy = probe.evaluate(SAP(eta=1, backbone=TINY), *args, rng=np.random.default_rng(0))
    assert noisy["accuracy"] < clean["accuracy"]


def test_cti_budgets(corpus, tiny) -> None:
    cti = SAPCTI(eta=100, backbone=TINY).fit(corpus.split("train"))
    ids = tiny.token_ids(["great awful the"])[0]
    etas = cti.token_etas(ids, 100.0)
    assert etas.shape == ids.shape and (etas > 0).all() and (etas < 200).all()
    # Sentiment words matter more than "the": more budget, less noise.
    assert etas[0] > etas[2] and etas[1] > etas[2]
    assert cti.with_knob(50.0).token_etas(ids, 50.0) == pytest.approx(etas / 2)
    release = cti.privatize(TEXTS, rng=np.random.default_rng(0))
    assert len(release.vectors or []) == len(TEXTS)


def test_cti_needs_fit_and_two_classes(corpus) -> None:
    with pytest.raises(ValueError, match="must be fitted"):
        SAPCTI(backbone=TINY).privatize(TEXTS, rng=np.random.default_rng(0))
    one_class = corpus.split("train").filter(lambda r: r["label"] == 1)
    with pytest.raises(ValueError, match="two classes"):
        SAPCTI(backbone=TINY).fit(one_class)


@pytest.mark.parametrize(
    ("layer", "error", "message"),
    [
        (3, ValueError, "outside 0..2"),  # the backbone's depth: checked once it is loaded
        (-1, ValueError, "split_layer=-1 is not allowed"),
        (1.5, ValueError, "split_layer=1.5 is not allowed: Input should be a valid integer"),
    ],
)
def test_bad_split_layer(layer, error, message) -> None:
    with pytest.raises(error, match=message):
        SAP(split_layer=layer, backbone=TINY).privatize(TEXTS, rng=np.random.default_rng(0))


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="eta=nan is not allowed"):
        SAP(eta=float("nan"), backbone=TINY)
    with pytest.raises(TypeError, match="single string"):
        SAP(backbone=TINY).privatize("x", rng=np.random.default_rng(0))  # type: ignore[arg-type]
    long = SAP(eta=100, split_layer=1, backbone=TINY).privatize(
        ["word " * 10_000, ""], rng=np.random.default_rng(0)
    )
    assert long.vectors[0].shape[0] == 128 and long.vectors[1].shape[0] == 2
