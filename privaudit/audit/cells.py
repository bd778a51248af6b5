"""Computing a defense point: privatize once, measure utility, run every unfinished attack.

For each (defense, knob value, seed) the point privatizes the corpus's train and test splits
once, measures utility on them, and hands the *public* test release (victims) to each attack.
Attacks learn only from what their threat model grants (the backbone, query access to the
mechanism on the attacker's own ``aux`` split, the ``aux`` labels); the runner alone holds the
truth and scores predictions. An inapplicable pair is a record with status ``n/a`` and the
reason, and so is a cell whose truth cannot judge the attack's metric
(:class:`privaudit.metrics.truth.NotScorable`: it ran, so its ``attack_seconds`` are kept); a
failing cell is one with status ``failed`` and the error, cut to what holds no corpus text
(:mod:`privaudit.audit.reasons`), and the grid goes on.

Records: each ``ok`` attack row carries its ``family``, its per-document ``outcome`` and
``baseline_outcome`` (:meth:`privaudit.metrics.outcomes.Outcome.to_record`, or None), from which
every interval is computed without re-running. The point record carries ``utility`` (the
evaluator's balanced accuracy, the headline; plain accuracy when an evaluator reports only
that), ``utility_accuracy``, ``utility_macro_f1``, ``utility_metric``, ``utility_outcome``
(the per-document outcome of the balanced accuracy, when the evaluator returned its
predictions), ``release`` (the release's :class:`~privaudit.api.Space`: its format),
``objective`` (whether the defense's service-side objective was applied) and
``privatize_seconds``: the measured time of the two privatize calls plus what the content
memos saved inside them (:func:`privaudit.runtime.memo.charged_seconds`), so each point is
charged the full cost of producing its release whatever point ran before it.

Randomness: every point's streams (train release, test release, utility, attacker queries) and
every attack cell's ``rng`` are spawned from the run seed and the cell's identity, so the same
config gives the same bytes, and the ``paper`` preset's seeds vary attackers as well as
defenses.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from privaudit.api import NONE, Attack, Defense, Knowledge, Predictions, Release
from privaudit.audit.plan import (
    Point,
    attack_rng,
    cell_key,
    fmt_params,
    identity,
    point_streams,
    victim_subset,
)
from privaudit.audit.reasons import FULL, failure_reason
from privaudit.audit.wrapper import UserDefense
from privaudit.metrics import (
    NotScorable,
    Truth,
    family_of,
    metric_spec,
    replacement_rate,
    score_predictions,
)
from privaudit.metrics.outcomes import Outcome
from privaudit.metrics.units import Units
from privaudit.models.backbone import backbone as load_backbone
from privaudit.records import Source, build_knowledge, build_truth, token_layout
from privaudit.registry import ATTACKS, CORPORA, DEFENSES, UTILITY, build_component
from privaudit.runtime.memo import charged_seconds, end_point
from privaudit.runtime.memory import ComponentMemory

if TYPE_CHECKING:
    from privaudit.audit.config import GridConfig

#: Receives each finished ``(key, record)`` of a task as it is made.
Emit = Callable[[str, dict[str, Any]], None]


@dataclass
class Task:
    """What a worker must compute for a point: the utility (unless the store has it) and the
    attacks (by label) whose cells are not finished."""

    point: Point
    point_key: str
    attack_keys: dict[str, str]  # label -> cell key, only the ones to compute
    cached_utility: dict[str, Any] | None = None


class Components(NamedTuple):
    """A grid's components, built and checked when it is planned: each defense spec, each
    attack by label with what its plan-time hook resolved for the run's corpus
    (:meth:`~privaudit.api.Attack.plan`: handed back at fit and shown in the row), and the
    utility evaluator."""

    defenses: list[Any]
    attacks: dict[str, Attack]
    evaluator: Any
    plans: dict[str, Mapping[str, Any]]


def build_components(config: GridConfig) -> Components:
    """Every defense spec, attack and the utility evaluator, built (names and values checked)
    without loading any data: what ``privaudit run`` does before anything else."""
    defenses = [_build_defense(config, i) for i in range(len(config.defenses))]
    attacks, plans = build_attacks(config)
    util = config.utility_spec()
    evaluator = build_component(UTILITY, util.name, util.params, config.backbone, "utility.params")
    return Components(defenses, attacks, evaluator, plans)


def build_attacks(
    config: GridConfig, only: set[str] | None = None
) -> tuple[dict[str, Attack], dict[str, Mapping[str, Any]]]:
    """The grid's attacks by label (those in ``only``, when given), built, and each one's
    plan (:meth:`~privaudit.api.Attack.plan`)."""
    bb = config.backbone
    attacks: dict[str, Attack] = {}
    plans: dict[str, Mapping[str, Any]] = {}
    for i, spec in enumerate(config.attack_specs()):
        label = spec.display()
        if only is not None and label not in only:
            continue
        attacks[label] = build_component(ATTACKS, spec.name, spec.params, bb, f"attacks.{i}.params")
        try:  # the attack's own plan-time check, and what it resolves from the corpus
            plans[label] = dict(attacks[label].plan(config.corpus.name, dict(config.corpus.params)))
        except ValueError as exc:
            raise ValueError(f"attacks.{i} ({label}): {exc}") from None
    return attacks, plans


def _build_defense(config: GridConfig, i: int) -> Defense:
    """Defense spec ``i``, built. A plain class (``module:Class`` with ``privatize(texts,
    rng)``, not a :class:`~privaudit.api.Defense`) is wrapped as ``privaudit audit`` wraps it
    (:class:`~privaudit.audit.wrapper.UserDefense`; its class attribute ``knob``, if any, names
    the constructor parameter the grid sweeps), and built once now, at the first configured
    level, so that a class that cannot be built or has no ``privatize`` fails before any
    work."""
    spec = config.defenses[i]
    cls = DEFENSES.get(spec.name)
    if isinstance(cls, type) and issubclass(cls, Defense):
        return build_component(
            DEFENSES, spec.name, spec.params, config.backbone, f"defenses.{i}.params"
        )
    if ":" not in spec.name:  # a registered name: the wrapper re-imports by module:Class
        raise ValueError(
            f"defenses.{i}.name: {spec.name!r} is not a privaudit Defense; derive it from "
            "privaudit.api.Defense, or name it as module:Class to have it wrapped."
        )
    knob = getattr(cls, "knob", None)
    if knob is not None and not isinstance(knob, str):
        raise ValueError(
            f"defenses.{i}.name: {spec.name}.knob is {knob!r}; set it to the name of the "
            "constructor parameter that sets the privacy level (a string), or drop it."
        )
    wrapped = UserDefense(spec.name, knob, **spec.params)
    probe = wrapped.with_knob(spec.knob_values[0]) if knob and spec.knob_values else wrapped
    try:
        probe.check()
    except ValueError as exc:  # no class, no privatize, or a constructor that refuses params
        raise ValueError(f"defenses.{i}.name: {exc}") from None
    return wrapped


class Context:
    """Everything a cell needs that does not change across the grid: the corpus and its
    splits, the backbone, the runner's ground truth, the utility evaluator, the attacks and
    each defense spec fitted once. Built once per process (the driver, and each worker)."""

    def __init__(self, config: GridConfig) -> None:
        self.config = config
        self._specs, self.attacks, self.evaluator, self.plans = build_components(config)
        corpus = build_component(
            CORPORA, config.corpus.name, config.corpus.params, None, "corpus.params"
        )
        corpus = corpus.subset(config.corpus.limits, np.random.default_rng(config.seeds[0]))
        corpus.check_labels()  # a one-class split would fail only after every cell ran
        self.corpus = corpus
        self.fingerprint = corpus.fingerprint()
        self.bb = load_backbone(config.backbone)
        self.train_texts, self.test_texts = corpus.texts("train"), corpus.texts("test")
        # The unit of privacy the corpus declares: what every interval resamples.
        self.units = Units.of_authors(corpus.authors("test"), corpus.unit)
        self.y_train, self.y_test = corpus.labels("train"), corpus.labels("test")
        self.n_words = sum(len(t.split()) for t in [*self.train_texts, *self.test_texts])
        # Truth and knowledge are built from their declarations (privaudit.records): only
        # the fields this grid's metrics and attacks ask for, beside the always-built ones.
        source = Source(corpus, self.bb)
        wanted = sorted({n for a in self.attacks.values() for n in metric_spec(a.metric).needs})
        # The runner's ground truth; attacks never see it.
        self.truth = Truth.of(build_truth(source, wanted))
        needs = sorted({n for a in self.attacks.values() for n in a.needs_knowledge})
        self.knowledge_extra = build_knowledge(source, needs)
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
        self._keys[point] = point_keys(ident, self.evaluator, self.attacks)
        return self._keys[point]


def point_keys(
    ident: list[Any], evaluator: Any, attacks: dict[str, Attack]
) -> tuple[str, dict[str, str]]:
    """A point's key and its cells' keys from its :func:`~privaudit.audit.plan.identity`."""
    point_key = cell_key(ident, evaluator.name, evaluator.version, evaluator.params())
    cells = {
        label: cell_key(ident, label, attack.name, attack.version, attack.params())
        for label, attack in attacks.items()
    }
    return point_key, cells


_CONTEXTS: dict[str, Context] = {}


def context_for(config: GridConfig) -> Context:
    """This process's :class:`Context` for ``config`` (built on first use)."""
    key = config.model_dump_json()
    if key not in _CONTEXTS:
        _CONTEXTS.clear()  # one grid at a time per process; free the previous corpus
        _CONTEXTS[key] = Context(config)
    return _CONTEXTS[key]


