"""The noisy-embedding baseline: token-vector releases, inversion and probe utility."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privaudit.api import Knowledge
from privaudit.attacks.nn_inversion import NNInversion
from privaudit.defenses.embedding_dx import EmbeddingDX
from privaudit.metrics import token_recovery
from privaudit.utility.probe import Probe
from tests.conftest import TINY

TEXTS = ["The pasta was perfect.", "Awful phone, broke in a week.", "", "😀"]


def test_release_shapes_and_identity_at_infinity(tiny) -> None:
    release = EmbeddingDX(eta=math.inf, backbone=TINY).privatize(
        TEXTS, rng=np.random.default_rng(0)
    )
    assert release.kind == "token_vectors" and len(release) == len(TEXTS)
    for ids, vectors in zip(tiny.token_ids(TEXTS), release.vectors or [], strict=True):
        assert vectors.shape == (len(ids), tiny.dim)
        np.testing.assert_array_equal(vectors, tiny.embeddings[ids])
    assert release.layer == 0 and release.space == "token_embeddings" and release.audit == {}


def test_inversion_falls_with_noise(tiny) -> None:
    attack = NNInversion(backbone=TINY).fit(Knowledge(backbone=TINY), rng=np.random.default_rng(0))
    truth = tiny.token_ids(TEXTS * 5)
    scores = []
    for eta in (1e9, 300, 1):
        release = EmbeddingDX(eta=eta, backbone=TINY).privatize(
            TEXTS * 5, rng=np.random.default_rng(0)
        )
        scores.append(token_recovery(truth, attack.attack(release.public())))
    assert scores[0] >= 0.99 and scores[0] > scores[1] > scores[2]


def test_probe_continues_the_forward_pass(tiny) -> None:
    texts = TEXTS[:3]  # not the emoji: the text path keeps [UNK], the token release drops it
    clean = EmbeddingDX(eta=math.inf, backbone=TINY).privatize(texts, rng=np.random.default_rng(0))
    features = Probe(backbone=TINY).features(clean)
    np.testing.assert_allclose(features, tiny.pooled(texts), atol=1e-4)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="eta=-3 is not allowed: Input should be greater than 0"):
        EmbeddingDX(eta=-3, backbone=TINY)
    with pytest.raises(TypeError, match="single string"):
        EmbeddingDX(backbone=TINY).privatize("text", rng=np.random.default_rng(0))  # type: ignore[arg-type]
