"""A run's results rows: each finished cell's row read back from the store, with its point's
columns (:func:`assemble`), and the per-document outcomes behind them; the results table with
its intervals (:func:`results_table`); the released examples (:func:`examples`)."""

from __future__ import annotations

import math
from typing import Any

from privaudit import __version__
from privaudit.audit.cells import Context, point_examples
from privaudit.audit.plan import Point, cell_key, fmt_params
from privaudit.audit.store import COLUMNS, ResultStore
from privaudit.metrics.outcomes import Outcome
from privaudit.metrics.stats import Bootstrap, Outcomes, annotate, run_stats

#: Appended to the label of a defense whose service-side objective the evaluator did not train.
NOT_APPLIED = "(objective not applied)"


def _evaluator_label(evaluator: Any) -> str:
    """``probe``, ``lora``, ...; ``peft[method]`` when the generic peft evaluator is used."""
    method = getattr(evaluator, "method", None)
    return evaluator.name if method in (None, evaluator.name) else f"{evaluator.name}[{method}]"


def results_table(
    ctx: Context,
    points: list[Point],
    store: ResultStore,
    *,
    intervals: bool = True,
    measured: tuple[dict[str, float], float | None] = ({}, None),
) -> tuple[Any, Any]:
    """The results table (rows of :func:`assemble` with intervals and normalised privacy,
    :func:`privaudit.metrics.stats.annotate`, unless ``intervals`` is false: the tables
    written while the grid runs) and the outcomes table behind it."""
    import pandas as pd

    rows, outcomes = assemble(ctx, points, store)
    frame = pd.DataFrame(rows).reindex(columns=COLUMNS)
    if frame.empty or not intervals:
        return frame, outcomes.to_frame()
    spec = ctx.config.bootstrap
    boot = Bootstrap(resamples=spec.resamples, level=spec.level, seed=spec.seed, units=ctx.units)
    # Attacker randomness: each attack's declared between-fit sd (Attack.fit_sd), by label.
    fit_sd = {
        str(label): float(
            getattr(ctx.attacks.get(str(label).split("[", 1)[0]), "fit_sd", 0.0) or 0.0
        )
        for label in frame["attack"].dropna().unique()
    }
    # Utility-evaluator randomness: its declared between-fit sd (UtilityEvaluator.fit_sd).
    u_sd = float(getattr(ctx.evaluator, "fit_sd", 0.0) or 0.0)
    # The larger of the declared and the measured spreads (privaudit.audit.fit_noise).
    fit_sd = {k: max(v, measured[0].get(k, 0.0)) for k, v in fit_sd.items()}
    u_sd = max(u_sd, measured[1] or 0.0)
    stats = run_stats(
        frame, outcomes, boot, n_test=len(ctx.test_texts), fit_sd=fit_sd, utility_fit_sd=u_sd
    )
    return annotate(stats).reindex(columns=COLUMNS), outcomes.to_frame()


def assemble(
    ctx: Context, points: list[Point], store: ResultStore
) -> tuple[list[dict[str, Any]], Any]:
    """The result rows of ``points`` from the store, in grid order (unfinished cells are
    absent), and their per-document outcomes (:class:`privaudit.metrics.stats.Outcomes`:
    each row's attack and baseline outcome by ``cell_key``, each point's utility outcome by
    its key, the ``point`` column)."""
    rows = []
    found: dict[tuple[str, str], Outcome] = {}
    for point in points:
        point_key, cells = ctx.keys(point)
        utility = store.get(point_key) or {}
        common = _point_columns(ctx, point, point_key, utility)
        if utility.get("utility_outcome"):
            found[(point_key, "utility")] = Outcome.from_record(utility["utility_outcome"])
        for key in cells.values():
            record = store.get(key)
            if record is not None:
                rows += _cell_rows(common, key, record, found)
    return rows, Outcomes(found)


def _point_columns(
    ctx: Context, point: Point, point_key: str, utility: dict[str, Any]
) -> dict[str, Any]:
    """The columns every row of ``point`` shares: the defense, its level, the run's setting,
    and the utility record ``utility`` (empty when the point has none)."""
    defense = ctx.defense(point)
    knob_value = point.knob_value  # planned (and checked) once: the point's level
    objective = str(utility.get("objective") or "")
    label = point.label
    if objective.startswith("not applied"):
        # The evaluator measured the noise alone: never present it under the method's name.
        label = f"{label} {NOT_APPLIED}"
    common = {
        "defense": defense.name,
        "label": label,
        "knob": defense.knob,
        "knob_value": float(knob_value) if knob_value is not None else math.nan,
        "seed": point.seed,
        "target_rate": point.target_rate if point.target_rate is not None else math.nan,
        "guarantee": str(defense.guarantee),  # the symbolic text; the object is on defense
        "defense_params": fmt_params(defense.params()),
        "utility_evaluator": _evaluator_label(ctx.evaluator),
        "utility_metric": ctx.evaluator.metric,
        "corpus": ctx.corpus.name,
        "corpus_fingerprint": ctx.fingerprint,
        "backbone": ctx.bb.name,
        "n_train": len(ctx.train_texts),
        "n_test": len(ctx.test_texts),
        "n_words": ctx.n_words,
        "privaudit_version": __version__,
        "point": point_key,
    }
    for field_ in (
        "utility",
        "utility_macro_f1",
        "utility_accuracy",
        "replacement_rate",
        "privatize_seconds",
        "utility_seconds",
    ):
        common[field_] = utility.get(field_, math.nan)
    common["utility_metric"] = utility.get("utility_metric", common["utility_metric"])
    common["objective"] = objective or None
    common["release"] = utility.get("release") or None
    details = utility.get("utility_details") or {}
    # The frozen probe's score at the same point: the lower bound the service starts from.
    common["utility_lower_bound"] = details.get("probe_balanced_accuracy", math.nan)
    for what in ("attribute_readout", "attribute_readout_no_objective"):
        common[what] = details.get(what, math.nan)
    return common


def _cell_rows(
    common: dict[str, Any],
    key: str,
    record: dict[str, Any],
    found: dict[tuple[str, str], Outcome],
) -> list[dict[str, Any]]:
    """The rows of one finished cell (``key``: one per target, or one), each on its point's
    ``common`` columns; the outcomes they keep go into ``found``."""
    rows = []
    for row in record["rows"]:
        row = dict(row)
        target = row.pop("target", "")
        row_key = cell_key(key, target) if target else key
        for what in ("attack", "baseline"):
            kept = row.pop("outcome" if what == "attack" else "baseline_outcome", None)
            if kept:
                found[(row_key, what)] = Outcome.from_record(kept)
        seconds = (
            common["privatize_seconds"]
            + common["utility_seconds"]
            + row.get("attack_seconds", math.nan)
        )
        rows.append(
            common
            | row
            | {
                "seconds": seconds if row["status"] == "ok" else math.nan,
                "cell_key": row_key,
                "cell": key,  # one (point, attack) cell may hold a row per target
            }
        )
    return rows


def examples(ctx: Context, points: list[Point], store: ResultStore) -> list[dict[str, Any]]:
    """A few original/released pairs per point, for ``report --show-examples`` (the report
    hides them by default); a point computed before examples were asked for draws its test
    release again (a point that failed has none)."""
    out = []
    for point in points:
        record = store.get(ctx.keys(point)[0])
        if record is None:
            continue
        pairs = record["examples"] if "examples" in record else point_examples(ctx, point)
        for ex in pairs:
            out.append({"defense": point.label, "knob_value": point.knob_value, **ex})
    return out
