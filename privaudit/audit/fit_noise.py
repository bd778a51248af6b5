"""Fit noise measured in the run: refits at the undefended point, beside the declared spreads.

The board's intervals add each learned attack's and the service's between-fit spread
(``fit_sd``, :mod:`privaudit.metrics.stats`). The classes declare it, measured once on one
corpus; on a user's corpus it may be larger, and a spread that is real but undeclared lets
identical defenses be told apart (issue 47: 26 % of null boards). So every run measures it:
after the grid, at each undefended point (the ``none`` defense, per seed), every attack whose
fit is random (declared ``fit_sd`` > 0; a declared 0 is tested to be a deterministic fit,
``tests/test_conformance.py``) is fitted again ``refits`` times from other streams of its cell
(:func:`~privaudit.audit.plan.attack_rng` with ``|refit<k>``), on the same aux, public text
and victims, and scored; the service is trained again ``refits`` times from other utility
streams on the same releases. The measured spread is the standard deviation (``ddof=1``) of
the ``refits + 1`` scores, the grid's own fit among them. The board uses, per attack row and
for the service, the **larger** of the declared spread and the measured one's 80 % upper
confidence bound (:func:`~privaudit.metrics.stats.sd_upper_bound`: the sd of three fits is
often far below the truth, and read as measured it left 9.5 % of null boards with a false
claim), and says which
(:func:`privaudit.leaderboard.board.leaderboard`'s ``measured_fit_sd``). With ``refits: 0``
(``fit_noise: {refits: 0}`` in the config) nothing is measured and the declarations alone are
used. Only ``none`` is refitted: its releases are the originals, so the refits cost only the
fits (the extra cost is in ``fit_noise.csv``'s ``seconds`` and in the run's notes).

Rows (:data:`FIT_NOISE_COLUMNS`) hold scores only, never corpus text.
"""

from __future__ import annotations

import math
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import NONE
from privaudit.audit.cells import fit_and_attack, knowledge, test_release, utility_fields
from privaudit.audit.plan import attack_rng, point_streams, stable_seed
from privaudit.audit.reasons import failure_reason
from privaudit.audit.stage_progress import StageProgress
from privaudit.metrics import score_predictions

if TYPE_CHECKING:
    from collections.abc import Callable

    import pandas as pd

    from privaudit.audit.cells import Context
    from privaudit.audit.plan import Point

#: fit_noise.csv's columns, in order. ``what``: ``attack`` or ``utility``; ``label``: the
#: attack row's label (``attribute-inference[gender]``) or the evaluator's; ``scores``: the
#: grid's fit first, then the refits (';'-joined); ``measured_sd``: their sd (ddof 1).
FIT_NOISE_COLUMNS = [
    "what",
    "label",
    "seed",
    "fits",
    "scores",
    "measured_sd",
    "declared_sd",
    "status",
    "reason",
    "seconds",
]


def refitted(attacks: dict[str, Any], evaluator: Any) -> tuple[list[str], bool]:
    """What the refits fit again at each undefended point: the attacks (labels) and whether
    the utility evaluator has a random fit (a declared ``fit_sd`` above 0)."""
    random = [label for label, a in attacks.items() if float(a.fit_sd or 0.0) > 0]
    return random, float(getattr(evaluator, "fit_sd", 0.0) or 0.0) > 0


def measure_fit_noise(
    ctx: Context,
    points: list[Point],
    frame: pd.DataFrame,
    refits: int,
    *,
    progress: bool,
    start: Callable[[str], None] = lambda _: None,
) -> pd.DataFrame:
    """The measured between-fit spreads of the run's random fits at its undefended points.
    ``start`` is called with each refitted component's name before its refits (the runner's
    :class:`~privaudit.runtime.memory.ComponentMemory`: freed memory back, peak logged)."""
    import pandas as pd

    jobs = [p for p in points if ctx.defense(p).name == NONE] if refits > 0 else []
    random, ev_random = refitted(ctx.attacks, ctx.evaluator)
    total = len(jobs) * refits * (len(random) + int(ev_random))
    rows: list[dict[str, Any]] = []
    bar = StageProgress("fit noise", total, "refit", progress=progress)
    try:
        for point in jobs:
            if ev_random:
                start(f"fit noise: {ctx.evaluator.name}")
                bar.step(f"{ctx.evaluator.name} · refits")
                rows.append(_utility_refits(ctx, point, frame, refits))
                bar.advance(refits)
            for label in random:
                start(f"fit noise: {label}")
                bar.step(f"{label} · refits")
                rows.extend(_attack_refits(ctx, point, label, frame, refits))
                bar.advance(refits)
    finally:
        bar.close()
    return pd.DataFrame(rows, columns=FIT_NOISE_COLUMNS)


