"""What a grid will cost, known before its first cell.

A grid's work is a sum of component runs: per defense point one privatize step (train and
test) and, unless stored, one utility evaluation; per unfinished attack cell one attack. Each
component's cost is kept as **seconds per 1,000 corpus words** (privatize and utility: the
train and test splits' words; an attack: the test and aux splits'), so a measurement on the
quick grid's corpus prices the paper grid's too. The book of costs is ``costs.json`` in
:func:`privaudit.runtime.cache.cache_dir`, one section per machine (:func:`machine_tag`: OS,
architecture, CPU count), updated after every defense point of a run. A section is kept
under the stamp of the shipped reference book it was measured beside: a release that ships a
new reference (new code, new costs) starts the section anew, so what the old code measured
does not price the new (a measured 3.8 s per 1,000 words for ``geia`` from before its batched
decoding priced the ``real`` preset at 6.2 h; it took 57 minutes).

A cost is looked up from the most specific measurement to the least: the component with its
parameters (a digest; a defense's knob left out, so every level shares one entry) on this
defense, the component by name on this defense, with its parameters on any defense, by name
on any defense. A component this machine has not measured is priced from the reference
cost book shipped with the package, the same keys in the same order, its rates × this
machine's speed ratio against the reference machine (:mod:`privaudit.runtime.costs`: a
second's fixed workload, measured once per machine); without a reference entry (or on
another device kind), from the class's ``cost_prior``
(:attr:`privaudit.api.Component.cost_prior`). Per defense entries learn what does not apply
(an attack that is ``n/a`` on a defense costs nothing there) and what a release's kind costs
(the probe on pooled vectors needs no encoding). Finished cells of a resumed run cost 0.

Privatize seconds are the wall time a point took, not its charged time (which adds what the
content memos saved: :func:`privaudit.runtime.memo.charged_seconds`): the estimate
predicts this run's wall clock, where the memo's savings are real. The driver's own work
(results tables, plots, leaderboard, report) is one more entry, per cell. A section's running
average weighs at most ``MAX_WEIGHT`` (20) samples.

One-time work: when an attack's disk-cached model is missing,
:func:`privaudit.audit.forecast.one_time_work` prices it from the attack's ``pretrain_cost``
(the strength curve's public shares included) and the forecast adds it to the wall time;
the run's banner and ``--estimate`` both show it. The run then builds those models before its
first cell, with their own progress, so the cells' bar never stands still on one cell for the
pre-training's minutes; a pre-training that fails is left to its cells, which record why.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.audit.store import write_json
from privaudit.runtime.cache import cache_dir, cache_writable, locked
from privaudit.runtime.costs import (
    RunScore,
    ScaledReference,
    machine_tag,
    reference_stamp,
    run_score,
    scaled_reference,
    score_ratio,
)

if TYPE_CHECKING:
    pass

COSTS_FILE = "costs.json"
FORMAT = 1
#: A running average weighs at most this many samples, so a component that got faster (or
#: slower) shows within a few runs.
MAX_WEIGHT = 20.0
#: Seconds per cell of the driver's own work (tables, plots, leaderboard, report), unmeasured.
OUTPUTS_PRIOR = 0.1
OUTPUTS = "outputs"
#: Seconds a pool's worker spends before its first point (start, imports, the grid's context),
#: measured as the driver's own context build; added once when points run in a pool.
STARTUP = "startup"
STARTUP_PRIOR = 20.0
#: Cores a point keeps busy in one process (the quick grid ran at 163 % CPU on two cores):
#: a pool speeds a grid up by at most cores / this, however many workers it has.
SERIAL_CORES = 1.6
#: What a pool achieves of that where its workers need more cores than there are: on two
#: cores, ``--jobs 2`` did the quick grid's first 8 points in 26:22 where ``--jobs 1`` did
#: them in about 16:40 (0.63× for a predicted 1.25×: each worker pays the per-process work,
#: the model loads and the inverter's widening, and the two contend for the memory bus).
CONTENDED = 0.5
#: Where a component's rate came from, best first (a component priced by several lookups,
#: e.g. one per defense, counts under its best).
MEASURED, REFERENCE, PRIOR = 0, 1, 2
#: The key prefix of a rate per hundred victims (:func:`victims_of`).
VICTIMS = "victims|"
#: A run's measured-to-predicted ratio, applied to the work no cell of it has measured yet,
#: stays within these bounds (one point's burst is not the grid's pace).
DRIFT_BOUNDS = (0.25, 4.0)
#: Components a run must have measured before their median ratio re-prices the others.
DRIFT_MIN_COMPONENTS = 2


def costs_path() -> Path:
    return cache_dir() / COSTS_FILE


def _digest(params: dict[str, Any]) -> str:
    blob = json.dumps(params, sort_keys=True, default=str).encode()
    return hashlib.blake2b(blob, digest_size=4).hexdigest()


def component_id(obj: Any) -> str:
    """``name@digest`` of a component's parameters (a defense's knob left out: every level of
    one defense spec costs alike)."""
    params = dict(obj.params())
    knob = getattr(obj, "knob", None)
    if knob is not None:
        params.pop(knob, None)
    return f"{obj.name}@{_digest(params)}"


def privatize_keys(defense: Any) -> list[str]:
    return [f"privatize:{component_id(defense)}", f"privatize:{defense.name}"]


def _on_defense_keys(kind: str, obj: Any, defense: str) -> list[str]:
    ident = component_id(obj)
    return [
        f"{kind}:{ident}|{defense}",
        f"{kind}:{obj.name}|{defense}",
        f"{kind}:{ident}",
        f"{kind}:{obj.name}",
    ]


def utility_keys(evaluator: Any, defense: str) -> list[str]:
    return _on_defense_keys("utility", evaluator, defense)


def attack_keys(attack: Any, defense: str) -> list[str]:
    return _on_defense_keys("attack", attack, defense)


def victim_keys(attack: Any, defense: str) -> list[str]:
    """The keys of an attack priced by its victims (:func:`victims_of`)."""
    return [f"{VICTIMS}{key}" for key in attack_keys(attack, defense)]


def victims_of(attack: Any, sizes: Sizes) -> int | None:
    """The victims an attack that declares ``max_victims`` scores (its cap, or every test
    document when there are fewer): its cost follows them, not the corpus's words (geia
    decodes 300 victims whether the test split has 400 documents or 4,000). None for an
    attack that scores every test document: it is priced by words."""
    cap = getattr(attack, "max_victims", None)
    if cap is None or sizes.victims <= 0:
        return None
    return min(int(cap), int(sizes.victims))


@dataclass(frozen=True)
class Sizes:
    """A corpus's size in the units costs scale with: thousands of words, and the victims (the
    test split's documents) for an attack priced by victims."""

    point_kwords: float  # train + test: what a point privatizes and the evaluator reads
    attack_kwords: float  # test + aux: what an attacker attacks and queries
    victims: int = 0  # test documents

    @classmethod
    def of(cls, corpus: Any) -> Sizes:
        def words(split: str) -> int:
            if split not in corpus.splits:
                return 0
            return sum(len(t.split()) for t in corpus.texts(split))

        test = words("test")
        victims = len(corpus.splits["test"]) if "test" in corpus.splits else 0
        return cls((words("train") + test) / 1000, (test + words("aux")) / 1000, victims)


