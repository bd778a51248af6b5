"""The runner's scorers: every metric on hand-made predictions with known answers."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from privaudit.api import Predictions, Release
from privaudit.mechanisms.align import align_positions
from privaudit.metrics import (
    Truth,
    embedding_mse,
    entity_f1,
    metrics,
    score_attributes,
    score_predictions,
    text_similarity,
    token_f1,
)
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
        Predictions(
            "tokens",
            tokens=[[1, 2, 3], [4, 5]],
            vectors=[t.embeddings[[1, 2, 3]], t.embeddings[[4, 5]]],
        ),
        t,
        "embedding_mse",
    )
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
        assert metric in metrics(), f"{name} declares metric {metric!r}, which has no scorer"


def test_unknown_metric_and_kind_mismatch_are_explained() -> None:
    t = _truth()
    with pytest.raises(ValueError, match=r"Unknown metric 'bleu'.*token_recovery"):
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
    assert row["attack_details"] == {
        "settings": {"epochs": 1},
        "accuracy": 0.5,
        "majority_accuracy": 0.5,
    }
    assert row["family"] == "attribute[gender]"


def test_frequency_guess_is_the_token_baseline() -> None:
    from privaudit.metrics import frequency_guess

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
    assert s["balanced_accuracy"] == pytest.approx((1 + 2 / 3) / 2)
    assert s["majority_balanced_accuracy"] == pytest.approx(0.5)
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


# -------------------------------------------------------------------------------------------
# Issue 17: balanced accuracy, families, n/a without truth, truncated releases, cell records
# -------------------------------------------------------------------------------------------


def test_attribute_headline_is_balanced_accuracy_under_imbalance() -> None:
    t = Truth(tokens=[], attributes={"gender": ["F", "F", "F", "M"]})
    meta = {"majority": {"gender": "F"}}
    lazy = Predictions("attributes", attributes={"gender": ["F"] * 4}, meta=meta)
    (row,) = score_predictions(lazy, t, "attribute_accuracy")
    # Guessing the majority: 0.75 accurate (the old headline), but no better than chance.
    assert row["attack_details"]["accuracy"] == pytest.approx(0.75)
    assert row["attack_score"] == pytest.approx(0.5) == row["attack_baseline"]
    sharp = Predictions("attributes", attributes={"gender": ["F", "M", "F", "M"]}, meta=meta)
    (row,) = score_predictions(sharp, t, "attribute_accuracy")
    assert row["attack_score"] == pytest.approx((2 / 3 + 1) / 2)
    assert row["attack_details"]["accuracy"] == pytest.approx(0.75)
    assert row["outcome"].value() == pytest.approx(row["attack_score"], abs=1e-12)
    # A subset of victims: the outcome's documents are their test indices, unknown ones out.
    t.attributes["gender"] = ["F", None, "F", "M"]
    sub = Predictions(
        "attributes", attributes={"gender": ["M", "F", "M"]}, meta=meta | {"doc_indices": [1, 2, 3]}
    )
    (row,) = score_predictions(sub, t, "attribute_accuracy")
    assert row["outcome"].docs.tolist() == [2, 3]
    assert row["attack_score"] == 1.0


def test_attribute_without_known_values_is_not_scored() -> None:
    from privaudit.metrics import NotScorable

    t = Truth(tokens=[], attributes={"gender": ["F", "M"], "age_bin": [None, None]})
    both = Predictions(
        "attributes", attributes={"gender": ["F", "M"], "age_bin": ["18-24", "25-34"]}
    )
    rows = {r["target"]: r for r in score_predictions(both, t, "attribute_accuracy")}
    assert rows["gender"]["attack_score"] == 1.0
    assert rows["age_bin"]["status"] == "n/a" and "'age_bin'" in rows["age_bin"]["reason"]
    only_age = Predictions("attributes", attributes={"age_bin": ["18-24", "25-34"]})
    with pytest.raises(NotScorable, match="'age_bin'"):
        score_predictions(only_age, t, "attribute_accuracy")


def test_ner_without_entity_truth_is_not_scorable() -> None:
    """Issue 17 item 6a. Before: a corpus without entity annotations scored the ner attack F1 0
    (privacy 1.0, status ok), even against the undefended release. After: n/a, with why."""
    from privaudit.metrics import NotScorable

    t = Truth(
        tokens=[np.array([1]), np.array([2])], texts=["Alice in Paris.", "Bob."], entities=[[], []]
    )
    found = Predictions(
        "entities",
        entities=[[{"text": "Alice", "type": "PERSON"}], [{"text": "Bob", "type": "PERSON"}]],
    )
    assert np.isnan(entity_f1(t.entities, found.entities)["f1"])  # the old code said 0.0
    with pytest.raises(NotScorable, match="no victim has an entity annotation"):
        score_predictions(found, t, "entity_f1")
    t.entities = [[{"text": "Alice", "type": "PERSON"}], []]  # one annotated victim is enough
    (row,) = score_predictions(found, t, "entity_f1")
    assert row["family"] == "entity" and row["attack_score"] == pytest.approx(2 / 3)


def test_micro_f1_is_two_hits_over_predicted_plus_true() -> None:
    """The headline F1 and the outcome's reducer are one formula, edge cases included."""
    from collections import Counter

    from privaudit.metrics.multiset import multiset_counts, prf
    from privaudit.metrics.outcomes import Outcome

    cases = [  # (truth, guess) multisets per document
        [(Counter("abc"), Counter("abd")), (Counter("xy"), Counter("x"))],  # ordinary
        [(Counter("abc"), Counter())],  # nothing predicted: F1 0
        [(Counter("abc"), Counter("xyz"))],  # nothing right: F1 0
        [(Counter(), Counter("xyz"))],  # nothing to find: undefined
        [(Counter(), Counter())],  # nothing at all: undefined
        [(Counter("aab"), Counter("aaab"))],  # multiplicities
    ]
    for docs in cases:
        s = prf(multiset_counts(docs))
        hit = sum(sum((t & g).values()) for t, g in docs)
        pred = sum(sum(g.values()) for _, g in docs)
        true = sum(sum(t.values()) for t, _ in docs)
        f1 = Outcome.f1([hit], [pred], [true]).value()
        if true == 0:
            assert np.isnan(s["f1"]) and np.isnan(f1)
            continue
        assert s["f1"] == pytest.approx(2 * hit / (pred + true), abs=1e-15)
        assert f1 == pytest.approx(s["f1"], abs=1e-15)
        p, r = s["precision"], s["recall"]
        assert s["f1"] == pytest.approx(2 * p * r / (p + r) if p + r else 0.0)


