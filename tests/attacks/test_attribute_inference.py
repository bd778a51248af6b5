"""attribute-inference (RAPT §IV-A2 / CAPE) and attribute scoring, on small synthetic data."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from privaudit.api import ALL_SPACES, Defense, Knowledge, Release
from privaudit.attacks.attribute_inference import AttributeInference
from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.defenses.none import NoDefense
from privaudit.defenses.t2t import T2T
from privaudit.mechanisms.batching import flatten, unflatten
from privaudit.metrics import score_attributes
from privaudit.params import ParamError
from tests.conftest import TINY

RNG = np.random.default_rng  # fit's rng: the attack's only source of randomness


@functools.cache
def corpus(leak_rate: float = 1.0):
    # About 600 aux (attacker) and 600 test (victim) documents, authors disjoint.
    return synthetic_reviews(
        n_docs=1500, seed=0, leak_rate=leak_rate, split_fractions=(0.2, 0.4, 0.4)
    )


def knowledge(defense: Defense, backbone: str = TINY, leak_rate: float = 1.0) -> Knowledge:
    return Knowledge(
        white_box=False,
        backbone=backbone,
        query_mechanism=lambda texts: defense.privatize(texts, rng=np.random.default_rng(1)),
        aux=corpus(leak_rate).split("aux"),
    )


def victims(defense: Defense, leak_rate: float = 1.0) -> tuple[Release, dict[str, list]]:
    c = corpus(leak_rate)
    release = defense.privatize(list(c.split("test")["text"]), rng=np.random.default_rng(2))
    truth = {a: c.attribute("test", a) for a in c.attribute_names}
    return release.public(), truth


def run(
    defense: Defense, backbone: str = TINY, leak_rate: float = 1.0, **params
) -> dict[str, dict[str, float]]:
    attack = AttributeInference(backbone=backbone, **params)
    attack.fit(knowledge(defense, backbone, leak_rate), rng=RNG(0))
    release, truth = victims(defense, leak_rate)
    predictions = attack.attack(release)
    return score_attributes({a: truth[a] for a in predictions.attributes or {}}, predictions)


def test_infers_attributes_from_undefended_text() -> None:
    # Tiny random embeddings carry little signal; with every review leaky it is clear.
    # Measured on this data: gender 0.65 vs majority 0.51, age bin 0.43 vs 0.19.
    scores = run(NoDefense())
    assert set(scores) == {"gender", "age_bin"}
    assert scores["gender"]["advantage"] >= 0.08
    assert scores["age_bin"]["advantage"] >= 0.12
    for s in scores.values():
        assert s["advantage"] == pytest.approx(s["accuracy"] - s["majority_accuracy"])
        assert 0.0 <= s["macro_f1"] <= 1.0


def test_random_replacement_leaves_only_the_majority_guess() -> None:
    # eta=1 on the tiny backbone replaces essentially every token at random.
    scores = run(T2T(eta=1.0, backbone=TINY))
    for name, s in scores.items():
        assert abs(s["advantage"]) < 0.08, (name, s)


@pytest.mark.slow
def test_real_backbone_on_default_leakage() -> None:
    # all-MiniLM-L6-v2 embeddings, default leak rate 0.6. Measured: gender 0.70 vs 0.50,
    # age bin 0.40 vs 0.19 (a TF-IDF probe reaches about 0.71-0.77 and 0.44-0.47).
    scores = run(NoDefense(), backbone="all-MiniLM-L6-v2", leak_rate=0.6)
    assert scores["gender"]["advantage"] >= 0.12
    assert scores["age_bin"]["advantage"] >= 0.12
    scores = run(T2T(eta=1.0, backbone="all-MiniLM-L6-v2"), "all-MiniLM-L6-v2", leak_rate=0.6)
    for name, s in scores.items():
        assert abs(s["advantage"]) < 0.08, (name, s)


class _NoisyEmbeddings(Defense):
    """Light Gaussian noise on the input word embeddings, released as token vectors."""

    def privatize(self, texts, *, rng):
        from privaudit.models.backbone import backbone

        bb = backbone(TINY)
        flat, bounds = flatten(bb.token_ids(texts))
        noisy = bb.embeddings[flat] + rng.normal(0, 1e-4, (len(flat), bb.dim)).astype(np.float32)
        return Release("token_vectors", vectors=unflatten(noisy, bounds), layer=0)


def test_reads_token_vectors() -> None:
    # Light noise: the release is nearly the clean token embeddings.
    scores = run(_NoisyEmbeddings(), attributes=["age_bin"])
    assert set(scores) == {"age_bin"}
    assert scores["age_bin"]["advantage"] >= 0.1


def test_pooled_vectors_match_the_mean_embedding_of_text(tiny) -> None:
    class MeanEmbedding(Defense):
        """Releases each document's mean input embedding (zeros when it has no tokens)."""

        def privatize(self, texts, *, rng):
            rows = [
                tiny.embeddings[ids].mean(0) if len(ids) else np.zeros(tiny.dim, np.float32)
                for ids in tiny.token_ids(texts)
            ]
            return Release("pooled_vectors", vectors=rows)

    pooled = AttributeInference(backbone=TINY).fit(knowledge(MeanEmbedding()), rng=RNG(0))
    text = AttributeInference(backbone=TINY).fit(knowledge(NoDefense()), rng=RNG(0))
    texts = [*corpus().split("test")["text"][:50], "", "🙂"]  # two without tokens
    by_pooled = pooled.attack(MeanEmbedding().privatize(texts, rng=np.random.default_rng(0)))
    by_text = text.attack(Release("text", texts=texts))
    assert by_pooled.attributes == by_text.attributes
    assert len(by_pooled.attributes["gender"]) == len(texts)


