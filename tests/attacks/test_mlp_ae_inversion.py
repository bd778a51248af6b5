"""mlp-inversion and ae-inversion (black-box learned inversions) on the tiny backbone."""

from __future__ import annotations

import functools

import datasets
import numpy as np
import pytest
import torch

from privaudit.api import Knowledge, Predictions, Release, Space
from privaudit.attacks._pairs import aux_pairs, released_tokens
from privaudit.attacks.ae_inversion import AEInversion
from privaudit.attacks.mlp_inversion import MLPInversion
from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.defenses.none import NoDefense
from privaudit.defenses.t2t import T2T
from privaudit.mechanisms.batching import flatten, unflatten
from privaudit.mechanisms.noise import sample_dx_noise
from privaudit.metrics import Truth, embedding_mse, token_recovery
from privaudit.params import ParamError, validate_params
from privaudit.registry import ATTACKS
from tests.conftest import TINY

ATTACKS_UNDER_TEST = [MLPInversion, AEInversion]
FAST = {"epochs": 3, "hidden": 64}


@functools.cache
def corpus():
    # About 100 aux (attacker) and 100 test (victim) documents, authors disjoint.
    return synthetic_reviews(n_docs=250, seed=0, split_fractions=(0.2, 0.4, 0.4))


def knowledge(defense, aux=None, **changes) -> Knowledge:
    fields = dict(
        white_box=False,
        backbone=TINY,
        query_mechanism=lambda texts: defense.privatize(texts, rng=np.random.default_rng(1)),
        aux=corpus().split("aux") if aux is None else aux,
    )
    return Knowledge(**(fields | changes))


class _InputNoise:
    """d_X noise on the input word embeddings, released as vectors (embedding-dx's release,
    built here so these tests do not depend on a defense's bookkeeping)."""

    def __init__(self, eta: float) -> None:
        self.eta = eta

    def privatize(self, texts, rng):
        from privaudit.models.backbone import backbone

        bb = backbone(TINY)
        flat, bounds = flatten(bb.token_ids(texts))
        noisy = bb.embeddings[flat] + sample_dx_noise(len(flat), bb.dim, self.eta, rng)
        return Release("token_vectors", vectors=unflatten(noisy, bounds), layer=0)


def victims(defense) -> Release:
    texts = corpus().texts("test")
    return defense.privatize(texts, rng=np.random.default_rng(2)).public()


def run(cls, defense, seed: int = 0, **params) -> tuple[Predictions, float]:
    attack = cls(backbone=TINY, **(FAST | params))
    attack.fit(knowledge(defense), rng=np.random.default_rng(seed))
    pred = attack.attack(victims(defense))
    return pred, token_recovery(truth_tokens(), pred)


@functools.cache
def truth_tokens() -> list[np.ndarray]:
    from privaudit.models.backbone import backbone

    return backbone(TINY).token_ids(corpus().texts("test"))


def test_registered() -> None:
    assert ATTACKS.get("mlp-inversion") is MLPInversion
    assert ATTACKS.get("ae-inversion") is AEInversion
    assert MLPInversion.metric == "token_recovery"
    assert AEInversion.metric == "embedding_mse"
    for cls in ATTACKS_UNDER_TEST:
        assert cls.needs_query and cls.needs_aux and not cls.needs_white_box
        assert cls.accepts == {Space.TEXT, Space.TOKEN_EMBEDDINGS}
        validate_params(cls, cls.quick_params)  # the quick grid's bounds are declared values
    assert MLPInversion.quick_params == {"threads": None, "epochs": 2}
    assert AEInversion.quick_params == {"threads": None, "epochs": 2}


