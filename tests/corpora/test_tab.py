"""TAB: the loader (privaudit.corpora.tab), TAB's evaluation protocol (privaudit.metrics.tab)
and `privaudit tab-score`, on a TAB-format fixture made here.

The expected scores are computed by hand below, following TAB's evaluation.py path by path:
GoldDocument._get_entities_from_mentions (entities per entity_id; need_masking if any mention
is DIRECT/QUASI; is_direct from the first mention), is_mention_masked (all characters masked
but those of spaCy tokens tagged ADP/PART/CCONJ/DET or titled mr/ms/..., and punctuation and
spaces; tests/metrics/test_tab_evaluation.py pins that rule), is_masked (every mention
that itself needs masking), get_recall (all mentions of entities to mask, token_level splits
them into \\w+ tokens), get_entity_recall, and get_precision with UniformTokenWeighting
(tokens of each system span; hits = annotators whose to-mask mention covers the token; out of
the document's number of annotators).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from privaudit.cli import app
from privaudit.corpora.tab import load_tab
from privaudit.metrics.tab import (
    excused_chars,
    format_scores,
    gold_documents,
    mention_masked,
    score_anonymizer,
    score_spans,
)
from privaudit.metrics.tab_align import masked_spans
from privaudit.registry import CORPORA

A = "Mr John Smith of Oslo sued Norway on 5 May 2001. Smith won."
B = "Anna Berg, born in 1970, lives in Bergen. Berg works for Acme."
C = "Ms Eva Lund appealed in Malmo in 1999."


def _m(eid: str, etype: str, kind: str, s: int, e: int, text: str) -> dict[str, Any]:
    return {
        "entity_type": etype,
        "entity_mention_id": f"{eid}-{s}",
        "start_offset": s,
        "end_offset": e,
        "span_text": text[s:e],
        "edit_type": "check",
        "identifier_type": kind,
        "entity_id": eid,
        "confidential_status": "NOT_CONFIDENTIAL",
    }


def fixture_docs() -> list[dict[str, Any]]:
    """Three cases. A (test): two annotators; a1 masks "Mr John Smith" and "Smith" (one
    DIRECT entity), Oslo and the date (QUASI), not Norway (NO_MASK-only entity); a2 masks "John
    Smith" (DIRECT) but marks its later "Smith" NO_MASK (an entity of mixed mentions), the date
    QUASI, Oslo NO_MASK. B (train): "Anna Berg" NO_MASK first, then "Berg" DIRECT: the entity
    needs masking but is QUASI (the first mention decides); 1970 and Bergen QUASI, Acme NO_MASK.
    C (dev): "Ms Eva Lund" DIRECT, Malmo and 1999 QUASI."""
    ann_a1 = [
        _m("A1e1", "PERSON", "DIRECT", 0, 13, A),
        _m("A1e2", "LOC", "QUASI", 17, 21, A),
        _m("A1e3", "LOC", "NO_MASK", 27, 33, A),
        _m("A1e4", "DATETIME", "QUASI", 37, 47, A),
        _m("A1e1", "PERSON", "DIRECT", 49, 54, A),
    ]
    ann_a2 = [
        _m("A2e1", "PERSON", "DIRECT", 3, 13, A),
        _m("A2e2", "DATETIME", "QUASI", 37, 47, A),
        _m("A2e1", "PERSON", "NO_MASK", 49, 54, A),
        _m("A2e3", "LOC", "NO_MASK", 17, 21, A),
    ]
    ann_b = [
        _m("Be1", "PERSON", "NO_MASK", 0, 9, B),
        _m("Be2", "DATETIME", "QUASI", 19, 23, B),
        _m("Be1", "PERSON", "DIRECT", 42, 46, B),
        _m("Be3", "LOC", "QUASI", 34, 40, B),
        _m("Be4", "ORG", "NO_MASK", 57, 61, B),
    ]
    ann_c = [
        _m("Ce1", "PERSON", "DIRECT", 0, 11, C),
        _m("Ce2", "LOC", "QUASI", 24, 29, C),
        _m("Ce3", "DATETIME", "QUASI", 33, 37, C),
    ]
    meta = {"year": 2001, "legal_branch": "CHAMBER", "articles": [6], "applicant": "X"}
    return [
        {
            "doc_id": "001-A",
            "text": A,
            "dataset_type": "test",
            "task": "anonymise John Smith",
            "meta": {**meta, "countries": "NOR"},
            "quality_checked": ["a2"],
            "annotations": {"a1": {"entity_mentions": ann_a1}, "a2": {"entity_mentions": ann_a2}},
        },
        {
            "doc_id": "001-B",
            "text": B,
            "dataset_type": "train",
            "task": "anonymise Anna Berg",
            "meta": {**meta, "countries": "NOR"},
            "annotations": {"a1": {"entity_mentions": ann_b}},
        },
        {
            "doc_id": "001-C",
            "text": C,
            "dataset_type": "dev",
            "task": "anonymise Eva Lund",
            "meta": {**meta, "countries": "SWE"},
            "annotations": {"a3": {"entity_mentions": ann_c}},
        },
    ]


#: The system's masks: A "John Smith", "Oslo", "5 May" (not the year, nor the later "Smith");
#: B "Anna" (not "Berg" of "Anna Berg"), "1970", the later "Berg", "Acme" (a false positive);
#: C all but the "Ms " of "Ms Eva Lund".
SPANS = {
    "001-A": [(3, 13), (17, 21), (37, 42)],
    "001-B": [(0, 4), (19, 23), (42, 46), (57, 61)],
    "001-C": [(3, 11), (24, 29), (33, 37)],
}


@pytest.fixture
def tab_file(tmp_path: Path) -> Path:
    path = tmp_path / "tab.json"
    path.write_text(json.dumps(fixture_docs()))
    return path


def _write(tmp_path: Path, docs: Any) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(docs))
    return path


# ---- the loader --------------------------------------------------------------------------


def test_the_loader_maps_tab_to_a_corpus(tab_file: Path) -> None:
    corpus = load_tab(tab_file)
    assert CORPORA.get("tab") is load_tab
    assert corpus.sizes() == {"train": 1, "test": 1, "aux": 1}  # train, test, dev → aux
    assert corpus.split("test")["author"] == ["001-A"]
    assert corpus.label_names == ["NOR", "SWE"]  # meta.countries
    assert corpus.labels("aux").tolist() == [1]
    # entities: the quality-checked annotator a2's DIRECT/QUASI mentions, with TAB's keys
    (ents,) = corpus.entities("test")
    assert [(e["start"], e["end"], e["type"], e["identifier_type"]) for e in ents] == [
        (3, 13, "PERSON", "DIRECT"),
        (37, 47, "DATETIME", "QUASI"),
    ]
    assert ents[0]["text"] == "John Smith" and ents[0]["entity_id"] == "A2e1"
    # tab_gold: every mention of every annotator, NO_MASK included, in file order
    (gold,) = corpus.split("test")["tab_gold"]
    assert len(gold) == 9 and {g["annotator"] for g in gold} == {"a1", "a2"}
    assert corpus.info["span_text_mismatches"] == 0


def test_the_annotator_and_label_can_be_chosen(tab_file: Path) -> None:
    corpus = load_tab(tab_file, annotator="a1")
    (ents,) = corpus.entities("test")
    assert [e["entity_id"] for e in ents] == ["A1e1", "A1e2", "A1e4", "A1e1"]  # no NO_MASK
    with pytest.raises(ValueError, match=r"meta.articles has 1 distinct value.*at least two"):
        load_tab(tab_file, label="articles")  # every case is about Article 6


def test_a_folder_of_tab_files_and_a_file_with_one_split(tmp_path: Path) -> None:
    docs = fixture_docs()
    for doc, name in zip(docs, ("echr_test.json", "echr_train.json", "echr_dev.json"), strict=True):
        (tmp_path / name).write_text(json.dumps([doc]))
    assert load_tab(tmp_path).sizes() == {"train": 1, "test": 1, "aux": 1}
    only_test = [docs[0], {**docs[2], "dataset_type": "test"}]
    with pytest.warns(UserWarning, match="no TAB document maps to the train split"):
        corpus = load_tab(_write(tmp_path, only_test))
    assert corpus.sizes() == {"train": 0, "test": 2}


@pytest.mark.parametrize(
    ("docs", "error"),
    [
        ({"doc_id": "x"}, "expected a JSON list of documents, got dict"),
        ([{"doc_id": "x", "text": "t", "dataset_type": "test"}], "lacks the key 'annotations'"),
        ([{**fixture_docs()[0], "annotations": {"a1": {}}}], "lacks the key 'entity_mentions'"),
        (
            [
                {
                    **fixture_docs()[0],
                    "annotations": {"a1": {"entity_mentions": [{"entity_id": "e"}]}},
                }
            ],
            "lacks the key 'identifier_type'",
        ),
        ([{**fixture_docs()[0], "dataset_type": "validation"}], "dataset_type 'validation'"),
        ([fixture_docs()[0], fixture_docs()[0]], "doc_id '001-A' appears twice"),
        ([{**fixture_docs()[0], "meta": {}}], "has no meta.countries"),
    ],
)
def test_what_is_not_tab_is_one_line(tmp_path: Path, docs: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        load_tab(_write(tmp_path, docs))


def test_missing_and_non_json_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="No such TAB file"):
        load_tab(tmp_path / "none.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ValueError, match="not UTF-8 JSON"):
        load_tab(tmp_path / "x.json")


def test_bad_identifier_type_and_offsets_are_refused(tmp_path: Path) -> None:
    doc = fixture_docs()[2]
    ments = doc["annotations"]["a3"]["entity_mentions"]
    bad_kind = [{**ments[0], "identifier_type": "MAYBE"}]
    with pytest.raises(ValueError, match="identifier_type 'MAYBE'"):
        load_tab(_write(tmp_path, [{**doc, "annotations": {"a3": {"entity_mentions": bad_kind}}}]))
    far = [{**ments[0], "end_offset": 99}, {**ments[1], "start_offset": 30, "end_offset": 30}]
    with pytest.raises(ValueError, match=r"2 mention\(s\) with offsets outside its 38-character"):
        load_tab(_write(tmp_path, [{**doc, "annotations": {"a3": {"entity_mentions": far}}}]))


def test_span_text_mismatch_is_counted_and_empty_texts_dropped(tmp_path: Path) -> None:
    docs = fixture_docs()
    ments = docs[0]["annotations"]["a1"]["entity_mentions"]
    ments[1] = {**ments[1], "span_text": "Bergen"}  # the text says "Oslo" there
    empty = {**docs[2], "doc_id": "001-D", "text": "  ", "annotations": {}}
    with pytest.warns(UserWarning, match=r"1 mention\(s\) whose span_text differs"):
        corpus = load_tab(_write(tmp_path, [*docs, empty]))
    assert corpus.info["span_text_mismatches"] == 1
    assert corpus.info["dropped"] == {"with an empty text": 1}
    with pytest.raises(ValueError, match="span_text differs"):
        load_tab(_write(tmp_path, docs), strict_spans=True)


def test_an_unreachable_hub_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    def offline(*_a: Any, **_k: Any) -> None:
        raise ConnectionError("Couldn't reach the Hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(ValueError, match=r"unreachable from here.*give their folder"):
        load_tab("hf:someone/tab")


# ---- TAB's evaluation --------------------------------------------------------------------


@pytest.mark.slow  # TAB's rule tags the documents with the spaCy pipeline
def test_the_scores_match_evaluation_py_by_hand(tab_file: Path) -> None:
    """Every document (split=None). Masked characters: A 3-12, 17-20, 37-41; B 0-3, 19-22,
    42-45, 57-60; C 3-10, 24-28, 33-36.

    Mentions (✓ masked, ✗ not): A "Mr John Smith" [0,13) ✓ (the unmasked "Mr " is an ignored
    word and a space), "Smith" [49,54) ✗, "Oslo" ✓, "5 May 2001" ✗ (the year is left),
    "John Smith" [3,13) ✓. B "Anna Berg" ✗ ("Berg" left), "Berg" [42,46) ✓, "1970" ✓,
    "Bergen" ✗. C "Ms Eva Lund" ✓ ("Ms " ignored), "Malmo" ✓, "1999" ✓.

    Entities to mask: DIRECT: A/a1 Smith (second mention ✗, needed → not protected), A/a2
    Smith (second mention ✗ but NO_MASK → protected), C Lund ✓ → 2/3. QUASI: A/a1 Oslo ✓,
    A/a1 date ✗, A/a2 date ✗, B Berg (QUASI: NO_MASK first; its needed mention ✓), B 1970 ✓,
    B Bergen ✗, C Malmo ✓, C 1999 ✓ → 5/8. (Norway, A/a2's Oslo and Acme are NO_MASK-only.)

    Mention recall, all mentions of those entities: A/a1 2/4, A/a2 1/3 (its NO_MASK "Smith"
    counts), B 2/4, C 3/3 → 8/14.

    Token recall (\\w+ tokens, each tested as a mention): A/a1 Mr✓ John✓ Smith✓ | Smith✗ |
    Oslo✓ | 5✓ May✓ 2001✗ = 6/8; A/a2 John✓ Smith✓ | Smith✗ | 5✓ May✓ 2001✗ = 4/6; B Anna✓
    Berg✗ | Berg✓ | 1970✓ | Bergen✗ = 3/5; C Ms✓ Eva✓ Lund✓ | Malmo✓ | 1999✓ = 5/5 → 18/24.
    By type: PERSON 3/4 + 2/3 + 2/3 + 3/3 = 10/13; LOC 1 + 0 + 1 = 2/3; DATETIME 2/3 + 2/3 +
    1 + 1 = 6/8.

    Token precision: A (2 annotators) John 2, Smith 2, Oslo 1 (a2 marked it NO_MASK), 5 2,
    May 2 → 9/10; B (1 annotator) Anna 0 (that mention is NO_MASK), 1970 1, Berg 1, Acme 0 →
    2/4; C Eva, Lund, Malmo, 1999 → 4/4; total 15/18. Mention precision (whole spans): A
    "John Smith" 2 (inside a1's [0,13) and a2's [3,13)), "Oslo" 1, "5 May" 2 → 5/6; B 2/4;
    C 3/3 → 10/13.
    """
    scores = score_anonymizer(load_tab(tab_file), SPANS, split=None)
    expected = {
        "entity_recall_direct": 2 / 3,
        "entity_recall_quasi": 5 / 8,
        "mention_recall": 8 / 14,
        "token_recall": 18 / 24,
        "token_precision": 15 / 18,
        "mention_precision": 10 / 13,
    }
    assert {k: scores[k] for k in expected} == pytest.approx(expected)
    assert scores["token_recall_by_type"] == pytest.approx(
        {"PERSON": 10 / 13, "LOC": 2 / 3, "DATETIME": 6 / 8}
    )
    counts = {k: scores[k] for k in ("n_direct_entities", "n_quasi_entities", "n_mentions")}
    assert counts == {"n_direct_entities": 3, "n_quasi_entities": 8, "n_mentions": 14}
    table = format_scores(scores, "TAB")
    assert re.search(r"entity recall, DIRECT identifiers +0\.667 +3\n", table)


@pytest.mark.slow
def test_the_test_split_alone_and_spans_in_json_form(tab_file: Path) -> None:
    """Document A only: DIRECT 1/2, QUASI 1/3, mentions 3/7, tokens 10/14, precision 9/10."""
    corpus = load_tab(tab_file)
    as_json = json.loads(json.dumps([SPANS["001-A"]]))  # [[3, 13], ...]: evaluation.py's input
    scores = score_anonymizer(corpus, as_json)
    got = [scores[k] for k in ("entity_recall_direct", "entity_recall_quasi", "mention_recall")]
    assert got == pytest.approx([1 / 2, 1 / 3, 3 / 7])
    assert (scores["token_recall"], scores["token_precision"]) == pytest.approx((10 / 14, 9 / 10))
    assert score_anonymizer(corpus, {"001-A": SPANS["001-A"]}, split=None) == scores
    with pytest.raises(ValueError, match="'001-Z' is not in corpus"):
        score_anonymizer(corpus, {"001-Z": []})
    with pytest.raises(ValueError, match="2 anonymized documents for the 1 of the test split"):
        score_anonymizer(corpus, [[], []])
    with pytest.raises(ValueError, match=r"masked span \[50, 70\) is outside"):
        score_anonymizer(corpus, [[(50, 70)]])


@pytest.mark.slow
def test_edge_semantics_of_evaluation_py(tab_file: Path) -> None:
    corpus = load_tab(tab_file)
    (doc,) = gold_documents(corpus, "test")
    nothing = np.zeros(len(A), dtype=bool)
    (excused,) = excused_chars([A])
    assert mention_masked(nothing, excused, 0, 2)  # the token "Mr" counts as masked unmasked
    assert not mention_masked(nothing, excused, 3, 7)
    # Overlapping spans count their tokens twice in the precision, as evaluation.py does:
    # "Oslo" (1 of 2 annotators) twice + "Norway" (0 of 2) → 2/6.
    twice = score_spans([doc], [[(17, 21), (17, 21), (27, 33)]])
    assert twice["token_precision"] == pytest.approx(2 / 6)
    # Nothing masked: recalls 0; no system token: precision 0 (an empty denominator).
    none = score_spans([doc], [[]])
    assert none["entity_recall_direct"] == 0 and none["token_precision"] == 0
    # Of the 14 tokens (a1: Mr John Smith | Smith | Oslo | 5 May 2001; a2: John Smith | Smith |
    # 5 May 2001) only a1's "Mr" counts as masked, being an ignorable word.
    assert none["token_recall"] == pytest.approx(1 / 14) and none["mention_recall"] == 0


# ---- aligning an anonymizer's output -----------------------------------------------------


def test_masked_spans_from_an_output_text() -> None:
    original = "Mr Aziz Canpolat's case was heard on 15 October 2004 in Ankara."
    hidden = "Mr <PERSON_1>'s case was heard on <DATE_1> in\n<GPE_1>."
    spans = masked_spans(original, hidden)
    assert [original[s:e] for s, e in spans] == ["Aziz Canpolat", "15 October 2004", "Ankara"]
    assert masked_spans(original, original) == []
    assert masked_spans(original, original.replace(" ", "  \n")) == []  # re-spacing keeps all
    assert masked_spans("a b", "") == [(0, 3)]
    # A limit: a surrogate that repeats the original's words, or their first letters, leaves
    # them unmasked ("1" of "15" → "12": the alignment errs towards not masked).
    surrogate = masked_spans("on 15 October 2004.", "on 12 October 1999.")
    assert [("on 15 October 2004."[s:e]) for s, e in surrogate] == ["5", "2004"]


@pytest.mark.slow
def test_texts_and_spans_give_the_same_scores(tab_file: Path) -> None:
    corpus = load_tab(tab_file)
    docs = {d.doc_id: d.text for d in gold_documents(corpus, None)}
    masked = {}
    for doc_id, spans in SPANS.items():
        text = docs[doc_id]
        for s, e in sorted(spans, reverse=True):
            text = text[:s] + "[MASK]" + text[e:]
        masked[doc_id] = text
    from_text = score_anonymizer(corpus, masked, split=None)
    from_spans = score_anonymizer(corpus, SPANS, split=None)
    assert (from_text.pop("masks"), from_spans.pop("masks")) == ("aligned", "reported")
    assert from_text == from_spans


# ---- the command -------------------------------------------------------------------------

PLUGIN = '''
import re

class Redactor:
    """Masks capitalised words but the first of a sentence, and digits."""
    name = "redactor"

    def __init__(self, level=1):
        self.level = level

    def privatize(self, texts, rng):
        return [re.sub(r"(?<=[a-z,] )[A-Z]\\w+|\\d+", "***", t) for t in texts]
'''


@pytest.mark.slow
def test_tab_score_with_a_plugin_writes_json(tab_file: Path, tmp_path: Path) -> None:
    plugin = tmp_path / "redact.py"
    plugin.write_text(PLUGIN)
    out = tmp_path / "scores.json"
    args = [
        "tab-score",
        "--data",
        str(tab_file),
        "--defense",
        f"{plugin}:Redactor",
        "--level",
        "2",
        "--split",
        "all",
        "--json",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "TAB evaluation of" in result.output and "token precision" in result.output
    saved = json.loads(out.read_text())
    assert saved["level"] == 2 and 0 <= saved["scores"]["token_recall"] <= 1


def test_tab_score_errors_are_one_line(tmp_path: Path, tab_file: Path) -> None:
    missing = CliRunner().invoke(
        app, ["tab-score", "--data", str(tmp_path / "no.json"), "--defense", "has"]
    )
    assert missing.exit_code == 2 and "No such TAB file" in missing.output
    bad = CliRunner().invoke(
        app, ["tab-score", "--data", str(tab_file), "--defense", "has", "--split", "val"]
    )
    assert bad.exit_code == 2 and "--split must be one of" in bad.output


@pytest.mark.slow
@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_tab_score_with_has(tab_file: Path, level: int) -> None:
    args = ["tab-score", "--data", str(tab_file), "--defense", "has", "--split", "all"]
    result = CliRunner().invoke(app, [*args, "--level", str(level)])
    assert result.exit_code == 0, result.output
    assert f"TAB evaluation of has (level {level}): 3 all documents" in result.output
    # names at any level
    assert re.search(r"entity recall, DIRECT identifiers +1\.000 ", result.output)
