"""The grid runner: every defense at every privacy level, attacked by every attack.

For each (defense, knob value, seed) the runner privatizes the corpus's train and test splits
once, measures utility on them, and hands the *public* test release (victims) to each attack.
Attacks learn only from what their threat model grants (the backbone, query access to the
mechanism on the attacker's own ``aux`` split, the ``aux`` labels); the runner alone holds the
truth and scores predictions. An inapplicable pair is a row with status ``n/a`` and the reason;
a failing cell is a row with status ``failed`` and the error, and the grid goes on. Rows are
written after every defense point, so an interruption never loses finished cells.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
import traceback
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from privaudit import __version__
from privaudit.api import Attack, Defense, Knowledge, Release
from privaudit.audit.config import GridConfig
from privaudit.audit.scoring import Truth, replacement_rate, score_predictions
from privaudit.registry import ATTACKS, CORPORA, DEFENSES, UTILITY

COLUMNS = [
    "defense", "knob", "knob_value", "attack", "seed", "status", "reason",
    "attack_metric", "attack_score", "empirical_privacy", "utility_metric", "utility",
    "utility_macro_f1", "replacement_rate", "seconds", "privatize_seconds", "utility_seconds",
    "attack_seconds", "guarantee", "defense_params", "attack_params", "utility_evaluator",
    "corpus", "corpus_fingerprint", "backbone", "n_train", "n_test", "privaudit_version",
    "cell_key", "target_rate", "label", "attack_baseline", "attack_macro_f1", "attack_details",
    "n_words",
]  # fmt: skip


@dataclass
class RunResult:
    run_dir: Path
    frame: Any  # pandas.DataFrame
    plots: list[Path] = field(default_factory=list)
    chance: float = float("nan")


def stable_seed(*parts: object) -> np.random.SeedSequence:
    """A seed sequence from the run seed and the cell's identity (stable across processes)."""
    words = [zlib.crc32(json.dumps(p, sort_keys=True, default=str).encode()) for p in parts]
    return np.random.SeedSequence(words)


def _evaluator_label(evaluator: Any) -> str:
    """``probe``, ``lora``, ...; ``peft[method]`` when the generic peft evaluator is used."""
    method = getattr(evaluator, "method", None)
    return evaluator.name if method in (None, evaluator.name) else f"{evaluator.name}[{method}]"


def _cell_key(*parts: object) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _fmt_params(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def build_defense(name: str, params: dict[str, Any], backbone: str | None) -> Defense:
    return build_component(DEFENSES, name, params, backbone, "Defense")


def build_component(
    registry: Any, name: str, params: dict[str, Any], backbone: str | None, kind: str
) -> Any:
    """``registry``'s ``name`` built with ``params`` (and the grid's backbone, where the class
    takes one); a wrong parameter says which ones the class accepts."""
    cls = registry.get(name)
    kwargs = dict(params)
    if backbone is not None and "backbone" in _init_params(cls):
        kwargs.setdefault("backbone", backbone)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(
            f"{kind} {name!r} does not accept parameters {sorted(params)}: {exc}. "
            f"It accepts {sorted(_init_params(cls))}."
        ) from None


def _init_params(cls: type) -> set[str]:
    import inspect

    return set(inspect.signature(cls.__init__).parameters) - {"self"}


def _write_rows(rows: list[dict[str, Any]], run_dir: Path) -> Any:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=COLUMNS)
    for name, writer in (
        ("results.csv", lambda p: frame.to_csv(p, index=False)),
        ("results.parquet", lambda p: frame.to_parquet(p, index=False)),
    ):
        tmp = run_dir / f".{name}.tmp"
        writer(tmp)
        os.replace(tmp, run_dir / name)  # atomic: readers never see half a file
    return frame


@dataclass
class Point:
    """One privacy level of one defense at one seed: privatized once, utility measured once,
    then attacked by every attack. Picklable, so executors can ship it to workers."""

    label: str
    defense: str
    params: dict[str, Any]
    knob_value: float | None
    target_rate: float | None
    seed: int


@dataclass
class Task:
    """What a worker must compute for a point: the utility (unless the store has it) and the
    attacks (by label) whose cells are not finished."""

    point: Point
    point_key: str
    attack_keys: dict[str, str]  # label -> cell key, only the ones to compute
    cached_utility: dict[str, Any] | None = None


