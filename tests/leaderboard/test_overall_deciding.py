"""Which families decide the overall ranking (issue 46, items 4 and 5): a family only some
defenses face by design, one that ranks fewer than two defenses, and one whose attacker is too
weak for a verdict are left out of the overall mean with one note; every defense is then ranked
overall, or one line says why none can be. On results tables and outcomes built by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from privaudit.leaderboard.board import Leaderboard, leaderboard
from privaudit.leaderboard.overall import deciding_families
from privaudit.leaderboard.strength import WEAK_SHARE, family_strengths
from privaudit.leaderboard.verdict_words import headline, power_lines
from privaudit.metrics.stats import run_stats
from tests.leaderboard.test_board_stats import BOOT, Grid

CHANCE = 0.5
DEFENSES = {"a": (0.3, 0.8), "b": (0.6, 0.85), "has": (0.45, 0.82)}  # strong attack, utility


def _strong_text(g: Grid) -> None:
    """A text family whose attack every defense faces (0.9 undefended against 0.1)."""
    g.add("none", 0, "x", 0.9, 0.9)
    for label, (score, utility) in DEFENSES.items():
        g.add(label, 1, "x", score, utility)


def _has_only_entity(g: Grid) -> None:
    """An entity family whose only attack reads HaS's releases alone (the others' rows and the
    undefended release's are n/a), as has-deanonymization on SynthPAI."""
    g.add("none", 0, "deanon", 0.0, 0.9, family="entity", status="n/a")
    g.add("has", 1, "deanon", 0.3, 0.82, family="entity")
    for label in ("a", "b"):
        g.add(label, 1, "deanon", 0.0, DEFENSES[label][1], family="entity", status="n/a")


def _board(g: Grid) -> Leaderboard:
    return leaderboard(g.frame(), CHANCE, outcomes=g.outcomes(), bootstrap=BOOT)


def _ranked(board: Leaderboard) -> dict[str, int]:
    o = board.overall.dropna(subset=["rank"])
    return {str(r["label"]): int(r["rank"]) for _, r in o.iterrows()}


def test_a_family_only_one_defense_faces_by_design_does_not_decide_who_is_ranked() -> None:
    g = Grid()
    _strong_text(g)
    _has_only_entity(g)
    board = _board(g)
    # Before: "ranked in every family" left a and b out, so only HaS was ranked overall.
    assert _ranked(board) == {"a": 1, "has": 2, "b": 3}
    (note,) = [n for n in board.notes if n.startswith("Left out of the overall ranking")]
    assert "entity (faced by only some defenses by design" in note
    assert "read has's releases, not a, b's" in note
    assert not any(n.startswith("Not ranked overall") for n in board.notes)
    overall = board.overall.set_index("label")
    assert overall.loc["a", "families"] == "1 of 1"
    assert overall["rank_ci_low"].notna().sum() == 3  # intervals from the text family alone
    # The entity family keeps its own table and headline.
    assert board.families.query("family == 'entity' and label == 'has'")["rank"].iloc[0] == 1


def test_a_family_that_ranks_one_defense_because_the_others_failed_orders_nothing() -> None:
    g = Grid()
    _strong_text(g)
    g.add("none", 0, "y", 0.9, 0.9, family="entity")
    g.add("has", 1, "y", 0.5, 0.82, family="entity")
    for label in ("a", "b"):
        g.add(label, 1, "y", 0.5, DEFENSES[label][1], family="entity", status="failed")
    board = _board(g)
    (note,) = [n for n in board.notes if n.startswith("Left out of the overall ranking")]
    assert "entity (ranks only has: fewer than two defenses" in note
    assert set(_ranked(board)) == {"a", "b", "has"}


def test_a_failure_in_a_deciding_family_still_keeps_that_defense_unranked() -> None:
    """A failure is the defense's own: the family still faces it and still decides."""
    g = Grid()
    _strong_text(g)
    g.add("none", 0, "y", 0.9, 0.9, family="entity")
    g.add("has", 1, "y", 0.5, 0.82, family="entity")
    g.add("a", 1, "y", 0.4, 0.8, family="entity")
    g.add("b", 1, "y", 0.5, 0.85, family="entity", status="failed")
    board = _board(g)
    assert set(_ranked(board)) == {"a", "has"}
    assert not any(n.startswith("Left out of the overall ranking") for n in board.notes)
    assert any(n.startswith("Not ranked overall") and "b in entity" in n for n in board.notes)


def test_a_board_with_one_defense_still_ranks_it() -> None:
    g = Grid()
    g.add("none", 0, "x", 0.9, 0.9)
    g.add("a", 1, "x", 0.3, 0.8)
    board = _board(g)
    assert _ranked(board) == {"a": 1}
    assert not any(n.startswith("Left out of the overall ranking") for n in board.notes)