def compute(
    ctx: Context, task: Task, on_record: Any = None, on_start: Any = None
) -> list[tuple[str, dict[str, Any]]]:
    """Run one task: privatize, measure utility (unless cached), run the needed attacks.
    Returns ``(key, record)`` pairs; ``on_record`` (if given) receives each as it finishes, so
    a sequential driver persists every cell at once; ``on_start`` (if given) is called with
    the name of each component as it starts: ``privatize``, the evaluator's (unless cached),
    then each attack's label. The components run inside :class:`ComponentMemory` (the heap
    trimmed as they run, each one's peak logged for the memory benchmark)."""
    out: list[tuple[str, dict[str, Any]]] = []
    with ComponentMemory(f"{task.point.label} {task.point.knob_value}") as parts:

        def start(what: str) -> None:
            parts.start(what)
            if on_start is not None:
                on_start(what)

        def emit(key: str, record: dict[str, Any]) -> None:
            out.append((key, record))
            if on_record is not None:
                on_record(key, record)

        _compute(ctx, task, start, emit)
    return out


def _compute(ctx: Context, task: Task, start: Callable[[str], None], emit: Emit) -> None:
    point = task.point
    defense = ctx.defense(point)
    rng_train, rng_test, rng_utility, rng_query = point_streams(point, defense)
    try:
        rel_test = _release_and_utility(
            ctx, task, defense, (rng_train, rng_test, rng_utility), start, emit
        )
    except Exception as exc:  # a failing defense point must not end the grid
        reason = failure_reason(exc)
        for label, key in task.attack_keys.items():
            row = _failed(ctx, label, reason)
            emit(key, {"kind": "cell", "status": "failed", "rows": [row]})
        return

    query = _memoized_query(defense, rng_query)  # one memo: the attacks share their queries
    released = _Released(point, defense, rel_test.public())
    for label, key in task.attack_keys.items():
        granted = knowledge(ctx, point, ctx.aux, label, query=query)
        _attack_cell(ctx, released, label, key, granted, start, emit)
    end_point()  # the point's own models (a fine-tuned decoder) serve no later point


