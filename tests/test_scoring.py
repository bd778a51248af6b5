"""The runner's scorers: every metric on hand-made predictions with known answers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privaudit.api import Predictions, Release
from privaudit.audit.scoring import (
    METRICS,
    Truth,
    embedding_mse,
    entity_f1,
    score_attributes,
    score_predictions,
    text_similarity,
    token_f1,
)
from privaudit.mechanisms.align import align_positions
from privaudit.registry import ATTACKS


def _truth() -> Truth:
    emb = np.arange(20, dtype=np.float32).reshape(10, 2)
    return Truth(
        tokens=[np.array([1, 2, 3]), np.array([4, 5])],
        texts=["Alice lives in Paris.", "Bob works at Acme."],
        entities=[
            [{"text": "Alice", "type": "PERSON"}, {"text": "Paris", "type": "GPE"}],
            [{"text": "Bob", "type": "PERSON"}, {"text": "Acme", "type": "ORG"}],
        ],
        embeddings=emb,
    )


def test_align_positions_equal_and_retokenized() -> None:
    i, j = align_positions([1, 2, 3], [7, 8, 9])
    assert i.tolist() == j.tolist() == [0, 1, 2]
    i, j = align_positions([1, 2, 3, 4], [1, 9, 9, 9, 4])  # one token became three
    assert (0, 0) in zip(i.tolist(), j.tolist(), strict=True)
    assert (3, 4) in zip(i.tolist(), j.tolist(), strict=True)
    assert len(i) == len(j) <= 4
    i, j = align_positions([], [1, 2])
    assert len(i) == len(j) == 0


def test_token_f1_is_a_bag_of_tokens_score() -> None:
    s = token_f1([[1, 2, 3], [4, 5]], [[3, 2, 1], [4, 4, 9]])
    assert s["precision"] == pytest.approx(4 / 6)
    assert s["recall"] == pytest.approx(4 / 5)
    assert s["f1"] == pytest.approx(2 * (4 / 6) * (4 / 5) / (4 / 6 + 4 / 5))
    with pytest.raises(ValueError, match="documents"):
        token_f1([[1]], [])


def test_entity_f1_ignores_unannotated_types_and_normalises() -> None:
    truth = _truth().entities
    guess = [
        [{"text": "alice", "type": "PERSON"}, {"text": "3", "type": "CARDINAL"}],
        [{"text": "Bob ", "type": "PERSON"}, {"text": "Acme", "type": "GPE"}],
    ]
    s = entity_f1(truth, guess)
    assert s["precision"] == pytest.approx(2 / 3)  # CARDINAL ignored, Acme/GPE wrong type
    assert s["recall"] == pytest.approx(2 / 4)


def test_text_similarity_and_entity_recovery() -> None:
    t = _truth()
    same = text_similarity(t.texts, t.texts, t.entities)
    assert same == {"similarity": 1.0, "entity_recovery": 1.0}
    hidden = text_similarity(
        t.texts, ["<PERSON_1> lives in <GPE_1>.", "Bob works at X."], t.entities
    )
    assert 0 < hidden["similarity"] < 1
    assert hidden["entity_recovery"] == pytest.approx(1 / 4)


def test_embedding_mse_pairs_positions() -> None:
    t = _truth()
    exact = [t.embeddings[[1, 2, 3]], t.embeddings[[4, 5]]]
    p = Predictions("tokens", tokens=[[1, 2, 3], [4, 5]], vectors=exact)
    assert embedding_mse(t, p) == 0.0
    off = [v + 1.0 for v in exact]
    p = Predictions("tokens", tokens=[[1, 2, 3], [4, 5]], vectors=off)
    assert embedding_mse(t, p) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="vectors"):
        embedding_mse(t, Predictions("tokens", tokens=[[1]]))


def test_score_predictions_rows_and_subsets() -> None:
    t = _truth()
    rows = score_predictions(
        Predictions("tokens", tokens=[[4, 5]], meta={"doc_indices": [1], "settings": {"s": 3}}),
        t,
        "token_f1",
    )
    assert rows[0]["attack_score"] == 1.0 and rows[0]["empirical_privacy"] == 0.0
    assert rows[0]["attack_details"]["n_attacked"] == 1
    json.dumps(rows[0]["attack_details"])
    with pytest.raises(ValueError, match="doc_indices"):
        score_predictions(
            Predictions("tokens", tokens=[[1]], meta={"doc_indices": [7]}), t, "token_recovery"
        )
    mse = score_predictions(
        Predictions("tokens", tokens=[[1, 2, 3], [4, 5]], vectors=[t.embeddings[[1, 2, 3]],
                    t.embeddings[[4, 5]]]), t, "embedding_mse")  # fmt: skip
    assert mse[0]["empirical_privacy"] == 0.0 and mse[0]["attack_details"]["token_recovery"] == 1
    released = Release("text", texts=["<PERSON_1> lives in <GPE_1>.", "<PERSON_1> works at Acme."])
    rows = score_predictions(Predictions("texts", texts=t.texts), t, "text_similarity", released)
    assert rows[0]["attack_score"] == 1.0
    assert rows[0]["attack_baseline"] < 1.0
    ents = score_predictions(Predictions("entities", entities=t.entities), t, "entity_f1")
    assert ents[0]["attack_score"] == 1.0
    with pytest.raises(ValueError, match="Token predictions expected"):
        score_predictions(Predictions("tokens"), t, "token_recovery")
    # Attacking a subset: the release no longer lines up with the truth, so no baseline.
    subset = Predictions("texts", texts=t.texts[1:], meta={"doc_indices": [1]})
    (row,) = score_predictions(subset, t, "text_similarity", released)
    assert row["attack_score"] == 1.0 and "attack_baseline" not in row


def test_every_builtin_attack_metric_has_a_scorer() -> None:
    for name in ATTACKS.builtins():
        metric = ATTACKS.get(name).metric
        assert metric in METRICS, f"{name} declares metric {metric!r}, which has no scorer"


def test_unknown_metric_and_kind_mismatch_are_explained() -> None:
    t = _truth()
    with pytest.raises(ValueError, match=r"No scorer for metric 'bleu'.*token_recovery"):
        score_predictions(Predictions("tokens", tokens=[[1, 2, 3], [4, 5]]), t, "bleu")
    with pytest.raises(ValueError, match="scores 'texts' predictions, got 'tokens'"):
        score_predictions(Predictions("tokens", tokens=[[1, 2, 3], [4, 5]]), t, "text_similarity")


def test_attribute_rows() -> None:
    t = _truth()
    t.attributes = {"gender": ["F", "M"], "age_bin": ["18-24", None]}
    predictions = Predictions(
        "attributes",
        attributes={"gender": ["F", "F"]},
        meta={"majority": {"gender": "M"}, "settings": {"epochs": 1}},
    )
    (row,) = score_predictions(predictions, t, "attribute_accuracy")
    assert row["target"] == "gender"  # only the predicted attributes are scored
    assert row["attack_score"] == 0.5 and row["empirical_privacy"] == 0.5
    assert row["attack_baseline"] == 0.5
    assert row["attack_macro_f1"] == pytest.approx((2 / 3 + 0) / 2)
    assert row["attack_details"] == {"settings": {"epochs": 1}}


def test_frequency_guess_is_the_token_baseline() -> None:
    from privaudit.audit.scoring import frequency_guess

    truth = _truth()
    truth.tokens = [np.array([7, 7, 3]), np.array([7, 5])]
    assert frequency_guess(truth.tokens, 7) == pytest.approx(3 / 5)
    assert np.isnan(frequency_guess(truth.tokens, None)) and np.isnan(frequency_guess([], 7))
    guess = Predictions(kind="tokens", tokens=[[7, 7, 7], [7, 7]])
    (row,) = score_predictions(guess, truth, "token_recovery")
    assert "attack_baseline" not in row  # the runner did not say what the aux favourite is
    truth.frequent_token = 7
    (row,) = score_predictions(guess, truth, "token_recovery")
    assert row["attack_baseline"] == pytest.approx(0.6) == row["attack_score"]
    assert row["attack_details"]["frequency_guess"] == pytest.approx(0.6)
    one = Predictions(kind="tokens", tokens=[[7, 7]], meta={"doc_indices": [1]})
    (row,) = score_predictions(one, truth, "token_f1")
    assert row["attack_baseline"] == pytest.approx(0.5)


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
    unknown = score_attributes({"gender": [None] * 4}, predictions)["gender"]
    assert all(np.isnan(v) for v in unknown.values())


def test_knowledge_query_checks_the_mechanism_contract() -> None:
    from privaudit.api import Knowledge, Release

    good = Knowledge(
        query_mechanism=lambda texts: Release("text", texts=list(texts), audit={"secret": 1})
    )
    out = good.query(["a b", "c"])
    assert out.texts == ["a b", "c"] and out.audit == {}  # the attacker's view only
    with pytest.raises(ValueError, match="no query access"):
        Knowledge().query(["a"])
    with pytest.raises(TypeError, match="expected a Release"):
        Knowledge(query_mechanism=lambda texts: list(texts)).query(["a"])
    with pytest.raises(ValueError, match="one document per input"):
        Knowledge(query_mechanism=lambda texts: Release("text", texts=["x"])).query(["a", "b"])