def _weak_text(g: Grid) -> None:
    """A text family whose attack gets 0.17 from the undefended release against 0.1 without
    it: measurable, but 8 % of the way to a perfect attacker."""
    g.add("none", 0, "x", 0.17, 0.9)
    for label, score in (("a", 0.16), ("b", 0.15), ("has", 0.17)):
        g.add(label, 1, "x", score, DEFENSES[label][1])


def _strong_attribute(g: Grid) -> None:
    g.add("none", 0, "attr", 0.9, 0.9, family="attribute[age]")
    for label, (score, utility) in DEFENSES.items():
        g.add(label, 1, "attr", score, utility, family="attribute[age]")


def test_a_weak_attacker_is_undecided_and_left_out_of_the_overall_mean() -> None:
    g = Grid()
    _weak_text(g)
    _strong_attribute(g)
    board = _board(g)
    s = family_strengths(run_stats(g.frame(), g.outcomes(), BOOT), board.ranked_on)["text"]
    assert s.informative and s.attack == "x"
    assert s.share == pytest.approx((0.17 - 0.1) / 0.9) and s.share < WEAK_SHARE and s.weak
    lines = dict(headline(board.verdict))["text"]
    assert lines[0].startswith(
        "undecided because of the attacker: the strongest attack every "
        "defense faces, x scores 0.170"
    )
    assert "8 % of the way to a perfect attacker, below the 10 %" in lines[0]
    assert "public text of the victims' domain" in lines[0] and "more aux" in lines[0]
    assert "no published figure" in lines[0]
    assert not any("beats the undefended release with confidence" in ln for ln in lines)
    assert not any("bought nothing" in n and n.startswith("text") for n in board.notes)
    assert not any(p.startswith("text:") for p in power_lines(board.verdict))
    (note,) = [n for n in board.notes if n.startswith("Left out of the overall ranking")]
    assert "text (undecided because of the attacker: its strongest attack (x) covers 8 %" in note
    # The attribute family alone decides: its ranks are the overall ranks.
    attr = board.families.query("family == 'attribute[age]'").dropna(subset=["rank"])
    assert _ranked(board) == {str(r["label"]): int(r["rank"]) for _, r in attr.iterrows()}
    assert dict(headline(board.verdict))["attribute[age]"][0].startswith("not beaten with 95 %")


def test_a_strong_attacker_keeps_its_verdict() -> None:
    g = Grid()
    _strong_text(g)
    board = _board(g)
    lines = dict(headline(board.verdict))["text"]
    assert not any("undecided" in ln for ln in lines)
    assert not board.verdict.families[0].undecided


def test_an_attacker_with_no_measurable_advantage_is_undecided() -> None:
    g = Grid()
    _strong_text(g)
    g.add("none", 0, "z", 0.1, 0.9, family="entity")  # at its baseline even undefended
    for label in DEFENSES:
        g.add(label, 1, "z", 0.1, DEFENSES[label][1], family="entity")
    board = _board(g)
    (line, *_) = dict(headline(board.verdict))["entity"]
    assert line.startswith(
        "undecided because of the attacker: no attack learns anything "
        "measurable from the undefended release (z scores 0.100"
    )
    assert set(_ranked(board)) == set(DEFENSES)


def test_every_family_weak_says_in_one_line_why_nothing_is_ranked() -> None:
    g = Grid()
    _weak_text(g)
    board = _board(g)
    assert _ranked(board) == {}
    (note,) = [n for n in board.notes if n.startswith("Left out of the overall ranking")]
    assert note.endswith("No family is left to decide it, so no defense is ranked overall.")


def test_a_lower_is_stronger_metric_measures_its_share_the_same_way() -> None:
    """embedding_mse: 0 is a perfect attacker; 0.96 undefended against 1.0 is 4 % of the way."""
    frame = pd.DataFrame(
        [
            {
                "defense": "none",
                "label": "none",
                "knob": None,
                "knob_value": float("nan"),
                "attack": "ae",
                "seed": 0,
                "status": "ok",
                "reason": "",
                "attack_metric": "embedding_mse",
                "family": "text",
                "attack_score": 0.96,
                "empirical_privacy": 0.96,
                "attack_baseline": 1.0,
                "utility": 0.9,
                "utility_metric": "balanced_accuracy",
                "cell_key": "k",
                "point": "p",
                "n_test": 10,
            }
        ]
    )
    s = family_strengths(run_stats(frame, Grid().outcomes(), BOOT), {})["text"]
    assert s.share == pytest.approx(0.04) and s.weak


def test_deciding_families_on_a_table_without_failures_column() -> None:
    fams = pd.DataFrame(
        {
            "family": ["t", "t", "e"],
            "label": ["a", "b", "a"],
            "defense": ["a", "b", "a"],
            "rank": pd.array([1, 2, 1], dtype="Int64"),
            "reason": ["", "", ""],
        }
    )
    kept, left = deciding_families(fams, {})
    assert set(kept["family"]) == {"t"} and set(left) == {"e"}
