"""Reading finished or partial runs from their directories for a leaderboard or a report:
results, chance level, per-document outcomes and the run's bootstrap, several runs merged."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.audit.store import RunDir, cell_counts
from privaudit.leaderboard.board import Leaderboard, leaderboard
from privaudit.metrics.stats import Bootstrap, Outcomes, measured_sds, with_labels
from privaudit.metrics.units import Units

if TYPE_CHECKING:
    import pandas as pd


def read_run(run_dir: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A run directory's results table (parquet, else csv) and its run.json (``{}`` if absent).

    Raises ``FileNotFoundError`` naming the directory and what to do when there are no results.
    """
    rd = RunDir(run_dir)
    return rd.read_results(), rd.read_meta()


def unfinished(run_dir: str | Path, frame: pd.DataFrame, meta: Mapping[str, Any]) -> str | None:
    """One line when run.json says the run did not finish (``kill -9``, a crash, a power
    cut), else None: how many of its cells are missing (``frame``: its results table; the
    planned total is in run.json from the first cell on; a run without it is only said to be
    unfinished) and the command that finishes it."""
    if meta.get("finished") is not False:
        return None
    total = meta.get("cells")
    finish = f"finish it with `privaudit run --resume {run_dir}`."
    if not isinstance(total, int) or isinstance(total, bool):
        return f"{run_dir} is an unfinished run (its cell count was not recorded); {finish}"
    missing = max(total - cell_counts(frame)["all"], 0)
    return f"{run_dir} is an unfinished run: {missing} of its {total} cells are missing; {finish}"


def results_from_cells(run_dir: str | Path) -> int:
    """A killed run's results table, built from its finished cells when it has none: a run
    writes ``results.csv``/``.parquet`` after each defense point, so a run killed during its
    first point (the undefended one: every attack's cell, minutes on a real grid) leaves only
    ``cells/``. The grid is planned again from its ``config.json`` (the corpus read, the
    defenses built; calibrated levels come from the store) and the tables are written as the
    run would have written them after its next point (no intervals yet: a finished run adds
    them). Returns the rows written; 0, writing nothing, for a directory that has a table,
    is not an unfinished run (``run.json`` with ``finished: false``), or has no finished
    cell. ``privaudit run --resume`` replaces the tables as it goes."""
    rd = RunDir(run_dir)
    if rd.results_parquet.is_file() or rd.results_csv.is_file() or not rd.path.is_dir():
        return 0
    cells = rd.cells_dir
    if rd.read_meta().get("finished") is not False or not cells.is_dir():
        return 0
    config = rd.read_config()
    if config is None or not any(cells.glob("*.json")):
        return 0
    # lazy: the grid's context brings the corpus, the backbone and the defenses
    from privaudit.audit.cells import context_for
    from privaudit.audit.config import load_config
    from privaudit.audit.plan import plan
    from privaudit.audit.rows import results_table

    cfg = load_config(config)
    with warnings.catch_warnings():  # the corpus's and defenses' notes were said by the run
        warnings.simplefilter("ignore")
        ctx = context_for(cfg)
        store = rd.store()
        frame, outcomes = results_table(ctx, plan(cfg, ctx, store), store, intervals=False)
    if frame.empty:  # only point records (or calibrations): no cell to show yet
        return 0
    rd.write_results(frame, outcomes)
    return len(frame)


def run_chance(meta: Mapping[str, Any]) -> float | None:
    """The chance level of a run's headline utility: ``chance_level`` (1/K for balanced
    accuracy), else, for a run written before it, ``chance_accuracy`` (majority share)."""
    for key in ("chance_level", "chance_accuracy"):
        value = meta.get(key)
        if value is not None and np.isfinite(value):
            return float(value)
    return None