def _long_truth() -> Truth:
    text = "aa bb cc dd ee"
    return Truth(
        tokens=[np.array([11, 12, 13, 14, 15])],
        texts=[text],
        entities=[
            [
                {"text": "bb", "start": 3, "end": 5, "type": "X"},
                {"text": "ee", "start": 12, "end": 14, "type": "X"},
            ]
        ],
        piece_positions=[np.arange(5)],
        token_ends=[np.array([2, 5, 8, 11, 14])],
        embeddings=np.arange(40, dtype=np.float32).reshape(20, 2),
        frequent_token=11,
    )


def test_a_truncated_release_is_scored_on_what_it_holds() -> None:
    """Issue 17 item 6c. SAP cuts a document to 126 content tokens; the cut tokens never left
    the device. Before: perfect recovery of the released part scored below 1 (0.6 here, 0.938
    on long real reviews). After: 1.0, with the cut reported."""
    from privaudit.metrics import released_token_counts

    t = _long_truth()
    perfect = Predictions("tokens", tokens=[[11, 12, 13]])
    (before,) = score_predictions(perfect, t, "token_recovery")  # no release: the old scoring
    assert before["attack_score"] == pytest.approx(3 / 5)
    layer0 = Release("token_vectors", vectors=[np.zeros((3, 2))], layer=0)
    (row,) = score_predictions(perfect, t, "token_recovery", layer0)
    assert row["attack_score"] == 1.0
    assert row["attack_details"]["truncated_tokens"] == 2
    assert row["attack_details"]["truncated_documents"] == 1
    assert row["attack_baseline"] == pytest.approx(1 / 3)  # the baseline on the same part
    # A split model's hidden states: [CLS] + 3 pieces + [SEP] hold 3 content positions ...
    hidden = Release("token_vectors", vectors=[np.zeros((5, 2))], layer=1)
    assert released_token_counts(t, hidden) == [3]
    (row,) = score_predictions(perfect, t, "token_f1", hidden)
    assert row["attack_score"] == 1.0
    # An attack on a subset (optimization-inversion's first victims) is cut the same way.
    two = Truth(tokens=[np.array([1, 2]), *t.tokens], texts=["x y", *t.texts])
    subset = Predictions("tokens", tokens=[[11, 12, 13]], meta={"doc_indices": [1]})
    hidden2 = Release("token_vectors", vectors=[np.zeros((4, 2)), np.zeros((5, 2))], layer=1)
    (row,) = score_predictions(subset, two, "token_f1", hidden2)
    assert row["attack_score"] == 1.0 and row["outcome"].docs.tolist() == [1]
    assert row["attack_details"]["truncated_tokens"] == 2  # the attacked victim's only
    # ... of which an [UNK] piece (dropped from the truth) takes one.
    t.piece_positions = [np.array([0, 2, 3, 4, 5])]
    assert released_token_counts(t, hidden) == [2]
    # The text and its entities are cut where the last released token ends.
    cut, n_tokens, n_docs = t.cut([3])
    assert cut.texts == ["aa bb cc"] and [e["text"] for e in cut.entities[0]] == ["bb"]
    assert (n_tokens, n_docs) == (2, 1) and cut.tokens[0].tolist() == [11, 12, 13]
    # Releases that hold everything, and text releases, change nothing.
    whole = Release("token_vectors", vectors=[np.zeros((5, 2))], layer=0)
    (row,) = score_predictions(
        Predictions("tokens", tokens=[[11, 12, 13, 14, 15]]), t, "token_recovery", whole
    )
    assert row["attack_score"] == 1.0 and "truncated_tokens" not in row["attack_details"]
    text = Release("text", texts=["aa bb cc"])
    (row,) = score_predictions(perfect, t, "token_recovery", text)
    assert row["attack_score"] == pytest.approx(3 / 5)


