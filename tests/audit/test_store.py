"""The result store: resume, partial recomputation, crash safety, executors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from privaudit.audit.config import PRESETS, load_config
from privaudit.outputs import run_grid

SAME = ["defense", "knob_value", "attack", "status", "attack_score", "utility", "cell_key"]


def _smoke(**change):
    return load_config({**PRESETS["smoke"], **change})


def _cells(run_dir: Path) -> dict[str, float]:
    return {p.name: p.stat().st_mtime_ns for p in (run_dir / "cells").glob("*.json")}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return run_grid(_smoke(), run_dir=tmp_path_factory.mktemp("ref") / "r", progress=False)


def test_rerun_skips_every_finished_cell(reference) -> None:
    before = _cells(reference.run_dir)
    again = run_grid(_smoke(), run_dir=reference.run_dir, progress=False)
    assert json.loads((reference.run_dir / "run.json").read_text())["computed"] == 0
    assert _cells(reference.run_dir) == before  # nothing rewritten
    pd.testing.assert_frame_equal(again.frame[SAME], reference.frame[SAME])


def test_a_changed_component_recomputes_only_its_cells(reference, tmp_path) -> None:
    run_dir = tmp_path / "r"
    run_grid(_smoke(), run_dir=run_dir, progress=False)
    first = _cells(run_dir)
    labelled = [{"name": "nn-inversion"}, {"name": "nn-inversion", "label": "nn-2"}]
    result = run_grid(_smoke(attacks=labelled), run_dir=run_dir, progress=False, overwrite=True)
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["cells"] == 8 and meta["computed"] == 4  # only the new attack's cells
    assert all(_cells(run_dir)[name] == t for name, t in first.items())
    assert sorted(result.frame["attack"].unique()) == ["nn-2", "nn-inversion"]
    # A different utility evaluator setting recomputes utility, never the attack cells.
    util = {"name": "probe", "params": {"c": 0.5}}
    after = run_grid(_smoke(utility=util), run_dir=run_dir, progress=False, overwrite=True)
    assert json.loads((run_dir / "run.json").read_text())["computed"] == 0
    assert all(_cells(run_dir)[name] == t for name, t in first.items() if "cal" not in name)
    assert len(after.frame) == 4


def test_kill_9_then_resume_loses_nothing_finished(reference, tmp_path) -> None:
    run_dir = tmp_path / "killed"
    code = (
        "from privaudit.audit.config import load_config\n"
        "from privaudit.outputs import run_grid\n"
        "import privaudit.audit.executors as r, time\n"
        "real = r.compute\n"
        "def slow(*a, **k):\n"
        "    out = real(*a, **k)\n"
        "    time.sleep(1.5)\n"  # leave time to be killed between points
        "    return out\n"
        "r.compute = slow\n"
        f"run_grid(load_config('smoke'), run_dir={str(run_dir)!r}, progress=False)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).parents[2])
    deadline = time.time() + 120
    while time.time() < deadline and len(list((run_dir / "cells").glob("*.json"))) < 4:
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = _cells(run_dir)
    assert len(finished) > 0, "the run persisted nothing before it was killed"
    assert not json.loads((run_dir / "run.json").read_text())["finished"]  # it died mid-run
    resumed = run_grid(_smoke(), run_dir=run_dir, progress=False)
    assert all(_cells(run_dir)[name] == t for name, t in finished.items())  # not recomputed
    pd.testing.assert_frame_equal(resumed.frame[SAME], reference.frame[SAME])


def test_failed_cells_are_retried(tmp_path, monkeypatch) -> None:
    import privaudit.attacks.nn_inversion as nn

    real, calls = nn.NNInversion.attack, []

    def flaky(self, release):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("transient")
        return real(self, release)

    monkeypatch.setattr(nn.NNInversion, "attack", flaky)
    first = run_grid(_smoke(), run_dir=tmp_path / "r", progress=False).frame
    assert (first["status"] == "failed").sum() == 1
    assert "RuntimeError" in first.loc[first["status"] == "failed", "reason"].iloc[0]
    again = run_grid(_smoke(), run_dir=tmp_path / "r", progress=False).frame
    assert (again["status"] == "ok").all() and len(calls) == 5


def test_process_pool_gives_the_same_rows(reference, tmp_path) -> None:
    pooled = run_grid(_smoke(), run_dir=tmp_path / "pool", progress=False, jobs=2)
    pd.testing.assert_frame_equal(pooled.frame[SAME], reference.frame[SAME])


def test_executor_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="Unknown executor 'spark'"):
        run_grid(_smoke(), run_dir=tmp_path / "x", progress=False, executor="spark")
    with pytest.raises(ValueError, match="--executor ray"):
        run_grid(_smoke(), run_dir=tmp_path / "x", progress=False, address="auto")
    with pytest.raises(ValueError, match=r"executor\.jobs"):
        _smoke(executor={"kind": "local", "jobs": 0})
    with pytest.raises(ValueError, match=r"executor\.kind"):
        _smoke(executor={"kind": "dask"})


def test_cli_resume(reference, tmp_path) -> None:
    from typer.testing import CliRunner

    from privaudit.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["run", "--resume", str(reference.run_dir), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert json.loads((reference.run_dir / "run.json").read_text())["computed"] == 0
    assert "leaderboard" in result.output and "report.html" in result.output
    empty = runner.invoke(app, ["run", "--resume", str(tmp_path)])
    assert empty.exit_code != 0 and "has no config.json" in empty.output
    both = runner.invoke(app, ["run", "--resume", str(reference.run_dir), "--run-dir", "x"])
    assert both.exit_code != 0 and "--resume takes its config" in both.output


def test_ray_executor_gives_the_same_rows(reference, tmp_path) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install privaudit[ray])")
    on_ray = run_grid(_smoke(), run_dir=tmp_path / "ray", progress=False, executor="ray", jobs=2)
    pd.testing.assert_frame_equal(on_ray.frame[SAME], reference.frame[SAME])