@dataclass(frozen=True)
class Runs:
    """One or more runs read for a leaderboard: results, chance, outcomes, resamples."""

    frame: pd.DataFrame
    chance: float
    outcomes: Outcomes
    bootstrap: Bootstrap
    guarantees: pd.DataFrame | None = None  # the runs' guarantees.csv
    strength: pd.DataFrame | None = None  # the runs' strength.csv (the attack-strength curve)
    fit_noise: pd.DataFrame | None = None  # the runs' fit_noise.csv (measured fit spreads)

    def board(self, difference: float | None = None) -> Leaderboard:
        """The runs' leaderboard: the one path every board of a run is computed by (the
        run's files, its report, ``privaudit leaderboard``)."""
        return leaderboard(self.frame, self.chance, **self.board_inputs(), difference=difference)

    def board_inputs(self) -> dict[str, Any]:
        """The keyword arguments :func:`privaudit.leaderboard.board.leaderboard` takes from
        the runs: outcomes, bootstrap (with the runs' units) and the measured fit noise."""
        measured, utility = measured_sds(self.fit_noise)
        return {
            "outcomes": self.outcomes,
            "bootstrap": self.bootstrap,
            "measured_fit_sd": measured,
            "measured_utility_fit_sd": utility,
        }


def load_runs(
    run_dirs: Iterable[str | Path],
    *,
    chance: float | None = None,
    mixed_corpora: bool = False,
) -> Runs:
    """:func:`merge_runs` plus the runs' per-document outcomes (merged; the last run wins on
    a repeated key) and the first run's bootstrap settings. ``mixed_corpora``: as in
    :func:`merge_runs` (runs of different corpora are refused without it)."""
    dirs = [Path(d) for d in run_dirs]
    frame, level = merge_runs(dirs, chance=chance, mixed_corpora=mixed_corpora)
    entries = {}
    for run_dir in dirs:
        entries.update(Outcomes.from_frame(RunDir(run_dir).read_outcomes()).entries)
    boot = Bootstrap.from_meta(RunDir(dirs[0]).read_meta())
    # The ids are salted per run: compare who-is-with-whom (the groups), not the ids.
    units = [Units.from_meta(RunDir(d).read_meta().get("unit")) for d in dirs]
    if any(u != units[0] for u in units[1:]):
        # Runs of different corpora (or subsets) have different victims: no one set of people
        # spans them, so the merged board resamples documents, and says so.
        warnings.warn(
            "the runs' victims differ (other corpora or subsets): the merged board's intervals "
            "resample documents, not people",
            stacklevel=2,
        )
        boot = dataclasses.replace(boot, units=None)
    audits = [g for g in (RunDir(d).read_guarantees() for d in dirs) if g is not None]
    guarantees = None
    if audits:
        import pandas as pd

        guarantees = pd.concat(audits, ignore_index=True).drop_duplicates(keep="last")
    curves = [c for c in (RunDir(d).read_strength() for d in dirs) if c is not None]
    strength = None
    if curves:
        import pandas as pd

        strength = pd.concat(curves, ignore_index=True).drop_duplicates(keep="last")
    noise = [n for n in (RunDir(d).read_fit_noise() for d in dirs) if n is not None]
    fit_noise = None
    if noise:
        import pandas as pd

        fit_noise = pd.concat(noise, ignore_index=True)
    return Runs(frame, level, Outcomes(entries), boot, guarantees, strength, fit_noise)


