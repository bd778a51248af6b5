"""optimization-inversion on the tiny random BERT: recovery through SAP's bottom model,
determinism, applicability, bad parameters, empty documents."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from privaudit.api import Knowledge, Release
from privaudit.attacks.optimization_inversion import OptimizationInversion
from privaudit.defenses.embedding_dx import EmbeddingDX
from privaudit.defenses.sap import SAP
from privaudit.registry import ATTACKS
from tests.conftest import TINY

TEXTS = [
    "Our waiter Sarah was lovely and the pasta was perfect.",
    "The phone broke after two weeks, awful.",
    "My husband and I stayed in Bristol; the room was spotless.",
    "Great battery, poor screen.",
]
KNOWLEDGE = Knowledge(white_box=True, backbone=TINY)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Small optimisation loops: one torch thread is faster than two on a shared CPU."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def token_f1(truth, guess) -> float:
    hit = n_pred = n_true = 0
    for t, g in zip(truth, guess, strict=True):
        ct, cg = Counter(np.asarray(t).tolist()), Counter(list(g))
        hit += sum((ct & cg).values())
        n_pred += sum(cg.values())
        n_true += sum(ct.values())
    p, r = hit / max(n_pred, 1), hit / max(n_true, 1)
    return 2 * p * r / (p + r) if p + r else 0.0


def candidates(tiny, texts=TEXTS, n_distractors: int = 400) -> list[int]:
    """The victims' tokens plus a few hundred other wordpieces."""
    own = np.concatenate(tiny.token_ids(texts))
    return np.union1d(own, tiny.candidate_ids[:n_distractors]).tolist()


def sap_release(layer: int, texts=TEXTS) -> Release:
    return SAP(eta=math.inf, split_layer=layer, backbone=TINY).privatize(
        texts, rng=np.random.default_rng(0)
    )


def fitted(tiny, **params) -> OptimizationInversion:
    params = {"candidates": candidates(tiny), "steps": 60, **params}
    return OptimizationInversion(backbone=TINY, **params).fit(KNOWLEDGE)


@pytest.mark.parametrize(
    ("layer", "loss"), [(0, "cosine"), (1, "cosine"), (2, "cosine"), (1, "mse")]
)
def test_recovers_tokens_through_the_bottom_model(tiny, layer: int, loss: str) -> None:
    release = sap_release(layer)
    predictions = fitted(tiny, loss=loss).attack(release.public())
    truth = tiny.token_ids(TEXTS)
    assert predictions.kind == "tokens"
    assert [len(p) for p in predictions.tokens] == [len(t) for t in truth]  # no specials
    assert token_f1(truth, predictions.tokens) >= 0.9
    assert predictions.meta["tokenizer"] == TINY
    assert predictions.meta["doc_indices"] == list(range(len(TEXTS)))
    settings = predictions.meta["settings"]
    assert settings["layer"] == layer and settings["steps"] == 60
    assert settings["candidate_source"] == "explicit"


def test_embedding_dx_release_without_noise_is_read_in_input_space(tiny) -> None:
    release = EmbeddingDX(eta=math.inf, backbone=TINY).privatize(
        TEXTS, rng=np.random.default_rng(0)
    )
    attack = fitted(tiny)
    assert attack.applicable("token_vectors", KNOWLEDGE, release.meta) is None
    predictions = attack.attack(release.public())
    assert predictions.meta["settings"]["space"] == "input_word_embeddings"
    assert token_f1(tiny.token_ids(TEXTS), predictions.tokens) >= 0.9


def test_deterministic_for_a_seed_and_backbone_untouched(tiny) -> None:
    release = sap_release(1).public()
    before = {n: p.detach().clone() for n, p in tiny.model.named_parameters()}
    first = fitted(tiny, steps=10, seed=3).attack(release)
    second = fitted(tiny, steps=10, seed=3).attack(release)
    assert first.tokens == second.tokens
    assert not tiny.model.training
    for n, p in tiny.model.named_parameters():
        assert p.grad is None
        assert np.array_equal(before[n].numpy(), p.detach().numpy())


def test_max_docs_sets_doc_indices(tiny) -> None:
    predictions = fitted(tiny, steps=5, max_docs=2).attack(sap_release(1).public())
    assert predictions.meta["doc_indices"] == [0, 1]
    assert len(predictions.tokens) == 2


