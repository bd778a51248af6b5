"""The format reference (issue 27, item 5): the ``clean`` defense releases the original text as
the vector defenses release it at no noise, and the board splits each vector defense's privacy
into the format's share (the clean reference's) and the mechanism's, never ranking ``clean``."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from privaudit.api import CLEAN, Knowledge
from privaudit.audit.presets import quick_preset
from privaudit.defenses.cape import CAPE
from privaudit.defenses.clean import CleanRelease
from privaudit.defenses.dpnr import DPNR
from privaudit.defenses.embedding_dx import EmbeddingDX
from privaudit.defenses.sap import SAP
from privaudit.leaderboard.board import leaderboard
from privaudit.leaderboard.render import leaderboard_html_body
from privaudit.leaderboard.render import tables as board_tables
from privaudit.leaderboard.verdict_words import headline
from privaudit.registry import ATTACKS, build_defense
from tests.conftest import TINY
from tests.leaderboard.test_board_stats import BOOT, Grid

TEXTS = ["The pasta was perfect.", "Awful phone, broke in a week.", "", "😀 fine"]
INF = math.inf


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


# ---- the defense ---------------------------------------------------------------------------


def test_pooled_is_cape_and_dpnr_at_no_noise(tiny) -> None:
    rng = np.random.default_rng(0)
    clean = CleanRelease(release="pooled", backbone=TINY).privatize(TEXTS, rng=rng)
    cape = CAPE(epsilon=INF, backbone=TINY).privatize(TEXTS, rng=rng)
    dpnr = DPNR(epsilon=INF, dropout=0.0, backbone=TINY).privatize(TEXTS, rng=rng)
    assert clean.kind == "pooled_vectors" and clean.space == "pooled"
    assert _same(clean.vectors, cape.vectors) and _same(clean.vectors, dpnr.vectors)
    assert all(v.shape == (tiny.dim,) and v.min() >= 0 and v.max() <= 1 for v in clean.vectors)


def test_token_embeddings_are_sap_and_embedding_dx_at_infinity(tiny) -> None:
    rng = np.random.default_rng(0)
    clean = CleanRelease(backbone=TINY).privatize(TEXTS, rng=rng)
    sap = SAP(eta=INF, split_layer=0, backbone=TINY).privatize(TEXTS, rng=rng)
    dx = EmbeddingDX(eta=INF, backbone=TINY).privatize(TEXTS, rng=rng)
    assert clean.layer == 0 and clean.space == "token_embeddings"
    assert _same(clean.vectors, sap.vectors) and _same(clean.vectors, dx.vectors)
    # SAP's truncation: max_length − 2 WordPieces ([CLS] and [SEP] aside).
    short = CleanRelease(backbone=TINY, max_length=5).privatize(TEXTS[1:2], rng=rng)
    assert short.vectors[0].shape == (3, tiny.dim)


def test_hidden_states_are_sap_split_at_that_layer_at_infinity() -> None:
    rng = np.random.default_rng(0)
    clean = CleanRelease(release="hidden_states", layer=1, backbone=TINY).privatize(TEXTS, rng=rng)
    sap = SAP(eta=INF, split_layer=1, backbone=TINY).privatize(TEXTS, rng=rng)
    assert clean.layer == 1 and clean.space == "hidden_states"
    assert _same(clean.vectors, sap.vectors)


def test_deterministic_draws_nothing_and_handles_no_text() -> None:
    for variant in CleanRelease.variants:
        d = CleanRelease(**variant, backbone=TINY)
        rng = np.random.default_rng(0)
        before = rng.bit_generator.state
        assert len(d.privatize([], rng=rng)) == 0
        assert len(d.privatize(TEXTS, rng=rng)) == len(TEXTS)
        assert rng.bit_generator.state == before
    with pytest.raises(TypeError, match="single string"):
        CleanRelease(backbone=TINY).privatize("text", rng=np.random.default_rng(0))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"release": "hidden_states"}, "needs layer=k"),
        ({"layer": 2}, "applies only to release='hidden_states'"),
        ({"release": "text"}, "release='text' is not allowed"),
        ({"release": "hidden_states", "layer": 0}, "layer=0 is not allowed"),
    ],
)
def test_bad_params_are_refused_in_one_line(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as err:
        build_defense(CLEAN, params, TINY)
    assert str(err.value).startswith("defense 'clean': ") and "\n" not in str(err.value)


def test_registered_without_knob_and_in_the_quick_preset() -> None:
    assert CleanRelease.knob is None and str(CleanRelease.guarantee) == "none"
    specs = [d for d in quick_preset()["defenses"] if d["name"] == CLEAN]
    assert [d["params"]["release"] for d in specs] == ["token_embeddings", "pooled"]
    assert not any("knob_values" in d for d in specs)


def test_vector_attacks_apply_to_it() -> None:
    release = CleanRelease(backbone=TINY).privatize(TEXTS[:1], rng=np.random.default_rng(0))
    know = Knowledge(backbone=TINY, guarantee=CleanRelease.guarantee)
    assert ATTACKS.get("nn-inversion")().applicable(release.public(), know) is None
    # bayes-inversion reads text and models a declared d_X mechanism: n/a here, as on sap.
    assert ATTACKS.get("bayes-inversion")().applicable(release.public(), know) is not None


# ---- the board -----------------------------------------------------------------------------

GENDER = {"family": "attribute[gender]", "baseline": 0.5}
RELEASE = {"none": "text", "clean": "pooled", "cape": "pooled", "t2t": "text",
           "sap": "token_embeddings"}  # fmt: skip


def _frame(g: Grid, release: dict[str, str] = RELEASE) -> pd.DataFrame:
    """The grid's rows with each label's release format; ``clean`` has no knob."""
    f = g.frame()
    f["release"] = f["defense"].map(release)
    refs = f["defense"] == CLEAN
    f.loc[refs, "knob"] = None
    f.loc[refs, "knob_value"] = math.nan
    return f


def _cape_board(with_clean: bool = True, outcomes: bool = True):
    """The real-corpus case: CAPE at ε = 10⁶ (no noise to speak of) scores the same gender
    privacy as at ε = 100 (.25); only ε = 3 adds privacy. t2t is a text defense."""
    g = Grid()
    g.add("none", 0, "attr", 0.9, 0.9, **GENDER)
    if with_clean:
        g.add("clean[release=pooled]", 0, "attr", 0.8, 0.86, **GENDER)
    for eps, score, utility in ((1e6, 0.8, 0.85), (100, 0.8, 0.84), (3, 0.6, 0.7)):
        g.add("cape", eps, "attr", score, utility, **GENDER)
    g.add("t2t", 50, "attr", 0.7, 0.8, **GENDER)
    return leaderboard(_frame(g), 0.5, outcomes=g.outcomes() if outcomes else None, bootstrap=BOOT)


def test_the_board_says_cape_without_noise_is_all_format() -> None:
    board = _cape_board()
    assert board.formats is not None
    t = board.formats.table.set_index("knob_value")
    assert list(t["label"].unique()) == ["cape"]  # not the text defense, not the references
    assert t.loc[1e6, "privacy"] == pytest.approx(t.loc[100, "privacy"]) == pytest.approx(0.25)
    assert t.loc[1e6, "format"] == pytest.approx(0.25)
    assert t.loc[1e6, "format_only"] and t.loc[100, "format_only"]
    assert not t.loc[3, "format_only"] and t.loc[3, "mechanism_ci_low"] > 0
    assert t.loc[3, "mechanism"] == pytest.approx(0.5)
    note = next(n for n in board.notes if "cape's privacy is the release format's" in n)
    assert "eta=100" in note and "eta=1e+06" in note and "eta=3" not in note
    assert "clean[release=pooled]: 0.250 [" in note
    shown = board_tables(board)
    assert "family attribute[gender]" in shown
    html = leaderboard_html_body(board)
    assert "Format and mechanism: attribute[gender]" in html and "mechanism adds privacy" in html


def test_clean_is_a_reference_never_ranked_nor_in_the_headline() -> None:
    board = _cape_board()
    fam = board.families.set_index("label")
    assert pd.isna(fam.loc["clean[release=pooled]", "rank"])
    assert set(fam["rank"].dropna()) == {1, 2}  # cape and t2t only
    overall = board.overall.set_index("label")
    assert pd.isna(overall.loc["clean[release=pooled]", "rank"])
    assert overall.loc["clean[release=pooled]", "families"] == "format reference"
    assert list(board.overall["label"][-2:]) == ["clean[release=pooled]", "none"]
    assert "clean" not in set(board.matched["label"])
    assert board.per_attack.set_index("label")["rank"].isna()["clean[release=pooled]"]
    assert board.verdict is not None
    assert not any("clean" in line for _, lines in headline(board.verdict) for line in lines)
    rows = {r[2]: r for r in board_tables(board)["family attribute[gender]"].rows}
    assert rows["clean[release=pooled]"][0] == "ref"
    assert rows["clean[release=pooled]"][7] == "format reference (never ranked)"


def test_headline_says_when_beating_none_is_the_format_alone() -> None:
    """A vector defense whose every point is the clean format's privacy may still beat the
    undefended text; the headline says the gain is the format's."""
    g = Grid()
    g.add("none", 0, "attr", 0.9, 0.9, **GENDER)
    g.add("clean[release=pooled]", 0, "attr", 0.6, 0.88, **GENDER)
    for eps in (1e6, 100):
        g.add("cape", eps, "attr", 0.6, 0.87, **GENDER)
    g.add("t2t", 50, "attr", 0.65, 0.8, **GENDER)
    board = leaderboard(_frame(g), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert board.verdict is not None
    lines = dict(headline(board.verdict))["attribute[gender]"]
    beat = next(line for line in lines if line.startswith("beat the undefended release"))
    assert "cape (format only: no more private than the clean release in its format)" in beat
    assert "t2t (format only" not in beat


def test_without_a_reference_the_board_asks_for_one() -> None:
    board = _cape_board(with_clean=False)
    assert board.formats is not None and board.formats.table.empty
    assert any(
        n.startswith("cape releases pooled, but the run has no clean reference")
        and "{name: clean, params: {release: pooled}}" in n
        for n in board.notes
    )
    assert "Format and mechanism" not in leaderboard_html_body(board)


def test_point_estimates_without_outcomes() -> None:
    board = _cape_board(outcomes=False)
    assert board.formats is not None and not board.formats.paired
    t = board.formats.table.set_index("knob_value")
    assert t.loc[1e6, "format_only"] and not t.loc[3, "format_only"]
    assert np.isnan(t.loc[3, "mechanism_ci_low"])
    assert "point estimates only" in board.formats.caption


def test_hidden_states_are_matched_by_layer_on_the_attacks_both_faced() -> None:
    """sap split after layer 1 against clean hidden states after layer 1, not layer 2; an
    attack only sap faced (its guarantee's) does not enter the split."""
    g = Grid()
    for attack in ("a", "bayes"):
        g.add("none", 0, attack, 0.9, 0.9)
    g.add("clean[layer=1]", 0, "a", 0.5, 0.85)  # privacy .5
    g.add("clean[layer=2]", 0, "a", 0.2, 0.85)
    g.add("sap", 60, "a", 0.3, 0.8)  # privacy .75
    g.add("sap", 60, "bayes", 0.85, 0.8)  # privacy .06: only sap faced it
    f = _frame(g, {"none": "text", "clean": "hidden_states", "sap": "hidden_states"})
    f["defense_params"] = (
        f["label"]
        .map(
            {
                "clean[layer=1]": '{"layer": 1}',
                "clean[layer=2]": '{"layer": 2}',
                "sap": '{"split_layer": 1}',
            }
        )
        .fillna("{}")
    )
    board = leaderboard(f, 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert board.formats is not None
    row = board.formats.table.iloc[0]
    assert row["reference"] == "clean[layer=1]" and row["attacks"] == "a"
    assert row["privacy"] == pytest.approx(0.75) and row["format"] == pytest.approx(0.5)
    assert row["mechanism"] == pytest.approx(0.25) and not row["format_only"]
