"""The board's service sections (issue 26), on small results tables made here (no model):
RAPT's comparison at equal η and at equal replacement rate with paired intervals, CAPE's
adversary measured on the service's representation beside the release-level attack, the
warning when the service learns less than the frozen probe, and one evaluator per board."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privaudit.leaderboard.board import leaderboard
from privaudit.leaderboard.service import PRIVACY_REFERS_TO
from privaudit.metrics.outcomes import Outcome
from privaudit.outputs.leaderboard import write_leaderboard
from privaudit.outputs.report import write_report
from tests.leaderboard.test_board_stats import BOOT, Grid, hits
from tests.leaderboard.test_leaderboard import make_run

PROBE_LINE = (
    "The service evaluator reached 0.600 on the undefended release, below the frozen probe's "
    "0.700: raise its epochs or lr (utility: {name: service, params: {epochs: 40}}), or use "
    "utility: probe."
)


def rapt_grid(utilities: dict[str, tuple[float, ...]], *, rapt: bool = True) -> Grid:
    """none plus t2t, pct2t (and rapt) at η 1, 2, 3 against one text attack."""
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    for label, us in utilities.items():
        if label == "rapt" and not rapt:
            continue
        for eta, u in zip((1, 2, 3), us, strict=True):
            g.add(label, eta, "a", 0.5, u)
    return g


def with_columns(g: Grid, **columns: object) -> pd.DataFrame:
    frame = g.frame()
    for name, value in columns.items():
        frame[name] = value
    return frame


def test_rapt_comparison_at_equal_eta_states_what_it_finds() -> None:
    g = rapt_grid({"t2t": (0.6, 0.6, 0.8), "pct2t": (0.6, 0.7, 0.8), "rapt": (0.85, 0.9, 0.8)})
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert board.service is not None and len(board.service.rapt) == 1
    (c,) = board.service.rapt
    assert c.by == "η"
    assert c.table.headers == ["η", "t2t", "pct2t", "rapt", "rapt − pct2t", "rapt − t2t"]
    assert [r[0] for r in c.table.rows] == ["1", "2", "3"]
    first = c.table.rows[0]
    assert first[3].startswith("0.850 [") and first[4].startswith("+0.250 [")
    assert c.sentence.startswith(
        "rapt's utility is above pct2t's at 2 of 3 η with confidence; below at none. "
        "Against t2t: above at 2 of 3; below at none (paired intervals; elsewhere tied)."
    )
    titles = [title for title, _, _ in board.service.sections()]
    assert titles == ["RAPT's comparison at equal η (RAPT Table II)"]


def test_rapt_comparison_pairs_the_same_documents() -> None:
    """rapt right on 10 more documents than pct2t, the same otherwise: unpaired intervals of
    two accuracies near 0.7 on 200 documents overlap, the paired difference does not."""
    g = rapt_grid({"t2t": (0.7, 0.7, 0.7), "pct2t": (0.7, 0.7, 0.7), "rapt": (0.75, 0.75, 0.75)})
    for eta in (1, 2, 3):
        base = hits(0.7, eta)
        better = base.copy()
        better[np.flatnonzero(base == 0)[:10]] = 1
        g.entries[(f"pct2t|{eta}|0", "utility")] = Outcome.ratio(base)
        g.entries[(f"rapt|{eta}|0", "utility")] = Outcome.ratio(better)
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert board.service is not None
    (c,) = board.service.rapt
    assert "above pct2t's at 3 of 3 η with confidence" in c.sentence
    low = float(c.table.rows[0][4].split("[")[1].split(",")[0])
    assert 0 < low < 0.05  # the paired interval of +0.05, not one reaching below 0
    # Intervals of each defense alone overlap: only pairing separates them.
    rapt_low = float(c.table.rows[0][3].split("[")[1].split(",")[0])
    pct2t_high = float(c.table.rows[0][2].split(", ")[1].rstrip("]"))
    assert rapt_low < pct2t_high


def test_rapt_comparison_by_target_rate_when_the_grid_calibrated_by_rate() -> None:
    """Calibrated η differ per defense: no common η, so only the rate table, with the
    measured rates beside the target."""
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    etas = {"t2t": (11, 21), "pct2t": (12, 22), "rapt": (13, 23)}
    for label, (e1, e2) in etas.items():
        g.add(label, e1, "a", 0.5, 0.8)
        g.add(label, e2, "a", 0.5, 0.7)
    frame = g.frame()
    frame["target_rate"] = np.where(
        frame["defense"] == "none", math.nan, np.where(frame["knob_value"] < 20, 0.5, 0.3)
    )
    frame["replacement_rate"] = frame["target_rate"] + 0.01
    board = leaderboard(frame, 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert board.service is not None
    (c,) = board.service.rapt
    assert c.by == "target rate"
    assert c.table.headers[:2] == ["target rate", "measured rate (t2t / pct2t / rapt)"]
    assert [r[0] for r in c.table.rows] == ["0.3", "0.5"]
    assert c.table.rows[0][1] == "0.310 / 0.310 / 0.310"
    assert "below at none" in c.sentence


def test_no_rapt_no_section(tmp_path: Path) -> None:
    g = rapt_grid(
        {"t2t": (0.6, 0.6, 0.8), "pct2t": (0.6, 0.7, 0.8), "rapt": (0.8, 0.8, 0.8)}, rapt=False
    )
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert board.service is not None and board.service.rapt == ()
    assert board.service.sections() == []
    write_leaderboard(board, tmp_path)
    md = (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
    assert "RAPT's comparison" not in md and "CAPE's adversary" not in md


def cape_frame() -> tuple[pd.DataFrame, Grid]:
    """none and cape at ε 1 and 10, two attribute attacks; readouts on cape's points only."""
    g = Grid()
    for attack in ("attribute-inference[gender]", "attribute-inference[age]"):
        g.add(
            "none",
            0,
            attack,
            0.9,
            0.9,
            baseline=0.5,
            family="attribute",
            metric="attribute_accuracy",
        )
        for eps in (1, 10):
            g.add(
                "cape",
                eps,
                attack,
                0.6 if eps == 1 else 0.8,
                0.8,
                baseline=0.5,
                family="attribute",
                metric="attribute_accuracy",
            )
    frame = g.frame()
    cape = frame["defense"] == "cape"
    frame["knob"] = np.where(cape, "epsilon", None)
    frame["defense_params"] = np.where(cape, json.dumps({"attribute": "gender"}), "{}")
    frame["attribute_readout"] = np.where(
        cape, np.where(frame["knob_value"] == 1, 0.55, 0.7), math.nan
    )
    frame["attribute_readout_no_objective"] = np.where(cape, 0.8, math.nan)
    return frame, g