def test_candidate_vocabulary_from_aux(tiny) -> None:
    import datasets

    aux = datasets.Dataset.from_dict({"text": ["zebra crossing near the quay"]})
    attack = OptimizationInversion(backbone=TINY, n_common=50).fit(
        Knowledge(white_box=True, backbone=TINY, aux=aux)
    )
    ids = set(attack._candidate_ids.tolist())
    assert set(tiny.token_ids(["zebra crossing near the quay"])[0].tolist()) <= ids
    assert set(tiny.candidate_ids[:50].tolist()) <= ids
    no_aux = OptimizationInversion(backbone=TINY, n_common=50).fit(KNOWLEDGE)
    assert no_aux._candidate_source == "common" and len(no_aux._candidate_ids) == 50
    full = OptimizationInversion(backbone=TINY, candidates="full").fit(KNOWLEDGE)
    assert len(full._candidate_ids) == len(tiny.candidate_ids)


def test_empty_documents(tiny) -> None:
    texts = ["", TEXTS[3], ""]
    for layer in (0, 1):
        predictions = fitted(tiny, steps=20).attack(sap_release(layer, texts).public())
        assert predictions.tokens[0] == [] and predictions.tokens[2] == []
        assert len(predictions.tokens[1]) == len(tiny.token_ids([TEXTS[3]])[0])
    nothing = Release("token_vectors", vectors=[], meta={"layer": 1, "space": "hidden"})
    empty = fitted(tiny, steps=5).attack(nothing)
    assert empty.tokens == [] and empty.meta["doc_indices"] == []


def test_not_applicable_to_text_pooled_or_unreadable_releases() -> None:
    attack = OptimizationInversion(backbone=TINY)
    assert attack.applicable("text", KNOWLEDGE, {}) is not None
    assert attack.applicable("pooled_vectors", KNOWLEDGE, {"layer": 2}) is not None
    assert attack.applicable("token_vectors", Knowledge(white_box=False, backbone=TINY), {})
    meta = {"defense": "sap", "backbone": TINY, "layer": 1, "space": "hidden"}
    assert attack.applicable("token_vectors", KNOWLEDGE, meta) is None
    assert attack.applicable("token_vectors", KNOWLEDGE, {**meta, "layer": None})
    assert attack.applicable("token_vectors", KNOWLEDGE, {**meta, "space": "pooled"})
    other = attack.applicable("token_vectors", KNOWLEDGE, {**meta, "backbone": "bert-base"})
    assert other is not None and "bert-base" in other
    assert ATTACKS.get("optimization-inversion") is OptimizationInversion


@pytest.mark.parametrize(
    "params",
    [
        {"steps": 0},
        {"steps": -3},
        {"temperature": 0.0},
        {"final_temperature": -1.0},
        {"lr": 0},
        {"candidates": "everything"},
        {"candidates": []},
        {"candidates": [1, 10**9]},
        {"loss": "l1"},
        {"max_docs": 0},
        {"batch_size": 0},
    ],
)
def test_bad_parameters_are_clear_value_errors(params) -> None:
    with pytest.raises(ValueError):
        OptimizationInversion(backbone=TINY, **params).fit(KNOWLEDGE)


def test_attack_errors(tiny) -> None:
    with pytest.raises(ValueError, match="not fitted"):
        OptimizationInversion(backbone=TINY).attack(sap_release(1).public())
    attack = fitted(tiny, steps=2)
    pooled = Release("pooled_vectors", vectors=[np.zeros(tiny.dim, np.float32)])
    with pytest.raises(ValueError, match="token_vectors"):
        attack.attack(pooled)
    wrong_dim = Release("token_vectors", vectors=[np.zeros((4, 7), np.float32)], meta={"layer": 1})
    with pytest.raises(ValueError, match="dimension"):
        attack.attack(wrong_dim)
    too_deep = Release("token_vectors", vectors=[np.zeros((4, tiny.dim), np.float32)])
    too_deep.meta = {"layer": 5, "space": "hidden"}
    with pytest.raises(ValueError, match="layers"):
        attack.attack(too_deep)
