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
    # Never a real ~/.cache/privaudit entry.
    monkeypatch.setenv("PRIVAUDIT_CACHE", str(tmp_path / "cache"))


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
    result = runner.invoke(app, ["audit-guarantee", "--defense", "dpnr", "--knob", "1",
                                 "--csv", str(target)])  # fmt: skip
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
