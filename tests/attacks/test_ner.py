"""ner (RAPT §IV-A3): spaCy NER on released text, and the fine-tuned tagger on the tiny BERT."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from privaudit.api import Knowledge, Predictions, Release, Space
from privaudit.attacks.ner import NERAttack, _decode
from privaudit.metrics import entity_f1
from privaudit.params import ParamError
from privaudit.registry import ATTACKS
from tests.conftest import TINY

pytestmark = pytest.mark.slow  # loads the spaCy pipeline (once per process)


@functools.cache
def corpus():
    from privaudit.corpora.synthetic import synthetic_reviews

    return synthetic_reviews(n_docs=300, seed=0)  # test: ~60 docs, aux: ~60 docs


def fit(attack: NERAttack, knowledge: Knowledge, seed: int = 0) -> NERAttack:
    return attack.fit(knowledge, rng=np.random.default_rng(seed))


def attack_texts(texts: list[str], plain_prefix: int = 0, **params) -> Predictions:
    attack = fit(NERAttack(**params), Knowledge(white_box=False))
    return attack.attack(Release("text", texts=texts, plain_prefix=plain_prefix))


def test_registered_and_declared() -> None:
    cls = ATTACKS.get("ner")
    assert cls is NERAttack
    assert cls.accepts == frozenset({Space.TEXT})
    assert cls.metric == "entity_f1"
    assert not (cls.needs_white_box or cls.needs_query or cls.needs_aux)


def test_finds_entities_in_clean_text() -> None:
    c = corpus()
    texts, truth = c.texts("test"), c.entities("test")
    predictions = attack_texts(texts)
    assert predictions.kind == "entities"
    assert len(predictions.entities) == len(texts)
    for doc, text in zip(predictions.entities, texts, strict=True):
        for e in doc:
            assert set(e) == {"text", "type"}
            assert e["text"] and e["text"] in text
    # Measured 0.69 on the quick preset's 400 test documents.
    assert entity_f1(truth, predictions.entities)["f1"] > 0.5


def test_placeholders_hide_the_entities() -> None:
    c = corpus()
    texts, truth = c.texts("test"), c.entities("test")
    hidden = []
    for text, ents in zip(texts, truth, strict=True):
        for e in sorted(ents, key=lambda e: -e["start"]):
            text = text[: e["start"]] + f"<{e['type']}_1>" + text[e["end"] :]
        hidden.append(text)
    assert entity_f1(truth, attack_texts(hidden).entities)["f1"] < 0.05


def test_rapt_plain_prefix_is_skipped() -> None:
    text = "Sarah Jones flew from Paris to Berlin on Monday."
    plain = attack_texts(["London Smith " + text], plain_prefix=2)
    found = {e["text"] for e in plain.entities[0]}
    assert "London" not in found and "London Smith" not in found
    assert found & {"Paris", "Berlin"}


def test_empty_inputs() -> None:
    assert attack_texts([]).entities == []
    predictions = attack_texts(["", "   ", "no entities here at all"])
    assert predictions.entities[:2] == [[], []]


def test_deterministic() -> None:
    texts = corpus().texts("test")[:20]
    assert attack_texts(texts).entities == attack_texts(texts).entities


def test_applicability() -> None:
    attack = NERAttack()
    k = Knowledge(white_box=False)
    text = Release("text", texts=["x"])
    assert attack.applicable(text, k) is None
    vectors = [np.zeros((2, 4), np.float32)]
    for release in (
        Release("token_vectors", vectors=vectors, layer=0),
        Release("pooled_vectors", vectors=[np.zeros(4)]),
    ):
        assert "reads text releases" in attack.applicable(release, k)
    assert "aux" in NERAttack(model="finetuned").applicable(text, k)
    assert (
        NERAttack(model="finetuned").applicable(text, Knowledge(aux=corpus().split("aux"))) is None
    )


@pytest.mark.parametrize(
    "params",
    [
        {"model": 3},
        {"model": "spcy"},
        {"epochs": 1.5},
        {"lr": "fast"},
        {"max_length": 4},
        {"spacy_model": ""},
        {"seed": 3},  # randomness comes from fit's rng only
    ],
)
def test_bad_parameters_fail_at_construction(params) -> None:
    with pytest.raises(ParamError, match=next(iter(params))):
        NERAttack(**params)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="aux"):
        fit(NERAttack(model="finetuned", backbone=TINY), Knowledge())
    with pytest.raises(ValueError, match="not fitted"):
        NERAttack(model="finetuned").attack(Release("text", texts=["x"]))
    attack = fit(NERAttack(), Knowledge())
    with pytest.raises(ValueError, match="released text"):
        attack.attack(Release("pooled_vectors", vectors=[np.zeros(3)]))
    with pytest.raises(TypeError, match="Release"):
        attack.attack(["a text"])
    with pytest.raises(TypeError, match="not a string"):
        attack.attack(Release("text", texts=["ok", 3]))


def test_decode_bio() -> None:
    tags = ["O", "B-PERSON", "I-PERSON", "B-GPE", "I-GPE"]
    text = "Sarah Jones visited Newcastle"
    offsets = [(0, 0), (0, 5), (6, 11), (12, 19), (20, 23), (23, 29), (0, 0)]
    # "Newcastle" in two pieces: the second piece continues the word whatever its tag.
    spans = _decode(text, offsets, np.array([0, 1, 2, 0, 3, 0, 0]), tags)
    assert [(text[s:e], t) for s, e, t in spans] == [
        ("Sarah Jones", "PERSON"),
        ("Newcastle", "GPE"),
    ]


def test_finetuned_tagger_on_tiny_backbone() -> None:
    c = corpus()
    aux = c.split("aux")
    knowledge = Knowledge(white_box=False, backbone=TINY, aux=aux)
    release = Release("text", texts=c.texts("test")[:30])

    def run(seed: int) -> list:
        attack = fit(NERAttack(model="finetuned", epochs=2, lr=1e-3), knowledge, seed)
        assert attack.backbone is None  # the declared value; fit resolved knowledge's
        predictions = attack.attack(release)
        assert predictions.meta["settings"]["backbone"] == TINY
        return predictions.entities

    first = run(3)
    assert len(first) == 30
    assert first == run(3)  # the same rng seed: the same entities again
    types = {e["type"] for doc in first for e in doc}
    assert types <= {e["type"] for doc in aux["entities"] for e in doc}
    for doc, text in zip(first, release.texts, strict=True):
        assert all(e["text"] in text for e in doc)
