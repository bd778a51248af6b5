"""Issue 24, what a run writes and where: a user's folder is never written over, --overwrite
takes the previous config's outputs away, every output location is checked before any work,
and an unfinished run is reported as one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest
import yaml
from typer.testing import CliRunner

from privaudit.api import Defense, Release
from privaudit.audit.config import PRESETS
from privaudit.audit.store import RunDir
from privaudit.cli import EXIT_UNFINISHED, app
from privaudit.params import PositiveFloat

REPO = Path(__file__).resolve().parents[2]
runner = CliRunner()


def _write(tmp_path: Path, data: dict, name: str) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _no_work(monkeypatch) -> None:
    """Fail the test if the run gets as far as loading its corpus and backbone."""
    import privaudit.audit.runner as grid_runner

    def context_for(config):
        raise AssertionError("the run started work")

    monkeypatch.setattr(grid_runner, "context_for", context_for)


# ---- item 3: a folder that is not a privaudit run -------------------------------------------


def test_a_users_own_folder_is_refused_before_any_work(tmp_path, monkeypatch) -> None:
    mine = tmp_path / "userdir"
    mine.mkdir()
    (mine / "results.csv").write_text("my,own\n1,2\n")
    (mine / "report.html").write_text("<p>mine</p>")
    _no_work(monkeypatch)
    for extra in ([], ["--overwrite"]):  # --overwrite is for privaudit runs only
        result = runner.invoke(
            app, ["run", "--preset", "smoke", "--run-dir", str(mine), "--no-progress", *extra]
        )
        assert result.exit_code == 2, result.output
        assert result.output.strip().splitlines() == [
            f"Error: {mine} is not empty and is not a privaudit run; "
            "choose another --run-dir, or empty it."
        ]
    assert (mine / "results.csv").read_text() == "my,own\n1,2\n"
    assert sorted(p.name for p in mine.iterdir()) == ["report.html", "results.csv"]
    # A run.json that privaudit did not write does not make a folder a run.
    (mine / "run.json").write_text('{"mine": true}')
    assert runner.invoke(app, ["run", "--preset", "smoke", "--run-dir", str(mine)]).exit_code == 2


# ---- item 8: --overwrite takes the previous config's outputs away ---------------------------


def test_overwrite_removes_the_previous_configs_outputs_and_only_those(tmp_path) -> None:
    defenses = [{"name": "none"}, {"name": "t2t", "knob_values": [10]}]
    small = {**PRESETS["smoke"], "defenses": defenses}
    attacks = ["nn-inversion", "attribute-inference"]
    first = _write(tmp_path, {**small, "name": "first", "attacks": attacks}, "a.yaml")
    second = _write(tmp_path, {**small, "name": "second"}, "b.yaml")
    run_dir = tmp_path / "run"
    run_dir.mkdir()  # an empty folder is taken
    done = runner.invoke(
        app, ["run", "--config", str(first), "--run-dir", str(run_dir), "--no-progress"]
    )
    assert done.exit_code == 0, done.output
    stale = sorted(p.name for p in run_dir.glob("pareto_attribute-inference-*.png"))
    assert len(stale) == 2  # one per target
    # RunDir declares every file a run writes besides its config, run.json and cell store.
    written = {p.name for p in run_dir.iterdir()} - {"config.json", "run.json", "cells"}
    assert {p.name for p in RunDir(run_dir).outputs()} == written
    (run_dir / "notes.txt").write_text("the user's own note")  # privaudit never wrote it
    cells = sorted(p.name for p in (run_dir / "cells").iterdir())

    replaced = runner.invoke(
        app,
        ["run", "--config", str(second), "--run-dir", str(run_dir), "--overwrite", "--no-progress"],
    )
    assert replaced.exit_code == 0, replaced.output
    names = {p.name for p in run_dir.iterdir()}
    assert not names & set(stale)
    assert {
        "pareto_nn-inversion.png",
        "frontiers.png",
        "families.png",
        "report.html",
        "results.csv",
        "leaderboard.md",
        "notes.txt",
    } <= names
    assert (run_dir / "notes.txt").read_text() == "the user's own note"
    assert sorted(p.name for p in (run_dir / "cells").iterdir()) == cells  # the store is kept
    assert json.loads((run_dir / "run.json").read_text())["computed"] == 0  # its cells reused


# ---- item 7: every output location is checked before any work -------------------------------


def test_an_output_location_that_cannot_be_written_is_one_line_before_any_work(
    tmp_path, monkeypatch
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    _no_work(monkeypatch)
    cases = {
        ("--out", str(a_file)): f"{a_file} is a file, not a directory; choose another --out.",
        ("--run-dir", str(a_file)): f"{a_file} is a file, not a directory; choose another "
        "--run-dir.",
        ("--run-dir", str(a_file / "run")): f"{a_file / 'run'} cannot be created: {a_file} is "
        "a file, not a directory; choose another --run-dir.",
    }
    for (option, value), line in cases.items():
        result = runner.invoke(app, ["run", "--preset", "smoke", option, value, "--no-progress"])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and line in lines[0], result.output
    assert a_file.read_text() == "not a directory"
    # leaderboard --out on a file: one line too (the run directory is never read).
    board = runner.invoke(app, ["leaderboard", str(tmp_path), "--out", str(a_file)])
    assert board.exit_code == 2 and "is a file, not a directory; choose another --out" in (
        board.output
    )


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root writes into a read-only directory (the file case still runs)"
)
def test_a_read_only_output_location_is_one_line_before_any_work(tmp_path, monkeypatch) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    _no_work(monkeypatch)
    try:
        assert not os.access(locked, os.W_OK)
        for option, value in (("--out", locked), ("--run-dir", locked / "run")):
            result = runner.invoke(app, ["run", "--preset", "smoke", option, str(value)])
            assert result.exit_code == 2, result.output
            lines = result.output.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith(f"Error: {locked} is not writable ")
            assert lines[0].endswith(f"; choose another {option}."), lines
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


# ---- item 4: an unfinished run says so ------------------------------------------------------


class Killed(Defense):
    """Dies as ``kill -9`` kills, at the knob value ``die_at`` or above: a run cut short with
    its first points stored, and no race with a timer."""

    name: ClassVar[str] = "killed"
    knob: ClassVar[str | None] = "eta"

    def __init__(
        self, eta: PositiveFloat = 1.0, die_at: PositiveFloat = 10.0, backbone: str | None = None
    ) -> None:
        self.eta, self.die_at, self.backbone = eta, die_at, backbone

    def privatize(self, texts, *, rng) -> Release:
        if self.eta >= self.die_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return Release("text", texts=[t.upper() for t in texts], meta={"defense": self.name})


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory) -> Path:
    """A smoke grid killed (SIGKILL) after 2 of its 4 cells: none and killed 1 are stored."""
    tmp = tmp_path_factory.mktemp("killed")
    data = {
        **PRESETS["smoke"],
        "defenses": [
            {"name": "none"},
            {"name": "tests.audit.test_run_dirs:Killed", "knob_values": [1, 10, 100]},
        ],
    }
    run_dir = tmp / "run"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "privaudit.cli",
            "run",
            "--config",
            str(_write(tmp, data, "g.yaml")),
            "--run-dir",
            str(run_dir),
            "--no-progress",
        ],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -signal.SIGKILL, done.stdout + done.stderr
    assert json.loads((run_dir / "run.json").read_text())["finished"] is False
    return run_dir


def test_report_and_leaderboard_of_an_unfinished_run_say_so_first(killed_run) -> None:
    line = (
        f"Warning: {killed_run} is an unfinished run: 2 of its 4 cells are missing; finish it "
        f"with `privaudit run --resume {killed_run}`."
    )
    assert json.loads((killed_run / "run.json").read_text())["cells"] == 4  # kept from the start
    report = runner.invoke(app, ["report", str(killed_run)])
    assert report.exit_code == EXIT_UNFINISHED == 5, report.output
    assert report.output.splitlines()[0] == line
    page = (killed_run / "report.html").read_text()
    banner = page.index('<p class="unfinished">')
    assert banner < page.index("<nav>")  # at the top, before every section
    assert "2 of its 4 cells are missing" in page[banner:]
    assert "privaudit run --resume" in page[banner:]

    board = runner.invoke(app, ["leaderboard", str(killed_run)])
    assert board.exit_code == EXIT_UNFINISHED, board.output
    assert board.output.splitlines()[0] == line
    assert (killed_run / "leaderboard.md").is_file()  # the files are still written


def test_an_unfinished_run_without_a_cell_count_and_a_finished_one(killed_run, tmp_path) -> None:
    import shutil

    old = tmp_path / "old"
    shutil.copytree(killed_run, old)
    meta = json.loads((old / "run.json").read_text())
    meta.pop("cells", None)  # a run written before the count was kept at the start
    (old / "run.json").write_text(json.dumps(meta))
    report = runner.invoke(app, ["report", str(old)])
    assert report.exit_code == EXIT_UNFINISHED
    assert report.output.splitlines()[0] == (
        f"Warning: {old} is an unfinished run (its cell count was not recorded); finish it "
        f"with `privaudit run --resume {old}`."
    )
    (old / "run.json").write_text(json.dumps(meta | {"finished": True}))
    report = runner.invoke(app, ["report", str(old)])
    assert report.exit_code == 0 and report.output.strip() == str(old / "report.html")
    assert 'class="unfinished"' not in (old / "report.html").read_text()