def test_deterministic_and_leaves_global_rng_alone() -> None:
    k = knowledge(NoDefense())
    release, _ = victims(NoDefense())
    before = torch.get_rng_state()
    a = AttributeInference(backbone=TINY, epochs=5).fit(k, rng=RNG(3)).attack(release)
    assert torch.equal(before, torch.get_rng_state())
    b = AttributeInference(backbone=TINY, epochs=5).fit(k, rng=RNG(3)).attack(release)
    assert a.attributes == b.attributes
    c = AttributeInference(backbone=TINY, epochs=5).fit(k, rng=RNG(4)).attack(release)
    assert a.attributes != c.attributes


def test_predictions_carry_majority_and_classes() -> None:
    attack = AttributeInference(backbone=TINY, epochs=1, max_aux=100)
    attack.fit(knowledge(NoDefense()), rng=RNG(0))
    predictions = attack.attack(Release("text", texts=["a b"]))
    assert predictions.kind == "attributes"
    assert predictions.meta["classes"]["gender"] == ["F", "M"]
    assert len(predictions.meta["classes"]["age_bin"]) == 6
    assert predictions.meta["majority"]["gender"] in ("F", "M")
    assert attack.params()["backbone"] == TINY and "seed" not in attack.params()


def test_applicability_reasons() -> None:
    a = AttributeInference()
    assert AttributeInference.accepts == ALL_SPACES
    aux = corpus().split("aux")
    query = NoDefense().privatize
    black_box = Knowledge(white_box=False, query_mechanism=query, aux=aux)
    vectors = [np.zeros((2, 4), np.float32)]
    releases = [
        Release("text", texts=["a"]),
        Release("token_vectors", vectors=vectors, layer=0),
        Release("token_vectors", vectors=vectors, layer=3),
        Release("pooled_vectors", vectors=[np.zeros(4)]),
    ]
    for release in releases:
        assert a.applicable(release, black_box) is None
    text = releases[0]
    assert "query access" in (a.applicable(text, Knowledge(aux=aux)) or "")
    assert "auxiliary" in (a.applicable(text, Knowledge(query_mechanism=query)) or "")


@pytest.mark.parametrize(
    "params",
    [
        {"attributes": "gender"},
        {"hidden": 0},
        {"epochs": 2.5},
        {"lr": -1.0},
        {"max_aux": 1},
        {"batch_size": True},
        {"seed": 3},  # randomness comes from fit's rng only
    ],
)
def test_bad_parameters_fail_at_construction(params) -> None:
    with pytest.raises(ParamError, match=next(iter(params))):
        AttributeInference(**params)


def test_errors_are_explained() -> None:
    k = knowledge(NoDefense())
    with pytest.raises(ValueError, match=r"no attribute 'income'.*gender"):
        AttributeInference(backbone=TINY, attributes=["income"]).fit(k, rng=RNG(0))
    single = corpus().split("aux").filter(lambda row: row["attributes"]["gender"] == "F")
    with pytest.raises(ValueError, match="single value"):
        AttributeInference(backbone=TINY, attributes=["gender"]).fit(
            Knowledge(backbone=TINY, query_mechanism=k.query_mechanism, aux=single), rng=RNG(0)
        )
    with pytest.raises(ValueError, match="not fitted"):
        AttributeInference().attack(Release("text", texts=["x"]))
    with pytest.raises(ValueError, match="query access"):
        AttributeInference().fit(Knowledge(aux=corpus().split("aux")), rng=RNG(0))
    fitted = AttributeInference(backbone=TINY, epochs=1, max_aux=50).fit(k, rng=RNG(0))
    with pytest.raises(ValueError, match="fitted on a 'text'"):
        fitted.attack(Release("pooled_vectors", vectors=[np.zeros(32)]))