def _release_and_utility(
    ctx: Context,
    task: Task,
    defense: Defense,
    rngs: tuple[np.random.Generator, np.random.Generator, np.random.Generator],
    start: Callable[[str], None],
    emit: Emit,
) -> Release:
    """Privatize the point's train and test splits; unless its utility is cached, measure it
    and emit the point record. Returns the test release, which the attacks read."""
    rng_train, rng_test, rng_utility = rngs
    start("privatize")
    t0 = time.perf_counter()
    with charged_seconds() as charged:  # what memoised work saved is still this point's
        rel_train = defense.privatize(ctx.train_texts, rng=rng_train)
        rel_test = defense.privatize(ctx.test_texts, rng=rng_test)
    privatize_wall = time.perf_counter() - t0
    privatize_s = privatize_wall + charged.seconds
    if task.cached_utility is None:
        ev = ctx.evaluator
        start(ev.name)
        t0 = time.perf_counter()
        util = ev.evaluate_releases(
            rel_train,
            ctx.y_train,
            rel_test,
            ctx.y_test,
            rng=rng_utility,
            defense=defense,
            train_attributes=ctx.train_attributes,
        )
        utility = {
            "kind": "point",
            "status": "ok",
            **utility_fields(util, ev.metric, ctx.y_test),
            "replacement_rate": replacement_rate([rel_train.audit, rel_test.audit])
            if defense.name != NONE
            else 0.0,
            "privatize_seconds": privatize_s,
            "privatize_wall_seconds": privatize_wall,  # what this run waited (estimates)
            "release": str(rel_test.space),  # the format: text, token/hidden vectors, pooled
            "utility_seconds": time.perf_counter() - t0,
            "n_words": ctx.n_words,
        }
        if ctx.config.show_examples:  # corpus text is stored only when asked for
            utility["examples"] = _examples(ctx.test_texts, rel_test)
        emit(task.point_key, utility)
    return rel_test


