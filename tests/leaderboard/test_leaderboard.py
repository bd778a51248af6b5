"""Pareto frontiers, hypervolume ranking, merging runs and the `leaderboard` command.

Every results table here is built by hand (no model is loaded), so the expected frontiers,
areas and ranks can be worked out on paper.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privaudit.cli import app
from privaudit.leaderboard.board import leaderboard
from privaudit.leaderboard.families import hypervolume
from privaudit.leaderboard.figures import frontier_figure
from privaudit.leaderboard.frontier import frontier, seed_means
from privaudit.leaderboard.render import tables as board_tables
from privaudit.outputs.leaderboard import write_leaderboard
from privaudit.outputs.plots import plot_frontiers
from privaudit.outputs.runs import merge_runs, read_run
from privaudit.runtime.provenance import provenance

runner = CliRunner()


def cell(
    label: str,
    value: float,
    attack: str,
    privacy: float,
    utility: float,
    *,
    seed: int = 0,
    status: str = "ok",
    metric: str = "token_recovery",
    reason: str = "",
    privatize_seconds: float = 1.0,
    n_words: float = 1000.0,
    defense: str | None = None,
) -> dict[str, Any]:
    """One results row with the runner's columns that the leaderboard reads."""
    defense = defense or label.split("[")[0]
    none = defense == "none"
    ok = status == "ok"
    return {
        "defense": defense,
        "label": label,
        "knob": None if none else "eta",
        "knob_value": math.nan if none else float(value),
        "attack": attack,
        "seed": seed,
        "status": status,
        "reason": reason,
        "attack_metric": metric,
        "attack_score": 1 - privacy if ok else math.nan,
        "empirical_privacy": privacy if ok else math.nan,
        "utility_metric": "accuracy",
        "utility": utility,
        "seconds": 2.0,
        "privatize_seconds": privatize_seconds,
        "guarantee": "none" if none else f"{defense} guarantee",
        "defense_params": json.dumps({"eta": value}),
        "corpus_fingerprint": "abc",
        "cell_key": f"{label}|{value}|{attack}|{seed}",
        "n_words": n_words,
    }


def table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows)


