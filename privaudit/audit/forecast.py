"""The estimate applied to a grid (:mod:`privaudit.audit.estimate` prices the work): from the
config alone before the first cell (:func:`estimate_config`, the one-time pre-trainings), and
re-priced as the grid runs (:class:`Tracker`, from what each finished point measured)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.api import NONE
from privaudit.audit.cells import build_components, point_keys
from privaudit.audit.estimate import (
    DRIFT_BOUNDS,
    DRIFT_MIN_COMPONENTS,
    CostBook,
    Estimate,
    Pricing,
    Sizes,
    Work,
    duration,
    estimate,
    one_process_share,
    price_work,
    speedup,
    tail_seconds,
)
from privaudit.audit.fit_noise import refitted
from privaudit.audit.plan import calibration_key, check_levels, identity
from privaudit.audit.reuse import Reuse
from privaudit.audit.store import RunDir
from privaudit.audit.strength import public_variants
from privaudit.models.backbone import backbone as load_backbone
from privaudit.registry import CORPORA, build_component
from privaudit.runtime.cell_store import CellStore, is_fresh

if TYPE_CHECKING:
    from privaudit.audit.config import GridConfig


def measured_parts(
    ctx: Any, task: Any, records: list[tuple[str, dict[str, Any]]]
) -> dict[str, float]:
    """What a finished point's records say each of its parts took (seconds, by
    :attr:`Part.component`); a failed record says nothing."""
    defense = ctx.defense(task.point)
    by_key = dict(records)
    out: dict[str, float] = {}
    point = by_key.get(task.point_key)
    if point is not None and point.get("status") == "ok":
        wall = point.get("privatize_wall_seconds", point.get("privatize_seconds"))
        out[f"defense {task.point.label or defense.name}"] = float(wall)
        out[f"utility {ctx.evaluator.name}"] = float(point.get("utility_seconds", math.nan))
    for label, key in task.attack_keys.items():
        record = by_key.get(key)
        if record is None or record.get("status") == "failed" or not record.get("rows"):
            continue
        out[label] = float(record["rows"][0].get("attack_seconds", 0.0))
    return {k: v for k, v in out.items() if math.isfinite(v) and v >= 0}


class Tracker:
    """The estimate as the grid runs: after each finished point the remaining work is priced
    again from the cells just measured, most specific first:

    1. a part this run has measured (the same book key: this component on this defense) at
       this run's own rate;
    2. a component this run has measured on other points (geia on t2t, before its first
       rapt cell) at its first price × that component's own measured / predicted seconds;
    3. anything else at its first price × the run's **drift**, the median over the
       components measured so far of each one's measured / predicted seconds (within
       :data:`DRIFT_BOUNDS`), so a machine that got busier (or quieter) since the run
       started moves the ETA at the next point.

    A component's price moves with its own measurements, not the machine's median: on a
    cold quick grid the small parts ran at 0.6-0.8× their book while geia and vec2text ran
    at 1.1-2.2×; the median (0.67-0.88) priced every later point's inverters below their
    first price, and the ETA at point 1 read 31 min for 56 (at point 10: 21 for 38). One
    component is not the machine either: the drift waits for
    :data:`DRIFT_MIN_COMPONENTS` of them (on SynthPAI's ``mechanisms-real``, one re-priced
    attack had read as drift ×4: "ETA 11.3 h" for a grid estimated at 2.9 h).
    ``line()`` is one ``--no-progress`` line per point; ``eta()`` is what the progress bar
    shows."""

    def __init__(
        self,
        tasks: Sequence[Any],
        work: Sequence[Work],
        pricing: Pricing,
        *,
        cells: int,
        done: int,
        jobs: int,
        after: float = 0.0,
    ) -> None:
        self.parts = {
            id(task): price_work(item, pricing) for task, item in zip(tasks, work, strict=True)
        }
        self.pending = [id(t) for t in tasks]
        self.points_total = len(tasks)
        self.cells, self.done, self.jobs = cells, done, max(1, jobs)
        self.outputs_s = tail_seconds(pricing.book, cells, after)
        self.started = time.perf_counter()
        self._rates: dict[str, list[float]] = {}  # book key -> [seconds, units] this run
        self._ratios: dict[str, list[float]] = {}  # component -> [measured, predicted] s

    def finished(self, task: Any, measured: dict[str, float], cells: int) -> None:
        """A point finished: ``measured`` seconds by part, ``cells`` attack cells done.

        A worker's seconds are not one process's: with ``jobs`` workers contending for the
        cores each part takes longer, which :func:`speedup` already prices. So they are
        filed as one process's (× ``speedup(jobs) / jobs``) and the remaining work is shared
        out as before; filed as measured, the contention counted twice (``--jobs 2`` on two
        cores: "ETA 29 min" after the first of three points, with 6 min left)."""
        self.done += cells
        if id(task) in self.pending:
            self.pending.remove(id(task))
        serial = one_process_share(self.jobs)
        for part in self.parts.get(id(task), []):
            seconds = measured.get(part.component)
            if seconds is None:
                continue
            seconds *= serial
            slot = self._rates.setdefault(part.key, [0.0, 0.0])
            slot[0] += seconds
            slot[1] += part.units
            pair = self._ratios.setdefault(part.component, [0.0, 0.0])
            pair[0] += seconds
            pair[1] += part.seconds

    @property
    def drift(self) -> float:
        ratios = [m / p for m, p in self._ratios.values() if m > 0 and p > 0]
        if len(ratios) < DRIFT_MIN_COMPONENTS:
            return 1.0
        low, high = DRIFT_BOUNDS
        return min(high, max(low, statistics.median(ratios)))

    def remaining(self) -> float:
        """Seconds of wall time left: the pending points re-priced, shared by the workers,
        and the outputs."""
        drift, per_point = self.drift, []
        for ident in self.pending:
            total = 0.0
            for part in self.parts[ident]:
                seconds, units = self._rates.get(part.key, (0.0, 0.0))
                measured, predicted = self._ratios.get(part.component, (0.0, 0.0))
                if units > 0:
                    total += seconds / units * part.units
                elif measured > 0 and predicted > 0:
                    total += part.seconds * measured / predicted
                else:
                    total += part.seconds * drift
            per_point.append(total)
        work = sum(per_point)
        jobs = max(1, min(self.jobs, len(per_point) or 1))
        return max(work / speedup(jobs), max(per_point, default=0.0)) + self.outputs_s

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def eta(self) -> str:
        """``ETA 12 min`` for the bar."""
        return f"ETA {duration(self.remaining())}"

    def line(self, what: str) -> str:
        """One line for a finished point: which, elapsed time, cells done of all, the ETA."""
        finished = self.points_total - len(self.pending)
        return (
            f"privaudit: point {finished}/{self.points_total} done ({what}) · elapsed "
            f"{_clock(self.elapsed())} · cells {self.done}/{self.cells} · ETA "
            f"{duration(self.remaining())}"
        )


def fit_noise_seconds(nones: Sequence[Any], refits: int, pricing: Pricing) -> float:
    """The fit-noise refits after the grid (:func:`~privaudit.audit.fit_noise.
    measure_fit_noise`): at each undefended point (its defense in ``nones``), every random
    fit ``refits`` times, each at its price on that point. They ran unpriced: the after-grid
    stages of a cold quick grid took 3:11 where the ETA at its last point said 62 s."""
    if refits <= 0 or not nones:
        return 0.0
    random, utility = refitted(pricing.attacks, pricing.evaluator)
    seconds = 0.0
    for defense in nones:
        parts = price_work(Work(defense, utility, random), pricing)
        seconds += sum(p.seconds for p in parts[1:])  # parts[0]: privatize, not refitted
    return refits * seconds


def _clock(seconds: float) -> str:
    hours, rest = divmod(round(seconds), 3600)
    minutes = f"{rest // 60:02d}" if hours else f"{rest // 60}"
    return f"{hours}:" * bool(hours) + f"{minutes}:{rest % 60:02d}"


def estimate_config(
    config: GridConfig,
    *,
    run_dir: str | Path | None = None,
    jobs: int | None = None,
    book: CostBook | None = None,
) -> Estimate:
    """The estimate of ``config`` from the config alone: components built (every name and
    value checked), the corpus loaded for its size; no defense fitted, nothing calibrated,
    nothing written. With ``run_dir`` (a run to resume), its finished cells count as done,
    and so do the cells the machine's cell store holds (unless ``--fresh``): that needs the
    backbone's fingerprint (the model is loaded, not run)."""
    import numpy as np

    config.check_names()
    defenses, attacks, evaluator, plans = build_components(config)
    check_levels(config, defenses)
    corpus = build_component(
        CORPORA, config.corpus.name, config.corpus.params, None, "corpus.params"
    ).subset(config.corpus.limits, np.random.default_rng(config.seeds[0]))
    store = None
    if run_dir is not None and RunDir(run_dir).config_json.is_file():  # a run: read its cells
        store = RunDir(run_dir).store()
    cell_store = CellStore()
    reuse = None
    if not cell_store.empty() and not is_fresh():  # what another run computed is free too
        reuse = Reuse(corpus, evaluator, attacks, cell_store)
    fps: tuple[str, str] | None = None
    if store is not None or reuse is not None:
        fps = corpus.fingerprint(), load_backbone(config.backbone).fingerprint

    work, points, cells, done, reused = _work(
        config, defenses, attacks, evaluator, store, reuse, fps
    )
    spec_jobs = jobs if jobs is not None else config.executor.jobs
    pricing = Pricing(attacks, evaluator, Sizes.of(corpus), book or CostBook())
    nones = [d for d in defenses if d.name == NONE for _ in config.seeds]
    after = fit_noise_seconds(nones, config.fit_noise.refits, pricing)
    forecast = estimate(
        work, pricing, points=points, cells=cells, done=done, jobs=spec_jobs, after=after
    )
    forecast.one_time = one_time_work(config, attacks, plans)
    forecast.wall += sum(s for _, s in forecast.one_time)
    forecast.reused = reused
    return forecast


