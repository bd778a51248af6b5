"""TAB's evaluation (privaudit.metrics.tab) where it once differed from TAB's evaluation.py:
the unmasked-token rule (spaCy tokens of the document tagged ADP/PART/CCONJ/DET, or the title
words), the alignment of an output text (never verbatim text counted as masked), the scores
table, and undefined scores printed as such (issues 48 and 49)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from privaudit.metrics.tab import (
    GoldDocument,
    excused_chars,
    format_scores,
    score_anonymizer,
    score_spans,
    scores_table,
)
from privaudit.metrics.tab_align import align, masked_spans

TEXT = "The claim of Price's company was heard every Monday before Mr C.A. Whomersley in Oslo."


def _gold(text: str, mentions: list[tuple[str, str, str, str]]) -> GoldDocument:
    """One annotator's mentions: (entity_id, identifier type, entity type, surface)."""
    rows = []
    for eid, kind, etype, surface in mentions:
        start = text.index(surface)
        rows.append(
            {
                "annotator": "a1",
                "entity_id": eid,
                "identifier_type": kind,
                "type": etype,
                "start": start,
                "end": start + len(surface),
            }
        )
    return GoldDocument.from_mentions("d1", text, rows)


def _span(text: str, surface: str) -> tuple[int, int]:
    start = text.index(surface)
    return start, start + len(surface)


@pytest.mark.slow  # tags the document with the shipped spaCy pipeline
def test_the_unmasked_token_rule_is_tabs() -> None:
    """The three cases where the old word-list rule and evaluation.py disagreed.

    - "Price's" with "Price" masked: the "'s" is a PART token, so the mention is masked (the
      old rule matched "'s" only as a whole word and failed it).
    - "C.A. Whomersley" with "C." and "Whomersley" masked: the "A" is a PROPN token, so the
      mention is not masked (the old rule excused the article "a").
    - "every Monday" with "Monday" masked: "every" is DET, so the entity counts as masked and
      ER_qi is 1 (the old rule gave 0).
    """
    (excused,) = excused_chars([TEXT])
    start = TEXT.index("'s")
    assert excused[start : start + 2].all()  # PART
    a = TEXT.index("C.A.") + 2
    assert not excused[a]  # "A" of C.A. is no article here
    every = TEXT.index("every")
    assert excused[every : every + 5].all()  # DET
    mr = TEXT.index("Mr C")
    assert excused[mr : mr + 2].all()  # a title word
    gold = _gold(
        TEXT,
        [
            ("e1", "QUASI", "ORG", "Price's"),
            ("e2", "QUASI", "DATETIME", "every Monday"),
            ("e3", "DIRECT", "PERSON", "C.A. Whomersley"),
        ],
    )
    masked = [_span(TEXT, w) for w in ("Price", "Monday", "C.", "Whomersley")]
    scores = score_spans([gold], [masked])
    assert scores["entity_recall_quasi"] == 1.0  # Price's and every Monday
    assert scores["entity_recall_direct"] == 0.0  # the "A" is left
    # \w+ tokens: Price, s | every, Monday | C, A, Whomersley → all but "A"
    assert scores["token_recall"] == pytest.approx(6 / 7)
    assert scores["token_recall_by_type"] == pytest.approx(
        {"ORG": 1.0, "DATETIME": 1.0, "PERSON": 2 / 3}
    )


def _court_paragraphs() -> tuple[str, str, np.ndarray]:
    """Text shaped like TAB case 001-61807, where the old alignment took a misplaced " Section"
    for a masked paragraph: six near-identical paragraphs whose dates, names and legal
    references an anonymizer replaced by tags. Returns original, output, and the truly
    replaced characters."""
    names = [
        "Ali Kaya",
        "Mehmet Demir",
        "Ayse Yilmaz",
        "Fatma Sahin",
        "Emre Celik",
        "Zeynep Arslan",
    ]
    paras = [
        f"On {k + 3} May 199{k} {n} lodged an application with the Commission under former "
        "Article 25 of the Convention. The application was allocated to the First Section of "
        "the Court (Rule 52 § 1 of the Rules of Court). Within that Section, the Chamber that "
        "would consider the case (Article 27 § 1 of the Convention) was constituted as "
        "provided in Rule 26 § 1."
        for k, n in enumerate(names)
    ]
    original = "\n\n".join(paras)
    targets = (
        [f"{k + 3} May 199{k}" for k in range(6)]
        + names
        + [
            "the First Section",
            "Rule 52 § 1 of the Rules of Court",
            "Rule 26 § 1",
            "Article 27 § 1 of the Convention",
            "Article 25 of the Convention",
        ]
    )
    spans = sorted(
        (m.start(), m.end(), t) for t in targets for m in re.finditer(re.escape(t), original)
    )
    tags: dict[str, str] = {}
    pieces, pos = [], 0
    truth = np.zeros(len(original), dtype=bool)
    for s, e, t in spans:
        pieces += [original[pos:s], tags.setdefault(t, f"<X_{len(tags) + 1}>")]
        truth[s:e] = True
        pos = e
    pieces.append(original[pos:])
    return original, "".join(pieces), truth