class CostBook:
    """The measured costs of this machine (``costs.json``): read once, added to by a run,
    saved by read-merge-write under a lock so that concurrent runs lose nothing. An
    unreadable file is ignored (a warning) and rewritten on the next save. ``reference``:
    what prices a component not measured here (the shipped reference for this machine)."""

    def __init__(
        self, path: Path | None = None, machine: str | None = None, score: RunScore | None = None
    ) -> None:
        self.path: Path | None = Path(path) if path is not None else costs_path()
        self.machine = machine or machine_tag()
        self.stamp = reference_stamp()
        self._pending: dict[str, list[float]] = {}
        machines, stamps = self._read(warn=True)
        # measurements made by other code (under another shipped reference) would outlive it
        current = stamps.get(self.machine) == self.stamp
        self.entries: dict[str, dict[str, float]] = {}
        if current:
            self.entries = machines.get(self.machine, {})
        # A book is a run's: its speed score is measured anew (never another load's)
        self.score = score if score is not None else run_score(new=True)
        self.reference: ScaledReference | None = scaled_reference(score=self.score)

    @classmethod
    def empty(cls, score: RunScore | None = None) -> CostBook:
        """A book with no file: the reference and priors, nothing kept (no cache directory)."""
        book = cls.__new__(cls)
        book.path, book.machine, book._pending, book.entries = None, machine_tag(), {}, {}
        book.stamp = reference_stamp()
        book.score = score if score is not None else run_score(new=True)
        book.reference = scaled_reference(score=book.score)
        return book

    def _read(self, *, warn: bool) -> tuple[dict[str, dict[str, dict[str, float]]], dict[str, str]]:
        """Every machine's entries and the reference stamp each was measured under (``{}``
        when the file is absent or unreadable; a machine without a stamp: old code's)."""
        if self.path is None:
            return {}, {}
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"not a privaudit cost file of format {FORMAT}")
            machines = data["machines"]
            for entries in machines.values():
                for entry in entries.values():
                    float(entry["seconds"]), float(entry["units"]), float(entry["n"])
            return machines, {str(k): str(v) for k, v in data.get("reference", {}).items()}
        except FileNotFoundError:
            return {}, {}
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            if warn:
                warnings.warn(
                    f"ignoring the unreadable cost file {self.path} ({type(exc).__name__}: "
                    f"{exc}); estimates use priors and the file is rewritten after this run",
                    stacklevel=3,
                )
            return {}, {}

    def rate(self, keys: Sequence[str]) -> float | None:
        """Seconds per unit of the first of ``keys`` that was measured (None: none was), at
        this run's speed: a rate filed under another run's speed score is rescaled by this
        run's (measured under load, it does not price a quiet machine's run, nor the reverse)."""
        for key in keys:
            entry = self.entries.get(key)
            if entry and entry["units"] > 0:
                rate = entry["seconds"] / entry["units"]
                then = entry.get("score")
                if then and math.isfinite(then) and then > 0:
                    rate *= score_ratio(self.score.value, then)
                return rate
        return None

    def measured(self, keys: Sequence[str]) -> bool:
        return self.rate(keys) is not None

    def lookup(self, keys: Sequence[str]) -> tuple[float | None, int]:
        """The rate of ``keys`` and its source: :data:`MEASURED` here, :data:`REFERENCE` (the
        reference × this machine's speed ratio), or (None, :data:`PRIOR`): none known."""
        rate = self.rate(keys)
        if rate is not None:
            return rate, MEASURED
        if self.reference is not None and (rate := self.reference.rate(keys)) is not None:
            return rate, REFERENCE
        return None, PRIOR

    def add(self, keys: Sequence[str], seconds: float, units: float) -> None:
        """One measurement of ``seconds`` for ``units``, filed under every key."""
        if not (math.isfinite(seconds) and seconds >= 0 and units > 0):
            return
        for key in keys:
            slot = self._pending.setdefault(key, [0.0, 0.0, 0.0])
            slot[0] += seconds
            slot[1] += units
            slot[2] += 1

    def record(
        self,
        ctx: Any,
        task: Any,
        records: list[tuple[str, dict[str, Any]]],
        sizes: Sizes,
        jobs: int = 1,
    ) -> None:
        """File the measurements in a finished point's records (failed ones say nothing);
        ``sizes``: the grid corpus's. Measured by one of ``jobs`` contending workers, they
        are filed as one process's seconds (× ``speedup(jobs) / jobs``, the contention the
        estimate prices apart), so a ``--jobs 2`` run does not price the next one slow."""
        serial = one_process_share(jobs)
        defense = ctx.defense(task.point)
        by_key = dict(records)
        point = by_key.get(task.point_key)
        if point is not None and point.get("status") == "ok":
            wall = point.get("privatize_wall_seconds", point.get("privatize_seconds"))
            self.add(privatize_keys(defense), float(wall) * serial, sizes.point_kwords)
            self.add(
                utility_keys(ctx.evaluator, defense.name),
                float(point.get("utility_seconds", math.nan)) * serial,
                sizes.point_kwords,
            )
        for label, key in task.attack_keys.items():
            record = by_key.get(key)
            if record is None or record.get("status") == "failed" or not record.get("rows"):
                continue
            # n/a before running costs (about) nothing; every row of a cell shares its time
            seconds = float(record["rows"][0].get("attack_seconds", 0.0)) * serial
            attack = ctx.attacks[label]
            self.add(attack_keys(attack, defense.name), seconds, sizes.attack_kwords)
            victims = victims_of(attack, sizes)
            if victims:  # per hundred victims too: what prices it on another corpus
                self.add(victim_keys(attack, defense.name), seconds, victims / 100)

    def save(self) -> None:
        """Merge this run's measurements into the file (atomically, under a lock)."""
        if not self._pending or self.path is None:
            return
        if not cache_writable():  # a read-only cache: said once, before the run (check_cache)
            self._pending.clear()
            return
        score = self.score.value  # what this run's measurements were made under
        with locked(self.path.with_name(self.path.name + ".lock")):
            machines, stamps = self._read(warn=False)  # another run may have written since
            if stamps.get(self.machine) != self.stamp:  # old code's: start the section anew
                machines[self.machine], stamps[self.machine] = {}, self.stamp
            entries = machines.setdefault(self.machine, {})
            for key, (seconds, units, n) in self._pending.items():
                old = entries.get(key, {"seconds": 0.0, "units": 0.0, "n": 0.0})
                then = float(old.get("score") or score)
                # the old seconds at this run's speed, so one score describes the entry
                scaled = old["seconds"] * score / then if then > 0 else old["seconds"]
                total = old["n"] + n
                keep = min(1.0, MAX_WEIGHT / total)
                entries[key] = {
                    "seconds": (scaled + seconds) * keep,
                    "units": (old["units"] + units) * keep,
                    "n": total * keep,
                    "score": score,
                }
            write_json(self.path, {"format": FORMAT, "machines": machines, "reference": stamps})
        self.entries = dict(entries)
        self._pending.clear()