def _work(
    config: GridConfig,
    defenses: list[Any],
    attacks: dict[str, Any],
    evaluator: Any,
    store: Any,
    reuse: Reuse | None,
    fps: tuple[str, str] | None,
) -> tuple[list[Work], int, int, int, int]:
    """The grid's work to do (a :class:`Work` per point with anything left), and its counts:
    points, cells, cells done (in ``store``, the run resumed, or in ``reuse``, the machine's
    cell store) and of those the ones reused from another run. Without ``fps`` (the corpus's
    and the backbone's fingerprints) no key is known, and every cell counts as to compute."""

    def finished(key: str) -> bool:
        if store is not None and store.finished(key) is not None:
            return True
        return reuse is not None and reuse.has(key)

    work, points, cells, done, reused = [], 0, 0, 0, 0
    for i, spec in enumerate(config.defenses):
        base = defenses[i]
        levels: list[float | None] = list(spec.knob_values or [None])
        if spec.target_rates:  # calibrated levels: known only if a run cached them
            cached = None
            if store is not None and fps is not None:
                cached = store.get(calibration_key(config, i, base, fps))
            levels = (
                [lv[0] for lv in cached["levels"]] if cached else [None] * len(spec.target_rates)
            )
        for value in levels:
            defense = base if value is None else base.with_knob(value)
            for seed in config.seeds:
                points += 1
                cells += len(attacks)
                todo, utility = list(attacks), True
                # an uncalibrated level's key is unknown: its cells count as to compute
                if fps is not None and (value is not None or not spec.target_rates):
                    ident = identity(defense, *fps, seed)
                    pkey, ckeys = point_keys(ident, evaluator, attacks)
                    if reuse is not None:
                        reuse.add(pkey, ckeys, defense, spec.display, value)
                    utility = not finished(pkey)
                    todo = [label for label, k in ckeys.items() if not finished(k)]
                    reused += sum(
                        1
                        for label, k in ckeys.items()
                        if label not in todo and (store is None or store.finished(k) is None)
                    )
                done += len(attacks) - len(todo)
                if utility or todo:
                    work.append(Work(defense, utility, todo, spec.display))
    return work, points, cells, done, reused


