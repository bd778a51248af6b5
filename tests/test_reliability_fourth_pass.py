"""Issue 49 (fourth reliability pass), items 1, 2, 6 and 7 and the smaller things: a read-only
cache, an output path's missing folder, a plugin's guarantee at the knob's level, a killed
run's board, n/a cells said by their cause, too few victims said, a truncated inverter said,
SIGTERM before the first cell said. (Items 3-5, ``tab-score``, are tested with the TAB
scorer.)

New symbols are imported inside the tests, so that each test fails on the old code by what it
checks, not by an import error."""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from privaudit.audit.config import PRESETS
from privaudit.cli import app

runner = CliRunner()
SMOKE = PRESETS["smoke"]


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Never a real ~/.cache/privaudit entry, nor an inverter an earlier test of this worker
    # process left in memory (it would be "found" without reading this test's cache).
    from privaudit.attacks import geia

    monkeypatch.setenv("PRIVAUDIT_CACHE", str(tmp_path / "cache"))
    geia._INVERTERS.__init__()


def _read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache as a read-only bind mount behaves: every new file in it is refused (root
    passes a chmod, so the refusal is made where files are created)."""

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", kwargs.get("dir", ""))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)


# -- item 1: a read-only, empty cache -----------------------------------------------------------


def test_nearest_neighbour_radii_in_a_read_only_cache_are_kept_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from privaudit.mechanisms.nearest import NearestNeighbourIndex

    (tmp_path / "cache").mkdir()
    _read_only(monkeypatch)
    matrix = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
    index = NearestNeighbourIndex(matrix, cache_key="ro")
    radii = index.radius(np.arange(10))  # computed, and not kept: no error
    assert np.isfinite(radii).all() and (radii > 0).all()
    assert not any((tmp_path / "cache").iterdir())
    # The projection that needs them works the same.
    assert (index.project(matrix[:10], source_ids=np.arange(10)) == np.arange(10)).all()


def test_a_cache_entry_is_kept_or_dropped_never_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from privaudit.runtime.cache import keep_entry

    path = tmp_path / "entry.npy"
    assert keep_entry(path, lambda fh: np.save(fh, np.arange(3)))
    assert np.load(path).tolist() == [0, 1, 2]
    _read_only(monkeypatch)
    assert not keep_entry(path, lambda fh: np.save(fh, np.arange(5)))
    assert np.load(path).tolist() == [0, 1, 2]  # the old entry, whole


def test_a_torn_radius_file_is_computed_anew(tmp_path: Path) -> None:
    from privaudit.mechanisms.nearest import NearestNeighbourIndex

    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "nn_radius_torn.npy").write_bytes(b"\x93NUMPY torn")
    matrix = np.random.default_rng(1).standard_normal((20, 4)).astype(np.float32)
    index = NearestNeighbourIndex(matrix, cache_key="torn")
    assert np.isfinite(index.radius(np.arange(3))).all()


# -- item 2: an output file's missing folder ---------------------------------------------------


def test_audit_guarantee_csv_into_a_missing_folder_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import privaudit.audit.guarantee_audit as guarantee_audit

    monkeypatch.setattr(guarantee_audit, "audit_levels", lambda *a, **k: [])
    target = tmp_path / "missing" / "sub" / "x.csv"
    result = runner.invoke(
        app, ["audit-guarantee", "--defense", "dpnr", "--knob", "1", "--csv", str(target)]
    )
    assert result.exit_code == 0, result.output
    assert target.is_file() and f"Wrote: {target}" in result.output


def test_an_output_files_folder_is_made_before_the_work(tmp_path: Path) -> None:
    from privaudit.audit.store import check_output_file

    target = tmp_path / "a" / "b" / "report.html"
    check_output_file(target, "--out")
    assert target.parent.is_dir() and not target.exists()
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="choose another --out"):
        check_output_file(tmp_path / "f" / "sub" / "r.html", "--out")


# -- item 6: a plugin's guarantee at the knob's level -------------------------------------------


class Knobbed:
    """A user's privatizer whose stated guarantee names its knob's value."""

    name = "knobbed"

    def __init__(self, eta: float = 10.0) -> None:
        self.eta = float(eta)

    @property
    def guarantee(self) -> str:
        return f"eta={self.eta:g} d_X per word"

    def privatize(self, texts: list[str], rng: np.random.Generator) -> list[str]:
        return list(texts)


def test_a_plugins_guarantee_is_read_at_the_knobs_level() -> None:
    from privaudit.audit.wrapper import UserDefense

    base = UserDefense(f"{__name__}:Knobbed", knob="eta", eta=10.0)
    base.check()  # loaded at its default: the guarantee read there
    assert str(base.guarantee) == "eta=10 d_X per word"
    five = base.with_knob(5)
    assert str(five.guarantee) == "eta=5 d_X per word"
    assert five.knob_value == 5 and five.name == "knobbed"
    assert str(base.guarantee) == "eta=10 d_X per word"  # the original keeps its own
    # Not loaded yet: the copy still reads its own level when it loads.
    fresh = UserDefense(f"{__name__}:Knobbed", knob="eta", eta=10.0).with_knob(2)
    fresh.check()
    assert str(fresh.guarantee) == "eta=2 d_X per word"


# -- smaller things: a truncated cached inverter -----------------------------------------------

GEIA_TINY = {"n_layer": 1, "n_memory": 2, "public_docs": 40, "pretrain_epochs": 1, "max_tokens": 16}


class _Stop(Exception):
    pass


def test_a_truncated_inverter_is_not_cached_and_its_rebuild_is_said(
    tiny, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import zipfile

    import privaudit.attacks._inverter.disk_cache as disk_cache
    from privaudit.attacks.geia import GEIA

    spec = GEIA(**GEIA_TINY).spec()
    path = spec.path(tiny)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as whole:  # a torch file is a zip archive
        whole.writestr("archive/data.pkl", b"x" * 4000)
    assert disk_cache.cached(tiny, spec)
    path.write_bytes(path.read_bytes()[:2000])  # cut short: its directory is gone
    # Not cached: the estimate prices the rebuild, and the run builds it before any cell.
    assert not disk_cache.cached(tiny, spec)
    assert disk_cache.pretrain_estimate(tiny, spec) is not None

    def stop(*args, **kwargs):
        raise _Stop

    monkeypatch.setattr(disk_cache, "pretrain", stop)
    with pytest.raises(_Stop):
        disk_cache.load_or_pretrain(tiny, spec, progress=False)
    err = capsys.readouterr().err
    assert f"the cached inverter {path} cannot be read" in err
    assert "truncated: 2,000 bytes" in err and "it is rebuilt" in err


# -- item 7: a killed run's board --------------------------------------------------------------


def _killed_run(tmp_path: Path) -> Path:
    """A smoke run as ``kill -9`` leaves it during its grid: run.json ``finished: false``,
    finished cells in cells/, one cell lost, and no results table (the run writes it after
    each defense point; this one was killed before its next write)."""
    import json

    from tests.conftest import write_grid

    data = SMOKE | {"defenses": [{"name": "none"}, {"name": "t2t", "knob_values": [10, 100]}]}
    run_dir = tmp_path / "r"
    done = runner.invoke(
        app,
        [
            "run",
            "--config",
            str(write_grid(tmp_path, data)),
            "--run-dir",
            str(run_dir),
            "--no-progress",
        ],
    )
    assert done.exit_code == 0, done.output
    for path in run_dir.iterdir():
        if path.is_file() and path.name not in ("config.json", "run.json"):
            path.unlink()
    meta = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps(meta | {"finished": False}))
    cells = sorted(run_dir.glob("cells/*.json"))
    lost = next(p for p in cells if json.loads(p.read_text())["kind"] == "cell")
    lost.unlink()
    return run_dir


def test_a_killed_runs_report_and_leaderboard_are_built_from_its_cells(tmp_path: Path) -> None:
    import pandas as pd

    run_dir = _killed_run(tmp_path)
    report = runner.invoke(app, ["report", str(run_dir)])
    assert report.exit_code == 5, report.output
    first = report.output.strip().splitlines()[0]
    assert "is an unfinished run: 1 of its 3 cells are missing" in first
    assert f"privaudit run --resume {run_dir}" in first
    assert "built from the finished cells (2 rows" in report.output
    assert len(pd.read_csv(run_dir / "results.csv")) == 2
    assert "unfinished run" in (run_dir / "report.html").read_text()  # its banner
    board = runner.invoke(app, ["leaderboard", str(run_dir)])
    assert board.exit_code == 5, board.output
    assert "is an unfinished run: 1 of its 3 cells" in board.output.strip().splitlines()[0]
    assert (run_dir / "leaderboard.md").is_file()
    # The files are marked unfinished too, not only the terminal.
    assert "UNFINISHED RUN:" in (run_dir / "leaderboard.md").read_text()
    # No finished cell at all: one line with the way out, not "run a grid into it first".
    for path in run_dir.iterdir():
        if path.is_file() and path.name not in ("config.json", "run.json"):
            path.unlink()
    for cell in run_dir.glob("cells/*.json"):
        cell.unlink()
    empty = runner.invoke(app, ["report", str(run_dir)])
    assert empty.exit_code == 2, empty.output
    assert "unfinished run with no finished cell yet" in empty.output
    assert f"privaudit run --resume {run_dir}" in empty.output


# -- smaller things: SIGTERM outside a run's guard is said --------------------------------------


@pytest.fixture
def _sigterm_unhandled() -> object:
    """A SIGTERM that no command handles fails the test instead of ending pytest."""
    import signal

    def unhandled(signum, frame):
        raise AssertionError("SIGTERM reached the default handler: the process would end silently")

    previous = signal.signal(signal.SIGTERM, unhandled)
    yield
    signal.signal(signal.SIGTERM, previous)


def _terminate(*args, **kwargs):
    import os
    import signal
    import time

    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler raises long before this ends
    raise AssertionError("SIGTERM was not delivered")


def test_sigterm_before_a_runs_first_cell_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _sigterm_unhandled: object
) -> None:
    import privaudit.cli.run as cli_run

    monkeypatch.setattr(cli_run, "check_cache_dir", _terminate)
    result = runner.invoke(app, ["run", "--preset", "smoke", "--run-dir", str(tmp_path / "r")])
    assert result.exit_code == 143, result.output
    assert "Interrupted (SIGTERM); before the run's first cell" in result.output


def test_sigterm_during_pretrain_is_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _sigterm_unhandled: object
) -> None:
    import privaudit.attacks._inverter.disk_cache as disk_cache
    from tests.conftest import write_grid

    monkeypatch.setattr(disk_cache, "pretrain", _terminate)
    geia = [{"name": "geia", "params": GEIA_TINY}]
    config = write_grid(tmp_path, SMOKE | {"defenses": [{"name": "none"}], "attacks": geia})
    result = runner.invoke(app, ["pretrain", "--config", str(config), "--no-progress"])
    assert result.exit_code == 143, result.output
    assert "Interrupted (SIGTERM); the model being trained was not kept" in result.output
    assert not list((tmp_path / "cache" / "inverters").glob("*.pt"))


# -- smaller things: n/a cells said by their cause; too few victims said ------------------------


def test_na_cells_are_summarised_by_their_cause() -> None:
    import pandas as pd

    from privaudit.leaderboard.unscored import na_summary

    background = "reidentification needs background: the corpus has no background split"
    frame = pd.DataFrame(
        [
            {"cell_key": "a", "status": "ok", "reason": "", "na_cause": None},
            {"cell_key": "b", "status": "n/a", "reason": background, "na_cause": "truth"},
            {
                "cell_key": "c",
                "status": "n/a",
                "reason": "ner reads text releases, not pooled",
                "na_cause": "release",
            },
            {"cell_key": "d", "status": "n/a", "reason": background, "na_cause": "truth"},
        ]
    )
    line = na_summary(frame)
    assert line is not None and line.startswith("3 of 4 cells are n/a: ")
    assert f"2 because the corpus cannot score the attack ({background})" in line
    assert "1 because the attack cannot read the release" in line
    only_corpus = na_summary(frame[frame["cell_key"] != "c"])
    assert only_corpus is not None and "cannot read the release" not in only_corpus
    assert na_summary(frame[frame["status"] == "ok"]) is None


def test_a_board_over_too_few_victims_says_it_decides_nothing() -> None:
    import pandas as pd

    from privaudit.leaderboard.board import leaderboard
    from tests.leaderboard.test_leaderboard import cell

    rows = [
        cell("none", 0, "a1", 0.1, 0.9),
        cell("A", 1, "a1", 0.5, 0.8),
        cell("A", 2, "a1", 0.8, 0.6),
    ]
    few = leaderboard(pd.DataFrame([r | {"n_test": 2} for r in rows]), 0.5)
    said = [n for n in few.notes if "test document(s) (the victims)" in n]
    assert len(said) == 1 and said[0].startswith("WARNING: only 2 test document(s)")
    from privaudit.leaderboard.notes import FEW_VICTIMS

    enough = leaderboard(pd.DataFrame([r | {"n_test": FEW_VICTIMS} for r in rows]), 0.5)
    assert not [n for n in enough.notes if "(the victims)" in n]
