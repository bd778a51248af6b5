"""The attack-strength stage: the curve of each attack at the undefended point against the
attacker's aux documents (strength.csv, strength.png), and the report's "Attack strength"
section, with and without the curve."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from privaudit.audit.config import PRESETS, load_config
from privaudit.audit.store import RunDir

FRACTIONS = [0.25, 0.5]


def _grid(**extra: Any) -> dict[str, Any]:
    return (
        dict(PRESETS["smoke"])
        | {
            "defenses": [{"name": "none"}],
            # mlp-inversion learns from the aux; nn-inversion (white box) does not: no curve
            "attacks": [{"name": "mlp-inversion", "params": {"epochs": 2}}, "nn-inversion"],
        }
        | extra
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from privaudit.outputs import run_grid

    config = load_config(_grid(strength={"fractions": FRACTIONS}))
    return run_grid(config, run_dir=tmp_path_factory.mktemp("s") / "run", progress=False)


def test_the_curve_has_a_row_per_share_and_ends_on_the_grid_cell(run: Any) -> None:
    rd = RunDir(run.run_dir)
    curve = rd.read_strength()
    assert curve is not None and rd.strength_csv in rd.outputs()
    assert set(curve["attack"]) == {"mlp-inversion"}  # nn-inversion reads no aux
    assert curve["fraction"].tolist() == [0.25, 0.5, 1.0]
    assert (curve["status"] == "ok").all(), curve["reason"].tolist()
    n_aux = int(rd.read_meta()["corpus_sizes"]["aux"])
    assert curve["n_aux"].tolist() == [round(0.25 * n_aux), round(0.5 * n_aux), n_aux]
    assert curve["reused"].tolist() == [False, False, True]
    cell = run.frame[(run.frame["label"] == "none") & (run.frame["attack"] == "mlp-inversion")]
    last = curve.iloc[-1]
    for column in ("attack_score", "attack_score_ci_low", "attack_score_ci_high"):
        assert last[column] == pytest.approx(float(cell[column].iloc[0]), abs=1e-12), column
    smaller = curve.iloc[:2]
    assert (smaller["attack_score_ci_low"] <= smaller["attack_score"]).all()
    assert (smaller["attack_score"] <= smaller["attack_score_ci_high"]).all()


def test_the_report_shows_the_section_and_the_figure(run: Any) -> None:
    rd = RunDir(run.run_dir)
    page = rd.report_html.read_text(encoding="utf-8")
    assert "<h2>Attack strength</h2>" in page and "no-information baseline" in page
    section = page.split('<section id="strength">', 1)[1].split("</section>", 1)[0]
    assert "data:image/png;base64," in section  # the curve, embedded
    assert "mlp-inversion: " in section and ("saturated" in section or "growing" in section)
    assert rd.strength_png.is_file() and rd.strength_png.read_bytes()[:4] == b"\x89PNG"
    md = rd.leaderboard("md").read_text(encoding="utf-8")
    assert "## Attack strength" in md and "aux documents" in md


def test_a_run_without_the_curve_says_how_to_enable_it(run: Any, tmp_path: Path) -> None:
    from privaudit.outputs.report import write_report

    RunDir(run.run_dir).strength_csv.rename(tmp_path / "kept.csv")
    try:
        page = write_report(run.run_dir, out=tmp_path / "r.html").read_text(encoding="utf-8")
    finally:
        (tmp_path / "kept.csv").rename(RunDir(run.run_dir).strength_csv)
    section = page.split('<section id="strength">', 1)[1].split("</section>", 1)[0]
    assert "not computed" in section and "strength: {fractions:" in section
    assert "mlp-inversion" in section  # the undefended table is there all the same


@pytest.mark.parametrize(
    ("fractions", "message"),
    [
        ([0], r"0 is not in \(0, 1\]"),
        ([0.5, 1.5], r"1\.5 is not in \(0, 1\]"),
        ([], "fractions is empty"),
        (["half"], "'half' is not a number"),
        ([True], "True is not a number"),
    ],
)
def test_bad_fractions_are_refused_when_the_grid_is_planned(
    fractions: list[Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        load_config(_grid(strength={"fractions": fractions}))
    assert "\n" not in str(caught.value) and "strength.fractions" in str(caught.value)


def test_the_curve_needs_the_undefended_point() -> None:
    data = _grid(strength={}, defenses=[{"name": "t2t", "knob_values": [100]}])
    with pytest.raises(ValueError, match=re.escape("add {name: none} to defenses")) as caught:
        load_config(data)
    assert "\n" not in str(caught.value)
    assert load_config(_grid(strength={})).strength.levels() == [0.25, 0.5, 1.0]


def test_strength_is_an_output_option_of_scores_only(run: Any) -> None:
    from privaudit.audit.runner import OUTPUT_OPTIONS
    from privaudit.audit.strength import STRENGTH_COLUMNS

    assert "strength" in OUTPUT_OPTIONS  # a rerun into the directory may add the curve
    frame = pd.read_csv(RunDir(run.run_dir).strength_csv)
    assert list(frame.columns) == STRENGTH_COLUMNS  # scores only, never corpus text


def test_privaudit_report_shows_the_section(run: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from privaudit.cli import app

    out = tmp_path / "cli.html"
    result = CliRunner().invoke(app, ["report", str(run.run_dir), "--out", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert '<section id="strength">' in page and "mlp-inversion: " in page