def merge_runs(
    run_dirs: Iterable[str | Path],
    *,
    chance: float | None = None,
    mixed_corpora: bool = False,
) -> tuple[pd.DataFrame, float]:
    """Concatenate several runs' results; a later run's row replaces an earlier one's.

    Rows are de-duplicated on ``cell_key`` keeping the last (the key hashes everything that
    determines a cell, so a repeated cell is the same measurement, re-run). The chance level
    comes from the runs' run.json (:func:`run_chance`; ``chance`` overrides it); runs with
    different chance levels are merged with a warning, using the highest chance level (the
    stricter box).

    Runs on different corpora (by digest: the results' ``corpus_fingerprint``, else run.json's;
    not by name) are refused unless ``mixed_corpora``. With it, every row's ``label`` gets its
    corpus appended (``"pct2t[eta=10] @ synthpai"``; the digest's first 8 characters are added
    where two corpora share a name), so no two corpora's rows are ever averaged: each corpus
    keeps its own undefended ``none`` row (its utility, and the reference of its attacks'
    normalised privacy), and the board ranks ``label @ corpus`` entries side by side (a
    comparison across data that the board's notes say). Raises ``ValueError`` for no
    directories, a directory without results, runs of different corpora without
    ``mixed_corpora``, or no chance level anywhere.
    """
    import pandas as pd

    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise ValueError("No run directory given; pass one or more (reports/<run-id>/).")
    frames, chances = [], []
    corpora: dict[str, list[Path]] = {}  # digest -> the runs on it
    names: dict[str, str] = {}  # digest -> the corpus's name
    for run_dir in dirs:
        frame, meta = read_run(run_dir)
        frame = _with_fingerprint(frame, meta)
        for digest in frame["corpus_fingerprint"].dropna().astype(str).unique():
            corpora.setdefault(digest, []).append(run_dir)
            if "corpus" in frame.columns:  # the name only to read by; the digest decides
                found = frame.loc[frame["corpus_fingerprint"] == digest, "corpus"].dropna()
                names.setdefault(digest, str(found.iloc[0]) if len(found) else "")
        frames.append(frame)
        value = run_chance(meta)
        if value is not None:
            chances.append(value)
    if len(corpora) > 1 and not mixed_corpora:
        named = "; ".join(
            f"{', '.join(map(str, d))} on {names.get(digest) or 'corpus'} {digest[:8]}"
            for digest, d in corpora.items()
        )
        raise ValueError(
            f"These runs are on {len(corpora)} different corpora ({named}), so their utilities "
            "and privacies are not on one scale: rank each corpus separately, or pass "
            "--mixed-corpora (mixed_corpora=True) to keep each corpus's rows apart on one board."
        )
    merged = pd.concat(frames, ignore_index=True)
    if "cell_key" in merged.columns:
        keyed = merged["cell_key"].notna()
        unique = merged[keyed].drop_duplicates(subset="cell_key", keep="last")
        merged = pd.concat([unique, merged[~keyed]]).sort_index().reset_index(drop=True)
    if len(corpora) > 1:
        merged = _corpus_labels(merged)
    if chance is None:
        if not chances:
            raise ValueError(
                f"None of {', '.join(map(str, dirs))} has a run.json with a chance level (an "
                "interrupted run writes none). Pass the utility's chance level with --chance."
            )
        if max(chances) - min(chances) > 1e-9:
            warnings.warn(
                f"The runs have different chance levels {sorted(set(chances))}; using the "
                f"highest, {max(chances):.4g}.",
                stacklevel=2,
            )
        chance = max(chances)
    return merged, float(chance)


def _with_fingerprint(frame: pd.DataFrame, meta: Mapping[str, Any]) -> pd.DataFrame:
    """``frame`` with a ``corpus_fingerprint`` column: its own, else run.json's digest for
    the rows without one (NaN where neither says)."""
    digest = meta.get("corpus_fingerprint")
    if "corpus_fingerprint" not in frame.columns:
        return frame.assign(corpus_fingerprint=digest)  # all NaN without one: nothing known
    if digest is not None:
        frame = frame.assign(corpus_fingerprint=frame["corpus_fingerprint"].fillna(digest))
    return frame


def _corpus_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """Merged results of several corpora with each row's corpus appended to its label
    (``label @ name``, ``label @ name#digest8`` where two digests share a name; rows with no
    digest keep their label), so every per-label grouping keeps the corpora apart."""
    frame = with_labels(frame)
    digests = frame["corpus_fingerprint"]
    names = frame["corpus"] if "corpus" in frame.columns else digests.str[:8]
    names = names.where(names.notna(), digests.str[:8]).astype(str)
    known = digests.notna()
    per_name = frame[known].groupby(names[known])["corpus_fingerprint"].nunique()
    shared = names.map(per_name).fillna(1) > 1
    tag = names.where(~shared, names + "#" + digests.astype(str).str[:8])
    frame.loc[known, "label"] = frame.loc[known, "label"] + " @ " + tag[known]
    return frame
