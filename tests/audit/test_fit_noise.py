"""Measured fit noise (issue 47): a run refits its random fits at the undefended point, keeps
the spreads in fit_noise.csv, and the board uses the larger of the measured and the declared
spread, saying which."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pandas as pd
import pytest
from scipy.stats import chi2

from privaudit.audit.config import PRESETS, load_config
from privaudit.audit.store import RunDir
from privaudit.leaderboard.fit_spreads import measured_notes, with_measured
from privaudit.metrics.stats import measured_sds, sd_upper_bound
from privaudit.outputs import run_grid
from privaudit.outputs.runs import load_runs
from privaudit.runtime import memory


def test_a_run_measures_its_random_fits_at_the_undefended_point(
    tmp_path, capsys, monkeypatch
) -> None:
    data = dict(PRESETS["smoke"]) | {
        "attacks": ["nn-inversion", "attribute-inference"],
        "defenses": [{"name": "none"}, {"name": "t2t", "knob_values": [10]}],
        "fit_noise": {"refits": 2},
    }
    log = tmp_path / "memory.jsonl"
    monkeypatch.setenv(memory.ENV, str(log))
    run_grid(load_config(data), run_dir=tmp_path / "r", progress=False)
    # The stages after the grid are measured like a point's components (issue 50: the
    # refits, untrimmed and unlogged, were where the whole run's peak came).
    after = [
        r["component"]
        for r in map(json.loads, log.read_text().splitlines())
        if r["point"] == "after the grid"
    ]
    if sys.platform.startswith("linux"):
        assert after == ["results", "fit noise: attribute-inference", "intervals", "outputs"]
    # A --no-progress log is not silent while the refits run (issue 50): a line per step.
    log = [ln for ln in capsys.readouterr().err.splitlines() if "fit noise" in ln]
    assert log[-1].startswith("privaudit: fit noise 2/2 refits done (attribute-inference")
    assert "elapsed" in log[-1] and "ETA" in log[-1]
    table = RunDir(tmp_path / "r").read_fit_noise()
    assert table is not None and set(table["what"]) == {"attack"}  # the probe is deterministic
    # attribute-inference (declared .01) is refitted; nn-inversion (declared 0, a
    # deterministic fit, tests/test_conformance.py) is not.
    assert all(label.startswith("attribute-inference[") for label in table["label"])
    assert (table["fits"] == 3).all() and (table["declared_sd"] == 0.01).all()
    for _, row in table.iterrows():
        scores = [float(s) for s in row["scores"].split(";")]
        assert math.isclose(row["measured_sd"], float(np.std(scores, ddof=1)), rel_tol=1e-4)
    results = RunDir(tmp_path / "r").read_results()
    grid = results.set_index("attack")["attack_score"]
    for _, row in table.iterrows():  # the grid's own fit is the first score
        first = float(row["scores"].split(";")[0])
        assert math.isclose(
            first,
            float(grid[(results["defense"] == "none").to_numpy()].loc[row["label"]]),
            rel_tol=1e-5,
        )
    runs = load_runs([tmp_path / "r"])
    inputs = runs.board_inputs()
    assert set(inputs["measured_fit_sd"]) == set(table["label"])
    board = (tmp_path / "r" / "leaderboard.md").read_text(encoding="utf-8")
    assert "Fit noise measured in this run" in board


def test_no_refits_measure_nothing(tmp_path) -> None:
    data = dict(PRESETS["smoke"]) | {
        "attacks": ["attribute-inference"],
        "defenses": [{"name": "none"}],
        "fit_noise": {"refits": 0},
    }
    run_grid(load_config(data), run_dir=tmp_path / "r", progress=False)
    assert RunDir(tmp_path / "r").read_fit_noise() is None


def test_the_larger_spread_is_used_and_the_board_says_which() -> None:
    declared = ({"a[x]": 0.01, "b": 0.0}, {"service": 0.015}, {"service": 0.015})
    sds, util, u_sds = with_measured(declared, {"a[x]": 0.03, "b": 0.002}, 0.004)
    assert sds == {"a[x]": 0.03, "b": 0.002}
    assert util == {"service": 0.015} and u_sds == {"service": 0.015}
    (note,) = measured_notes(declared[0], declared[2], {"a[x]": 0.03}, 0.004)
    assert "a[x] 0.03 measured, 0.01 declared (measured used)" in note
    assert "the service 0.004 measured, 0.015 declared (declared used)" in note
    assert measured_notes({}, {}, None, None) == []
    table = pd.DataFrame(
        {
            "what": ["attack", "attack", "utility"],
            "label": ["a", "a", "s"],
            "measured_sd": [0.01, 0.02, 0.005],
            "fits": [3, 3, 3],
            "status": ["ok"] * 3,
        }
    )
    # each as its 80 % upper bound over 3 fits: sd * sqrt(2 / chi2.ppf(0.2, 2)) = sd * 2.12
    factor = math.sqrt(2 / chi2.ppf(0.2, 2))
    attacks, service = measured_sds(table)
    assert attacks == {"a": pytest.approx(0.02 * factor)}
    assert service == pytest.approx(0.005 * factor)
    assert sd_upper_bound(0.02, 3) == pytest.approx(0.02 * factor)
    assert math.isnan(sd_upper_bound(0.02, 1))  # one fit measures no spread
    assert measured_sds(None) == ({}, None)


def test_a_stage_without_a_bar_logs_each_step_with_elapsed_time_and_eta(capsys) -> None:
    from privaudit.audit.stage_progress import StageProgress

    stage = StageProgress("strength", 3, "fit", progress=False)
    for what in ("geia · aux 0.25", "geia · aux 0.5", "geia · public 0.5"):
        stage.step(what)
        stage.advance()
    stage.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("privaudit: strength 1/3 fits done (geia")
    assert lines[-1].endswith("ETA 0 s") and "(geia · public 0.5)" in lines[-1]
    StageProgress("strength", 0, "fit", progress=False).close()  # nothing to do: silent
    assert capsys.readouterr().err == ""
