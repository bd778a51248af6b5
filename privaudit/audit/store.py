"""The run directory: its layout, its column schema and its result store, in one place.

Everything that reads or writes a run (the runner, the leaderboard, the report, the CLI) goes
through :class:`RunDir`, so a file's name or a column is declared once::

    RUN_DIR/
      config.json          the validated grid
      run.json             run facts and provenance (written at the start, updated at the end)
      cells/<key>.json     the result store: one record per finished point or cell
      results.csv/.parquet one row per (defense point, attack), columns COLUMNS
      outcomes.parquet     the per-document outcomes behind every score (key, what, reducer,
                           k, docs, stats), for intervals and rank stability
      examples.json        a few original/released pairs per point, only when the run asked
                           for them (show_examples); otherwise no corpus text is stored
      pareto_<attack>.png, frontiers.png, families.png (worst case per attack family),
      leaderboard.{md,csv,html}, worst_case_points.csv, report.html
      guarantees.csv       the guarantee audit: each defense point's stated guarantee against
                           an empirical lower bound on its privacy loss
      strength.csv, strength.png   the attack-strength curve (when the grid asks for it):
                           each aux-trained attack at the undefended point by aux documents

Every file is written atomically (a temporary file, then a rename), so a reader or a crash
never sees half a file; a full disk is :class:`DiskFull`, naming the file, with nothing
half-written left behind.
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.records import result_columns

if TYPE_CHECKING:
    import pandas as pd

#: The results table's columns, in order: declared once, with the leaderboard's, in
#: :data:`privaudit.records.RESULT_COLUMNS`.
COLUMNS = result_columns()


def cell_counts(frame: Any) -> dict[str, int]:
    """Cells (what the progress bar counts: one per point and attack) by status, and
    ``"all"``; a cell with a row per target (attribute inference) counts once, as failed when
    any of its rows failed, else n/a when all are."""
    if frame.empty:
        return {"all": 0, "ok": 0, "n/a": 0, "failed": 0}
    cell = frame["cell_key"]  # runs written before the "cell" column: one row, one cell
    if "cell" in frame:
        cell = frame["cell"].where(frame["cell"].notna(), cell)

    def worst(s: pd.Series) -> str:
        return "failed" if (s == "failed").any() else ("n/a" if (s == "n/a").all() else "ok")

    status = frame["status"].groupby(cell).agg(worst)
    counts = status.value_counts()
    return {"all": len(status)} | {k: int(counts.get(k, 0)) for k in ("ok", "n/a", "failed")}


def json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


class DiskFull(OSError):
    """A write ran out of disk space (or quota). ``path`` is the file that was being written;
    ``run_dir`` is set by the runner, so the message can name the ``--resume`` command."""

    def __init__(self, path: Path, run_dir: Path | None = None) -> None:
        super().__init__(errno.ENOSPC, "No space left on device", str(path))
        self.path, self.run_dir = path, run_dir

    def __str__(self) -> str:
        then = (
            f"privaudit run --resume {self.run_dir}"
            if self.run_dir is not None
            else "the command again"
        )
        return f"the disk is full writing {self.path}; free space and run {then}"


def is_disk_full(exc: BaseException) -> bool:
    """ENOSPC/EDQUOT, also when a library (pyarrow) wraps it without an errno."""
    if not isinstance(exc, OSError):
        return False
    return exc.errno in (errno.ENOSPC, errno.EDQUOT) or "No space left on device" in str(exc)


def write_atomic(path: Path, write: Callable[[Path], Any]) -> Path:
    """``write(tmp)`` then rename onto ``path``: readers never see half a file, and a failed
    write (a full disk included: :class:`DiskFull`) leaves the previous file, or none."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except DiskFull:
        raise
    except OSError as exc:
        if is_disk_full(exc):
            raise DiskFull(path) from exc
        raise
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text(path: Path, text: str) -> Path:
    return write_atomic(path, lambda p: p.write_text(text, encoding="utf-8"))