def test_cape_adversary_beside_the_release_attack(tmp_path: Path) -> None:
    frame, g = cape_frame()
    board = leaderboard(frame, 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert board.service is not None and board.service.rapt == ()
    table = board.service.adversary
    assert table is not None
    assert [r[:6] for r in table.rows] == [
        ["cape", "epsilon=1", "0.550", "0.800", "-0.250", "attribute-inference[gender]"],
        ["cape", "epsilon=10", "0.700", "0.800", "-0.100", "attribute-inference[gender]"],
    ]
    assert table.rows[0][6].startswith("0.600 [") and table.rows[0][7] == "0.500"
    ((title, _, caption),) = board.service.sections()
    assert title.startswith("CAPE's adversary") and caption.endswith(PRIVACY_REFERS_TO)
    assert "refers to the RELEASE" in PRIVACY_REFERS_TO
    # In leaderboard.md and in the report, as their own section.
    write_leaderboard(board, tmp_path / "board")
    md = (tmp_path / "board" / "leaderboard.md").read_text(encoding="utf-8")
    assert "## CAPE's adversary, measured" in md and "refers to the RELEASE" in md
    run = make_run(tmp_path / "run", frame.to_dict("records"))
    page = write_report(run, board=board).read_text(encoding="utf-8")
    assert '<section id="service">' in page and "refers to the RELEASE" in page


def test_service_below_the_probe_warns_first() -> None:
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.6)
    g.add("t2t", 1, "a", 0.5, 0.55)
    frame = with_columns(g, utility_evaluator="service", utility_lower_bound=0.7)
    board = leaderboard(frame, 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert board.notes[0] == PROBE_LINE
    # Within the 0.01 slack, or with no lower bound: no such line.
    for bound in (0.605, math.nan):
        frame["utility_lower_bound"] = bound
        board = leaderboard(frame, 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
        assert not any(n.startswith("The service evaluator reached") for n in board.notes)


def test_a_board_mixing_evaluators_is_refused_before_any_work() -> None:
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    g.add("t2t", 1, "a", 0.5, 0.8)
    frame = with_columns(g, utility_evaluator=["probe", "service"])
    with pytest.raises(ValueError, match=r"mix utility evaluators \(probe, service\).*rank each"):
        leaderboard(frame, 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    frame["utility_evaluator"] = "service"  # one evaluator: ranked
    board = leaderboard(frame, 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert board.families.set_index("label").loc["t2t", "rank"] == 1
