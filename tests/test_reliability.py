"""Issue 15, first items: a dead run is not exit 0; config mistakes are one clear line before
any work; one output that cannot be made never costs the others."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from privaudit.audit.config import PRESETS, load_config
from privaudit.cli import EXIT_CELLS_FAILED, app

runner = CliRunner()


def _write(tmp_path, data: dict, name: str = "grid.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_version() -> None:
    from privaudit import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"privaudit {__version__}"


def test_failed_cells_exit_3_unless_allowed(tmp_path) -> None:
    data = {
        **PRESETS["smoke"],
        "defenses": [{"name": "tests.audit.test_runner:Exploding"}, {"name": "none"}],
    }
    path = _write(tmp_path, data)
    failed = runner.invoke(
        app, ["run", "--config", str(path), "--run-dir", str(tmp_path / "a"), "--no-progress"]
    )
    assert failed.exit_code == EXIT_CELLS_FAILED == 3, failed.output
    assert "1 of 2 cells failed (1 distinct reason(s)" in failed.output
    assert (tmp_path / "a" / "report.html").is_file()  # everything else is still written
    allowed = runner.invoke(
        app, ["run", "--resume", str(tmp_path / "a"), "--no-progress", "--allow-failures"]
    )
    assert allowed.exit_code == 0 and "--allow-failures" not in allowed.output.split("cells")[-1]
    ok = runner.invoke(
        app, ["run", "--preset", "smoke", "--run-dir", str(tmp_path / "b"), "--no-progress"]
    )
    assert ok.exit_code == 0 and "cells failed" not in ok.output


def test_malformed_yaml_is_one_line_with_file_line_column(tmp_path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: x\ndefenses: [\n  - {name: t2t\nattacks: [nn-inversion]\n")
    result = runner.invoke(app, ["run", "--config", str(path)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and f"{path}:3:3: invalid YAML:" in lines[0], result.output
    bad_json = tmp_path / "broken.json"
    bad_json.write_text('{"name": "x",\n "defenses": [}')
    with pytest.raises(ValueError, match=rf"{bad_json}:2:15: invalid JSON"):
        load_config(bad_json)


def test_config_mistakes_name_field_value_and_fix(tmp_path) -> None:
    missing = runner.invoke(app, ["run", "--config", str(tmp_path / "nope.yaml")])
    assert missing.exit_code == 2 and "PosixPath" not in missing.output
    assert f"'{tmp_path / 'nope.yaml'}' is neither a preset" in missing.output
    smoke = PRESETS["smoke"]
    cases = [
        (
            {k: v for k, v in smoke.items() if k != "defenses"} | {"defences": smoke["defenses"]},
            "defences: unknown field. Did you mean 'defenses'?",
        ),
        (
            smoke | {"defenses": [{"name": "t2t", "lable": "x"}]},
            "defenses.0.lable: unknown field. Did you mean 'label'?",
        ),
        (smoke | {"seeds": [-1]}, "seeds.0: Input should be greater than or equal to 0 (got -1)"),
        (
            smoke | {"attacks": [{"name": "nn-inversion", "label": "nn/white-box"}]},
            "attacks.0.label: a label may not contain '/'",
        ),
        (
            smoke | {"defenses": [{"name": "t2t", "params": {"eta": "abc"}}]},
            "defenses.0.params: t2t (T2T) parameter eta='abc' is not allowed",
        ),
        (
            smoke | {"corpus": {"name": "synthetic-reviews", "params": {"n_doc": 10}}},
            "corpus.params: synthetic_reviews has no parameter 'n_doc'. Did you mean 'n_docs'?",
        ),
    ]
    for i, (data, message) in enumerate(cases):
        run_dir = tmp_path / f"r{i}"
        result = runner.invoke(
            app, ["run", "--config", str(_write(tmp_path, data)), "--run-dir", str(run_dir)]
        )
        assert result.exit_code == 2, (message, result.output)
        assert message in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert not run_dir.exists()  # nothing was computed or written


def test_one_failing_output_costs_nothing_else(tmp_path, monkeypatch) -> None:
    from privaudit.outputs import plots, run_grid

    def broken(*args, **kwargs):
        raise RuntimeError("no room on the canvas")

    monkeypatch.setattr(plots, "frontier_figure", broken)
    with pytest.warns(UserWarning, match="frontiers.png: RuntimeError: no room"):
        result = run_grid(load_config("smoke"), run_dir=tmp_path / "r", progress=False)
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["finished"] and meta["output_problems"] == [
        "frontiers.png: RuntimeError: no room on the canvas"
    ]
    for name in ("results.csv", "report.html", "leaderboard.md", "pareto_nn-inversion.png"):
        assert (tmp_path / "r" / name).is_file(), name
    assert not (tmp_path / "r" / "frontiers.png").exists()
    assert result.plots  # the others are listed


def test_plot_file_names_are_always_safe(tmp_path) -> None:
    from privaudit.audit.store import RunDir

    rd = RunDir(tmp_path)
    assert rd.pareto_png("attribute-inference[gender]").name == (
        "pareto_attribute-inference-gender.png"
    )
    assert rd.pareto_png("nn/white box").name == "pareto_nn-white-box.png"
    assert rd.pareto_png("../..").parent == tmp_path


def test_a_run_directory_is_never_silently_reused_by_another_config(tmp_path) -> None:
    run_dir = str(tmp_path / "r")
    first = runner.invoke(app, ["run", "--preset", "smoke", "--run-dir", run_dir, "--no-progress"])
    assert first.exit_code == 0
    other = {**PRESETS["smoke"], "defenses": [{"name": "none"}]}
    path = _write(tmp_path, other)
    refused = runner.invoke(app, ["run", "--config", str(path), "--run-dir", run_dir])
    assert refused.exit_code == 2 and "holds a run of another config ('smoke')" in refused.output
    assert "--resume" in refused.output and "--overwrite" in refused.output
    assert json.loads((tmp_path / "r" / "config.json").read_text())["defenses"][1]["name"] == "t2t"
    again = runner.invoke(app, ["run", "--preset", "smoke", "--run-dir", run_dir, "--no-progress"])
    assert again.exit_code == 0  # the same config continues its own run
    replaced = runner.invoke(
        app, ["run", "--config", str(path), "--run-dir", run_dir, "--overwrite", "--no-progress"]
    )
    assert replaced.exit_code == 0
    frame = pd.read_parquet(tmp_path / "r" / "results.parquet")
    assert set(frame["defense"]) == {"none"}  # the new config's rows only
    assert json.loads((tmp_path / "r" / "run.json").read_text())["computed"] == 0  # reused


def test_failure_reasons_show_package_paths() -> None:
    from privaudit.audit.reasons import package_path as _package_path

    assert _package_path("/opt/venv/lib/site-packages/privaudit/utility/probe.py") == (
        "privaudit/utility/probe.py"
    )
    assert _package_path("/home/me/plugins/mine.py") == "mine.py"


def test_knob_values_show_four_significant_digits_and_keep_the_exact_value(tmp_path) -> None:
    from privaudit.numbers import shown

    assert shown(105.16591384263059) == "105.2" and shown(100.0) == "100" and shown(0.5) == "0.5"
    exact = 105.16591384263059
    data = {**PRESETS["smoke"], "defenses": [{"name": "t2t", "knob_values": [exact]}]}
    result = runner.invoke(
        app,
        [
            "run",
            "--config",
            str(_write(tmp_path, data)),
            "--run-dir",
            str(tmp_path / "r"),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "eta=105.2" in result.output and "105.166" not in result.output
    html = (tmp_path / "r" / "report.html").read_text()
    assert ">105.2<" in html and "105.166" not in html
    assert pd.read_parquet(tmp_path / "r" / "results.parquet")["knob_value"].iloc[0] == exact


def test_a_plan_that_fails_leaves_no_empty_run_directory(tmp_path, monkeypatch) -> None:
    from privaudit.audit import runner as grid_runner

    def failing_plan(*args, **kwargs):
        raise ValueError("defenses.0: fitting failed")

    monkeypatch.setattr(grid_runner, "plan", failing_plan)
    with pytest.raises(ValueError, match="fitting failed"):
        grid_runner.run_grid(load_config("smoke"), run_dir=tmp_path / "r", progress=False)
    assert not (tmp_path / "r").exists()
    kept = tmp_path / "mine"
    kept.mkdir()  # a directory the user made is theirs: never removed
    with pytest.raises(ValueError, match="fitting failed"):
        grid_runner.run_grid(load_config("smoke"), run_dir=kept, progress=False)
    assert kept.is_dir()


def test_progress_bar_terminal_and_report_count_cells_alike(tmp_path) -> None:
    from privaudit.audit.store import cell_counts

    data = {
        **PRESETS["smoke"],
        "defenses": [{"name": "none"}, {"name": "cape", "knob_values": [10]}],
        "attacks": ["nn-inversion", "attribute-inference"],
    }
    result = runner.invoke(
        app,
        [
            "run",
            "--config",
            str(_write(tmp_path, data)),
            "--run-dir",
            str(tmp_path / "r"),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    frame = pd.read_parquet(tmp_path / "r" / "results.parquet")
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    counts = cell_counts(frame)
    # 2 points x 2 attacks; attribute inference gives a row per attribute
    assert meta["cells"] == counts["all"] == 4 and len(frame) > 4
    assert counts["n/a"] == 1  # nn-inversion cannot read cape's pooled vectors
    assert "1 of 4 cells are n/a" in result.output
    html = (tmp_path / "r" / "report.html").read_text()
    assert f"4: {counts['ok']} ok, 1 n/a, 0 failed ({len(frame)} result rows)" in html


def test_a_run_written_before_a_new_config_field_still_resumes(tmp_path) -> None:
    run_dir = tmp_path / "r"
    first = runner.invoke(
        app, ["run", "--preset", "smoke", "--run-dir", str(run_dir), "--no-progress"]
    )
    assert first.exit_code == 0, first.output
    saved = json.loads((run_dir / "config.json").read_text())
    del saved["executor"]  # as an older privaudit wrote it: a field with a default missing
    (run_dir / "config.json").write_text(json.dumps(saved))
    again = runner.invoke(app, ["run", "--resume", str(run_dir), "--no-progress"])
    assert again.exit_code == 0, again.output
    assert json.loads((run_dir / "run.json").read_text())["computed"] == 0