def make_run(
    run_dir: Path,
    rows: list[dict[str, Any]],
    *,
    chance: float | None = 0.5,
    fmt: str = "parquet",
    config: dict[str, Any] | None = None,
) -> Path:
    """A run directory as `privaudit run` leaves it (results, run.json, config.json)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    frame = table(rows)
    if fmt == "parquet":
        frame.to_parquet(run_dir / "results.parquet", index=False)
    else:
        frame.to_csv(run_dir / "results.csv", index=False)
    if chance is not None:
        meta = {
            "chance_accuracy": chance,
            "corpus_sizes": {"train": 10},
            "backbone": "tiny",
            "provenance": provenance(),
        }
        (run_dir / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    (run_dir / "config.json").write_text(json.dumps(config or {"name": "test-grid"}))
    return run_dir


def ranked_rows() -> list[dict[str, Any]]:
    """Chance 0.5, two attacks; hypervolumes worked out in test_leaderboard_ranks."""
    return [
        # a1: A one point -> 0.5 × 0.5 = 0.25
        cell("A", 1, "a1", 0.5, 0.75),
        # a1: B staircase (0.8, y 0.2), (0.4, y 0.6) -> 0.8·0.2 + 0.4·0.4 = 0.32
        cell("B", 1, "a1", 0.8, 0.6),
        cell("B", 2, "a1", 0.4, 0.8),
        # a1: C -> 0.2 × 0.1 = 0.02
        cell("C", 1, "a1", 0.2, 0.55),
        cell("none", 0, "a1", 0.0, 0.9),
        # a2: A -> 1; B and C tie at 0 (utility at chance adds nothing)
        cell("A", 1, "a2", 1.0, 1.0),
        cell("B", 1, "a2", 0.5, 0.5),
        cell("B", 2, "a2", 0.9, 0.45),
        cell("C", 1, "a2", 0.5, 0.5),
        cell("none", 0, "a2", 0.0, 0.9),
    ]


# ---- frontier ------------------------------------------------------------------------------


def test_frontier_removes_dominated_points_per_label_and_attack() -> None:
    rows = [
        cell("A", 1, "a1", 0.2, 0.9),
        cell("A", 2, "a1", 0.5, 0.7),
        cell("A", 3, "a1", 0.4, 0.6),  # dominated by (0.5, 0.7)
        cell("A", 4, "a1", 0.8, 0.3),
        cell("A", 5, "a1", 0.5, 0.7 - 1e-9),  # dominated on utility alone
        # B beats every A point, but frontiers are per label: A keeps its own.
        cell("B", 1, "a1", 0.9, 0.95),
        # Another attack: its own frontier.
        cell("A", 1, "a2", 0.3, 0.9),
        cell("A", 2, "a2", 0.1, 0.7),  # dominated on a2
        # Not ok: never on a frontier, however good.
        cell("A", 6, "a1", 1.0, 1.0, status="failed", reason="boom"),
        cell("A", 7, "a1", 1.0, 1.0, status="n/a", reason="cannot read text"),
    ]
    front = frontier(table(rows))
    a1 = front[(front["attack"] == "a1") & (front["label"] == "A")]
    assert list(zip(a1["empirical_privacy"], a1["utility"], strict=True)) == [
        (0.2, 0.9),
        (0.5, 0.7),
        (0.8, 0.3),
    ]
    assert front[(front["attack"] == "a1") & (front["label"] == "B")]["knob_value"].tolist() == [
        1.0
    ]
    a2 = front[front["attack"] == "a2"]
    assert a2["knob_value"].tolist() == [1.0]
    assert set(front["knob_value"]) <= {1.0, 2.0, 4.0}


def test_frontier_averages_seeds_first() -> None:
    rows = [
        # knob 1: seed 0 alone would dominate knob 2, but its mean (0.3, 0.7) does not...
        cell("A", 1, "a", 0.5, 0.9, seed=0),
        cell("A", 1, "a", 0.1, 0.5, seed=1),
        # ... knob 2's mean (0.35, 0.75) dominates it.
        cell("A", 2, "a", 0.3, 0.7, seed=0),
        cell("A", 2, "a", 0.4, 0.8, seed=1),
    ]
    points = seed_means(table(rows))
    assert points["n_seeds"].tolist() == [2, 2]
    one = points[points["knob_value"] == 1.0].iloc[0]
    assert (one["empirical_privacy"], one["utility"]) == pytest.approx((0.3, 0.7))
    front = frontier(table(rows))
    assert front["knob_value"].tolist() == [2.0]
    assert front.iloc[0]["empirical_privacy"] == pytest.approx(0.35)
    assert "on_frontier" not in front.columns


def test_frontier_label_falls_back_to_defense() -> None:
    rows = [cell("t2t", 1, "a", 0.5, 0.7), cell("pct2t", 1, "a", 0.6, 0.6)]
    rows[0]["label"] = None
    front = frontier(table(rows))
    assert sorted(front["label"]) == ["pct2t", "t2t"]


def test_frontier_without_ok_rows_is_a_clear_error() -> None:
    rows = [cell("A", 1, "a", 0.5, 0.7, status="failed", reason="boom")]
    with pytest.raises(ValueError, match=r"No cell with status 'ok'.*failed"):
        frontier(table(rows))
    with pytest.raises(ValueError, match="lacks the columns"):
        frontier(pd.DataFrame({"attack": ["a"]}))


def test_plot_frontiers_one_panel_per_attack(tmp_path: Path) -> None:
    rows = [*ranked_rows(), cell("A", 1, "ae", 0.003, 0.8, metric="embedding_mse")]
    fig = frontier_figure(table(rows), chance=0.5)
    panels = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in panels] == ["a1", "a2", "ae"]
    assert panels[0].get_xlabel() == "empirical privacy (1 − token_recovery)"
    assert panels[2].get_xlabel() == "empirical privacy (embedding MSE)"
    assert panels[0].get_ylabel() == "utility (accuracy)"
    # One shared legend for the figure; none is a dashed line, not a defense.
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in panels)
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert names[:3] == ["A", "B", "C"] and "none (undefended)" in names
    dashed = [ln for ln in panels[0].get_lines() if ln.get_linestyle() == "--"]
    assert [ln.get_ydata()[0] for ln in dashed] == [0.9]
    path = plot_frontiers(table(rows), tmp_path / "frontiers.png", chance=0.5)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000


# ---- hypervolume ---------------------------------------------------------------------------


@pytest.mark.parametrize("chance", [0.0, 0.5, 0.6])
def test_hypervolume_single_point_is_a_quarter(chance: float) -> None:
    assert hypervolume([0.5], [chance + 0.5 * (1 - chance)], chance=chance) == pytest.approx(0.25)


def test_hypervolume_hand_computed_cases() -> None:
    # Staircase: 0.8 × 0.2 + 0.4 × (0.6 − 0.2) = 0.32 (chance 0: utility is the y).
    assert hypervolume([0.8, 0.4], [0.2, 0.6], chance=0.0) == pytest.approx(0.32)
    # Order and dominated points change nothing.
    assert hypervolume([0.4, 0.3, 0.8], [0.6, 0.1, 0.2], chance=0.0) == pytest.approx(0.32)
    # At or below chance: nothing; privacy above 1 and below 0 clipped.
    assert hypervolume([0.9], [0.5], chance=0.5) == 0.0
    assert hypervolume([1.7], [1.0], chance=0.5) == pytest.approx(1.0)
    assert hypervolume([-0.2], [1.0], chance=0.5) == 0.0
    # An MSE axis divided by its largest value.
    assert hypervolume([0.002], [1.0], chance=0.5, privacy_scale=0.004) == pytest.approx(0.5)
    assert hypervolume([], [], chance=0.5) == 0.0
    assert hypervolume([0.5, math.nan], [0.75, 0.9], chance=0.5) == pytest.approx(0.25)


def test_hypervolume_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError, match=r"chance level must be a number in \[0, 1\)"):
        hypervolume([0.5], [0.7], chance=1.0)
    with pytest.raises(ValueError, match="--chance"):
        hypervolume([0.5], [0.7], chance=math.nan)
    with pytest.raises(ValueError, match="privacy_scale"):
        hypervolume([0.5], [0.7], chance=0.5, privacy_scale=0.0)


# ---- leaderboard ---------------------------------------------------------------------------


def test_leaderboard_ranks() -> None:
    board = leaderboard(table(ranked_rows()), chance=0.5)
    per = board.per_attack.set_index(["attack", "label"])
    expected = {
        ("a1", "A"): (0.25, 2), ("a1", "B"): (0.32, 1), ("a1", "C"): (0.02, 3),
        ("a2", "A"): (1.0, 1), ("a2", "B"): (0.0, 2), ("a2", "C"): (0.0, 2),
    }  # fmt: skip
    for key, (area, rank) in expected.items():
        assert per.loc[key, "hypervolume"] == pytest.approx(area), key
        assert per.loc[key, "rank"] == rank, key
    assert per.loc[("a1", "B"), "n_frontier"] == 2
    overall = board.overall.set_index("label")
    # One family (text): the worst case over a1 and a2, normalised against none (its score
    # is 1 on both, no baseline = 0, so normalised = privacy); a point's utility is its first
    # row's. A: min(.5, 1) = .5 at .75 -> .5·.5 = .25; B: (min(.8, .5) = .5, .6) and
    # (min(.4, .9) = .4, .8) -> (.5 − .4)·.2 + .4·.6 = .26; C: min(.2, .5) = .2 at .55 -> .02.
    fam = board.families.set_index("label")
    assert fam.loc["A", "hypervolume"] == pytest.approx(0.25)
    assert fam.loc["B", "hypervolume"] == pytest.approx(0.26)
    assert fam.loc["C", "hypervolume"] == pytest.approx(0.02)
    assert overall.index.tolist()[:3] == ["B", "A", "C"]
    assert overall["rank"].tolist()[:3] == [1, 2, 3]
    assert overall.loc["A", "families"] == "1 of 1"
    assert overall.loc["B", "guarantee"] == "B guarantee"
    # A point's utility is the mean over its rows (here they differ by attack): B knob 2.
    assert overall.loc["B", "best_utility"] == pytest.approx((0.8 + 0.45) / 2)
    assert overall.loc["none", "best_utility"] == pytest.approx(0.9)


def test_none_is_a_reference_not_ranked() -> None:
    rows = [
        cell("A", 1, "mse", 0.001, 0.9, metric="embedding_mse"),
        # The undefended point has the largest area here; it still takes no rank.
        cell("none", 0, "mse", 0.004, 0.95, metric="embedding_mse"),
    ]
    board = leaderboard(table(rows), chance=0.5)
    per = board.per_attack.set_index("label")
    assert per.loc["A", "rank"] == 1 and pd.isna(per.loc["none", "rank"])
    # MSE is divided by the largest MSE for the attack: none 1.0 × 0.9, A 0.25 × 0.8.
    assert per.loc["none", "hypervolume"] == pytest.approx(0.9)
    assert per.loc["A", "hypervolume"] == pytest.approx(0.25 * 0.8)
    assert per.loc["A", "privacy_scale"] == pytest.approx(0.004)
    assert any("divided by 0.004" in note for note in board.notes)
    assert board.overall["label"].tolist() == ["A", "none"]  # none last
    none = board.overall.set_index("label").loc["none"]
    assert pd.isna(none["rank"]) and none["best_utility"] == pytest.approx(0.95)


def test_leaderboard_cost_counts_each_defense_point_once() -> None:
    rows = [
        # Two privacy levels × two attacks: privatize_seconds repeats on both attack rows.
        cell("A", v, a, 0.5, 0.7, privatize_seconds=2.0, n_words=1000)
        for v in (1, 2)
        for a in ("a1", "a2")
    ]
    board = leaderboard(table(rows), chance=0.5)
    assert board.overall.set_index("label").loc["A", "s_per_1k_words"] == pytest.approx(2.0)
    no_words = table(rows).drop(columns="n_words")
    board = leaderboard(no_words, chance=0.5)
    assert math.isnan(board.overall.loc[0, "s_per_1k_words"])
    assert any("n_words" in note for note in board.notes)
    overall = board_tables(board)["overall"]
    assert overall.rows[0][overall.headers.index("s / 1k words")] == "—"


def test_leaderboard_keeps_unranked_defenses_with_the_reason() -> None:
    rows = [
        *ranked_rows(),
        cell("D", 1, "a1", 0.9, 0.9),  # D is n/a on a2: the family is what reads it
        cell("D", 1, "a2", 0.0, 0.9, status="n/a", reason="cannot read vectors"),
        cell("E", 1, "a1", 0.0, 0.9, status="failed", reason="boom"),
    ]
    board = leaderboard(table(rows), chance=0.5)
    overall = board.overall.set_index("label")
    fam = board.families.set_index("label")
    assert fam.loc["D", "rank"] == 1 and fam.loc["D", "complete"]  # n/a is no threat
    assert not fam.loc["E", "complete"] and pd.isna(fam.loc["E", "rank"])
    assert "a1 failed at eta=1" in fam.loc["E", "reason"]
    assert pd.isna(overall.loc["E", "rank"]) and overall.loc["E", "families"] == "0 of 1"
    assert any("Not ranked overall" in note and "E" in note for note in board.notes)
    wide = board_tables(board)["per attack"]
    d_row = next(row for row in wide.rows if row[0] == "D")
    assert d_row[2] == "—"  # never scored on a2


def test_leaderboard_errors() -> None:
    with pytest.raises(ValueError, match="chance"):
        leaderboard(table(ranked_rows()), chance=math.nan)
    failed = [cell("A", 1, "a", 0.5, 0.7, status="failed", reason="x")]
    with pytest.raises(ValueError, match="status 'ok'"):
        leaderboard(table(failed), chance=0.5)


def test_write_leaderboard(tmp_path: Path) -> None:
    rows = [*ranked_rows(), cell("x<y>", 1, "a1", 0.1, 0.6, defense="x")]
    board = leaderboard(table(rows), chance=0.5)
    paths = write_leaderboard(board, tmp_path / "lb")
    assert [p.name for p in paths] == [
        "leaderboard.md",
        "leaderboard.csv",
        "leaderboard.html",
        "worst_case_points.csv",
    ]
    points = pd.read_csv(paths[3])
    assert {"family", "label", "privacy", "privacy_ci_low", "utility_sd", "strongest"} <= set(
        points.columns
    )
    md = paths[0].read_text()
    assert "| rank | rank interval | defense |" in md and "Worst-case hypervolume:" in md
    assert "## Family: text (worst-case privacy)" in md
    assert "## Utility at matched privacy: text" in md
    assert "| B | 0.320 (1) | 0.000 (2) |" in md
    csv = pd.read_csv(paths[1])
    assert list(csv.columns[:2]) == ["rank", "label"]
    assert {"hypervolume[a1]", "rank[a2]", "hypervolume[text]", "rank_ci_low[text]"} <= set(
        csv.columns
    )
    page = paths[2].read_text()
    assert page.startswith("<!doctype html>") and "<table>" in page
    assert "x&lt;y&gt;" in page and "x<y>" not in page


# ---- merging runs --------------------------------------------------------------------------


def test_merge_runs_drops_repeated_cells_keeping_the_last(tmp_path: Path) -> None:
    first = [cell("A", 1, "a", 0.1, 0.6), cell("B", 1, "a", 0.5, 0.7)]
    second = [cell("A", 1, "a", 0.4, 0.8), cell("C", 1, "a", 0.3, 0.9)]  # A re-run
    one = make_run(tmp_path / "one", first, fmt="parquet")
    two = make_run(tmp_path / "two", second, fmt="csv")
    frame, chance = merge_runs([one, two])
    assert chance == 0.5
    assert sorted(frame["label"]) == ["A", "B", "C"]
    assert frame.set_index("label").loc["A", "empirical_privacy"] == 0.4
    frame, _ = merge_runs([two, one])  # the other order: the other A wins
    assert frame.set_index("label").loc["A", "empirical_privacy"] == 0.1


def test_merge_runs_chance_levels(tmp_path: Path) -> None:
    one = make_run(tmp_path / "one", [cell("A", 1, "a", 0.1, 0.6)], chance=0.5)
    two = make_run(tmp_path / "two", [cell("B", 1, "a", 0.1, 0.6)], chance=0.6)
    with pytest.warns(UserWarning, match="different chance levels"):
        _, chance = merge_runs([one, two])
    assert chance == 0.6
    bare = make_run(tmp_path / "bare", [cell("A", 1, "a", 0.1, 0.6)], chance=None)
    with pytest.raises(ValueError, match=r"run.json.*--chance"):
        merge_runs([bare])
    assert merge_runs([bare], chance=0.4)[1] == 0.4


def test_merge_runs_clear_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty has no results.parquet.*privaudit run"):
        merge_runs([empty])
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        merge_runs([tmp_path / "missing"])
    with pytest.raises(ValueError, match="No run directory"):
        merge_runs([])
    no_rows = make_run(tmp_path / "no_rows", [])
    with pytest.raises(ValueError, match="no rows"):
        read_run(no_rows)


# ---- command line --------------------------------------------------------------------------


def test_cli_leaderboard(tmp_path: Path) -> None:
    rows = ranked_rows()
    one = make_run(tmp_path / "one", [*rows[:5], cell("has[mode=label]", 1, "a1", 0.3, 0.7)])
    two = make_run(tmp_path / "two", rows[5:])
    result = runner.invoke(app, ["leaderboard", str(one), str(two), "--out", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert "has[mode=label]" in result.output  # not eaten as rich markup
    for name in ("leaderboard.md", "leaderboard.csv", "leaderboard.html"):
        assert (tmp_path / "o" / name).is_file() and str(tmp_path / "o" / name) in result.output
    default = runner.invoke(app, ["leaderboard", str(one)])
    assert default.exit_code == 0, default.output
    assert (one / "leaderboard.md").is_file()


def test_cli_leaderboard_errors_are_one_clear_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(app, ["leaderboard", str(empty)])
    assert result.exit_code == 2
    assert "has no results.parquet" in result.output and "Traceback" not in result.output
    bare = make_run(tmp_path / "bare", ranked_rows(), chance=None)
    result = runner.invoke(app, ["leaderboard", str(bare)])
    assert result.exit_code == 2 and "--chance" in result.output
    result = runner.invoke(app, ["leaderboard", str(bare), "--chance", "0.5"])
    assert result.exit_code == 0, result.output


def test_cli_report(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", ranked_rows())
    result = runner.invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(run / "report.html")
    assert (run / "report.html").is_file()
    out = tmp_path / "elsewhere" / "r.html"
    result = runner.invoke(app, ["report", str(run), "--show-examples", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.is_file()
    missing = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "not a directory" in missing.output


def test_seed_means_sorted_and_typed() -> None:
    points = seed_means(table(ranked_rows()))
    assert points["on_frontier"].dtype == bool
    assert np.all(np.diff(points[points["label"] == "B"]["empirical_privacy"].head(2)) >= 0)
