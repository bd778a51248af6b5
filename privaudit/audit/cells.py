"""Computing a defense point: privatize once, measure utility, run every unfinished attack.

For each (defense, knob value, seed) the point privatizes the corpus's train and test splits
once, measures utility on them, and hands the *public* test release (victims) to each attack.
Attacks learn only from what their threat model grants (the backbone, query access to the
mechanism on the attacker's own ``aux`` split, the ``aux`` labels); the runner alone holds the
truth and scores predictions. An inapplicable pair is a record with status ``n/a`` and the
reason; a failing cell one with status ``failed`` and the error, and the grid goes on.

Randomness: every point's streams (train release, test release, utility, attacker queries) and
every attack cell's ``rng`` are spawned from the run seed and the cell's identity, so the same
config gives the same bytes, and the ``paper`` preset's seeds vary attackers as well as
defenses.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import Attack, Defense, Knowledge, Release
from privaudit.audit.plan import (
    Point,
    build_component,
    cell_key,
    fmt_params,
    identity,
    stable_seed,
)
from privaudit.audit.scoring import Truth, replacement_rate, score_predictions
from privaudit.registry import ATTACKS, CORPORA, DEFENSES, UTILITY

if TYPE_CHECKING:
    from privaudit.audit.config import GridConfig


@dataclass
class Task:
    """What a worker must compute for a point: the utility (unless the store has it) and the
    attacks (by label) whose cells are not finished."""

    point: Point
    point_key: str
    attack_keys: dict[str, str]  # label -> cell key, only the ones to compute
    cached_utility: dict[str, Any] | None = None


def build_components(config: GridConfig) -> tuple[list[Any], dict[str, Attack], Any]:
    """Every defense spec, attack and the utility evaluator, built (names and values checked)
    without loading any data: what ``privaudit run`` does before anything else."""
    bb = config.backbone
    defenses = [
        build_component(DEFENSES, spec.name, spec.params, bb, f"defenses.{i}.params")
        for i, spec in enumerate(config.defenses)
    ]
    attacks = {
        spec.display(): build_component(ATTACKS, spec.name, spec.params, bb, f"attacks.{i}.params")
        for i, spec in enumerate(config.attack_specs())
    }
    util = config.utility_spec()
    evaluator = build_component(UTILITY, util.name, util.params, bb, "utility.params")
    return defenses, attacks, evaluator


class Context:
    """Everything a cell needs that does not change across the grid: the corpus and its
    splits, the backbone, the runner's ground truth, the utility evaluator, the attacks and
    each defense spec fitted once. Built once per process (the driver, and each worker)."""

    def __init__(self, config: GridConfig) -> None:
        from privaudit.resources import backbone as load_backbone

        self.config = config
        self._specs, self.attacks, self.evaluator = build_components(config)
        corpus = build_component(
            CORPORA, config.corpus.name, config.corpus.params, None, "corpus.params"
        )
        corpus = corpus.subset(config.corpus.limits, np.random.default_rng(config.seeds[0]))
        corpus.check_labels()  # a one-class split would fail only after every cell ran
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
        self._fitted: dict[int, Defense] = {}
        self._keys: dict[Point, tuple[str, dict[str, str]]] = {}

    def base(self, spec: int) -> Defense:
        """Defense spec ``spec`` as configured, fitted on the train split (once)."""
        if spec not in self._fitted:
            self._fitted[spec] = self._specs[spec].fit(self.corpus.split("train"))
        return self._fitted[spec]

    def defense(self, point: Point) -> Defense:
        base = self.base(point.spec)
        return base if point.knob_value is None else base.with_knob(point.knob_value)

    def keys(self, point: Point) -> tuple[str, dict[str, str]]:
        """The point's key (identity + utility evaluator) and each attack cell's key
        (identity + attack): a changed evaluator recomputes utility only, a changed attack
        only its own cells."""
        if point in self._keys:
            return self._keys[point]
        ident = identity(self.defense(point), self.fingerprint, self.bb.fingerprint, point.seed)
        ev = self.evaluator
        point_key = cell_key(ident, ev.name, ev.version, ev.params())
        cells = {
            label: cell_key(ident, label, attack.name, attack.version, attack.params())
            for label, attack in self.attacks.items()
        }
        self._keys[point] = (point_key, cells)
        return point_key, cells


_CONTEXTS: dict[str, Context] = {}


def context_for(config: GridConfig) -> Context:
    """This process's :class:`Context` for ``config`` (built on first use)."""
    key = config.model_dump_json()
    if key not in _CONTEXTS:
        _CONTEXTS.clear()  # one grid at a time per process; free the previous corpus
        _CONTEXTS[key] = Context(config)
    return _CONTEXTS[key]


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
    rng_train, rng_test, rng_utility, rng_query = _point_streams(point, defense)
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
            }
            if ctx.config.show_examples:  # corpus text is stored only when asked for
                utility["examples"] = _examples(ctx.test_texts, rel_test)
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
                "attack_params": fmt_params(attack.params())}  # fmt: skip
        reason = attack.applicable(public, knowledge)
        if reason is not None:
            emit(key, {"kind": "cell", "status": "n/a",
                       "rows": [base | {"status": "n/a", "reason": reason}]})  # fmt: skip
            continue
        rng_attack = np.random.default_rng(
            stable_seed(point.seed, defense.name, defense.params(), "attack", label)
        )
        try:
            t0 = time.perf_counter()
            predictions = attack.fit(knowledge, rng=rng_attack).attack(public)
            scored = score_predictions(predictions, ctx.truth, attack.metric, public)
            attack_s = time.perf_counter() - t0
            rows = []
            for result in scored:
                target = result.pop("target")
                result["attack_details"] = fmt_params(result.get("attack_details", {}))
                rows.append(base | result | {
                    "attack": f"{label}[{target}]" if target else label,
                    "status": "ok", "reason": "", "attack_seconds": attack_s,
                    "target": target or "",
                })  # fmt: skip
            emit(key, {"kind": "cell", "status": "ok", "rows": rows})
        except Exception as exc:
            emit(key, {"kind": "cell", "status": "failed", "rows": [_failed(label, attack, exc)]})
    return out