class Context:
    """Everything a cell needs that does not change across the grid: the corpus and its
    splits, the backbone, the runner's ground truth, the utility evaluator and the attacks.
    Built once per process (the driver, and each worker of a pool or Ray cluster)."""

    def __init__(self, config: GridConfig) -> None:
        from privaudit.resources import backbone as load_backbone

        self.config = config
        corpus = CORPORA.get(config.corpus.name)(**config.corpus.params)
        corpus = corpus.subset(config.corpus.limits, np.random.default_rng(config.seeds[0]))
        self.corpus = corpus
        self.fingerprint = corpus.fingerprint()
        self.bb = load_backbone(config.backbone)
        self.train_texts, self.test_texts = corpus.texts("train"), corpus.texts("test")
        self.y_train, self.y_test = corpus.labels("train"), corpus.labels("test")
        self.n_words = sum(len(t.split()) for t in [*self.train_texts, *self.test_texts])
        self.truth = Truth(  # the runner's ground truth; attacks never see it
            tokens=self.bb.token_ids(self.test_texts),
            attributes={a: corpus.attribute("test", a) for a in corpus.attribute_names},
            texts=list(self.test_texts),
            entities=corpus.entities("test"),
            embeddings=self.bb.embeddings,
            frequent_token=_most_frequent_token(self.bb, corpus.texts("aux"))
            if "aux" in corpus.splits
            else None,
        )
        self.aux = corpus.splits.get("aux")
        y = self.y_test
        self.chance = float(np.bincount(y).max() / len(y)) if len(y) else float("nan")
        # The service's own labels for training-time objectives (CAPE's adversary).
        self.train_attributes = {a: corpus.attribute("train", a) for a in corpus.attribute_names}
        util, bb_name = config.utility_spec(), config.backbone
        self.evaluator = build_component(UTILITY, util.name, util.params, bb_name, "Utility")
        if hasattr(self.evaluator, "settings"):
            self.evaluator.settings()  # bad values fail before any work starts
        self.attacks: dict[str, Attack] = {
            spec.display(): build_component(ATTACKS, spec.name, spec.params, bb_name, "Attack")
            for spec in config.attack_specs()
        }
        self._defenses: dict[str, Defense] = {}
        self._keys: dict[str, tuple[str, dict[str, str]]] = {}

    def defense(self, point: Point) -> Defense:
        key = _fmt_params([point.defense, point.params])
        if key not in self._defenses:
            built = build_defense(point.defense, point.params, self.config.backbone)
            self._defenses[key] = built.fit(self.corpus.split("train"))
        return self._defenses[key]

    def identity(self, defense: Defense, seed: int) -> list[Any]:
        """What a defense point's results depend on (component names, versions, parameters,
        corpus, backbone, seed): the base of every cell key."""
        return [defense.name, _version(defense), defense.params(), self.fingerprint,
                self.bb.fingerprint, seed]  # fmt: skip

    def keys(self, point: Point) -> tuple[str, dict[str, str]]:
        """The point's key (identity + utility evaluator) and each attack cell's key
        (identity + attack): a changed evaluator recomputes utility only, a changed attack
        only its own cells."""
        cache_key = _fmt_params(dataclasses.asdict(point))
        if cache_key in self._keys:  # computed before any work: fitting cannot change them
            return self._keys[cache_key]
        identity = self.identity(self.defense(point), point.seed)
        ev = self.evaluator
        point_key = _cell_key(identity, ev.name, _version(ev), ev.params())
        cells = {
            label: _cell_key(identity, label, attack.name, _version(attack), attack.params())
            for label, attack in self.attacks.items()
        }
        self._keys[cache_key] = (point_key, cells)
        return point_key, cells


_CONTEXTS: dict[str, Context] = {}


def context_for(config: GridConfig) -> Context:
    """This process's :class:`Context` for ``config`` (built on first use)."""
    key = config.model_dump_json()
    if key not in _CONTEXTS:
        _CONTEXTS.clear()  # one grid at a time per process; free the previous corpus
        _CONTEXTS[key] = Context(config)
    return _CONTEXTS[key]


def _version(component: Any) -> str:
    return str(getattr(component, "version", "1"))