@dataclass(frozen=True)
class _Released:
    """A privatized point as each of its attack cells reads it: the point, its defense and
    the public view of its test release (the victims)."""

    point: Point
    defense: Defense
    public: Release


def _attack_cell(
    ctx: Context,
    released: _Released,
    label: str,
    key: str,
    knowledge: Knowledge,
    start: Callable[[str], None],
    emit: Emit,
) -> None:
    """One attack's cell on the ``released`` point: n/a when the attack cannot read the
    release or lacks knowledge the corpus cannot provide; else fitted, run and scored (n/a
    when the truth cannot judge it, failed with its reason on an error)."""
    point, public = released.point, released.public
    attack = ctx.attacks[label]
    base = {
        "attack": label,
        "attack_metric": attack.metric,
        "attack_params": attack_params(ctx, label),
    }
    start(label)
    # A knowledge field the corpus cannot provide says its own cause (background: truth).
    missing = attack.missing_knowledge(knowledge)
    reason, cause = missing or (attack.applicable(public, knowledge), "release")
    if reason is not None:
        # na_cause: "release" (cannot read it) vs "truth" (the corpus cannot score it).
        na = {"status": "n/a", "reason": reason, "na_cause": cause}
        row = base | _family(attack) | na
        emit(key, {"kind": "cell", "status": "n/a", "rows": [row]})
        return
    rng_attack = attack_rng(point, released.defense, label)
    t0 = time.perf_counter()
    try:
        predictions = fit_and_attack(attack, knowledge, rng_attack, public, point.seed)
        try:
            scored = score_predictions(predictions, ctx.truth, attack.metric, public)
        except NotScorable as exc:  # the attack ran; the truth cannot judge it
            row = (
                base
                | _family(attack)
                | {
                    "status": "n/a",
                    "reason": str(exc),
                    "na_cause": "truth",
                    "attack_seconds": time.perf_counter() - t0,
                }
            )
            emit(key, {"kind": "cell", "status": "n/a", "rows": [row]})
            return
        attack_s = time.perf_counter() - t0
        rows = [_scored_row(base, label, result, attack_s) for result in scored]
        status = "ok" if any(r["status"] == "ok" for r in rows) else "n/a"
        emit(key, {"kind": "cell", "status": status, "rows": rows})
    except Exception as exc:
        row = _failed(ctx, label, failure_reason(exc))
        emit(key, {"kind": "cell", "status": "failed", "rows": [row]})