def _point_streams(point: Point, defense: Defense) -> list[np.random.Generator]:
    """The point's train, test, utility and attacker-query streams (same point, same draws)."""
    seq = stable_seed(point.seed, defense.name, defense.params())
    return [np.random.default_rng(s) for s in seq.spawn(4)]


def point_examples(ctx: Context, point: Point) -> list[dict[str, str]]:
    """The point's (original, released) pairs, for a run that asks for examples after its
    cells were computed without them: the test release is drawn again from the point's own
    stream, so the pairs are the ones the cells were scored on."""
    defense = ctx.defense(point)
    rng_test = _point_streams(point, defense)[1]
    return _examples(ctx.test_texts, defense.privatize(ctx.test_texts, rng=rng_test))


def _examples(texts: list[str], release: Release, n: int = 3) -> list[dict[str, str]]:
    """A few (original, released) pairs for the report, shown only on request."""
    if release.kind != "text" or not release.texts:
        return []
    pairs = zip(texts[:n], release.texts[:n], strict=False)
    return [{"original": o, "released": r} for o, r in pairs]


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


def _failed(label: str, attack: Attack, exc: BaseException) -> dict[str, Any]:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" at {_package_path(last[0].filename)}:{last[0].lineno}" if last else ""
    return {
        "attack": label,
        "attack_metric": attack.metric,
        "attack_params": fmt_params(attack.params()),
        "status": "failed",
        "reason": f"{type(exc).__name__}: {exc}{where}",
    }


def _package_path(filename: str) -> str:
    """``privaudit/utility/probe.py`` rather than this machine's install path."""
    parts = Path(filename).parts
    if "privaudit" in parts:
        return "/".join(parts[len(parts) - 1 - parts[::-1].index("privaudit") :])
    return Path(filename).name
