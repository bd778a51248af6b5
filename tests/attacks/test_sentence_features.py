"""The sentence attacks' one feature path: every release read as the public backbone's pooled
last-layer embedding (privaudit.attacks._pooled_features.release_features), on the tiny backbone."""

from __future__ import annotations

import datasets
import numpy as np
import pytest

from privaudit.api import Knowledge, Release, Space
from privaudit.attacks._pooled_features import clean_features, release_features
from privaudit.attacks._sentence import Format, _same_space
from privaudit.attacks.bow_inversion import BowInversion
from privaudit.defenses.embedding_dx import EmbeddingDX
from privaudit.defenses.none import NoDefense
from privaudit.defenses.sap import SAP
from privaudit.metrics import Truth, score_predictions
from tests.conftest import TINY

NOUNS = ["food", "room", "phone", "book", "staff", "service", "shoes", "laptop", "chair", "hotel"]
ADJS = ["great", "awful", "lovely", "broken", "perfect", "dreadful", "superb", "useless", "noisy"]
NAMES = ["Anna", "Brian", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hamish"]


def reviews(n: int, seed: int) -> list[str]:
    """Short reviews the tiny backbone's 32-dimensional pooled vector can carry (no [UNK])."""
    rng = np.random.default_rng(seed)
    return [
        f"{rng.choice(NAMES)} said "
        + " and ".join(f"the {rng.choice(NOUNS)} was {rng.choice(ADJS)}" for _ in range(2))
        + "."
        for _ in range(n)
    ]


def features(tiny, release: Release) -> np.ndarray:
    return release_features(tiny, release, name="test")


@pytest.mark.parametrize("split_layer", [0, 1, 2])
def test_an_untouched_split_release_reads_as_its_text(tiny, split_layer) -> None:
    # eta so large that the noise is nil: layer 0 projects back to the same tokens, k >= 1
    # releases the hidden states after layer k ([CLS]/[SEP] included).
    texts = reviews(12, seed=0)
    release = SAP(eta=1e12, split_layer=split_layer, backbone=TINY).privatize(
        texts, rng=np.random.default_rng(0)
    )
    assert release.layer == split_layer
    text = features(tiny, Release("text", texts=texts))
    np.testing.assert_allclose(features(tiny, release), text, atol=1e-4)


def test_an_untouched_token_embedding_release_reads_as_its_text(tiny) -> None:
    texts = reviews(12, seed=1)
    release = EmbeddingDX(eta=1e12, backbone=TINY).privatize(texts, rng=np.random.default_rng(0))
    assert release.space is Space.TOKEN_EMBEDDINGS
    text = features(tiny, Release("text", texts=texts))
    np.testing.assert_allclose(features(tiny, release), text, atol=1e-4)


def test_every_token_release_is_in_the_clean_pooled_space(tiny) -> None:
    texts = reviews(6, seed=2)
    clean = features(tiny, Release("text", texts=texts))
    for space, layer in [(Space.TOKEN_EMBEDDINGS, 0), (Space.HIDDEN_STATES, 1)]:
        np.testing.assert_array_equal(clean_features(tiny, texts, space, layer), clean)
    assert clean_features(tiny, texts, Space.HIDDEN_STATES, tiny.n_layers + 1) is None
    release = SAP(eta=50.0, split_layer=1, backbone=TINY).privatize(
        texts, rng=np.random.default_rng(0)
    )
    assert _same_space(Format(release.kind, release.space, 1, tiny.dim), tiny)
    assert not _same_space(Format("pooled_vectors", Space.POOLED, None, tiny.dim + 1), tiny)


def test_bad_token_vectors_say_what_is_wrong(tiny) -> None:
    good = tiny.embeddings[tiny.token_ids(["the food was great"])[0]]
    with pytest.raises(ValueError, match="dimension 32, but document 1 has shape"):
        features(tiny, Release("token_vectors", vectors=[good, np.zeros((3, 5))], layer=0))
    with pytest.raises(ValueError, match="NaN or infinite"):
        features(tiny, Release("token_vectors", vectors=[good * np.nan], layer=1))
    with pytest.raises(ValueError, match="has 2 layers"):
        features(tiny, Release("token_vectors", vectors=[good], layer=3))
    with pytest.raises(TypeError, match="not numeric"):
        features(tiny, Release("token_vectors", vectors=[np.array(["a"])], layer=0))
    # Empty documents are zero rows, beside a full one read as its text.
    out = features(tiny, Release("token_vectors", vectors=[np.zeros((0, 32)), good], layer=0))
    np.testing.assert_array_equal(out[0], 0.0)
    text = features(tiny, Release("text", texts=["the food was great"]))
    np.testing.assert_allclose(out[1], text[0], atol=1e-4)


def test_the_finished_forward_pass_is_memoised(tiny) -> None:
    states = tiny.hidden_at_layer(reviews(5, seed=3), 1)
    hits = tiny._finished_memo.hits
    first = tiny.pooled_from_layer(states, 1)
    second = tiny.pooled_from_layer([s.copy() for s in states], 1)
    assert tiny._finished_memo.hits == hits + 1
    np.testing.assert_array_equal(first, second)


def _bow_f1(defense, aux: list[str], texts: list[str]) -> float:
    knowledge = Knowledge(
        white_box=False,
        backbone=TINY,
        query_mechanism=lambda t: defense.privatize(t, rng=np.random.default_rng(1)),
        aux=datasets.Dataset.from_dict({"text": aux}),
    )
    attack = BowInversion(backbone=TINY, hidden=64, pretrain_epochs=30, epochs=3)
    release = defense.privatize(texts, rng=np.random.default_rng(2)).public()
    pred = attack.fit(knowledge, rng=np.random.default_rng(0)).attack(release)
    truth = Truth(tokens=[], texts=texts, entities=[[] for _ in texts])
    return float(score_predictions(pred, truth, "word_set_f1")[0]["attack_score"])


def test_a_nearly_untouched_release_does_not_beat_the_undefended_one() -> None:
    # bow-inversion read mean token vectors for SAP and pooled embeddings for text, and
    # scored higher on a nearly untouched SAP release (here F1 .727 at layer 0 against .720
    # undefended). Both now read the same features, so the same seeds give the same score;
    # the slack is for float differences only.
    aux, texts = reviews(160, seed=4), reviews(60, seed=5)
    undefended = _bow_f1(NoDefense(), aux, texts)
    for split_layer in (0, 1):
        nearly = _bow_f1(SAP(eta=1e4, split_layer=split_layer, backbone=TINY), aux, texts)
        assert nearly <= undefended + 0.005, (split_layer, nearly, undefended)