@pytest.mark.parametrize("cls", ATTACKS_UNDER_TEST)
def test_recovers_undefended_text(cls, tiny) -> None:
    pred, recovery = run(cls, NoDefense())
    assert recovery >= 0.95
    assert pred.kind == "tokens"
    assert pred.meta["tokenizer"] == TINY
    assert [len(t) for t in pred.tokens] == [len(r) for r in pred.meta["released_tokens"]]
    assert pred.meta["settings"]["n_aux_docs"] == len(corpus().split("aux"))
    if cls is AEInversion:
        truth = Truth(tokens=truth_tokens(), embeddings=tiny.embeddings)
        assert embedding_mse(truth, pred) < 1e-8
        assert [v.shape for v in pred.vectors] == [(len(t), tiny.dim) for t in pred.tokens]


def test_unseen_but_unchanged_tokens_are_recovered(tiny) -> None:
    # The keep class: victim tokens that never occur in the aux are recovered when unchanged.
    seen = {i for ids in tiny.token_ids(corpus().texts("aux")) for i in ids.tolist()}
    pred, _ = run(MLPInversion, NoDefense())
    unseen = hits = 0
    for truth, guess in zip(truth_tokens(), pred.tokens, strict=True):
        for t, g in zip(truth.tolist(), guess, strict=True):
            if t not in seen:
                unseen += 1
                hits += int(t == g)
    assert unseen >= 20
    assert hits / unseen >= 0.95


def test_strong_noise_defeats_recovery(tiny) -> None:
    # eta = 1 on the tiny backbone replaces essentially every token at random.
    _, clean = run(MLPInversion, NoDefense())
    _, noisy = run(MLPInversion, T2T(eta=1.0, backbone=TINY))
    assert noisy < 0.3 < clean
    pred, ae_noisy = run(AEInversion, T2T(eta=1.0, backbone=TINY))
    assert ae_noisy < 0.3
    truth = Truth(tokens=truth_tokens(), embeddings=tiny.embeddings)
    assert embedding_mse(truth, pred) > 1e-4


@pytest.mark.parametrize("cls", ATTACKS_UNDER_TEST)
def test_reads_input_space_token_vectors(cls, tiny) -> None:
    pred, recovery = run(cls, _InputNoise(eta=1000.0))
    assert recovery >= 0.5
    assert [len(t) for t in pred.tokens] == [len(t) for t in truth_tokens()]


@pytest.mark.parametrize("cls", ATTACKS_UNDER_TEST)
def test_deterministic_for_a_seed(cls, tiny) -> None:
    defense = T2T(eta=5.0, backbone=TINY)
    state = torch.random.get_rng_state()
    a, _ = run(cls, defense, seed=3)
    assert torch.equal(state, torch.random.get_rng_state())  # global torch RNG untouched
    b, _ = run(cls, defense, seed=3)
    assert a.tokens == b.tokens
    if cls is AEInversion:
        assert all(np.array_equal(x, y) for x, y in zip(a.vectors, b.vectors, strict=True))
        c, _ = run(cls, defense, seed=4)  # the rng is the only source of randomness
        assert not all(np.array_equal(x, y) for x, y in zip(a.vectors, c.vectors, strict=True))


@pytest.mark.parametrize("cls", ATTACKS_UNDER_TEST)
def test_not_applicable_reasons(cls) -> None:
    attack = cls()
    full = knowledge(NoDefense())
    text = Release("text", texts=["a"])
    vectors = [np.zeros((2, 4), np.float32)]
    assert attack.applicable(text, full) is None
    assert attack.applicable(Release("token_vectors", vectors=vectors, layer=0), full) is None
    pooled = Release("pooled_vectors", vectors=[np.zeros(4)])
    assert "not pooled" in attack.applicable(pooled, full)
    hidden = Release("token_vectors", vectors=vectors, layer=2)
    assert "not hidden_states" in attack.applicable(hidden, full)
    assert "query" in attack.applicable(text, knowledge(NoDefense(), query_mechanism=None))
    no_aux = Knowledge(white_box=False, query_mechanism=full.query_mechanism, aux=None)
    assert "aux" in attack.applicable(text, no_aux)