def compute(ctx: Context, task: Task, on_record: Any = None) -> list[tuple[str, dict[str, Any]]]:
    """Run one task: privatize, measure utility (unless cached), run the needed attacks.
    Returns ``(key, record)`` pairs; ``on_record`` (if given) receives each as it finishes, so
    a sequential driver persists every cell at once."""
    out: list[tuple[str, dict[str, Any]]] = []

    def emit(key: str, record: dict[str, Any]) -> None:
        out.append((key, record))
        if on_record is not None:
            on_record(key, record)

    point = task.point
    defense = ctx.defense(point)
    seq = stable_seed(point.seed, defense.name, defense.params())
    rng_train, rng_test, rng_utility, rng_query = (np.random.default_rng(s) for s in seq.spawn(4))
    try:
        t0 = time.perf_counter()
        rel_train = defense.privatize(ctx.train_texts, rng=rng_train)
        rel_test = defense.privatize(ctx.test_texts, rng=rng_test)
        privatize_s = time.perf_counter() - t0
        if task.cached_utility is not None:
            utility = dict(task.cached_utility)
        else:
            ev = ctx.evaluator
            t0 = time.perf_counter()
            util = ev.evaluate_releases(
                rel_train, ctx.y_train, rel_test, ctx.y_test, rng=rng_utility, defense=defense,
                train_attributes=ctx.train_attributes,
            )  # fmt: skip
            utility = {
                "kind": "point",
                "status": "ok",
                "utility": util.get(ev.metric, math.nan),
                "utility_macro_f1": util.get("macro_f1", math.nan),
                "replacement_rate": replacement_rate([rel_train.audit, rel_test.audit])
                if defense.name != "none"
                else 0.0,
                "privatize_seconds": privatize_s,
                "utility_seconds": time.perf_counter() - t0,
                "n_words": ctx.n_words,
                "examples": _examples(ctx.test_texts, rel_test),
            }
            emit(task.point_key, utility)
    except Exception as exc:  # a failing defense point must not end the grid
        for label, key in task.attack_keys.items():
            attack = ctx.attacks[label]
            emit(key, {"kind": "cell", "status": "failed", "rows": [_failed(label, attack, exc)]})
        return out

    query = _memoized_query(defense, rng_query)
    knowledge = Knowledge(
        white_box=True, backbone=ctx.config.backbone, query_mechanism=query, aux=ctx.aux
    )
    public = rel_test.public()
    for label, key in task.attack_keys.items():
        attack = ctx.attacks[label]
        base = {"attack": label, "attack_metric": attack.metric,
                "attack_params": _fmt_params(attack.params())}  # fmt: skip
        reason = attack.applicable(public.kind, knowledge, public.meta)
        if reason is not None:
            emit(key, {"kind": "cell", "status": "n/a",
                       "rows": [base | {"status": "n/a", "reason": reason}]})  # fmt: skip
            continue
        try:
            t0 = time.perf_counter()
            predictions = attack.fit(knowledge).attack(public)
            scored = score_predictions(predictions, ctx.truth, attack.metric, public)
            attack_s = time.perf_counter() - t0
            rows = []
            for result in scored:
                target = result.pop("target")
                result["attack_details"] = _fmt_params(result.get("attack_details", {}))
                rows.append(base | result | {
                    "attack": f"{label}[{target}]" if target else label,
                    "status": "ok", "reason": "", "attack_seconds": attack_s,
                    "target": target or "",
                })  # fmt: skip
            emit(key, {"kind": "cell", "status": "ok", "rows": rows})
        except Exception as exc:
            emit(key, {"kind": "cell", "status": "failed", "rows": [_failed(label, attack, exc)]})
    return out


def _examples(texts: list[str], release: Release, n: int = 3) -> list[dict[str, str]]:
    """A few (original, released) pairs for the report, shown only on request."""
    if release.kind != "text" or not release.texts:
        return []
    pairs = zip(texts[:n], release.texts[:n], strict=False)
    return [{"original": o, "released": r} for o, r in pairs]