def test_embedding_mse_has_a_frequent_token_baseline() -> None:
    t = _long_truth()
    vectors = [t.embeddings[[11, 12, 13]] + 0.5]
    p = Predictions("tokens", tokens=[[11, 12, 13]], vectors=vectors)
    layer0 = Release("token_vectors", vectors=[np.zeros((3, 2))], layer=0)
    (row,) = score_predictions(p, t, "embedding_mse", layer0)
    assert row["attack_score"] == pytest.approx(0.25) == row["empirical_privacy"]
    # Guessing token 11's embedding at the 3 released positions: squared distances 0, 8, 32.
    assert row["attack_baseline"] == pytest.approx((0 + 8 + 32) / 6)
    assert row["baseline_outcome"].value() == pytest.approx(row["attack_baseline"], abs=1e-12)
    t.frequent_token = None
    (row,) = score_predictions(p, t, "embedding_mse", layer0)
    assert "attack_baseline" not in row and row["baseline_outcome"] is None


def test_bow_and_geia_score_entities_in_a_second_row() -> None:
    t = _truth()
    vocab = ["alice", "lives", "paris", "bob", "works", "acme"]
    bow = Predictions(
        "tokens", tokens=[[0, 1], [3]], meta={"vocabulary": vocab, "baseline_tokens": [1]}
    )
    head, ents = score_predictions(bow, t, "word_set_f1")
    assert (head["family"], head["target"]) == ("text", "")
    assert (ents["family"], ents["target"]) == ("entity", "entities")
    assert ents["attack_score"] == pytest.approx(2 / 4)  # alice, bob of alice, paris, bob, acme
    assert ents["empirical_privacy"] == pytest.approx(0.5)
    assert ents["attack_baseline"] == 0.0
    assert head["attack_details"]["entity_word_recovery"] == ents["attack_score"]
    geia = Predictions(
        "texts",
        texts=["Alice lives in Paris.", "Someone works."],
        meta={"baseline_text": "Bob works."},
    )
    head, ents = score_predictions(geia, t, "generation_f1")
    assert ents["attack_score"] == pytest.approx(2 / 4)
    assert ents["attack_baseline"] == pytest.approx(1 / 4)  # "Bob" in the second victim's
    assert head["attack_details"]["entity_recovery"] == ents["attack_score"]
    t.entities = [[], []]  # no entity truth: the headline only
    assert len(score_predictions(bow, t, "word_set_f1")) == 1
    assert len(score_predictions(geia, t, "generation_f1")) == 1


