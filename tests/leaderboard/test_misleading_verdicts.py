"""The misleading verdicts of issue 27's real-corpus review, each rebuilt on a small results
table made here (no model): a tie printed as two ranks, defenses judged on different attack
sets, a false "bought nothing" note, no warning at the edge of chance, a point at chance
reaching a privacy level, the target-rate column, the axis label and the crushed axes."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privaudit.leaderboard.board import leaderboard
from privaudit.leaderboard.figures import frontier_figure, pareto_figure
from privaudit.leaderboard.render import leaderboard_html_body
from privaudit.leaderboard.render import tables as board_tables
from privaudit.leaderboard.strength import undefended_table
from privaudit.leaderboard.verdict_words import headline as verdict_headline
from tests.leaderboard.test_board_stats import BOOT, Grid


def test_a_tie_is_never_printed_as_distinct_overall_ranks() -> None:
    """Six defenses within noise of each other (every family rank interval spans them) and
    one clearly worse: the overall table gives the six overlapping intervals and ties."""
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    for i, label in enumerate(["d1", "d2", "d3", "d4", "d5", "d6"]):
        g.add(label, 1, "a", 0.5 + 0.005 * i, 0.8)
    g.add("weak", 1, "a", 0.85, 0.6)
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    overall = board_tables(board)["overall"]
    col = {h: overall.headers.index(h) for h in ("rank", "rank interval", "tied with")}
    rows = {r[overall.headers.index("defense")]: r for r in overall.rows}
    top = next(r for r in overall.rows if r[col["rank"]] == "1")
    assert top[col["rank interval"]] != "1–1"  # a tie, shown as one
    assert len(top[col["tied with"]].split(", ")) >= 4
    assert rows["weak"][col["rank interval"]] == "7–7" and "weak" not in top[col["tied with"]]
    assert rows["none"][col["rank interval"]] == "—"
    frame = board.overall.set_index("label")
    assert frame.loc["weak", "stability"] > 0.95


def test_a_family_is_ranked_on_the_attacks_every_defense_faced() -> None:
    """A token attack reads word-replacement releases but not pooled vectors (n/a): ranking
    `words` on it and `vector` without it put `vector` first on unlike attack sets."""
    g = Grid()
    for attack, score in (("sentence", 0.9), ("token", 1.0)):
        g.add("none", 0, attack, score, 0.9)
    g.add("words", 1, "sentence", 0.3, 0.85)  # strong against the sentence attack
    g.add("words", 1, "token", 0.8, 0.85)  # weak against the token attack
    g.add("vector", 1, "sentence", 0.5, 0.85)
    g.add("vector", 1, "token", 0.0, 0.85, status="n/a")
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    fam = board.families.set_index("label")
    assert fam.loc["words", "rank"] == 1 and fam.loc["vector", "rank"] == 2
    assert fam.loc["words", "strongest"] == "sentence"
    # The worst case over every attack a defense faced stays beside it.
    assert fam.loc["words", "hv_all"] < fam.loc["words", "hypervolume"]
    assert fam.loc["vector", "hv_all"] == fam.loc["vector", "hypervolume"]
    assert any("(sentence)" in n and "words (+token)" in n for n in board.notes)
    table = board_tables(board)["family text"]
    assert "worst-case HV, all attacks" in table.headers


def test_privacy_levels_are_the_worst_case_over_every_attack_not_the_ranking_set() -> None:
    """`words` reaches privacy .875 on the attack both defenses faced but .125 against the
    token attack only it faced: ranked on the common set, but the matched table, the points
    and the headline must not say it reaches 0.75 (the strongest adversary sets privacy)."""
    g = Grid()
    for attack, score in (("sentence", 0.9), ("token", 0.9)):
        g.add("none", 0, attack, score, 0.9)
    g.add("words", 1, "sentence", 0.2, 0.85)  # privacy (0.9 − 0.2) / 0.8 = .875
    g.add("words", 1, "token", 0.8, 0.85)  # privacy .125: its worst case
    g.add("vector", 1, "sentence", 0.25, 0.7)  # privacy .8125, less utility
    g.add("vector", 1, "token", 0.0, 0.7, status="n/a")
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert board.ranked_on == {"text": ("sentence",)}
    assert board.families.set_index("label").loc["words", "rank"] == 1  # ranks: common set
    m = board.matched.set_index(["label", "level"])
    assert np.isnan(m.loc[("words", 0.75), "utility"])
    assert m.loc[("vector", 0.75), "utility"] == 0.7
    points = board.points.set_index("label")
    assert points.loc["words", "privacy"] < 0.2 and points.loc["words", "strongest"] == "token"
    rows = {r[0]: r for r in board_tables(board)["matched text"].rows}
    assert rows["words"][2] == "not reached" and rows["vector"][2].startswith("0.700 [")
    v = board.verdict
    assert v is not None and v.families[0].best is not None
    assert v.families[0].best.label == "vector" and v.families[0].best.privacy < 0.85
    lines = dict(verdict_headline(v))["text"]
    best = next(line for line in lines if line.startswith("best utility at"))
    assert "vector at eta=1" in best and "words" not in best
    assert "over every attack it faced" in best
    assert "ranked on the attacks every defense faced: sentence" in lines[0]
    html = leaderboard_html_body(board)
    assert "Ranked on the attacks every ranked defense faced (sentence)" in html
    assert "over all the attacks it faced" in html


def test_no_common_attack_falls_back_to_each_defenses_own_set_with_a_note() -> None:
    g = Grid()
    for attack in ("x", "y"):
        g.add("none", 0, attack, 0.9, 0.9)
    g.add("p", 1, "x", 0.5, 0.8)
    g.add("p", 1, "y", 0.0, 0.8, status="n/a")
    g.add("q", 1, "y", 0.5, 0.8)
    g.add("q", 1, "x", 0.0, 0.8, status="n/a")
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert board.families.set_index("label")["rank"].notna().sum() == 2
    assert any(n.startswith("text: no attack reads every ranked defense") for n in board.notes)


def test_bought_nothing_needs_an_advantage_on_the_undefended_release() -> None:
    """An attack at its baseline even against the original text: no defense beats `none` on
    its raw scale, but there was nothing to buy, and the board must not say otherwise."""
    g = Grid()
    g.add("none", 0, "useless", 0.1, 0.9)  # the baseline is 0.1 too
    g.add("t2t", 1, "useless", 0.12, 0.8)
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert not any("bought nothing" in n for n in board.notes)
    assert any(n.startswith("useless: against the undefended release") for n in board.notes)


def test_the_near_chance_warning_fires_when_the_interval_reaches_chance() -> None:
    """Undefended utility .525 against chance .5 on 200 documents: the interval reaches
    chance, so the ranking must carry the warning though the point is above it."""
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.525)
    g.add("t2t", 1, "a", 0.5, 0.52)
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert any("within its interval of chance" in n for n in board.notes)
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    g.add("t2t", 1, "a", 0.5, 0.8)
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert not any("WARNING: the undefended utility" in n for n in board.notes)


def test_a_point_at_chance_utility_reaches_no_privacy_level() -> None:
    """sap at η = 60: privacy .8 but utility .49 against chance .5 (its interval reaches
    above chance); and a point whose whole utility interval lies below chance."""
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    g.add("sap", 1, "a", 0.26, 0.49)  # privacy 0.8, utility at chance
    g.add("sap", 2, "a", 0.5, 0.7)  # privacy 0.5, useful
    g.add("low", 1, "a", 0.1, 0.35)  # privacy 1, interval wholly below chance
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    m = board.matched.set_index(["label", "level"])
    assert m.loc[("sap", 0.5), "utility"] == 0.7  # the useful point, not the one at chance
    assert np.isnan(m.loc[("sap", 0.75), "utility"])
    points = board.points.set_index("label")
    assert points.loc["sap", "utility_ci_high"].max() > 0.5  # the point rule catches it
    assert points.loc["low", "utility_ci_high"] < 0.5  # the interval rule too
    assert np.isnan(m.loc[("low", 0.9), "utility"])
    rows = {r[0]: r for r in board_tables(board)["matched text"].rows}
    assert rows["sap"][2].startswith("not reached (only at chance utility: 0.490 [")
    assert rows["low"][3].startswith("not reached (only at chance utility: 0.350 [")


def test_the_target_rate_column_shows_where_the_grid_calibrated_by_rate() -> None:
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    g.add("pct2t", 1, "a", 0.5, 0.8)
    g.add("t2t", 2, "a", 0.5, 0.8)
    frame = g.frame()
    frame["replacement_rate"] = np.where(frame["defense"] == "none", 0.0, 0.3)
    frame["target_rate"] = np.where(frame["defense"] == "pct2t", 0.3, np.nan)
    board = leaderboard(frame, 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    rates = board_tables(board)["rates"]
    k = rates.headers.index("target rate")
    shown = {r[rates.headers.index("defense")]: r[k] for r in rates.rows}
    assert shown == {"pct2t": "0.3", "t2t": "—"}
    assert '<td class="num">0.3</td>' in leaderboard_html_body(board)
    # No rate calibrated: no column of dashes.
    board = leaderboard(
        frame.drop(columns="target_rate"), 0.5, outcomes=g.outcomes(), bootstrap=BOOT
    )
    assert "target rate" not in board_tables(board)["rates"].headers


def _attack_rows(metric: str, privacy: list[float], baseline: float) -> pd.DataFrame:
    """One attack's ok rows: the undefended point and a defense's three levels, with
    interval columns as the runner writes them."""
    n = len(privacy)
    labels = ["none", *["d"] * (n - 1)]
    p = np.asarray(privacy)
    u = np.linspace(0.85, 0.7, n)
    return pd.DataFrame(
        {
            "label": labels,
            "defense": labels,
            "knob": [None, *["eta"] * (n - 1)],
            "knob_value": [np.nan, *range(1, n)],
            "seed": 0,
            "attack": "geia",
            "status": "ok",
            "attack_metric": metric,
            "utility_metric": "balanced_accuracy",
            "empirical_privacy": p,
            "empirical_privacy_ci_low": p - 0.005,
            "empirical_privacy_ci_high": p + 0.005,
            "utility": u,
            "utility_ci_low": u - 0.03,
            "utility_ci_high": u + 0.03,
            "attack_baseline": baseline,
        }
    )


def test_axes_and_columns_name_the_metric_actually_scored() -> None:
    """attribute_accuracy scores balanced accuracy: the axis says so, and so does the
    attack-strength table's metric column."""
    rows = _attack_rows("attribute_accuracy", [0.35, 0.37, 0.42, 0.48], 0.5)
    ax = pareto_figure(rows, attack="attribute-inference[gender]", chance=0.5).axes[0]
    assert "(1 − balanced accuracy)" in ax.get_xlabel()
    assert "attribute_accuracy" not in ax.get_xlabel()
    panel = frontier_figure(rows, chance=0.5).axes[0]
    assert "(1 − balanced accuracy)" in panel.get_xlabel()
    rows["attack_score"] = 1 - rows["empirical_privacy"]
    table = undefended_table(rows)
    assert table.rows[0][table.headers.index("metric")] == "balanced accuracy (attribute_accuracy)"


def test_the_per_attack_plot_zooms_like_the_combined_figure() -> None:
    """GEIA privacy .95–.98 (baseline .99): a fixed 0–1 axis crushed the points."""
    rows = _attack_rows("generation_f1", [0.95, 0.96, 0.97, 0.98], 0.01)
    single = pareto_figure(rows, attack="geia", chance=0.5).axes[0]
    panel = frontier_figure(rows, chance=0.5).axes[0]
    assert single.get_xlim() == panel.get_xlim()
    x0, x1 = single.get_xlim()
    assert x0 > 0.9 and x1 - x0 < 0.1
    assert single.get_ylim() == panel.get_ylim()