def write_json(path: Path, data: Any) -> Path:
    return write_text(path, json.dumps(data, indent=2, default=json_default))


def check_writable(path: Path, option: str) -> None:
    """Raise ``ValueError`` (one line naming ``option``, the way out) unless ``path`` is, or can
    be made, a directory this process can write: called before any work, so a file in the
    way or a read-only file system is not a traceback after the first cells."""
    for existing in (path, *path.parents):
        if existing.exists():
            break
    else:  # pragma: no cover - the root always exists
        return
    if not existing.is_dir():
        where = "is a file" if existing == path else f"cannot be created: {existing} is a file"
        raise ValueError(f"{path} {where}, not a directory; choose another {option}.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(
            f"{existing} is not writable (a read-only file system, or no permission), so "
            f"{path} cannot be written; choose another {option}."
        )
    # access() answers for permissions only (root passes, /proc refuses anyway): try it.
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".privaudit-probe-", dir=existing))
    except OSError as exc:
        raise ValueError(
            f"{path} cannot be written: {existing} takes no new files "
            f"({exc.strerror or type(exc).__name__}); choose another {option}."
        ) from None


def check_output_file(path: Path, option: str) -> None:
    """Refuse, before any work and in one line naming ``option``, an output file that cannot
    be written: a directory in its place, or a folder it cannot be created in. Its folder is
    created here, so the write at the end of the work finds it."""
    if path.is_dir():
        raise ValueError(f"{option} {path} is a directory; give a file name.")
    check_writable(path.parent, option)
    if path.exists() and not os.access(path, os.W_OK):
        raise ValueError(f"{option} {path} is not writable; choose another {option}.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # checked above; a race or an odd file system still says one line
        raise ValueError(
            f"{option} {path}: its folder cannot be created ({exc.strerror or exc}); choose "
            f"another {option}."
        ) from None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}.") from None


