"""nn-inversion and token-recovery scoring on the tiny random BERT."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.api import Knowledge, Predictions, Release
from privaudit.attacks.nn_inversion import NNInversion
from privaudit.defenses.none import NoDefense
from privaudit.defenses.t2t import T2T
from privaudit.metrics import matched_tokens, replacement_rate, token_recovery
from tests.conftest import TINY

TEXTS = [
    "Our waiter Sarah was lovely and the pasta was perfect.",
    "The phone from Acme Ltd broke after two weeks, awful.",
    "My husband and I stayed in Bristol in June 2019; the room was spotless.",
] * 4


def attack() -> NNInversion:
    knowledge = Knowledge(white_box=True, backbone=TINY)
    return NNInversion().fit(knowledge, rng=np.random.default_rng(0))


def test_recovers_everything_from_undefended_text(tiny, rng) -> None:
    release = NoDefense().privatize(TEXTS, rng=rng)
    predictions = attack().attack(release.public())
    assert token_recovery(tiny.token_ids(TEXTS), predictions) >= 0.99


@pytest.mark.parametrize("eta", [200.0, 300.0, 500.0])
def test_recovery_is_one_minus_replacement_rate(tiny, eta: float) -> None:
    release = T2T(eta=eta, backbone=TINY).privatize(TEXTS, rng=np.random.default_rng(1))
    recovery = token_recovery(tiny.token_ids(TEXTS), attack().attack(release.public()))
    assert recovery == pytest.approx(1 - replacement_rate([release.audit]), abs=0.05)


def test_token_vector_release(tiny) -> None:
    ids = tiny.token_ids(TEXTS[:2])
    vectors = [tiny.embeddings[row] + 1e-4 for row in ids]
    predictions = attack().attack(Release("token_vectors", vectors=vectors, layer=0))
    assert token_recovery(ids, predictions) >= 0.99
    again = attack().attack(Release("token_vectors", vectors=vectors, layer=0))
    assert again.tokens == predictions.tokens  # deterministic: it draws nothing


def test_wrong_dimension_is_explained() -> None:
    bad = Release("token_vectors", vectors=[np.zeros((3, 7), dtype=np.float32)], layer=0)
    with pytest.raises(ValueError, match="dimension"):
        attack().attack(bad)


def test_applicability_reasons() -> None:
    a = NNInversion()
    text = Release("text", texts=["a"])
    assert a.applicable(text, Knowledge(white_box=True)) is None
    pooled = Release("pooled_vectors", vectors=[np.zeros(4)])
    assert "not pooled" in (a.applicable(pooled, Knowledge()) or "")
    hidden = Release("token_vectors", vectors=[np.zeros((2, 4))], layer=2)
    assert "not hidden_states" in (a.applicable(hidden, Knowledge()) or "")
    with pytest.raises(ValueError, match="hidden_states"):
        attack().attack(hidden)
    assert "white-box" in (a.applicable(text, Knowledge(white_box=False)) or "")


def test_scoring_alignment_and_errors() -> None:
    assert matched_tokens([1, 2, 3], [1, 9, 3]) == 2
    assert matched_tokens([1, 2, 3, 4], [1, 2, 7, 8, 4]) == 3  # length changed: aligned
    with pytest.raises(ValueError, match="returned 1 documents for 2"):
        token_recovery([[1], [2]], Predictions("tokens", tokens=[[1]]))
    assert np.isnan(token_recovery([[]], Predictions("tokens", tokens=[[]])))
    assert np.isnan(replacement_rate([{}]))
