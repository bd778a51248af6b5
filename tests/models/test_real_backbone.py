"""The foundation's claims on the real default backbone (all-MiniLM-L6-v2). Slow-ish: they load
the real model, so they are marked ``slow``; CI still runs them."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from privaudit.api import Knowledge
from privaudit.attacks.nn_inversion import NNInversion
from privaudit.defenses.none import NoDefense
from privaudit.defenses.t2t import T2T
from privaudit.metrics import replacement_rate, token_recovery
from privaudit.utility.probe import Probe

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def corpus():
    from privaudit.corpora.synthetic import synthetic_reviews

    return synthetic_reviews(n_docs=600, seed=1)


@pytest.fixture(scope="module")
def real():
    from privaudit.models.backbone import backbone

    return backbone()


def test_default_backbone_shape(real) -> None:
    assert real.embeddings.shape == (30522, 384)
    assert real.n_layers == 6
    assert len(real.candidate_ids) < 30522  # specials and [unused] excluded


def test_nn_inversion_on_none_and_t2t(real, corpus) -> None:
    texts = corpus.texts("test")[:80]
    truth = real.token_ids(texts)
    attack = NNInversion().fit(Knowledge(white_box=True), rng=np.random.default_rng(0))
    clean = NoDefense().privatize(texts, rng=np.random.default_rng(0))
    assert token_recovery(truth, attack.attack(clean.public())) >= 0.99
    rates, recoveries = [], []
    for eta in (40, 60, 80, 100, 125, 175):
        release = T2T(eta=eta).privatize(texts, rng=np.random.default_rng(0))
        rates.append(replacement_rate([release.audit]))
        recoveries.append(token_recovery(truth, attack.attack(release.public())))
    assert all(a > b for a, b in itertools.pairwise(rates)), rates
    assert rates[0] > 0.8 and rates[-1] < 0.05
    np.testing.assert_allclose(recoveries, 1 - np.asarray(rates), atol=0.03)


def test_probe_utility_beats_chance_and_falls_with_noise(corpus) -> None:
    train, test = corpus.texts("train")[:300], corpus.texts("test")[:120]
    y_train, y_test = corpus.labels("train")[:300], corpus.labels("test")[:120]
    probe = Probe()
    clean = probe.evaluate(NoDefense(), train, y_train, test, y_test, rng=np.random.default_rng(0))
    noisy = probe.evaluate(T2T(eta=30), train, y_train, test, y_test, rng=np.random.default_rng(0))
    chance = np.bincount(y_test).max() / len(y_test)
    assert clean["accuracy"] > chance + 0.2
    assert noisy["accuracy"] < clean["accuracy"]
    with pytest.raises(ValueError, match="two classes"):
        probe.evaluate(
            NoDefense(), train[:5], [1] * 5, test[:5], [1] * 5, rng=np.random.default_rng(0)
        )


def test_pct2t_on_the_default_corpus(real, corpus) -> None:
    from privaudit.defenses.pct2t import CATEGORIES, PCT2T
    from privaudit.models.pipelines import spacy_pipeline

    texts = corpus.texts("test")[:60]
    release = PCT2T(eta=60).privatize(texts, rng=np.random.default_rng(0))
    selected = {t for c in ("noun", "verb", "pronoun", "preposition") for t in CATEGORIES[c]}
    nlp = spacy_pipeline()
    changed = 0
    for original, out, replacements in zip(
        texts, release.texts or [], release.audit["replacements"], strict=True
    ):
        assert len(out.split()) == len(original.split())
        # re-tag the original independently: spaCy's tagger and attribute ruler (no parser)
        with nlp.select_pipes(enable=["tok2vec", "tagger", "attribute_ruler"]):
            tagged = nlp(original)
        for index, old, new in replacements:
            assert tagged[index].text == old and tagged[index].pos_ in selected, (old, new)
            changed += 1
    assert changed > 50


@pytest.mark.parametrize("name", ["t2t", "pct2t"])
def test_calibrated_rate_holds_on_fresh_text(name: str) -> None:
    from privaudit.audit.calibration import calibrate, measure_rate, sample_texts
    from privaudit.registry import DEFENSES

    defense = DEFENSES.get(name)()
    result = calibrate(defense, sample_texts(n_docs=150, seed=0), target=0.15)
    assert abs(result.solved_rate - 0.15) <= 0.005
    fresh = sample_texts(n_docs=150, seed=7)  # other documents, other noise
    assert abs(measure_rate(defense.with_knob(result.solution), fresh, seed=7) - 0.15) <= 0.02
