"""mlp-inversion and ae-inversion (black-box learned inversions) on the tiny backbone."""

from __future__ import annotations

import functools

import datasets
import numpy as np
import pytest
import torch

from privaudit.api import Knowledge, Predictions, Release
from privaudit.attacks._pairs import aux_pairs, released_tokens
from privaudit.attacks.ae_inversion import AEInversion
from privaudit.attacks.mlp_inversion import MLPInversion
from privaudit.audit.scoring import Truth, embedding_mse, token_recovery
from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.defenses.embedding_dx import EmbeddingDX
from privaudit.defenses.none import NoDefense
from privaudit.defenses.t2t import T2T
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


def victims(defense) -> Release:
    texts = corpus().texts("test")
    return defense.privatize(texts, rng=np.random.default_rng(2)).public()


def run(cls, defense, **params) -> tuple[Predictions, float]:
    attack = cls(backbone=TINY, **(FAST | params)).fit(knowledge(defense))
    pred = attack.attack(victims(defense))
    return pred, token_recovery(truth_tokens(), pred)


@functools.cache
def truth_tokens() -> list[np.ndarray]:
    from privaudit.resources import backbone

    return backbone(TINY).token_ids(corpus().texts("test"))


def test_registered() -> None:
    assert ATTACKS.get("mlp-inversion") is MLPInversion
    assert ATTACKS.get("ae-inversion") is AEInversion
    assert MLPInversion.metric == "token_recovery"
    assert AEInversion.metric == "embedding_mse"
    for cls in ATTACKS_UNDER_TEST:
        assert cls.needs_query and cls.needs_aux and not cls.needs_white_box


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
    defense = EmbeddingDX(eta=1000.0, backbone=TINY)
    pred, recovery = run(cls, defense)
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


@pytest.mark.parametrize("cls", ATTACKS_UNDER_TEST)
def test_not_applicable_reasons(cls) -> None:
    attack = cls()
    full = knowledge(NoDefense())
    assert attack.applicable("text", full, {}) is None
    assert attack.applicable("token_vectors", full, {"space": "input_word_embeddings"}) is None
    assert "pooled_vectors" in attack.applicable("pooled_vectors", full, {})
    reason = attack.applicable("token_vectors", full, {"space": "hidden", "layer": 2})
    assert reason is not None and "optimization-inversion" in reason
    assert "query" in attack.applicable("text", knowledge(NoDefense(), query_mechanism=None))
    no_aux = Knowledge(white_box=False, query_mechanism=full.query_mechanism, aux=None)
    assert "aux" in attack.applicable("text", no_aux)


@pytest.mark.parametrize("cls", ATTACKS_UNDER_TEST)
def test_bad_input(cls, tiny) -> None:
    with pytest.raises(ValueError, match="empty aux"):
        cls(backbone=TINY).fit(knowledge(NoDefense(), aux=corpus().split("aux").select([])))
    blank = datasets.Dataset.from_dict({"text": ["", "  "]})
    with pytest.raises(ValueError, match="no token pairs"):
        cls(backbone=TINY).fit(knowledge(NoDefense(), aux=blank))
    with pytest.raises(ValueError, match="query access"):
        cls(backbone=TINY).fit(knowledge(NoDefense(), query_mechanism=None))
    with pytest.raises(TypeError, match="hidden"):
        cls(backbone=TINY, hidden="big").fit(knowledge(NoDefense()))
    with pytest.raises(TypeError, match="lr"):
        cls(backbone=TINY, lr="fast").fit(knowledge(NoDefense()))
    with pytest.raises(ValueError, match="epochs"):
        cls(backbone=TINY, epochs=0).fit(knowledge(NoDefense()))
    with pytest.raises(TypeError, match="max_aux"):
        cls(backbone=TINY, max_aux=2.5).fit(knowledge(NoDefense()))
    with pytest.raises(TypeError, match="threads"):
        cls(backbone=TINY, threads="all").fit(knowledge(NoDefense()))
    with pytest.raises(ValueError, match="val_fraction"):
        cls(backbone=TINY, val_fraction=0.9).fit(knowledge(NoDefense()))
    with pytest.raises(ValueError, match="not fitted"):
        cls(backbone=TINY).attack(victims(NoDefense()))

    attack = cls(backbone=TINY, **FAST).fit(knowledge(NoDefense()))
    with pytest.raises(ValueError, match="no documents"):
        attack.attack(Release("text", texts=[]))
    with pytest.raises(ValueError, match="query the same mechanism"):
        attack.attack(Release("token_vectors", vectors=[np.zeros((2, tiny.dim))]))
    # Empty documents in a release are fine: no tokens to guess.
    pred = attack.attack(Release("text", texts=["", "the film was good", ""]))
    assert [len(t) for t in pred.tokens] == [0, len(tiny.token_ids(["the film was good"])[0]), 0]

    vec = cls(backbone=TINY, **FAST).fit(knowledge(EmbeddingDX(eta=100.0, backbone=TINY)))
    with pytest.raises(ValueError, match="dimensions"):
        vec.attack(Release("token_vectors", vectors=[np.zeros((2, tiny.dim + 1))]))
    hidden = Release("token_vectors", vectors=[np.zeros((2, tiny.dim))], meta={"space": "hidden"})
    with pytest.raises(ValueError, match="optimization-inversion"):
        vec.attack(hidden)


class _Prefixed:
    """A RAPT-like mechanism: the text unchanged behind two public plain words."""

    def privatize(self, texts, rng):
        return Release("text", texts=[f"alpha beta {t}" for t in texts], meta={"n_plain_words": 2})


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
    attack = MLPInversion(backbone=TINY, max_aux=10, **FAST).fit(knowledge(NoDefense()))
    pred = attack.attack(victims(NoDefense()))
    assert pred.meta["settings"]["n_aux_docs"] == 10
    assert pred.meta["settings"]["max_aux"] == 10