@dataclass
class Work:
    """One defense point to compute: its defense, whether its utility is still to measure,
    the attacks (labels) of its unfinished cells, and the defense's label in the grid."""

    defense: Any
    utility: bool
    attacks: list[str]
    label: str = ""


@dataclass
class Estimate:
    points: int
    cells: int
    done: int  # cells already in the store
    seconds: float  # the work in one process, seconds
    wall: float  # with ``jobs`` workers
    jobs: int
    measured: int  # components priced from this machine's measurements
    components: int
    priors: list[str] = field(default_factory=list)  # priced by their priors, by name
    referenced: int = 0  # components priced from the shipped reference × speed ratio
    ratio: float | None = None  # that speed ratio (None: no reference rate was used)
    #: one-time work before the grid (pre-training an attack's disk-cached model): (what, s)
    one_time: list[tuple[str, float]] = field(default_factory=list)
    reused: int = 0  # of the done cells, those taken from the machine's cell store

    def lines(self) -> list[str]:
        out = self._grid_lines()
        for what, seconds in self.one_time:
            out.append(
                f"One-time, first run only: {what} ≈ {duration(seconds)} (cached on disk "
                "after; `privaudit pretrain` builds it ahead)."
            )
        return out

    def _grid_lines(self) -> list[str]:
        todo = self.cells - self.done
        done = f"{self.done} done" + (
            f", {self.reused} of them from the cell store" if self.reused else ""
        )
        size = f"Grid: {self.points} points, {self.cells} cells ({done}, {todo} to compute)"
        if todo == 0:
            return [
                f"{size}; nothing to compute but the fit-noise refits, the tables and the "
                f"report ≈ {duration(self.wall)}."
            ]
        source = f"measured costs for {self.measured} of {self.components} components"
        if self.referenced:
            source += (
                f", reference costs scaled ×{self.ratio or 1.0:.2g} for this machine for "
                f"{self.referenced}"
            )
        if self.priors:
            shown = ", ".join(self.priors[:6]) + (" …" if len(self.priors) > 6 else "")
            source += f", priors for {len(self.priors)}: {shown}"
        jobs = (
            f" with {self.jobs} workers ({duration(self.seconds)} of work)"
            if (self.jobs > 1)
            else ""
        )
        if self.jobs > 1 and speedup(self.jobs) < 1:
            jobs += f"; slower than one worker on {os.cpu_count() or 1} cores (--jobs 1)"
        return [f"{size}; estimated wall time ≈ {duration(self.wall)}{jobs}", f"({source})"]

    def record(self) -> dict[str, Any]:
        """For run.json: what was predicted, beside the run's measured elapsed time."""
        return {
            "seconds": round(self.wall, 1),
            "work_seconds": round(self.seconds, 1),
            "jobs": self.jobs,
            "cells_done": self.done,
            "measured": self.measured,
            "components": self.components,
            "priors": self.priors,
            "machine": machine_tag(),
            "referenced": self.referenced,
            "speed_ratio": self.ratio,
            "reused": self.reused,
        }


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