def test_families() -> None:
    from privaudit.metrics import family_of

    assert family_of("token_recovery") == family_of("generation_f1") == "text"
    assert family_of("entity_f1") == family_of("text_similarity") == "entity"
    assert family_of("word_set_f1", "entities") == "entity"
    assert family_of("attribute_accuracy", "gender") == "attribute[gender]"
    with pytest.raises(ValueError, match="bleu"):
        family_of("bleu")


# -- cell records ---------------------------------------------------------------------------


def _fake_context(
    truth: Truth, attacks: dict[str, Any], defense: Any = None, evaluator: Any = None
) -> Any:
    from types import SimpleNamespace

    from privaudit.defenses.none import NoDefense

    d = defense or NoDefense()
    return SimpleNamespace(
        defense=lambda point: d,
        train_texts=["a b", "c d", "e f"],
        test_texts=list(truth.texts),
        y_train=np.array([0, 1, 0]),
        y_test=np.array([0, 1, 1])[: len(truth.texts)],
        evaluator=evaluator or _Evaluator(),
        train_attributes={},
        config=SimpleNamespace(show_examples=False, backbone=None),
        n_words=10,
        aux=None,
        attacks=attacks,
        plans={label: {} for label in attacks},
        truth=truth,
    )


class _Evaluator:
    name, version, metric = "fake", "1", "balanced_accuracy"

    def __init__(self, answer: dict[str, Any] | None = None) -> None:
        self.answer = answer

    def evaluate_releases(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        if self.answer is not None:
            return dict(self.answer)
        # Test labels [0, 1], predictions [0, 0]: balanced accuracy 0.5 (accuracy is not
        # checked against the predictions, so a distinct value shows where it goes).
        return {
            "accuracy": 0.6,
            "balanced_accuracy": 0.5,
            "macro_f1": 0.4,
            "predictions": [0, 0],
            "objective": "none",
        }


def _ner_attack() -> Any:
    from privaudit.api import Attack, Space

    class FakeNER(Attack):
        name = "fake-ner"
        accepts = frozenset({Space.TEXT})
        metric = "entity_f1"

        def attack(self, release: Release) -> Predictions:
            return Predictions(
                "entities",
                entities=[[{"text": "Alice", "type": "PERSON"}] for _ in release.texts or []],
            )

    return FakeNER()


def _task(attacks: dict[str, Any]) -> Any:
    from privaudit.audit.cells import Task
    from privaudit.audit.plan import Point

    point = Point(label="none", spec=0, defense="none", knob_value=None, target_rate=None, seed=0)
    return Task(point=point, point_key="point", attack_keys={k: f"cell-{k}" for k in attacks})


def test_cell_records_carry_outcomes_and_n_a_without_truth() -> None:
    from privaudit.audit.cells import compute
    from privaudit.metrics.outcomes import Outcome

    attacks = {"ner": _ner_attack()}
    truth = Truth(
        tokens=[np.array([1]), np.array([2])],
        texts=["Alice lives in Paris.", "Bob."],
        entities=[[], []],
    )
    records = dict(compute(_fake_context(truth, attacks), _task(attacks)))
    json.dumps(records)  # the store json-dumps records
    point = records["point"]
    assert point["utility"] == 0.5 and point["utility_metric"] == "balanced_accuracy"
    assert point["utility_accuracy"] == 0.6 and point["utility_macro_f1"] == 0.4
    assert point["objective"] == "none"
    assert Outcome.from_record(point["utility_outcome"]).value() == 0.5
    assert "predictions" not in point
    # No entity annotation anywhere: n/a with the reason, not privacy 1.0; the attack ran.
    cell = records["cell-ner"]
    (row,) = cell["rows"]
    assert cell["status"] == row["status"] == "n/a"
    assert "no victim has an entity annotation" in row["reason"]
    assert row["attack_seconds"] >= 0 and row["family"] == "entity"
    truth.entities = [[{"text": "Alice", "type": "PERSON", "start": 0, "end": 5}], []]
    records = dict(compute(_fake_context(truth, attacks), _task(attacks)))
    json.dumps(records)
    (row,) = records["cell-ner"]["rows"]
    assert row["status"] == "ok" and row["family"] == "entity"
    assert Outcome.from_record(row["outcome"]).value() == pytest.approx(row["attack_score"])
    assert row["baseline_outcome"] is None


def test_utility_fields_fall_back_for_an_accuracy_only_evaluator() -> None:
    from privaudit.audit.cells import compute, utility_fields

    truth = Truth(tokens=[np.array([1]), np.array([2])], texts=["a", "b"])
    ev = _Evaluator({"accuracy": 0.5, "macro_f1": 0.4})
    ev.metric = "accuracy"
    ((_, point),) = compute(_fake_context(truth, {}, evaluator=ev), _task({}))
    assert point["utility"] == 0.5 and point["utility_metric"] == "accuracy"
    assert point["utility_outcome"] is None and point["objective"] is None
    # Predictions that contradict the reported balanced accuracy are a broken evaluator.
    with pytest.raises(ValueError, match=r"reported balanced accuracy 0\.900000"):
        utility_fields({"balanced_accuracy": 0.9, "predictions": [1, 0]}, "x", [0, 1])
    with pytest.raises(ValueError, match="3 predictions for 2 test documents"):
        utility_fields({"predictions": [1, 0, 1]}, "x", [0, 1])


def test_privatize_seconds_charge_memoised_work() -> None:
    """Item 6e: a point that finds its work memoised is charged what the memo saved."""
    import time

    from privaudit.api import Defense
    from privaudit.audit.cells import compute
    from privaudit.runtime.memo import ContentMemo, digest

    memo = ContentMemo(size=4)

    class Slow(Defense):
        name = "slow"

        def privatize(self, texts: Any, *, rng: np.random.Generator) -> Release:
            memo.get(digest(list(texts)), lambda: (time.sleep(0.05), np.zeros(1))[1])
            return Release("text", texts=list(texts))

    truth = Truth(tokens=[np.array([1]), np.array([2])], texts=["a", "b"])
    ctx = _fake_context(truth, {}, defense=Slow())
    first = dict(compute(ctx, _task({})))["point"]["privatize_seconds"]
    second = dict(compute(ctx, _task({})))["point"]["privatize_seconds"]
    assert memo.hits == 2  # the second point found both splits memoised
    assert first >= 0.1 and second >= 0.1


def test_token_layout_matches_the_truth_tokens(tiny: Any) -> None:
    from privaudit.audit.cells import _token_layout

    texts = ["Hello wörld ☃ café", "", "plain words here"]
    tokens = tiny.token_ids(texts)
    pieces, ends = _token_layout(tiny, texts, tokens)
    assert [len(p) for p in pieces] == [len(t) for t in tokens]
    assert pieces[0].tolist() == [0, 1, 3]  # the snowman is an [UNK] piece, dropped
    assert texts[0][: ends[0][1]] == "Hello wörld"
    assert _token_layout(tiny, texts, [t[:-1] for t in tokens]) == ([], [])