def _scored_row(
    base: dict[str, Any], label: str, result: dict[str, Any], attack_s: float
) -> dict[str, Any]:
    """One record row from a scorer's row: JSON-ready details and outcomes, the attack's label
    with its target (``attribute-inference[gender]``, ``geia[entities]``), and its status
    (``ok``, or ``n/a`` with the scorer's reason for a target the truth cannot judge)."""
    result = dict(result)
    target = result.pop("target", "") or ""
    status = result.pop("status", "ok")
    result["attack_details"] = fmt_params(result.get("attack_details", {}))
    if status == "ok":
        outcome = result.pop("outcome")
        baseline = result.pop("baseline_outcome", None)
        result["outcome"] = outcome.to_record()
        result["baseline_outcome"] = None if baseline is None else baseline.to_record()
    return (
        base
        | result
        | {
            "attack": f"{label}[{target}]" if target else label,
            "status": status,
            "reason": result.get("reason", ""),
            "attack_seconds": attack_s,
            "target": target,
            "na_cause": "truth" if status == "n/a" else None,  # a scorer's n/a
        }
    )


def _family(attack: Attack) -> dict[str, str]:
    """The family of an attack's row that has no target yet (an n/a or failed cell)."""
    return {"family": family_of(attack.metric)}


def utility_fields(util: dict[str, Any], metric: str, y_test: Any) -> dict[str, Any]:
    """The point record's utility fields from an evaluator's answer (see the module
    docstring). The headline is balanced accuracy; an evaluator that reports neither it nor
    its predictions (a user's plugin) gives its own metric, else plain accuracy, with no
    outcome. When both the evaluator's balanced accuracy and its predictions are given they
    must agree (the intervals are computed from the predictions)."""
    outcome = None
    predictions = util.get("predictions")
    if predictions is not None:
        # An evaluator may score a subset of the test split (peft's max_test): it says which.
        indices = [int(i) for i in util.get("test_indices", range(len(y_test)))]
        if len(predictions) != len(indices) or any(not 0 <= i < len(y_test) for i in indices):
            raise ValueError(
                f"The utility evaluator returned {len(predictions)} predictions for "
                f"{len(indices)} test documents (of {len(y_test)}); return one prediction "
                "per test document, or test_indices naming the ones scored."
            )
        outcome = Outcome.classes(
            [int(y_test[i]) for i in indices],
            [int(p) for p in predictions],
            "balanced_accuracy",
            docs=indices,
        )
    if "balanced_accuracy" in util or outcome is not None:
        used = "balanced_accuracy"
        value = float(util.get("balanced_accuracy", math.nan))
        if outcome is not None:
            if math.isfinite(value) and abs(value - outcome.value()) > 1e-9:
                raise ValueError(
                    f"The utility evaluator reported balanced accuracy {value:.6f}, but its "
                    f"predictions give {outcome.value():.6f}."
                )
            value = outcome.value()
    else:
        used = metric if metric in util else "accuracy"
        value = float(util.get(used, math.nan))
    return {
        "utility": value,
        "utility_accuracy": float(util.get("accuracy", math.nan)),
        "utility_macro_f1": float(util.get("macro_f1", math.nan)),
        "utility_metric": used,
        "utility_outcome": None if outcome is None else outcome.to_record(),
        "objective": util.get("objective"),
        # What the evaluator says of its own training (epochs kept, the probe's lower bound).
        "utility_details": util.get("details") or None,
    }