@dataclass(frozen=True)
class Part:
    """One component run of a point as priced: what it is (``defense t2t``, ``utility probe``,
    an attack's label), the book key this run's own measurement of it is kept under, its
    units, its predicted seconds and where the rate came from."""

    component: str
    key: str
    units: float
    seconds: float
    source: int


@dataclass(frozen=True)
class Pricing:
    """What a grid's work is priced with: its attacks (by label) and utility evaluator, the
    corpus's :class:`Sizes` and the machine's :class:`CostBook`."""

    attacks: dict[str, Any]
    evaluator: Any
    sizes: Sizes
    book: CostBook


def price_work(item: Work, pricing: Pricing) -> list[Part]:
    """The parts of one point's work, priced (see the module docstring): privatize, the
    utility unless stored, each attack to compute; an attack that declares ``max_victims``
    by the rate per hundred victims this machine measured, else by words."""
    evaluator, sizes, book = pricing.evaluator, pricing.sizes, pricing.book

    def part(component: str, keys: list[str], obj: Any, units: float) -> Part:
        rate, source = book.lookup(keys)
        if rate is None:
            rate = float(getattr(obj, "cost_prior", 0.3))
        return Part(component, keys[0], units, rate * units, source)

    d = item.defense
    label = item.label or d.name
    parts = [part(f"defense {label}", privatize_keys(d), d, sizes.point_kwords)]
    if item.utility:
        parts.append(
            part(
                f"utility {evaluator.name}",
                utility_keys(evaluator, d.name),
                evaluator,
                sizes.point_kwords,
            )
        )
    for name in item.attacks:
        attack = pricing.attacks[name]
        victims = victims_of(attack, sizes)
        keys = victim_keys(attack, d.name)
        if victims and book.measured(keys):
            parts.append(part(name, keys, attack, victims / 100))
        else:
            parts.append(part(name, attack_keys(attack, d.name), attack, sizes.attack_kwords))
    return parts