class ResultStore:
    """Finished records, one JSON file each under ``RUN_DIR/cells/``, written atomically:
    a crash or ``kill -9`` loses at most the cells in flight. Point records hold a defense
    point's utility; cell records an attack's rows. Failed records are kept (they appear in
    the results) but do not count as finished."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> dict[str, Any] | None:
        path = self.dir / f"{key}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def finished(self, key: str) -> dict[str, Any] | None:
        record = self.get(key)
        return record if record is not None and record.get("status") != "failed" else None

    def put(self, key: str, record: dict[str, Any]) -> None:
        path = self.dir / f"{key}.json"
        write_text(path, json.dumps(record, default=json_default))


class RunDir:
    """A run directory: where each file lives and how it is read and written."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    # ---- layout -------------------------------------------------------------------------

    @property
    def config_json(self) -> Path:
        return self.path / "config.json"

    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    @property
    def results_csv(self) -> Path:
        return self.path / "results.csv"

    @property
    def results_parquet(self) -> Path:
        return self.path / "results.parquet"

    @property
    def outcomes_parquet(self) -> Path:
        return self.path / "outcomes.parquet"

    @property
    def examples_json(self) -> Path:
        return self.path / "examples.json"

    @property
    def report_html(self) -> Path:
        return self.path / "report.html"

    @property
    def frontiers_png(self) -> Path:
        return self.path / "frontiers.png"

    @property
    def families_png(self) -> Path:
        return self.path / "families.png"

    def pareto_png(self, attack: str) -> Path:
        """``pareto_<attack>.png``; any character a file name cannot safely hold becomes ``-``."""
        safe = re.sub(r"[^A-Za-z0-9._=,+-]", "-", attack.replace("]", "")).strip("-.")
        return self.path / f"pareto_{safe or 'attack'}.png"

    def leaderboard(self, ext: str) -> Path:
        return self.path / f"leaderboard.{ext}"

    @property
    def worst_case_csv(self) -> Path:
        """The leaderboard's worst-case points per family (the numbers behind families.png)."""
        return self.path / "worst_case_points.csv"

    @property
    def guarantees_csv(self) -> Path:
        """The guarantee audit of the run's defense points (claim vs empirical lower bound)."""
        return self.path / "guarantees.csv"

    @property
    def strength_csv(self) -> Path:
        """The attack-strength curve (:mod:`privaudit.audit.strength`): derived results, no
        corpus text."""
        return self.path / "strength.csv"

    @property
    def strength_png(self) -> Path:
        return self.path / "strength.png"

    @property
    def fit_noise_csv(self) -> Path:
        """The measured between-fit spreads (:mod:`privaudit.audit.fit_noise`): scores only."""
        return self.path / "fit_noise.csv"

    def outputs(self) -> list[Path]:
        """The files a run writes from its results, those present: the tables, the plots
        (a Pareto plot per attack of the results table), the leaderboard files and the
        report. What ``--overwrite`` removes; never config.json/run.json (rewritten), the
        cell store (reused by key) or a file privaudit does not write."""
        try:
            attacks = sorted({str(a) for a in self.read_results()["attack"].dropna()})
        except (OSError, ValueError, KeyError):  # no table yet: no plot was drawn from it
            attacks = []
        names = [
            self.results_csv,
            self.results_parquet,
            self.outcomes_parquet,
            self.examples_json,
            self.report_html,
            self.frontiers_png,
            self.families_png,
            *(self.leaderboard(ext) for ext in ("md", "csv", "html")),
            self.worst_case_csv,
            self.guarantees_csv,
            self.strength_csv,
            self.strength_png,
            self.fit_noise_csv,
            *(self.pareto_png(a) for a in attacks),
        ]
        return [p for p in names if p.is_file()]

    def is_run(self) -> bool:
        """Whether privaudit wrote this directory: its run.json is a run's (an object with
        ``finished``), which every run writes before its first cell."""
        try:
            meta = self.read_meta()
        except (OSError, ValueError):
            return False
        return isinstance(meta, dict) and "finished" in meta

    def check_target(self, option: str = "--run-dir") -> None:
        """Refuse, in one line with the way out, a directory a run must not write into: one
        that cannot be written (:func:`check_writable`), or a non-empty folder that is not a
        privaudit run (the user's own files would be written over)."""
        check_writable(self.path, option)
        if self.path.is_dir() and any(self.path.iterdir()) and not self.is_run():
            raise ValueError(
                f"{self.path} is not empty and is not a privaudit run; "
                f"choose another {option}, or empty it."
            )

    @property
    def cells_dir(self) -> Path:
        return self.path / "cells"

    def store(self) -> ResultStore:
        return ResultStore(self.cells_dir)

    def create(self) -> RunDir:
        self.path.mkdir(parents=True, exist_ok=True)
        return self

    # ---- reading ------------------------------------------------------------------------

    def read_meta(self) -> dict[str, Any]:
        """run.json (``{}`` when absent)."""
        return _read_json(self.run_json) if self.run_json.is_file() else {}

    def read_outcomes(self) -> pd.DataFrame | None:
        """outcomes.parquet (None for a run written before outcomes were stored)."""
        import pandas as pd

        return pd.read_parquet(self.outcomes_parquet) if self.outcomes_parquet.is_file() else None

    def read_config(self) -> dict[str, Any] | None:
        return _read_json(self.config_json) if self.config_json.is_file() else None

    def read_guarantees(self) -> pd.DataFrame | None:
        """guarantees.csv (None when the run has no guarantee audit)."""
        import pandas as pd

        return pd.read_csv(self.guarantees_csv) if self.guarantees_csv.is_file() else None

    def read_strength(self) -> pd.DataFrame | None:
        """strength.csv (None when the run computed no attack-strength curve)."""
        import pandas as pd

        if not self.strength_csv.is_file():
            return None
        return pd.read_csv(self.strength_csv, keep_default_na=False, na_values=[""])  # "n/a"

    def read_fit_noise(self) -> pd.DataFrame | None:
        """fit_noise.csv (None when the run measured none)."""
        import pandas as pd

        if not self.fit_noise_csv.is_file():
            return None
        return pd.read_csv(self.fit_noise_csv, keep_default_na=False, na_values=[""])

    def read_examples(self) -> list[dict[str, Any]] | None:
        return _read_json(self.examples_json) if self.examples_json.is_file() else None

    def read_results(self) -> pd.DataFrame:
        """The results table (parquet, else csv); a missing or empty table says what to do."""
        import pandas as pd

        if not self.path.is_dir():
            raise FileNotFoundError(
                f"{self.path} is not a directory. Pass a run directory written by `privaudit "
                "run` (e.g. reports/<run-id>/)."
            )
        if self.results_parquet.is_file():
            frame = pd.read_parquet(self.results_parquet)
        elif self.results_csv.is_file():
            frame = pd.read_csv(self.results_csv, keep_default_na=False, na_values=[""])
        elif self.read_meta().get("finished") is False:  # stopped before any cell finished
            raise FileNotFoundError(
                f"{self.path} is an unfinished run with no finished cell yet, so there is "
                f"nothing to show; finish it with `privaudit run --resume {self.path}`."
            )
        else:
            raise FileNotFoundError(
                f"{self.path} has no results.parquet or results.csv. Run a grid into it first "
                f"(`privaudit run --run-dir {self.path}`), or pass the run directory that "
                "`privaudit run` printed (reports/<run-id>/)."
            )
        if frame.empty:
            raise ValueError(
                f"The results table in {self.path} has no rows: the run was interrupted before "
                "its first defense point finished. Re-run it (`privaudit run --run-dir ...`)."
            )
        return frame

    # ---- writing ------------------------------------------------------------------------

    def write_meta(self, meta: dict[str, Any]) -> Path:
        return write_json(self.run_json, meta)

    def write_config(self, config_json: str) -> Path:
        return write_text(self.config_json, config_json)

    def write_guarantees(self, frame: pd.DataFrame) -> Path:
        """guarantees.csv, one row per defense point (the guarantee audit's table)."""
        return write_atomic(self.guarantees_csv, lambda p: frame.to_csv(p, index=False))

    def write_strength(self, frame: pd.DataFrame) -> Path:
        """strength.csv, one row per (seed, attack row, share of the aux)."""
        return write_atomic(self.strength_csv, lambda p: frame.to_csv(p, index=False))

    def write_fit_noise(self, frame: pd.DataFrame) -> Path:
        """fit_noise.csv, one row per (seed, random fit's row label)."""
        return write_atomic(self.fit_noise_csv, lambda p: frame.to_csv(p, index=False))

    def write_examples(self, examples: list[dict[str, Any]]) -> Path:
        return write_text(self.examples_json, json.dumps(examples, indent=1))

    def forget_examples(self, point_keys: list[str]) -> None:
        """Remove every stored example text (``examples.json`` and the ``examples`` of these
        point records): a run that did not ask for examples keeps no corpus text, even in a
        directory an earlier run with ``show_examples`` wrote."""
        self.examples_json.unlink(missing_ok=True)
        store = self.store()
        for key in point_keys:
            record = store.get(key)
            if record is not None and "examples" in record:
                store.put(key, {k: v for k, v in record.items() if k != "examples"})

    def write_results(
        self, rows: list[dict[str, Any]] | pd.DataFrame, outcomes: pd.DataFrame | None = None
    ) -> pd.DataFrame:
        """results.csv and results.parquet from ``rows`` (columns :data:`COLUMNS`), and
        outcomes.parquet when ``outcomes`` are given."""
        import pandas as pd

        frame = pd.DataFrame(rows).reindex(columns=COLUMNS)
        if outcomes is not None:
            write_atomic(self.outcomes_parquet, lambda p: outcomes.to_parquet(p, index=False))
        write_atomic(self.results_csv, lambda p: frame.to_csv(p, index=False))
        write_atomic(self.results_parquet, lambda p: frame.to_parquet(p, index=False))
        return frame