def fit_and_attack(
    attack: Attack, knowledge: Knowledge, rng: np.random.Generator, public: Release, seed: int
) -> Predictions:
    """A copy of ``attack`` (the grid's, never fitted) fitted with ``knowledge`` and run on
    its victims: all, or the ``max_victims`` it declares (:func:`victim_subset`), whose test
    indices its predictions carry (``meta["doc_indices"]``). The copy, models and all, goes
    with the cell (a fitted geia and vec2text held 450 MB into the next point)."""
    victims = victim_subset(len(public), attack.max_victims, seed)
    seen = public if victims is None else public.subset(victims)
    predictions = copy.deepcopy(attack).fit(knowledge, rng=rng).attack(seen)
    if victims is not None:  # the subset's own indices into the test split
        inner = predictions.meta.get("doc_indices")
        picked = victims if inner is None else victims[np.asarray(inner, dtype=int)]
        predictions.meta["doc_indices"] = [int(i) for i in picked]
    return predictions


def test_release(ctx: Context, point: Point) -> Release:
    """The point's test release, drawn again from its own stream: the one its cells were
    scored on."""
    defense = ctx.defense(point)
    rng_test = point_streams(point, defense)[1]
    return defense.privatize(ctx.test_texts, rng=rng_test)


def knowledge(ctx: Context, point: Point, aux: Any, label: str, *, query: Any = None) -> Knowledge:
    """What the threat model grants attack ``label`` at ``point`` with ``aux`` as its own
    split: the backbone, queries to the mechanism at this level (``query``, else a memo of
    its own on the point's query stream; the attack-strength curve gives a share of the aux,
    :mod:`privaudit.audit.strength`), the declared guarantee and likelihood, and what the
    attack's plan-time hook resolved."""
    defense = ctx.defense(point)
    if query is None:
        query = _memoized_query(defense, point_streams(point, defense)[3])
    return Knowledge(
        white_box=True,
        backbone=ctx.config.backbone,
        query_mechanism=query,
        aux=aux,
        guarantee=defense.guarantee,
        likelihood=defense.likelihood(),
        plan=ctx.plans[label],
        extra=getattr(ctx, "knowledge_extra", {}),
    )


def attack_params(ctx: Context, label: str) -> str:
    """The row's ``attack_params``: the attack's parameters with what its plan resolved for
    the run's corpus over the configured values (geia's public corpus used, not ``auto``)."""
    return fmt_params(ctx.attacks[label].params() | dict(ctx.plans[label]))


def point_examples(ctx: Context, point: Point) -> list[dict[str, str]]:
    """The point's (original, released) pairs, for a run that asks for examples after its
    cells were computed without them (:func:`test_release`)."""
    return _examples(ctx.test_texts, test_release(ctx, point))


def _examples(texts: list[str], release: Release, n: int = 3) -> list[dict[str, str]]:
    """A few (original, released) pairs for the report, shown only on request."""
    if release.kind != "text" or not release.texts:
        return []
    pairs = zip(texts[:n], release.texts[:n], strict=False)
    return [{"original": o, "released": r} for o, r in pairs]


# Moved to privaudit.records (the truth fields' builders); the old names stay for callers.
_token_layout = token_layout


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


def _failed(ctx: Context, label: str, reason: tuple[str, str]) -> dict[str, Any]:
    """A failed cell's row: ``reason`` is :func:`~privaudit.audit.reasons.failure_reason`'s
    (stored, full); the full message rides along only where it differs."""
    stored, full = reason
    attack = ctx.attacks[label]
    return {
        "attack": label,
        "attack_metric": attack.metric,
        "attack_params": attack_params(ctx, label),
        **_family(attack),
        "status": "failed",
        "reason": stored,
        **({FULL: full} if full != stored else {}),
    }
