"""optimization-inversion on the tiny random BERT: recovery through SAP's bottom model,
determinism, applicability, bad parameters, empty documents."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from privaudit.api import MIN_VICTIMS, Knowledge, Release, Space
from privaudit.attacks.geia import GEIA
from privaudit.attacks.optimization_inversion import OptimizationInversion
from privaudit.params import ParamError, validate_params
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


def split_release(layer: int, texts=TEXTS) -> Release:
    """What SAP without noise releases: the input word embeddings of the content tokens
    (layer 0), or the states after encoder layer k over [CLS] tokens [SEP]."""
    from privaudit.models.backbone import backbone

    bb = backbone(TINY)
    if layer == 0:
        vectors = [bb.embeddings[ids] for ids in bb.token_ids(texts)]
    else:
        vectors = bb.hidden_at_layer(texts, layer)
    meta = {"defense": "sap", "backbone": TINY}
    return Release("token_vectors", vectors=vectors, layer=layer, meta=meta)


def fitted(tiny, seed: int = 0, **params) -> OptimizationInversion:
    params = {"candidates": candidates(tiny), "steps": 60, **params}
    attack = OptimizationInversion(backbone=TINY, **params)
    return attack.fit(KNOWLEDGE, rng=np.random.default_rng(seed))


@pytest.mark.parametrize(
    ("layer", "loss"), [(0, "cosine"), (1, "cosine"), (2, "cosine"), (1, "mse")]
)
def test_recovers_tokens_through_the_bottom_model(tiny, layer: int, loss: str) -> None:
    release = split_release(layer)
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
    space = Space.TOKEN_EMBEDDINGS if layer == 0 else Space.HIDDEN_STATES
    assert settings["space"] == str(space)


def test_deterministic_for_a_seed_and_backbone_untouched(tiny) -> None:
    import torch

    release = split_release(1).public()
    before = {n: p.detach().clone() for n, p in tiny.model.named_parameters()}
    state = torch.random.get_rng_state()
    first = fitted(tiny, steps=10, seed=3).attack(release)
    assert torch.equal(state, torch.random.get_rng_state())  # global torch RNG untouched
    second = fitted(tiny, steps=10, seed=3).attack(release)
    assert first.tokens == second.tokens
    attack = fitted(tiny, steps=10, seed=3)
    assert attack.attack(release).tokens == attack.attack(release).tokens  # attack is pure
    assert not tiny.model.training
    for n, p in tiny.model.named_parameters():
        assert p.grad is None
        assert np.array_equal(before[n].numpy(), p.detach().numpy())


def test_scores_the_declared_victims_as_geia_does(tiny) -> None:
    """It declares ``max_victims`` (300 by default, like geia and vec2text: the runner draws
    the same victims for all three) and attacks every victim it is given; the old ``max_docs``
    (the first N victims) is refused with a pointer to it."""
    assert OptimizationInversion().max_victims == MIN_VICTIMS == GEIA().max_victims
    assert OptimizationInversion(max_victims=None).max_victims is None
    with pytest.raises(ParamError, match="greater than or equal to 300"):
        validate_params(OptimizationInversion, {"max_victims": 32}, where="optimization-inversion")
    with pytest.raises(ParamError, match=r"no parameter 'max_docs'\. Did you mean 'max_victims'"):
        OptimizationInversion(max_docs=32)
    predictions = fitted(tiny, steps=5).attack(split_release(1).public())
    assert predictions.meta["doc_indices"] == list(range(len(TEXTS)))
    assert len(predictions.tokens) == len(TEXTS)
    assert predictions.meta["settings"]["max_victims"] == MIN_VICTIMS


def test_layer_0_batches_run_together_with_the_same_result(tiny, monkeypatch) -> None:
    """At layer 0 positions are independent, so running the length-sorted batches together
    (unpadded, up to a logit budget) or one by one changes nothing."""
    from privaudit.attacks import optimization_inversion as module

    assert len(module._chunks([[0, 1], [2, 3]], [4, 4, 4, 4], 10)) == 1  # one chunk
    texts = TEXTS * 3
    release = split_release(0, texts).public()
    together = fitted(tiny, steps=30, batch_size=2).attack(release)
    monkeypatch.setattr(module, "_CHUNK_LOGITS", 1)  # one batch per chunk
    alone = fitted(tiny, steps=30, batch_size=2).attack(release)
    assert together.tokens == alone.tokens


def test_candidate_vocabulary_from_aux(tiny) -> None:
    import datasets

    aux = datasets.Dataset.from_dict({"text": ["zebra crossing near the quay"]})
    rng = np.random.default_rng(0)
    attack = OptimizationInversion(backbone=TINY, n_common=50).fit(
        Knowledge(white_box=True, backbone=TINY, aux=aux), rng=rng
    )
    ids = set(attack._candidate_ids.tolist())
    assert set(tiny.token_ids(["zebra crossing near the quay"])[0].tolist()) <= ids
    assert set(tiny.candidate_ids[:50].tolist()) <= ids
    no_aux = OptimizationInversion(backbone=TINY, n_common=50).fit(KNOWLEDGE, rng=rng)
    assert no_aux._candidate_source == "common" and len(no_aux._candidate_ids) == 50
    full = OptimizationInversion(backbone=TINY, candidates="full").fit(KNOWLEDGE, rng=rng)
    assert len(full._candidate_ids) == len(tiny.candidate_ids)


def test_empty_documents(tiny) -> None:
    texts = ["", TEXTS[3], ""]
    for layer in (0, 1):
        predictions = fitted(tiny, steps=20).attack(split_release(layer, texts).public())
        assert predictions.tokens[0] == [] and predictions.tokens[2] == []
        assert len(predictions.tokens[1]) == len(tiny.token_ids([TEXTS[3]])[0])
    nothing = Release("token_vectors", vectors=[], layer=1)
    empty = fitted(tiny, steps=5).attack(nothing)
    assert empty.tokens == [] and empty.meta["doc_indices"] == []


def test_not_applicable_to_text_pooled_or_another_backbone() -> None:
    attack = OptimizationInversion(backbone=TINY)
    vectors = [np.zeros((3, 4), np.float32)]
    assert "not text" in attack.applicable(Release("text", texts=["a"]), KNOWLEDGE)
    pooled = Release("pooled_vectors", vectors=[np.zeros(4)])
    assert "not pooled" in attack.applicable(pooled, KNOWLEDGE)
    hidden = Release("token_vectors", vectors=vectors, layer=1, meta={"backbone": TINY})
    assert attack.applicable(hidden, Knowledge(white_box=False, backbone=TINY))
    assert attack.applicable(hidden, KNOWLEDGE) is None
    embeddings = Release("token_vectors", vectors=vectors, layer=0)
    assert attack.applicable(embeddings, KNOWLEDGE) is None
    other = Release("token_vectors", vectors=vectors, layer=1, meta={"backbone": "bert-base"})
    reason = attack.applicable(other, KNOWLEDGE)
    assert reason is not None and "bert-base" in reason
    assert ATTACKS.get("optimization-inversion") is OptimizationInversion
    assert OptimizationInversion.accepts == {Space.TOKEN_EMBEDDINGS, Space.HIDDEN_STATES}


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
        {"candidates": [1, -2]},
        {"loss": "l1"},
        {"max_victims": 0},
        {"max_docs": 32},  # renamed max_victims (a drawn subset, at least 300)
        {"batch_size": 0},
        {"seed": 3},  # randomness comes from fit's rng only
    ],
)
def test_bad_parameters_fail_at_construction(params) -> None:
    with pytest.raises(ParamError, match=next(iter(params))):
        OptimizationInversion(backbone=TINY, **params)


def test_attack_errors(tiny) -> None:
    with pytest.raises(ValueError, match="not fitted"):
        OptimizationInversion(backbone=TINY).attack(split_release(1).public())
    with pytest.raises(ValueError, match="must lie in"):  # needs the loaded vocabulary
        OptimizationInversion(backbone=TINY, candidates=[1, 10**9]).fit(
            KNOWLEDGE, rng=np.random.default_rng(0)
        )
    attack = fitted(tiny, steps=2)
    pooled = Release("pooled_vectors", vectors=[np.zeros(tiny.dim, np.float32)])
    with pytest.raises(ValueError, match="token_vectors"):
        attack.attack(pooled)
    wrong_dim = Release("token_vectors", vectors=[np.zeros((4, 7), np.float32)], layer=1)
    with pytest.raises(ValueError, match="dimension"):
        attack.attack(wrong_dim)
    too_deep = Release("token_vectors", vectors=[np.zeros((4, tiny.dim), np.float32)], layer=5)
    with pytest.raises(ValueError, match="layers"):
        attack.attack(too_deep)