def one_time_work(
    config: GridConfig, attacks: dict[str, Any], plans: Mapping[str, Mapping[str, Any]]
) -> list[tuple[str, float]]:
    """The pre-trainings the grid's attacks would do before their first cell (a model not in
    the disk cache yet), and those of the strength curve's public-data shares, each once:
    (which attacks, estimated seconds)."""
    pending: dict[Any, tuple[list[str], float]] = {}
    bb = None
    for label, (attack, plan) in prepared_attacks(config, attacks, plans).items():
        cost = getattr(attack, "pretrain_cost", None)
        if not callable(cost):
            continue
        bb = bb or load_backbone(config.backbone)  # lean: its fingerprint, no model
        seconds = cost(bb, plan)
        if seconds is None:  # cached
            continue
        key = attack.spec(plan)
        names, _ = pending.get(key, ([], seconds))
        pending[key] = ([*names, label], seconds)
    return [
        (f"pre-training the inverter of {', '.join(names)}", seconds)
        for names, seconds in pending.values()
    ]


def prepared_attacks(
    config: GridConfig, attacks: dict[str, Any], plans: Mapping[str, Mapping[str, Any]]
) -> dict[str, tuple[Any, Mapping[str, Any]]]:
    """The grid's attacks with their plans (:meth:`~privaudit.api.Attack.plan`), and for the
    strength curve's public-data shares each attack rebuilt on that share of its public
    documents (``"geia (strength: 2000 public documents)"``, under its original's plan):
    every model a run pre-trains."""
    out = {label: (attack, plans[label]) for label, attack in attacks.items()}
    levels = config.strength.public_levels() if config.strength is not None else []
    for label, attack in attacks.items():
        for _, n, variant in public_variants(attack, levels, plans[label]):
            out[f"{label} (strength: {n} public documents)"] = (variant, plans[label])
    return out