def test_the_alignment_never_counts_verbatim_text_as_masked() -> None:
    original, output, truth = _court_paragraphs()
    spans, unaligned = align(original, output)
    found = np.zeros(len(original), dtype=bool)
    for s, e in spans:
        found[s:e] = True
    assert not (found & ~truth).any()  # the old difflib alignment counted 739 such characters
    # where it cannot tell which copy was kept it says so, and counts it as not masked
    assert unaligned > 0
    assert found.sum() > truth.sum() / 2
    # each name and date is found (its spaces aside: which space was kept is unknown)
    for name in ("Ali Kaya", "Zeynep Arslan", "3 May 1990"):
        s = original.index(name)
        assert all(found[s + k] for k, c in enumerate(name) if c != " ")


def test_the_alignment_errs_towards_not_masked_and_counts_it() -> None:
    # "Mr" kept before one name and hidden with the other: which "Mr" stayed is unknown
    original = "the judges, Mr B. Walsh, Mr C. Russo, Mr A. Spielmann, sat"
    output = "the judges, <P_1>, Mr <P_2>, <P_3>, sat"
    spans, unaligned = align(original, output)
    masked = "".join(original[s:e] for s, e in spans)
    assert "Walsh" in masked and "Russo" in masked and "Spielmann" in masked
    kept_mr = original.index("Mr C.")
    assert not any(s <= kept_mr < e for s, e in spans)  # the kept "Mr" is not counted masked
    assert unaligned > 0
    # a word changed in part keeps its unchanged end; spaces between two tags are unknown
    word = "Smiths' farm"
    assert [word[s:e] for s, e in masked_spans(word, "<P_1>s' farm")] == ["Smith"]
    both = "on 15 May 1990 the Ankara Court ruled"
    spans, unaligned = align(both, "on <D_1> <O_1> ruled")
    assert unaligned == 5 and "".join(both[s:e] for s, e in spans) == "15May1990theAnkaraCourt"


def test_undefined_scores_are_printed_as_such() -> None:
    scores: dict[str, Any] = {
        "entity_recall_direct": 0.0, "entity_recall_quasi": 0.5, "mention_recall": 0.5,
        "token_recall": 0.5, "token_precision": 0.0, "mention_precision": 0.0,
        "n_direct_entities": 0, "n_quasi_entities": 2, "n_mentions": 2, "n_tokens": 4,
        "n_system_tokens": 0, "n_system_spans": 0, "token_recall_by_type": {"LOC": 0.5},
        "n_tokens_by_type": {"LOC": 4}, "masks": "reported", "n_documents": 1,
    }  # fmt: skip
    text = format_scores(scores)
    assert re.search(r"token precision \(uniform weights\) +undefined +0\n", text)
    assert re.search(r"DIRECT identifiers +undefined +0\n", text)
    assert re.search(r"QUASI identifiers +0\.500 +2\n", text)
    table = scores_table(
        [("x", scores), ("y", {**scores, "n_system_tokens": 3, "token_precision": 1 / 3})]
    )
    lines = table.splitlines()
    assert lines[0].startswith("| anonymizer | ER_di | ER_qi | token recall | R LOC |")
    assert lines[2].split(" | ")[1] == "undefined"
    assert " 0.333 " in lines[3]


@pytest.mark.slow
def test_gold_documents_are_tagged_once() -> None:
    gold = _gold(TEXT, [("e1", "QUASI", "LOC", "Oslo")])
    score_anonymizer([gold], [[_span(TEXT, "Oslo")]])
    tagged = gold.excused
    assert tagged is not None
    again = score_anonymizer([gold], [[]])
    assert gold.excused is tagged and again["entity_recall_quasi"] == 0
