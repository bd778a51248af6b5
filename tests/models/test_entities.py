"""The HaS entity protocol (privaudit.models.entities) and the shared input checks."""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.mechanisms.inputs import check_rng, check_texts
from privaudit.models.entities import (
    PLACEHOLDER,
    placeholder,
    propagate,
    repeats,
    spacy_entities,
    word_pattern,
)


def test_word_pattern_matches_whole_words_only() -> None:
    text = "Sarah, Sarahs and Sarah-Jane; $20 or US$20."
    assert [m.start() for m in word_pattern("Sarah").finditer(text)] == [0, 18]
    # A non-word edge needs no boundary: "$20" is found inside "US$20" too.
    assert [m.start() for m in word_pattern("$20").finditer(text)] == [30, 39]


def test_propagate_adds_every_whole_word_repeat_longest_first() -> None:
    text = "Sarah Jones met Sarah. Later Sarah Jones left Sarahs and Jones."
    ents = [(0, 11, "PERSON"), (16, 21, "PERSON")]  # "Sarah Jones", "Sarah"
    spans = propagate(text, ents)
    assert [text[s:e] for s, e, _ in spans] == ["Sarah Jones", "Sarah", "Sarah Jones"]
    assert spans == sorted(spans) and all(t == "PERSON" for _, _, t in spans)
    # Covered stretches are never found again; "Jones" alone was never detected.
    assert repeats(text, [(0, 11)], {"Jones": "PERSON"}) == [(35, 40, "PERSON"), (57, 62, "PERSON")]
    assert propagate("", []) == []


@pytest.mark.parametrize(("etype", "n"), [("PERSON", 1), ("WORK_OF_ART", 12), ("GPE", 3)])
def test_placeholder_round_trip(etype: str, n: int) -> None:
    m = PLACEHOLDER.fullmatch(placeholder(etype, n))
    assert m is not None and m.groups() == (etype, str(n))


def test_placeholder_pattern_needs_a_letter_first() -> None:
    text = "<PERSON_1> <_X_1> <__2> <person_1> <PERSON_> <WORK_OF_ART_2>"
    assert [m.group(0) for m in PLACEHOLDER.finditer(text)] == ["<PERSON_1>", "<WORK_OF_ART_2>"]


@pytest.mark.slow  # loads the spaCy pipeline (once per process)
def test_spacy_entities_types_and_chunks() -> None:
    texts = ["", "  ", "Sarah Jones moved to Paris in May 2020.\nShe works for Google."]
    found = spacy_entities(texts)
    assert found[:2] == [[], []]
    strings = {(texts[2][s:e], t) for s, e, t in found[2]}
    assert ("Sarah Jones", "PERSON") in strings and ("Paris", "GPE") in strings
    assert all(texts[2][s:e] == texts[2][s:e].strip() for s, e, _ in found[2])
    people = spacy_entities(texts, types=frozenset({"PERSON"}))
    assert people == [[sp for sp in doc if sp[2] == "PERSON"] for doc in found]
    # Pieces of at most 45 characters, cut at the line break: offsets stay the text's.
    assert spacy_entities(texts, chunk=45) == found


def test_check_texts_messages() -> None:
    assert check_texts(("a", "b")) == ["a", "b"]
    with pytest.raises(TypeError, match=r"^privatize\(\) takes .* single string"):
        check_texts("abc")
    with pytest.raises(TypeError, match=r"^privatize\(\) takes a sequence of strings, got int"):
        check_texts(3)
    with pytest.raises(TypeError, match=r"^Document 1 is a int, not a string \(2 non-string"):
        check_texts(["a", 1, None])
    with pytest.raises(TypeError, match=r"^ner: a text release takes .* single string"):
        check_texts("abc", "ner")
    with pytest.raises(TypeError, match=r"^ner: Document 0 is a NoneType, not a string"):
        check_texts([None], "ner")
    assert isinstance(check_rng(np.random.default_rng(0)), np.random.Generator)
    with pytest.raises(TypeError, match="Generator"):
        check_rng(0)
