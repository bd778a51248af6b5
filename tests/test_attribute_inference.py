"""attribute-inference (RAPT §IV-A2 / CAPE) and attribute scoring, on small synthetic data."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from privaudit.api import Defense, Knowledge, Predictions, Release
from privaudit.attacks.attribute_inference import AttributeInference, score_attributes
from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.defenses.embedding_dx import EmbeddingDX
from privaudit.defenses.none import NoDefense
from privaudit.defenses.t2t import T2T
from tests.conftest import TINY


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
    attack.fit(knowledge(defense, backbone, leak_rate))
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


def test_reads_token_vectors() -> None:
    # Light noise: the release is nearly the clean token embeddings.
    scores = run(EmbeddingDX(eta=1e4, backbone=TINY), attributes=["age_bin"])
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

    pooled = AttributeInference(backbone=TINY).fit(knowledge(MeanEmbedding()))
    text = AttributeInference(backbone=TINY).fit(knowledge(NoDefense()))
    texts = [*corpus().split("test")["text"][:50], "", "🙂"]  # two without tokens
    by_pooled = pooled.attack(MeanEmbedding().privatize(texts, rng=np.random.default_rng(0)))
    by_text = text.attack(Release("text", texts=texts))
    assert by_pooled.attributes == by_text.attributes
    assert len(by_pooled.attributes["gender"]) == len(texts)


def test_deterministic_and_leaves_global_rng_alone() -> None:
    k = knowledge(NoDefense())
    release, _ = victims(NoDefense())
    before = torch.get_rng_state()
    a = AttributeInference(backbone=TINY, epochs=5, seed=3).fit(k).attack(release)
    assert torch.equal(before, torch.get_rng_state())
    b = AttributeInference(backbone=TINY, epochs=5, seed=3).fit(k).attack(release)
    assert a.attributes == b.attributes
    c = AttributeInference(backbone=TINY, epochs=5, seed=4).fit(k).attack(release)
    assert a.attributes != c.attributes


def test_predictions_carry_majority_and_classes() -> None:
    attack = AttributeInference(backbone=TINY, epochs=1, max_aux=100)
    predictions = attack.fit(knowledge(NoDefense())).attack(Release("text", texts=["a b"]))
    assert predictions.kind == "attributes"
    assert predictions.meta["classes"]["gender"] == ["F", "M"]
    assert len(predictions.meta["classes"]["age_bin"]) == 6
    assert predictions.meta["majority"]["gender"] in ("F", "M")
    assert attack.fit_seconds > 0
    assert "fit_seconds" not in attack.params()  # params stay the constructor's


def test_applicability_reasons() -> None:
    a = AttributeInference()
    aux = corpus().split("aux")
    query = NoDefense().privatize
    black_box = Knowledge(white_box=False, query_mechanism=query, aux=aux)
    for kind in ("text", "token_vectors", "pooled_vectors"):
        assert a.applicable(kind, black_box) is None
    assert "query access" in (a.applicable("text", Knowledge(aux=aux)) or "")
    assert "auxiliary" in (a.applicable("text", Knowledge(query_mechanism=query)) or "")


def test_errors_are_explained() -> None:
    k = knowledge(NoDefense())
    with pytest.raises(ValueError, match=r"no attribute 'income'.*gender"):
        AttributeInference(backbone=TINY, attributes=["income"]).fit(k)
    single = corpus().split("aux").filter(lambda row: row["attributes"]["gender"] == "F")
    with pytest.raises(ValueError, match="single value"):
        AttributeInference(backbone=TINY, attributes=["gender"]).fit(
            Knowledge(backbone=TINY, query_mechanism=k.query_mechanism, aux=single)
        )
    with pytest.raises(ValueError, match="not fitted"):
        AttributeInference().attack(Release("text", texts=["x"]))
    with pytest.raises(ValueError, match="query access"):
        AttributeInference().fit(Knowledge(aux=corpus().split("aux")))
    fitted = AttributeInference(backbone=TINY, epochs=1, max_aux=50).fit(k)
    with pytest.raises(ValueError, match="fitted on a 'text'"):
        fitted.attack(Release("pooled_vectors", vectors=[np.zeros(32)]))


def test_score_attributes() -> None:
    predictions = Predictions(
        "attributes",
        attributes={"gender": ["F", "F", "M", "M"]},
        meta={"majority": {"gender": "F"}},
    )
    s = score_attributes({"gender": ["F", "M", "M", "M"]}, predictions)["gender"]
    assert s["accuracy"] == pytest.approx(0.75)
    assert s["majority_accuracy"] == pytest.approx(0.25)
    assert s["advantage"] == pytest.approx(0.5)
    assert s["macro_f1"] == pytest.approx((2 / 3 + 0.8) / 2)
    with pytest.raises(ValueError, match="returned 4 'gender' predictions for 3 victims"):
        score_attributes({"gender": ["F", "M", "M"]}, predictions)
    with pytest.raises(ValueError, match="not 'age_bin'"):
        score_attributes({"age_bin": ["x"] * 4}, predictions)