@pytest.mark.parametrize("cls", ATTACKS_UNDER_TEST)
def test_bad_input(cls, tiny) -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="empty aux"):
        cls(backbone=TINY).fit(
            knowledge(NoDefense(), aux=corpus().split("aux").select([])), rng=rng
        )
    blank = datasets.Dataset.from_dict({"text": ["", "  "]})
    with pytest.raises(ValueError, match="no token pairs"):
        cls(backbone=TINY).fit(knowledge(NoDefense(), aux=blank), rng=rng)
    with pytest.raises(ValueError, match="query access"):
        cls(backbone=TINY).fit(knowledge(NoDefense(), query_mechanism=None), rng=rng)
    with pytest.raises(ValueError, match="not fitted"):
        cls(backbone=TINY).attack(victims(NoDefense()))

    attack = cls(backbone=TINY, **FAST).fit(knowledge(NoDefense()), rng=rng)
    with pytest.raises(ValueError, match="no documents"):
        attack.attack(Release("text", texts=[]))
    with pytest.raises(ValueError, match="query the same mechanism"):
        attack.attack(Release("token_vectors", vectors=[np.zeros((2, tiny.dim))], layer=0))
    # Empty documents in a release are fine: no tokens to guess.
    pred = attack.attack(Release("text", texts=["", "the film was good", ""]))
    assert [len(t) for t in pred.tokens] == [0, len(tiny.token_ids(["the film was good"])[0]), 0]

    vec = cls(backbone=TINY, **FAST).fit(knowledge(_InputNoise(eta=100.0)), rng=rng)
    with pytest.raises(ValueError, match="dimensions"):
        vec.attack(Release("token_vectors", vectors=[np.zeros((2, tiny.dim + 1))], layer=0))
    hidden = Release("token_vectors", vectors=[np.zeros((2, tiny.dim))], layer=2)
    with pytest.raises(ValueError, match="optimization-inversion"):
        vec.attack(hidden)


@pytest.mark.parametrize("cls", ATTACKS_UNDER_TEST)
@pytest.mark.parametrize(
    "params",
    [
        {"hidden": "big"},
        {"lr": "fast"},
        {"epochs": 0},
        {"max_aux": 2.5},
        {"threads": "all"},
        {"threads": 0},
        {"val_fraction": 0.5},
        {"seed": 3},  # randomness comes from fit's rng only
    ],
)
def test_bad_parameters_fail_at_construction(cls, params) -> None:
    name = next(iter(params))
    with pytest.raises(ParamError, match=name):
        cls(backbone=TINY, **params)


class _Prefixed:
    """A RAPT-like mechanism: the text unchanged behind two public plain words."""

    def privatize(self, texts, rng):
        return Release("text", texts=[f"alpha beta {t}" for t in texts], plain_prefix=2)


@pytest.mark.parametrize("cls", ATTACKS_UNDER_TEST)
def test_rapt_plain_prefix_is_skipped(cls, tiny) -> None:
    defense = _Prefixed()
    prefix_ids = set(tiny.token_ids(["alpha beta"])[0].tolist())
    pairs = aux_pairs(tiny, knowledge(defense), max_aux=20, name="test")
    assert len(pairs.original_ids) and np.array_equal(pairs.original_ids, pairs.released_ids)
    rel = released_tokens(tiny, victims(defense), name="test")
    assert [r.tolist() for r in rel.ids] == [t.tolist() for t in truth_tokens()]

    pred, recovery = run(cls, defense)
    assert recovery >= 0.95
    assert pred.tokens == [t.tolist() for t in truth_tokens()]
    assert not prefix_ids & {i for doc in pred.meta["released_tokens"] for i in doc} - {
        i for t in truth_tokens() for i in t.tolist()
    }


def test_max_aux_caps_the_aux_documents() -> None:
    attack = MLPInversion(backbone=TINY, max_aux=10, **FAST)
    attack.fit(knowledge(NoDefense()), rng=np.random.default_rng(0))
    pred = attack.attack(victims(NoDefense()))
    assert pred.meta["settings"]["n_aux_docs"] == 10
    assert pred.meta["settings"]["max_aux"] == 10
