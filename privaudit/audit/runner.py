"""The grid runner: every defense at every privacy level, attacked by every attack.

``run_grid`` checks the whole config (every component built, every name and value), plans the
defense points (:mod:`privaudit.audit.plan`), hands the unfinished ones to an executor
(:mod:`privaudit.audit.executors`, which computes them with :mod:`privaudit.audit.cells`),
persists each finished record in the run directory's store (:mod:`privaudit.audit.store`),
and ends with the results table, the plots, the leaderboard and the report. Rows are rewritten
after every defense point, so an interruption never loses finished cells.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from privaudit.api import NONE
from privaudit.audit.cells import Context, Task, build_attacks, build_components, context_for
from privaudit.audit.config import GridConfig
from privaudit.audit.estimate import (
    OUTPUTS,
    STARTUP,
    CostBook,
    Estimate,
    Pricing,
    Sizes,
    Work,
    estimate,
)
from privaudit.audit.executors import end_pool, guard_run, make_executor
from privaudit.audit.fit_noise import measure_fit_noise
from privaudit.audit.forecast import Tracker, fit_noise_seconds, measured_parts, one_time_work
from privaudit.audit.plan import Point, check_levels, plan
from privaudit.audit.reasons import full_reasons
from privaudit.audit.reuse import Reuse
from privaudit.audit.rows import examples, results_table
from privaudit.audit.store import ResultStore, RunDir
from privaudit.audit.strength import check_shares, strength_curve
from privaudit.metrics.stats import measured_sds
from privaudit.numbers import shown
from privaudit.runtime.cache import cache_writable
from privaudit.runtime.cell_store import fresh_cells
from privaudit.runtime.devices import current_device, resolve_device, use_device
from privaudit.runtime.memory import ComponentMemory
from privaudit.runtime.provenance import provenance

#: Writes a finished run's outputs (results frame, run directory, chance level) → the plots
#: written, the problems met (one line each) and the leaderboard: the outputs layer's
#: :func:`privaudit.outputs.write_outputs`, handed down so the runner imports none of it.
OutputWriter = Callable[[Any, RunDir, float], tuple[list[Path], list[str], Any]]


@dataclass
class RunResult:
    run_dir: Path
    frame: Any  # pandas.DataFrame
    plots: list[Path] = field(default_factory=list)
    chance: float = float("nan")  # the chance level of the headline utility
    board: Any = None  # the run's Leaderboard (None when it could not be computed)
    strength_failed: int = 0  # failed rows of strength.csv: they fail the run as a cell does


def run_grid(
    config: GridConfig,
    *,
    reports_root: str | Path = "reports",
    run_dir: str | Path | None = None,
    progress: bool = True,
    executor: str | None = None,
    jobs: int | None = None,
    address: str | None = None,
    overwrite: bool = False,
    outputs: OutputWriter | None = None,
    fresh: bool = False,
) -> RunResult:
    """Run every cell of ``config`` not already in ``run_dir``'s store; write
    ``results.csv``/``.parquet`` (after every point) and ``run.json``; then ``outputs`` (the
    plots, leaderboard and report, :func:`privaudit.outputs.write_outputs`, passed in by the
    layer above: the runner imports no output module) when given. The CLI and the Python
    facade :func:`privaudit.outputs.run_grid` pass it.

    Re-running a config into the same directory (``privaudit run --resume RUN_DIR``) skips
    every finished cell by its key; ``executor``/``jobs``/``address`` override the config's
    ``executor`` block (``local`` with a process pool when ``jobs`` > 1, or ``ray``). A
    directory that holds a run of another config is refused unless ``overwrite``: then the
    new config takes the directory (the previous config's tables, plots, leaderboard and
    report are removed first) and the store's cells, keyed by content, are reused wherever
    they still apply. Any other non-empty folder, or a location that cannot be written
    (a file, a read-only file system), is refused before any work.

    A cell another run on this machine computed with the same key is taken from the cell
    store (:mod:`privaudit.audit.reuse`) unless ``fresh`` (``--fresh``): then every cell is
    computed and replaces the stored one.

    SIGTERM stops the run as Ctrl-C does: the workers are ended and
    :class:`~privaudit.audit.executors.Interrupted` names the ``--resume`` command; a full
    disk is :class:`~privaudit.audit.store.DiskFull`. Finished cells are kept either way."""
    option = "--run-dir" if run_dir is not None else "--out"
    if run_dir is None:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        run_dir = Path(reports_root) / f"{stamp}-{config.name}"
    rd = RunDir(run_dir)
    rd.check_target(option)  # writable, and not a folder of the user's own files
    config.check_names()
    defenses = build_components(config).defenses  # every value checked before anything is written
    check_levels(config, defenses)
    spec = config.executor
    # The driver's device (plan, calibration; a local run's cells): it must exist here. Ray's
    # GPUs are on its nodes, so there a driver without a GPU plans on what it has.
    device = config.device
    if (executor or spec.kind) == "ray" and device.startswith("cuda"):
        device = "auto"
    resolve_device(device)
    runner = make_executor(
        executor or spec.kind,
        jobs=jobs if jobs is not None else spec.jobs,
        address=address if address is not None else spec.address,
    )
    _claim(rd, config, overwrite)
    with guard_run(rd.path) as checkpoint, use_device(device), fresh_cells(fresh):
        return _execute(config, rd, runner, progress, checkpoint, outputs)


@dataclass
class _Grid:
    """A run in progress, as the stages after planning read it: the config and its context,
    the run directory and its result store, the points, how cells run (``runner``, the
    bar or its lines, the SIGTERM ``checkpoint``) and what prices them."""

    config: GridConfig
    ctx: Context
    rd: RunDir
    store: ResultStore
    points: list[Point]
    runner: Any
    progress: bool
    checkpoint: Callable[[], None]
    book: CostBook | None  # None: the cache cannot be read; nothing is kept
    sizes: Sizes
    reuse: Reuse
    tracker: Tracker


def _execute(
    config: GridConfig,
    rd: RunDir,
    runner: Any,
    progress: bool,
    checkpoint: Callable[[], None] = lambda: None,
    outputs: OutputWriter | None = None,
) -> RunResult:
    """The run in its claimed directory: plan, compute every unfinished cell, write outputs."""
    t0 = time.perf_counter()
    ctx = context_for(config)
    context_s = time.perf_counter() - t0  # what a pool's worker pays before its first cell
    check_shares(ctx)  # strength shares against the documents they draw, before any cell
    store, meta, points = _plan_in(config, rd, ctx)
    reuse = Reuse.of_run(ctx, points)  # the machine's cell store: identical cells are taken
    tasks, done = _unfinished(ctx, points, store, reuse)
    total = sum(len(c) for c in (ctx.keys(p)[1] for p in points))
    started = time.perf_counter()
    sizes = Sizes.of(ctx.corpus)  # the units costs scale with, counted once
    book, forecast, tracker = _forecast(ctx, points, tasks, total, done, runner, sizes)
    forecast.reused = reuse.reused_cells
    if context_s > 0.5:  # built here, not reused from an earlier grid in this process
        _keep_costs(book, lambda: book.add([STARTUP], context_s, 1.0))
    meta["estimate"] = forecast.record()
    meta["cells"] = total
    meta["reused"] = {"cells": reuse.reused_cells, "points": reuse.reused_points}
    rd.write_meta(meta)  # a report of the run if it is cut short can count the missing cells
    # Before the first cell, progress bar or not: the grid's size and what it will cost here.
    print("\n".join(forecast.lines()), file=sys.stderr, flush=True)
    _pretrain_first(ctx, tasks, progress)
    tracker.started = started
    grid = _Grid(
        config, ctx, rd, store, points, runner, progress, checkpoint, book, sizes, reuse, tracker
    )
    _compute_cells(grid, tasks, done, total)
    print(reuse.line(total, len(points)), file=sys.stderr, flush=True)
    reuse.store.prune()  # bounded: the least recently used entries go first

    outputs_start = time.perf_counter()
    with ComponentMemory("after the grid") as parts:  # trimmed and logged like a point's cells
        frame, strength_failed, strength_s = _write_tables(grid, parts.start)
        outputs_start += strength_s  # attacks fitted, not outputs: not costed so
        end = {"finished": True, "cells": total, "computed": total - done}
        end["reused"] = meta["reused"]
        rd.write_meta(meta | end)
        level = chance_level(ctx)
        parts.start("outputs")
        plots, problems, board = ([], [], None) if outputs is None else outputs(frame, rd, level)
    if total:
        outputs_s = time.perf_counter() - outputs_start
        _keep_costs(book, lambda: book.add([OUTPUTS], outputs_s, total))
    end["elapsed_seconds"] = round(time.perf_counter() - started, 1)  # beside the estimate
    if problems:  # the results are on disk; say what could not be drawn or written
        end["output_problems"] = problems
    rd.write_meta(meta | end)
    return RunResult(
        run_dir=rd.path,
        frame=frame,
        plots=plots,
        chance=level,
        board=board,
        strength_failed=strength_failed,
    )


def _plan_in(
    config: GridConfig, rd: RunDir, ctx: Context
) -> tuple[ResultStore, dict[str, Any], list[Point]]:
    """The run directory created with its config and a first run.json (finished: false), and
    the planned points; a plan that fails in a directory it created removes it."""
    fresh = not rd.path.exists()
    rd.create().write_config(config.model_dump_json(indent=2))
    store = rd.store()
    meta = {
        "chance_accuracy": ctx.chance,
        "chance_level": chance_level(ctx),
        "utility_metric": ctx.evaluator.metric,
        "bootstrap": config.bootstrap.model_dump(),
        "unit": ctx.units.to_meta(ctx.corpus.authors("test")),
        "corpus_sizes": ctx.corpus.sizes(),
        "corpus_dropped": ctx.corpus.dropped(),
        "backbone": ctx.bb.name,
        "finished": False,
        "provenance": provenance(),
    }
    try:
        rd.write_meta(meta)  # leaderboards can read a run that is cut short
        points = plan(config, ctx, store)  # fits defenses, calibrates rates: can still fail
    except BaseException:
        if fresh and not any(store.dir.iterdir()):
            shutil.rmtree(rd.path, ignore_errors=True)  # a failed plan leaves no empty run
        raise
    return store, meta, points


def _unfinished(
    ctx: Context, points: list[Point], store: ResultStore, reuse: Reuse | None = None
) -> tuple[list[Task], int]:
    """The tasks of the points with a cell (or their utility) still to compute, and how many
    cells are already finished: in the run's store, or taken from the cell store (``reuse``)
    into it."""

    def finished(key: str) -> dict[str, Any] | None:
        found = store.finished(key)
        return found if found is not None or reuse is None else reuse.take(store, key)

    tasks, done = [], 0
    for point in points:
        point_key, cells = ctx.keys(point)
        cached = finished(point_key)
        todo = {label: key for label, key in cells.items() if finished(key) is None}
        done += len(cells) - len(todo)
        if cached is None or todo:
            tasks.append(Task(point, point_key, todo, cached))
    return tasks, done


def _compute_cells(grid: _Grid, tasks: list[Task], done: int, total: int) -> None:
    """Every task through the executor, each record stored as it comes (and kept in the cell
    store), with the progress bar (its ETA re-priced after every point; without a bar, one
    line per point), the measured costs and the results table rewritten after every task."""
    from tqdm.auto import tqdm

    config, ctx, rd, store, points = grid.config, grid.ctx, grid.rd, grid.store, grid.points
    runner, progress, checkpoint, reuse = grid.runner, grid.progress, grid.checkpoint, grid.reuse
    book, sizes, tracker = grid.book, grid.sizes, grid.tracker
    # tqdm's own remaining time assumes every cell costs alike: the tracker's replaces it
    bar = tqdm(
        total=total,
        initial=done,
        desc=_bar_desc(tracker),
        unit="cell",
        disable=not progress,
        bar_format=BAR_FORMAT,
    )
    in_flight = _InFlight(bar, tasks, runner)
    told: set[str] = set()  # full failure messages printed (a failed point fails every cell)
    try:

        def put(key: str, record: dict[str, Any]) -> None:
            # A failure's full message may quote the corpus: the terminal gets it, the run
            # directory only when the run keeps examples.
            for full in full_reasons(record, keep=config.show_examples):
                if full not in told:
                    told.add(full)
                    tqdm.write(f"cell failed: {full}", file=sys.stderr)
            store.put(key, record)
            reuse.keep(key, record)
            checkpoint()  # stop after the cell that was running when SIGTERM came

        for task, records in runner.run(config, ctx, tasks, put, on_start=in_flight.started):
            checkpoint()
            cells = sum(1 for _, r in records if r["kind"] == "cell")
            bar.update(cells)
            in_flight.finished(task)
            _keep_costs(book, lambda t=task, r=records: book.record(ctx, t, r, sizes, tracker.jobs))
            # the remaining work re-priced from what was just measured
            tracker.finished(task, measured_parts(ctx, task, records), cells)
            if progress:
                bar.set_description_str(_bar_desc(tracker), refresh=True)
            else:
                print(tracker.line(_describe(task.point)), file=sys.stderr, flush=True)
            # Intervals need every cell's outcomes: computed once, at the end.
            rd.write_results(*results_table(ctx, points, store, intervals=False))
    finally:
        bar.close()
        runner.close()


#: The cells bar: its ETA is the tracker's (in the description), not tqdm's per-cell rate.
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"


def _bar_desc(tracker: Tracker | None) -> str:
    return "cells" if tracker is None else f"cells ({tracker.eta()})"


def _write_tables(grid: _Grid, start: Callable[[str], None]) -> tuple[Any, int, float]:
    """After every cell: the results table with its intervals, the strength curve when the
    config declares one, and the examples (or none). Returns the results frame, the failed
    rows of strength.csv and the seconds the curve took (its attacks are not outputs).
    ``start`` names each stage as it begins (the run's memory log)."""
    config, ctx, rd, store, points = grid.config, grid.ctx, grid.rd, grid.store, grid.points
    progress = grid.progress
    t0 = time.perf_counter()
    start("results")
    plain, _ = results_table(ctx, points, store, intervals=False)
    refits = config.fit_noise.refits
    noise = measure_fit_noise(ctx, points, plain, refits, progress=progress, start=start)
    if len(noise):
        rd.write_fit_noise(noise)
    fit_noise_s = time.perf_counter() - t0
    start("intervals")
    frame = rd.write_results(*results_table(ctx, points, store, measured=measured_sds(noise)))
    strength_failed, strength_s = 0, fit_noise_s
    if config.strength is not None:  # a declared stage, after every cell: reuses their rows
        start("strength")
        t0 = time.perf_counter()
        curve = strength_curve(ctx, points, frame, progress=progress)
        rd.write_strength(curve)
        strength_failed = int((curve["status"] == "failed").sum())
        strength_s += time.perf_counter() - t0
    if config.show_examples:
        rd.write_examples(examples(ctx, points, store))
    else:  # no corpus text in the run directory unless asked for
        rd.forget_examples([ctx.keys(p)[0] for p in points])
    return frame, strength_failed, strength_s


def _pretrain_first(ctx: Context, tasks: list[Task], progress: bool) -> None:
    """Build the one-time models the unfinished cells need (the generative inverter) before
    the first cell, with their own progress (a bar with an ETA, or a line every half minute
    without one), rather than inside a cell whose bar would stand still for their minutes.
    A pre-training that fails is left to the cells, which record why.

    They are built in a child process (:func:`_pretrain_apart`), which writes them to the
    disk cache and exits; the cells load them from there. Built here, the pre-training left
    this process's heap fragmented: 1.3 GB more resident before the first point than a run
    that found the model cached, and every later peak rode on it. A read-only cache could
    not pass the models on, so there they are built here, as before."""
    needed = {label for task in tasks for label in task.attack_keys}
    labels: list[str] = []
    specs: set[Any] = set()
    for label, attack in ctx.attacks.items():
        cost, plan = getattr(attack, "pretrain_cost", None), ctx.plans[label]
        if label not in needed or not callable(cost) or cost(ctx.bb, plan) is None:
            continue
        if attack.spec(plan) not in specs:  # geia and vec2text share one pre-trained model
            specs.add(attack.spec(plan))
            labels.append(label)
    if not labels:
        return
    payload, device = ctx.config.model_dump_json(), current_device()
    if cache_writable():
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        spawn = multiprocessing.get_context("spawn")  # a fresh process: torch is not fork-safe
        pool = ProcessPoolExecutor(max_workers=1, mp_context=spawn)
        try:
            notes = pool.submit(_pretrain_apart, payload, labels, progress, device).result()
        except Exception as exc:  # the child could not start or died: the cells try again
            notes = {label: f"{type(exc).__name__}: {exc}" for label in labels}
        except BaseException:  # Ctrl-C or SIGTERM: the child must not train on for minutes
            end_pool(pool, cut_short=True)
            raise
        end_pool(pool, cut_short=False)
    else:  # what a child built could not be kept for this process to load
        notes = _pretrain_apart(payload, labels, progress, device)
    for label, note in notes.items():
        if isinstance(note, str):
            print(
                f"privaudit: pre-training the inverter of {label} failed ({note}); its cells "
                "will try again and record why",
                file=sys.stderr,
                flush=True,
            )
        else:
            print(
                f"privaudit: pre-trained the inverter of {label} in {note['seconds']:.0f} s "
                "(kept in the cache for later runs)",
                file=sys.stderr,
                flush=True,
            )


def _pretrain_apart(
    config_json: str, labels: list[str], progress: bool, device: str
) -> dict[str, dict[str, Any] | str]:
    """In a child process: build the grid's attacks named ``labels`` (no others: a plugin
    the parent registered at run time is unknown here) and pre-train them into the disk
    cache, on ``device``. Returns each one's note, or why it failed (a message: an exception
    may not survive the trip back)."""
    from privaudit.models.backbone import backbone  # lazy: a child's only use of the models

    config = GridConfig.model_validate_json(config_json)
    attacks, plans = build_attacks(config, only=set(labels))
    notes: dict[str, dict[str, Any] | str] = {}
    with use_device(device):
        bb = backbone(config.backbone)
        for label in labels:
            attack = attacks[label]
            attack.progress = progress
            try:
                notes[label] = attack.prepare(bb, plans[label])
            except Exception as exc:
                notes[label] = f"{type(exc).__name__}: {exc}"
    return notes


def chance_level(ctx: Context) -> float:
    """The headline utility of guessing without the text: 1/K (K test classes) for balanced
    accuracy, whatever the imbalance; the majority-class share for plain accuracy."""
    import numpy as np

    if ctx.evaluator.metric == "balanced_accuracy":
        k = len(np.unique(ctx.y_test))
        return 1.0 / k if k else math.nan
    return ctx.chance


def _claim(rd: RunDir, config: GridConfig, overwrite: bool) -> None:
    """The same config continues a run in its directory; another one is refused (or, with
    ``overwrite``, takes it over: the previous config's outputs are removed, so none of its
    plots looks like part of the new run), so a finished grid is never silently replaced."""
    import json

    saved = rd.read_config() if rd.config_json.is_file() else None
    if saved is None:
        return
    try:  # through the model: a field added since (with its default) is no difference
        theirs = json.loads(GridConfig.model_validate(saved).model_dump_json())
    except ValueError:
        theirs = saved
    # Output options choose what is kept or how it is summarised (no key, no result): they
    # may change on --resume; so may the device (no key either, recorded in provenance).
    ours = json.loads(config.model_dump_json())
    if _sans_outputs(theirs) == _sans_outputs(ours):
        return
    if not overwrite:
        raise ValueError(
            f"{rd.path} holds a run of another config ({saved.get('name')!r}); continue it "
            f"with `privaudit run --resume {rd.path}`, choose another --run-dir, or pass "
            "--overwrite to replace it (finished cells that still apply are reused)."
        )
    for path in rd.outputs():
        path.unlink()


OUTPUT_OPTIONS = ("show_examples", "bootstrap", "device", "strength", "fit_noise")


def _sans_outputs(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in OUTPUT_OPTIONS}


def _describe(point: Point) -> str:
    return point.label + (f" {shown(point.knob_value)}" if point.knob_value is not None else "")


def _forecast(
    ctx: Context,
    points: list[Point],
    tasks: list[Task],
    total: int,
    done: int,
    runner: Any,
    sizes: Sizes,
) -> tuple[CostBook | None, Estimate, Tracker]:
    """This machine's cost book (None when the cache cannot be read), the estimate of
    ``tasks`` and the tracker that re-prices it as points finish
    (:mod:`privaudit.audit.estimate`)."""
    try:
        book: CostBook | None = CostBook()
    except OSError:  # no cache directory: priors, and nothing is kept
        book = None
    work = [
        Work(ctx.defense(t.point), t.cached_utility is None, list(t.attack_keys), t.point.label)
        for t in tasks
    ]
    priced = book if book is not None else CostBook.empty()
    jobs = int(getattr(runner, "jobs", 1) or 1)
    pricing = Pricing(ctx.attacks, ctx.evaluator, sizes, priced)
    nones = [ctx.defense(p) for p in points if ctx.defense(p).name == NONE]
    after = fit_noise_seconds(nones, ctx.config.fit_noise.refits, pricing)
    forecast = estimate(
        work, pricing, points=len(points), cells=total, done=done, jobs=jobs, after=after
    )
    tracker = Tracker(tasks, work, pricing, cells=total, done=done, jobs=jobs, after=after)
    # A model pre-trained before the first cell (and the strength curve's) is waited for too.
    forecast.one_time = one_time_work(ctx.config, ctx.attacks, ctx.plans)
    forecast.wall += sum(s for _, s in forecast.one_time)
    return book, forecast, tracker


def _keep_costs(book: CostBook | None, add: Callable[[], None]) -> None:
    """File measurements and save the book; a cache that cannot be written costs the run
    nothing (the next estimate uses what was kept)."""
    if book is None:
        return
    try:
        add()
        book.save()
    except (OSError, ValueError, KeyError, TypeError) as exc:  # never the run's failure
        import warnings

        warnings.warn(f"privaudit could not keep measured costs: {exc}", stacklevel=2)


class _InFlight:
    """The progress bar's postfix: what is being computed now. In this process, the point
    and its component (``t2t 50 · privatize``, ``· probe``, ``· geia``); with a pool, the
    points in flight (tasks run in the order given, ``jobs`` at a time)."""

    def __init__(self, bar: Any, tasks: list[Task], runner: Any) -> None:
        self.bar, self.pending = bar, list(tasks)
        self.jobs = max(1, int(getattr(runner, "jobs", 1) or 1))
        self.show()

    def started(self, task: Task, component: str) -> None:
        self.bar.set_postfix_str(f"{_describe(task.point)} · {component}", refresh=True)

    def finished(self, task: Task) -> None:
        self.pending = [t for t in self.pending if t is not task]
        self.show()

    def show(self) -> None:
        if self.jobs == 1 or not self.pending:
            return  # one at a time: ``started`` says what runs
        now = [_describe(t.point) for t in self.pending[: self.jobs]]
        self.bar.set_postfix_str("in flight: " + ", ".join(now), refresh=True)