def _attack_refits(
    ctx: Context, point: Point, label: str, frame: pd.DataFrame, refits: int
) -> list[dict[str, Any]]:
    """One row per scored target of the cell (point, ``label``): its grid score and refits."""
    attack = ctx.attacks[label]
    _, cells = ctx.keys(point)
    grid = frame[(frame["cell"] == cells[label]) & (frame["status"] == "ok")]
    if grid.empty:
        return []
    scores = {str(r["attack"]): [float(r["attack_score"])] for _, r in grid.iterrows()}
    base = {"what": "attack", "seed": point.seed, "declared_sd": float(attack.fit_sd)}
    public = test_release(ctx, point).public()
    defense = ctx.defense(point)
    t0 = time.perf_counter()
    for k in range(refits):
        rng = attack_rng(point, defense, f"{label}|refit{k}")
        try:
            predictions = fit_and_attack(
                attack, knowledge(ctx, point, ctx.aux, label), rng, public, point.seed
            )
            scored = score_predictions(predictions, ctx.truth, attack.metric, public)
        except Exception as exc:  # say why, keep the declared spread for it
            stored, full = failure_reason(exc)
            print(f"fit noise: a refit of {label} failed: {full}", file=sys.stderr)
            return [
                base
                | {
                    "label": name,
                    "fits": len(s),
                    "scores": _join(s),
                    "status": "failed",
                    "reason": stored,
                    "measured_sd": math.nan,
                    "seconds": math.nan,
                }
                for name, s in scores.items()
            ]
        for result in scored:
            target = result.get("target") or ""
            name = f"{label}[{target}]" if target else label
            if name in scores and result.get("status", "ok") == "ok":
                scores[name].append(float(result["attack_score"]))
    seconds = (time.perf_counter() - t0) / max(len(scores), 1)
    return [base | _spread(name, s, seconds) for name, s in scores.items()]


def _utility_refits(ctx: Context, point: Point, frame: pd.DataFrame, refits: int) -> dict[str, Any]:
    """The service trained ``refits`` more times on the undefended point's releases."""
    ev = ctx.evaluator
    grid = frame[(frame["point"] == ctx.keys(point)[0])]["utility"].dropna()
    scores = [float(grid.iloc[0])] if len(grid) else []
    base = {"what": "utility", "seed": point.seed, "declared_sd": float(ev.fit_sd)}
    defense = ctx.defense(point)
    rng_train, rng_test, _, _ = point_streams(point, defense)
    rel_train = defense.privatize(ctx.train_texts, rng=rng_train)
    rel_test = defense.privatize(ctx.test_texts, rng=rng_test)
    t0 = time.perf_counter()
    for k in range(refits):
        rng = np.random.default_rng(stable_seed(point.seed, defense.name, "utility-refit", k))
        try:
            util = ev.evaluate_releases(
                rel_train,
                ctx.y_train,
                rel_test,
                ctx.y_test,
                rng=rng,
                defense=defense,
                train_attributes=ctx.train_attributes,
            )
        except Exception as exc:
            stored, full = failure_reason(exc)
            print(f"fit noise: a refit of {ev.name} failed: {full}", file=sys.stderr)
            return base | {
                "label": ev.name,
                "fits": len(scores),
                "scores": _join(scores),
                "status": "failed",
                "reason": stored,
                "measured_sd": math.nan,
                "seconds": math.nan,
            }
        scores.append(float(utility_fields(util, ev.metric, ctx.y_test)["utility"]))
    seconds = time.perf_counter() - t0
    labels = frame["utility_evaluator"].dropna() if "utility_evaluator" in frame else []
    return base | _spread(str(labels.iloc[0]) if len(labels) else ev.name, scores, seconds)


def _spread(label: str, scores: list[float], seconds: float) -> dict[str, Any]:
    finite = [s for s in scores if math.isfinite(s)]
    sd = float(np.std(finite, ddof=1)) if len(finite) >= 2 else math.nan
    return {
        "label": label,
        "fits": len(scores),
        "scores": _join(scores),
        "measured_sd": sd,
        "status": "ok" if math.isfinite(sd) else "n/a",
        "reason": "",
        "seconds": seconds,
    }


def _join(scores: list[float]) -> str:
    return ";".join(f"{s:.6g}" for s in scores)
