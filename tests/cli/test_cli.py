"""The command line, driven as a user would."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

from privaudit.cli import app
from tests.conftest import TINY

runner = CliRunner()


def test_help_and_list_do_not_import_torch() -> None:
    code = (
        "import sys; from privaudit.cli import app; from privaudit.registry import DEFENSES;"
        "[DEFENSES.get(n) for n in DEFENSES.names()];"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_importing_the_cli_loads_no_numpy_pydantic_or_runner() -> None:
    """What ``privaudit --help`` pays for: the commands' heavier imports stay inside them."""
    code = (
        "import sys; import privaudit.cli;"
        "loaded = [m for m in ('numpy', 'pydantic', 'pandas', 'torch', 'privaudit.audit',"
        " 'privaudit.leaderboard', 'privaudit.outputs', 'privaudit.metrics',"
        " 'privaudit.cli.render') if m in sys.modules];"
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_help() -> None:
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for command in ("run", "list", "privatize", "calibrate"):
        assert command in result.output


def test_list() -> None:
    result = runner.invoke(app, ["list"])
    assert result.exit_code == 0, result.output
    for name in ("t2t", "none", "nn-inversion", "probe", "synthetic-reviews", "eta"):
        assert name in result.output
    assert "cannot load" not in result.output
    only = runner.invoke(app, ["list", "attacks"])
    assert "nn-inversion" in only.output and "t2t" not in only.output
    bad = runner.invoke(app, ["list", "gadgets"])
    assert bad.exit_code != 0


def _line_of(output: str, name: str) -> str:
    """The listing's line for ``name`` (its first word)."""
    (line,) = [line for line in output.splitlines() if line.split()[:1] == [name]]
    return line


def test_list_metrics_shows_each_metric_its_direction_and_the_families() -> None:
    from privaudit.metrics import families, metrics

    result = runner.invoke(app, ["list", "metrics"])
    assert result.exit_code == 0, result.output
    for name, spec in metrics().items():
        line = _line_of(result.output, name)
        assert f"family: {spec.family}" in line and spec.description in line
        assert f"predictions: {spec.prediction_kind}" in line
        if spec.baseline is not None:
            assert f"baseline: {spec.baseline.label}" in line
    assert "lower = stronger attack" in _line_of(result.output, "embedding_mse")
    assert "higher = stronger attack" in _line_of(result.output, "token_recovery")
    assert "baseline: none" in _line_of(result.output, "entity_f1")
    for name, family in families().items():
        assert family.description in _line_of(result.output, name)
    # With no argument, metrics come after the attacks and before the corpora.
    everything = runner.invoke(app, ["list"]).output.splitlines()
    heads = [line for line in everything if line and not line.startswith(" ")]
    assert heads == ["defenses", "attacks", "metrics", "metric families", "corpora", "utility"]
    attacks = runner.invoke(app, ["list", "attacks"]).output
    assert "metric: embedding_mse (lower = stronger attack)" in _line_of(attacks, "ae-inversion")
    assert "metrics" not in attacks.splitlines()
    bad = runner.invoke(app, ["list", "metric"])  # an unknown target: a usage error, no trace
    assert bad.exit_code == 2 and "'metric'" in bad.output and "Traceback" not in bad.output


def test_privatize_stdin_to_stdout() -> None:
    text = "My name is Ann.\n\nI live in Leeds 😀\n"
    args = ["privatize", "--defense", "t2t", "--knob", "1e9", "--backbone", TINY]
    result = runner.invoke(app, args, input=text)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["my name is ann.", "", "i live in leeds"]
    noisy = runner.invoke(app, [*args[:4], "1", *args[5:], "--seed", "3"], input=text)
    again = runner.invoke(app, [*args[:4], "1", *args[5:], "--seed", "3"], input=text)
    assert noisy.stdout == again.stdout != result.stdout
    assert len(noisy.stdout.splitlines()) == 3


def test_privatize_errors_are_one_clear_line() -> None:
    unknown = runner.invoke(app, ["privatize", "--defense", "t2tt"], input="x\n")
    assert unknown.exit_code == 2
    assert "Did you mean 't2t'" in unknown.output and "Traceback" not in unknown.output
    for knob in ("-1", "nan"):
        bad = runner.invoke(
            app, ["privatize", "--defense", "t2t", "--knob", knob, "--backbone", TINY], input="x\n"
        )
        assert bad.exit_code == 2, bad.output
        assert f"eta={float(knob)} is not allowed" in bad.output
    param = runner.invoke(app, ["privatize", "--defense", "t2t", "--param", "oops"], input="x\n")
    assert param.exit_code == 2 and "key=value" in param.output
    extra = runner.invoke(app, ["privatize", "--defense", "t2t", "--param", "colour=1"], input="")
    assert extra.exit_code == 2 and "has no parameter 'colour'" in extra.output


def test_calibrate_measures_and_solves() -> None:
    base = ["calibrate", "--defense", "t2t", "--backbone", TINY, "--n-docs", "20"]
    table = runner.invoke(app, [*base, "--values", "10,300,1000"])
    assert table.exit_code == 0, table.output
    assert "replacement rate" in table.output
    solved = runner.invoke(app, [*base, "--rate", "0.3", "--values", "100,200,400,800"])
    assert solved.exit_code == 0, solved.output
    assert "target 0.3" in solved.output
    eta = float(solved.output.strip().splitlines()[-1])
    assert 200 <= eta <= 800
    out_of_range = runner.invoke(app, [*base, "--rate", "1.5"])
    assert out_of_range.exit_code == 2 and "strictly between 0 and 1" in out_of_range.output
    none = runner.invoke(app, ["calibrate", "--defense", "none", "--n-docs", "5"])
    assert none.exit_code == 2 and "no privacy knob" in none.output


def test_run_smoke_preset(tmp_path) -> None:
    result = runner.invoke(
        app, ["run", "--preset", "smoke", "--out", str(tmp_path), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    (run_dir,) = list(tmp_path.iterdir())
    frame = pd.read_csv(run_dir / "results.csv")
    assert len(frame) == 4
    assert "results.csv" in result.output and "pareto_nn-inversion.png" in result.output
    missing = runner.invoke(app, ["run", "--preset", "nope"])
    assert missing.exit_code == 2 and "neither a preset" in missing.output


def test_privatize_every_text_defense() -> None:
    text = "Sarah Jones flew from London to Paris on Monday.\n\n"
    for args in (
        ["--defense", "pct2t", "--knob", "1e9"],
        ["--defense", "rapt", "--knob", "1e9", "--param", "n_plain=4"],
        ["--defense", "has"],
        ["--defense", "has", "--param", "mode=generative", "--knob", "4"],
    ):
        result = runner.invoke(app, ["privatize", *args, "--backbone", TINY], input=text)
        assert result.exit_code == 0, (args, result.output)
        lines = result.stdout.splitlines()
        assert len(lines) == 2, (args, lines)
    has = runner.invoke(app, ["privatize", "--defense", "has"], input=text)
    assert "Sarah" not in has.stdout and "<PERSON_1>" in has.stdout
    vectors = runner.invoke(app, ["privatize", "--defense", "embedding-dx"], input=text)
    assert vectors.exit_code == 2 and "token_vectors" in vectors.output
    level = runner.invoke(app, ["privatize", "--defense", "has", "--knob", "7"], input=text)
    assert level.exit_code == 2 and "level=7.0 is not allowed" in level.output
    category = runner.invoke(
        app, ["privatize", "--defense", "pct2t", "--param", "categories=nouns"], input=text
    )
    assert category.exit_code == 2 and "Did you mean 'noun'" in category.output


def test_grid_with_every_issue3_defense_and_target_rates(tmp_path) -> None:
    from privaudit.audit.config import PRESETS, load_config
    from privaudit.outputs import run_grid

    data = {
        **PRESETS["smoke"],
        "defenses": [
            {"name": "pct2t", "target_rates": [0.3]},
            {"name": "rapt", "knob_values": [100], "params": {"n_plain": 5}},
            {"name": "embedding-dx", "knob_values": [100]},
            {"name": "has", "knob_values": [1, 4]},
        ],
    }
    frame = run_grid(load_config(data), run_dir=tmp_path / "r", progress=False).frame
    assert (frame["status"] == "ok").all(), frame["reason"].tolist()
    pct = frame[frame["defense"] == "pct2t"].iloc[0]
    assert pct["target_rate"] == 0.3 and abs(pct["replacement_rate"] - 0.3) < 0.15
    # The probe trains no service-side objective: RAPT's reconstruction is not applied, and
    # its rows say so rather than passing the privatizer's noise alone off as RAPT.
    assert set(frame["label"]) == {
        "pct2t",
        "rapt[n_plain=5] (objective not applied)",
        "embedding-dx",
        "has",
    }
    rapt = frame[frame["defense"] == "rapt"].iloc[0]
    assert rapt["objective"].startswith("not applied: the probe")


@pytest.mark.parametrize(
    ("grid", "says"),
    [
        (
            "defenses: [{name: t2tt, knob_values: [50]}]\nattacks: [nn-inversion]\n",
            "defenses.0.name: Unknown defense 't2tt'. Did you mean 't2t'",
        ),
        (
            "defenses: [{name: t2t, knob_values: [fifty]}]\nattacks: [nn-inversion]\n",
            "defenses.0.knob_values.0: Input should be a valid number",
        ),
        (
            "defenses: [{name: t2t, knob_values: [50]}]\nattacks: [nn-invertion]\n",
            "attacks.0: Unknown attack 'nn-invertion'. Did you mean 'nn-inversion'",
        ),
    ],
)
def test_bad_grid_configs_fail_in_one_line(grid, says, tmp_path) -> None:
    path = tmp_path / "grid.yaml"
    path.write_text(grid)
    result = runner.invoke(app, ["run", "--config", str(path), "--run-dir", str(tmp_path / "r")])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], result.output