class ResultStore:
    """Finished records, one JSON file each under ``RUN_DIR/cells/``, written atomically
    (temporary file + rename): a crash or ``kill -9`` loses at most the cells in flight.
    Point records hold a defense point's utility; cell records an attack's rows. Failed
    records are kept (they appear in the results) but do not count as finished."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = run_dir / "cells"
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
        tmp = self.dir / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(record, default=_json_default), encoding="utf-8")
        os.replace(tmp, path)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def plan(config: GridConfig, ctx: Context, store: ResultStore | None = None) -> list[Point]:
    """Every defense point of the grid, with calibrated knob values resolved (and cached)."""
    points: list[Point] = []
    for spec in config.defenses:
        base = build_defense(spec.name, spec.params, config.backbone).fit(ctx.corpus.split("train"))
        levels: list[tuple[float | None, float | None]] = [(None, None)]
        if spec.knob_values:
            levels = [(v, None) for v in spec.knob_values]
        elif spec.target_rates:
            key = _cell_key("calibration", ctx.identity(base, config.seeds[0]), spec.target_rates)
            cached = store.get(key) if store is not None else None
            if cached is None:
                levels = _calibrated_levels(
                    base, spec.target_rates, ctx.train_texts, config.seeds[0]
                )
                if store is not None:
                    store.put(key, {"kind": "calibration", "levels": levels})
            else:
                levels = [tuple(level) for level in cached["levels"]]  # type: ignore[misc]
        for value, target in levels:
            params = dict(base.params())
            if value is not None and base.knob:
                params[base.knob] = value
            for seed in config.seeds:
                points.append(Point(spec.display, spec.name, params, value, target, seed))
    return points


def run_grid(
    config: GridConfig,
    *,
    reports_root: str | Path = "reports",
    run_dir: str | Path | None = None,
    progress: bool = True,
    executor: str | None = None,
    jobs: int | None = None,
    address: str | None = None,
) -> RunResult:
    """Run every cell of ``config`` not already in ``run_dir``'s store; write
    ``results.csv``/``.parquet`` (after every point), Pareto plots and ``run.json``.

    Re-running a config into the same directory (``privaudit run --resume RUN_DIR``) skips
    every finished cell by its key; ``executor``/``jobs``/``address`` override the config's
    ``executor`` block (``local`` with a process pool when ``jobs`` > 1, or ``ray``)."""
    from tqdm.auto import tqdm

    from privaudit.audit.executors import make_executor

    config.check_names()
    if run_dir is None:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        run_dir = Path(reports_root) / f"{stamp}-{config.name}"
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(config.model_dump_json(indent=2), encoding="utf-8")
    store = ResultStore(run_dir)
    ctx = context_for(config)
    meta = {"chance_accuracy": ctx.chance, "corpus_sizes": ctx.corpus.sizes(),
            "backbone": ctx.bb.name, "finished": False}  # fmt: skip
    _write_json(run_dir / "run.json", meta)  # leaderboards can read a run that is cut short
    points = plan(config, ctx, store)

    tasks, done = [], 0
    for point in points:
        point_key, cells = ctx.keys(point)
        cached = store.finished(point_key)
        todo = {label: key for label, key in cells.items() if store.finished(key) is None}
        done += len(cells) - len(todo)
        if cached is None or todo:
            tasks.append(Task(point, point_key, todo, cached))

    spec = config.executor
    runner = make_executor(
        executor or spec.kind, jobs=jobs if jobs is not None else spec.jobs,
        address=address if address is not None else spec.address,
    )  # fmt: skip
    total = sum(len(c) for c in (ctx.keys(p)[1] for p in points))
    bar = tqdm(total=total, initial=done, desc="cells", unit="cell", disable=not progress)
    try:
        for task, records in runner.run(config, ctx, tasks, store.put):
            bar.update(sum(1 for _, r in records if r["kind"] == "cell"))
            bar.set_postfix_str(_describe(task.point))
            _write_rows(assemble(ctx, points, store), run_dir)
    finally:
        bar.close()
        runner.close()

    frame = _write_rows(assemble(ctx, points, store), run_dir)
    _write_examples(ctx, points, store, run_dir)
    _write_json(run_dir / "run.json", meta | {"finished": True, "cells": total,
                                              "computed": total - done})  # fmt: skip
    plots = _plots(frame, run_dir, ctx.chance)
    return RunResult(run_dir=run_dir, frame=frame, plots=plots, chance=ctx.chance)


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=_json_default), encoding="utf-8")
    os.replace(tmp, path)


def _describe(point: Point) -> str:
    return point.label + (f" {point.knob_value:g}" if point.knob_value is not None else "")


def assemble(ctx: Context, points: list[Point], store: ResultStore) -> list[dict[str, Any]]:
    """The result rows of ``points`` from the store, in grid order; unfinished cells are
    absent."""
    rows = []
    for point in points:
        defense = ctx.defense(point)
        point_key, cells = ctx.keys(point)
        utility = store.get(point_key) or {}
        knob_value = point.knob_value
        if knob_value is None and defense.knob:
            knob_value = getattr(defense, defense.knob, None)
        common = {
            "defense": defense.name,
            "label": point.label,
            "knob": defense.knob,
            "knob_value": float(knob_value) if knob_value is not None else math.nan,
            "seed": point.seed,
            "target_rate": point.target_rate if point.target_rate is not None else math.nan,
            "guarantee": defense.guarantee,
            "defense_params": _fmt_params(defense.params()),
            "utility_evaluator": _evaluator_label(ctx.evaluator),
            "utility_metric": ctx.evaluator.metric,
            "corpus": ctx.corpus.name,
            "corpus_fingerprint": ctx.fingerprint,
            "backbone": ctx.bb.name,
            "n_train": len(ctx.train_texts),
            "n_test": len(ctx.test_texts),
            "n_words": ctx.n_words,
            "privaudit_version": __version__,
        }
        for field_ in ("utility", "utility_macro_f1", "replacement_rate", "privatize_seconds",
                       "utility_seconds"):  # fmt: skip
            common[field_] = utility.get(field_, math.nan)
        for key in cells.values():
            record = store.get(key)
            if record is None:
                continue
            for row in record["rows"]:
                row = dict(row)
                target = row.pop("target", "")
                seconds = (common["privatize_seconds"] + common["utility_seconds"]
                           + row.get("attack_seconds", math.nan))  # fmt: skip
                rows.append(common | row | {
                    "seconds": seconds if row["status"] == "ok" else math.nan,
                    "cell_key": _cell_key(key, target) if target else key,
                })  # fmt: skip
    return rows


def _plots(frame: Any, run_dir: Path, chance: float) -> list[Path]:
    """Per-attack Pareto plots, the combined frontier figure, the leaderboard files and the
    HTML report (the results are already on disk, so none of these can lose them)."""
    from privaudit.leaderboard.board import leaderboard, write_leaderboard
    from privaudit.leaderboard.pareto import plot_frontiers, plot_pareto
    from privaudit.leaderboard.report import write_report

    plots = []
    ok = frame[frame["status"] == "ok"]
    for attack_name in sorted(ok["attack"].unique()):
        sub = ok[ok["attack"] == attack_name]
        safe = attack_name.replace("[", "-").replace("]", "")
        path = run_dir / f"pareto_{safe}.png"
        plot_pareto(sub, path, attack=attack_name, chance=chance)
        plots.append(path)
    if len(ok):
        plots.append(plot_frontiers(frame, run_dir / "frontiers.png", chance=chance))
        plots.extend(write_leaderboard(leaderboard(frame, chance), run_dir))
    plots.append(write_report(run_dir))
    return plots


def _write_examples(ctx: Context, points: list[Point], store: ResultStore, run_dir: Path) -> None:
    """``examples.json``: a few original/released pairs per point, for ``report
    --show-examples`` (the report hides them by default)."""
    out = []
    for point in points:
        record = store.get(ctx.keys(point)[0]) or {}
        for ex in record.get("examples", []):
            out.append({"defense": point.label, "knob_value": point.knob_value, **ex})
    tmp = run_dir / ".examples.json.tmp"
    tmp.write_text(json.dumps(out, indent=1), encoding="utf-8")
    os.replace(tmp, run_dir / "examples.json")


def _most_frequent_token(bb: Any, texts: list[str]) -> int | None:
    counts = np.bincount(np.concatenate([np.asarray(t, np.int64) for t in bb.token_ids(texts)]))
    return int(counts.argmax()) if counts.size else None


def _memoized_query(defense: Defense, rng: np.random.Generator) -> Any:
    """The attacker's query access to the mechanism at this privacy level. Several attacks
    query the same aux texts; they share one privatization (one draw of the mechanism, as a
    single attacker holding the aux release would) instead of paying for it each time."""
    cache: dict[str, Release] = {}

    def query(texts: list[str]) -> Release:
        key = hashlib.sha256(json.dumps(list(texts)).encode()).hexdigest()
        if key not in cache:
            cache[key] = defense.privatize(list(texts), rng=rng).public()
        return cache[key]

    return query


def _calibrated_levels(
    defense: Defense, rates: list[float], texts: list[str], seed: int, n_docs: int = 150
) -> list[tuple[float | None, float | None]]:
    """Knob values reaching each target replacement rate on a seeded sample of ``texts``."""
    from privaudit.audit.calibration import calibrate

    rng = np.random.default_rng(seed)
    sample = [texts[i] for i in sorted(rng.choice(len(texts), min(n_docs, len(texts)), False))]
    out: list[tuple[float | None, float | None]] = []
    known: dict[float, float] = {}
    for rate in rates:
        result = calibrate(defense, sample, target=rate, seed=seed, known=known)
        out.append((result.solution, rate))
    return out


def _failed(label: str, attack: Attack, exc: BaseException) -> dict[str, Any]:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" at {last[0].filename}:{last[0].lineno}" if last else ""
    return {
        "attack": label,
        "attack_metric": attack.metric,
        "attack_params": _fmt_params(attack.params()),
        "status": "failed",
        "reason": f"{type(exc).__name__}: {exc}{where}",
    }
