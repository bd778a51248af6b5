"""has-deanonymization (HaS §3.3): learn from queried aux pairs, recover the hidden entities."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from privaudit.api import Knowledge, Release, Space
from privaudit.attacks._has_spans import Aligner, find_spans, merge_spans, span_contexts
from privaudit.attacks._has_white_box import surrogate_shape
from privaudit.attacks.has_deanonymization import HaSDeanonymization
from privaudit.defenses.has import HideAndSeek
from privaudit.metrics import text_similarity
from privaudit.params import ParamError
from privaudit.registry import ATTACKS

pytestmark = pytest.mark.slow  # loads the spaCy pipeline (once per process)


@functools.cache
def corpus():
    from privaudit.corpora.synthetic import synthetic_reviews

    return synthetic_reviews(n_docs=500, seed=0)  # aux ~100 docs, test ~100 docs


def knowledge(defense: HideAndSeek, white_box: bool = True) -> Knowledge:
    return Knowledge(
        white_box=white_box,
        query_mechanism=lambda texts: defense.privatize(texts, rng=np.random.default_rng(1)),
        aux=corpus().split("aux"),
    )


def fit(attack: HaSDeanonymization, knowledge: Knowledge) -> HaSDeanonymization:
    return attack.fit(knowledge, rng=np.random.default_rng(0))


@functools.cache
def victims(mode: str, level: int) -> tuple[list[str], Release, list]:
    c = corpus()
    texts = c.texts("test")
    release = HideAndSeek(mode=mode, level=level).privatize(texts, rng=np.random.default_rng(2))
    return texts, release.public(), c.entities("test")


@functools.cache
def run(mode: str, level: int, white_box: bool) -> tuple[dict, dict, list[str]]:
    texts, release, entities = victims(mode, level)
    defense = HideAndSeek(mode=mode, level=level)
    attack = fit(HaSDeanonymization(white_box=white_box), knowledge(defense))
    predictions = attack.attack(release)
    assert predictions.kind == "texts"
    assert len(predictions.texts) == len(texts)
    recovered = text_similarity(texts, predictions.texts, entities)
    baseline = text_similarity(texts, release.texts, entities)
    return recovered, baseline, predictions.texts


def test_registered_and_declared() -> None:
    cls = ATTACKS.get("has-deanonymization")
    assert cls is HaSDeanonymization
    assert cls.accepts == frozenset({Space.TEXT})
    assert cls.metric == "text_similarity"
    assert cls.needs_query and cls.needs_aux and not cls.needs_white_box


@pytest.mark.parametrize("white_box", [False, True])
def test_label_mode_recovery_beats_doing_nothing(white_box: bool) -> None:
    recovered, baseline, texts = run("label", 4, white_box)
    # Measured on the quick preset (400 victims): 0.885 → 0.925 (black and white box).
    assert recovered["similarity"] > baseline["similarity"] + 0.02
    assert recovered["entity_recovery"] > baseline["entity_recovery"]
    assert not any("<DATE_" in t or "<PERSON_" in t for t in texts)


@pytest.mark.parametrize("white_box", [False, True])
def test_generative_mode_recovery_beats_doing_nothing(white_box: bool) -> None:
    recovered, baseline, _ = run("generative", 4, white_box)
    # Measured on the quick preset: 0.900 → 0.919 (black box), 0.923 (white box).
    assert recovered["similarity"] > baseline["similarity"] + 0.005


def test_white_box_substitutes_one_placeholder_consistently() -> None:
    release = Release(
        "text",
        texts=["<PERSON_1> met <PERSON_2> at the hotel. Later <PERSON_1> left."],
        meta={"defense": "has", "mode": "label", "entity_types": ["PERSON"], "level": 1},
    )
    attack = fit(HaSDeanonymization(white_box=True), knowledge(HideAndSeek(level=1)))
    text = attack.attack(release).texts[0]
    first, rest = text.split(" met ")
    second = rest.split(" at the hotel")[0]
    assert "<PERSON" not in text
    assert text.endswith(f"Later {first} left.")  # same placeholder, same guess
    assert first != second  # distinct placeholders stand for distinct originals


def test_deterministic() -> None:
    _, release, _ = victims("generative", 2)
    defense = HideAndSeek(mode="generative", level=2)
    outs = [
        HaSDeanonymization().fit(knowledge(defense), rng=np.random.default_rng(seed))
        for seed in (0, 1)
    ]
    assert outs[0].attack(release).texts == outs[1].attack(release).texts


def test_applicability() -> None:
    attack = HaSDeanonymization()
    k = knowledge(HideAndSeek())

    def text(**meta) -> Release:
        return Release("text", texts=["x"], meta=meta)

    assert attack.applicable(text(defense="has", mode="label"), k) is None
    assert "Hide-and-Seek" in attack.applicable(text(defense="t2t", eta=10.0), k)
    vectors = Release("token_vectors", vectors=[np.zeros((2, 4))], layer=0, meta={"defense": "has"})
    assert "reads text releases" in attack.applicable(vectors, k)
    assert "query" in attack.applicable(text(defense="has"), Knowledge(aux=k.aux))
    assert "aux" in attack.applicable(
        text(defense="has"), Knowledge(query_mechanism=k.query_mechanism)
    )
    white = HaSDeanonymization(white_box=True)
    blind = Knowledge(white_box=False, query_mechanism=k.query_mechanism, aux=k.aux)
    assert "white_box" in white.applicable(text(defense="has"), blind)
    assert attack.applicable(text(defense="has"), blind) is None


def test_empty_inputs() -> None:
    attack = fit(HaSDeanonymization(), knowledge(HideAndSeek(level=2)))
    meta = {"defense": "has", "mode": "label", "level": 2}
    assert attack.attack(Release("text", texts=[], meta=meta)).texts == []
    out = attack.attack(Release("text", texts=["", "  ", "nothing hidden"], meta=meta)).texts
    assert out == ["", "  ", "nothing hidden"]


@pytest.mark.parametrize(
    "params",
    [
        {"white_box": "yes"},
        {"context_words": 0},
        {"context_words": 7},
        {"context_words": 2.5},
        {"k_neighbours": "many"},
        {"doc_weight": -1.0},
        {"max_aux": 0},
        {"spacy_model": ""},
    ],
)
def test_bad_parameters_fail_at_construction(params) -> None:
    with pytest.raises(ParamError, match=next(iter(params))):
        HaSDeanonymization(**params)


def test_bad_input() -> None:
    k = knowledge(HideAndSeek(level=2))
    with pytest.raises(ValueError, match="query"):
        fit(HaSDeanonymization(), Knowledge(aux=k.aux))
    with pytest.raises(ValueError, match="aux"):
        fit(HaSDeanonymization(), Knowledge(query_mechanism=k.query_mechanism))
    with pytest.raises(ValueError, match="white-box"):
        fit(
            HaSDeanonymization(white_box=True),
            Knowledge(white_box=False, query_mechanism=k.query_mechanism, aux=k.aux),
        )
    not_has = Knowledge(
        query_mechanism=lambda t: Release("text", texts=list(t), meta={"defense": "none"}),
        aux=k.aux,
    )
    with pytest.raises(ValueError, match="Hide-and-Seek"):
        fit(HaSDeanonymization(), not_has)
    with pytest.raises(ValueError, match="not fitted"):
        HaSDeanonymization().attack(Release("text", texts=["x"], meta={"defense": "has"}))
    attack = fit(HaSDeanonymization(), k)
    with pytest.raises(ValueError, match="Hide-and-Seek"):
        attack.attack(Release("text", texts=["x"], meta={"defense": "t2t"}))
    with pytest.raises(ValueError, match="mode"):
        attack.attack(Release("text", texts=["x"], meta={"defense": "has", "mode": "generative"}))
    with pytest.raises(ValueError, match="released text"):
        attack.attack(Release("pooled_vectors", vectors=[np.zeros(3)], meta={"defense": "has"}))
    with pytest.raises(TypeError, match="not a string"):
        attack.attack(Release("text", texts=["ok", None], meta={"defense": "has"}))


# ---- the pieces ----------------------------------------------------------------------------


def test_aligner_maps_replacements_to_originals() -> None:
    al = Aligner(
        "Booked Red Table Hotel in Leeds with Mr Smith.",
        "Booked <ORG_1> in Leeds with Mr Hughes.",
    )
    s = al.anonymized.index("<ORG_1>")
    assert al.original_of(s, s + len("<ORG_1>")) == ("Red Table Hotel", True)
    s = al.anonymized.index("Leeds")
    assert al.original_of(s, s + 5) == ("Leeds", False)
    s = al.anonymized.index("Mr Hughes")
    assert al.original_of(s, s + len("Mr Hughes")) == ("Mr Smith", True)


def test_spans_contexts_and_merges() -> None:
    text = "I met <PERSON_1> in Miller, Gill and Meyer on Monday."
    ner = [(20, 26, "PERSON"), (28, 32, "PERSON"), (37, 42, "ORG"), (46, 52, "DATE")]
    merged = merge_spans(text, ner, frozenset({",", "and"}))
    assert [text[s:e] for s, e, _ in merged] == ["Miller, Gill and Meyer", "Monday"]
    spans = find_spans(text, merged, frozenset({"PERSON"}))
    assert [(sp.released, sp.type, sp.placeholder) for sp in spans] == [
        ("<PERSON_1>", "PERSON", True),
        ("Miller, Gill and Meyer", "PERSON", False),
    ]
    left, right, doc = span_contexts(text, spans, 2)
    assert left[0] == ("i", "met") and right[0] == ("in", "<PERSON>")
    assert right[1] == ("on", "monday")
    assert doc.split()[:3] == ["i", "met", "<PERSON>"]


def test_shapes_follow_the_surrogate_generator() -> None:
    assert surrogate_shape("Mr Smith", "PERSON") == surrogate_shape("Mr Hughes", "PERSON")
    assert surrogate_shape("Sarah", "PERSON") != surrogate_shape("Jones Smith", "PERSON")
    assert surrogate_shape("last Tuesday", "DATE") == surrogate_shape("last Friday", "DATE")
    assert surrogate_shape("8 December 2018", "DATE") == surrogate_shape("3 May 1999", "DATE")
    assert surrogate_shape("March 2019", "DATE") != surrogate_shape("8 December 2018", "DATE")
    assert surrogate_shape("France", "GPE") != surrogate_shape("Leeds", "GPE")
    assert surrogate_shape("Acme", "ORG") is None