def one_process_share(jobs: int) -> float:
    """What one of ``jobs`` contending workers' measured seconds are in one process's
    seconds (``speedup(jobs) / jobs``): the contention :func:`speedup` prices apart, so a
    worker's measurement filed as it is would count it twice."""
    return speedup(jobs) / max(1, jobs)


def tail_seconds(book: CostBook, cells: int, after: float) -> float:
    """The driver's work after the cells: the outputs (per cell) and ``after``, the stages
    priced apart (the fit-noise refits)."""
    outputs, _ = book.lookup([OUTPUTS])
    return (outputs if outputs is not None else OUTPUTS_PRIOR) * cells + after


def speedup(jobs: int) -> float:
    """What ``jobs`` workers gain (see :func:`estimate`): below 1 where they contend for
    the cores (:data:`CONTENDED`)."""
    if jobs <= 1:
        return 1.0
    cores = os.cpu_count() or 1
    gain = min(float(jobs), max(1.0, cores / SERIAL_CORES))
    return gain * CONTENDED if jobs * SERIAL_CORES > cores else gain


def estimate(
    work: Sequence[Work],
    pricing: Pricing,
    *,
    points: int,
    cells: int,
    done: int,
    jobs: int = 1,
    after: float = 0.0,
) -> Estimate:
    """The predicted cost of ``work`` priced by ``pricing`` (see the module docstring). With
    ``jobs`` workers the points' work is shared out, bounded below by the costliest point;
    the driver's outputs are not shared, and the workers' start-up is added once. One
    process already keeps about :data:`SERIAL_CORES` cores busy, so the speed-up is ``jobs``
    at most and ``cores / SERIAL_CORES`` at most, and :data:`CONTENDED` of that where the
    workers need more cores than there are (0.63 on two cores: slower than one worker).
    ``after``: seconds of the stages after the grid priced apart (the fit-noise refits), in
    the driver, paid even when every cell is reused."""
    book = pricing.book
    known: dict[str, int] = {}  # component -> its best source (MEASURED, REFERENCE, PRIOR)
    per_point = []
    for item in work:
        parts = price_work(item, pricing)
        for p in parts:
            known[p.component] = min(known.get(p.component, PRIOR), p.source)
        per_point.append(sum(p.seconds for p in parts))
    outputs_s = tail_seconds(book, cells, after)
    work_s = sum(per_point)
    jobs = max(1, min(jobs, len(per_point) or 1))
    wall = max(work_s / speedup(jobs), max(per_point, default=0.0)) + outputs_s
    if jobs > 1:  # the workers start (in parallel) before their first point
        startup, _ = book.lookup([STARTUP])
        wall += startup if startup is not None else STARTUP_PRIOR
    return Estimate(
        points=points,
        cells=cells,
        done=done,
        seconds=work_s + outputs_s,
        wall=wall,
        jobs=jobs,
        measured=sum(s == MEASURED for s in known.values()),
        components=len(known),
        priors=sorted(c for c, s in known.items() if s == PRIOR),
        referenced=sum(s == REFERENCE for s in known.values()),
        ratio=book.reference.ratio if REFERENCE in known.values() and book.reference else None,
    )
