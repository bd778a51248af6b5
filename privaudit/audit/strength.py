"""The attack-strength curve: how strong each attack is with more or less of the attacker's data.

An optional stage of a run (``strength: {fractions: [...]}`` in the grid config,
:class:`~privaudit.audit.config.StrengthSpec`), run after every cell is finished. At each
undefended point (the ``none`` defense, per seed) every attack that learns from the aux
split (``needs_aux``) and whose cell is ``ok`` is fitted again on a share of the aux documents
and scored on the same victims, with the same truth and the run's bootstrap. A reader then
sees whether the attacker has saturated or would grow stronger with more data.

- **Subsets** are nested: one seeded permutation of the aux per (seed, attack), its first
  ``round(fraction · n)`` documents, kept in the split's order; a share that draws fewer than
  :data:`MIN_SHARE_DOCS`, or as many as another share, is refused before any cell. The attack's
  own stream is the grid cell's (:func:`~privaudit.audit.plan.attack_rng`), so only its data
  differs from the cell's.
- **1.0 is the grid's cell**, reused from the results table (score, interval, baseline), never
  recomputed, so the curve ends exactly on the number the rest of the report shows.
- Attacks that do not read the aux (white-box nn-inversion, optimization-inversion, a
  pretrained NER) are left out: their score does not depend on it.
- A subset the attack cannot learn from (one class in a small share) is a ``failed`` row with
  the reason, free of corpus text as a cell's is; the curve goes on.

- **Public data** (``public_fractions``): an attack that pre-trains on public text declares
  the parameter that sets how much (``Attack.public_data``: geia's and vec2text's
  ``public_docs``); it is rebuilt with that parameter at each share (:func:`public_variants`)
  and fitted on all of the aux, so the curve shows whether more public pre-training would
  make it stronger. Each share pre-trains its own model once (cached on disk, listed by
  ``--estimate``'s one-time lines and built ahead by ``privaudit pretrain``). Rows say which
  data varied (``data``: aux or public) and how much public text the model saw
  (``n_public``).
- Every refit scores the same victims as the grid's cell: those it declares
  (``max_victims``), drawn with the run's seed (:func:`~privaudit.audit.cells.fit_and_attack`).

Rows (:data:`STRENGTH_COLUMNS`) hold scores only, never corpus text.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import NONE
from privaudit.audit.cells import fit_and_attack, knowledge, test_release
from privaudit.audit.plan import attack_rng, stable_seed
from privaudit.audit.reasons import failure_reason
from privaudit.audit.stage_progress import StageProgress
from privaudit.metrics import interval, score_predictions
from privaudit.metrics.stats import Bootstrap

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.api import Attack
    from privaudit.audit.cells import Context
    from privaudit.audit.plan import Point

#: strength.csv's columns, in order.
STRENGTH_COLUMNS = [
    "seed",
    "attack",
    "attack_metric",
    "data",
    "fraction",
    "n_aux",
    "n_public",
    "status",
    "reason",
    "attack_score",
    "attack_score_ci_low",
    "attack_score_ci_high",
    "attack_baseline",
    "reused",
    "attack_seconds",
]


#: The fewest documents a share below 1 may draw: fewer is no data set to learn from, and two
#: shares that draw the same count are one point of the curve twice.
MIN_SHARE_DOCS = 2


def share_counts(shares: list[float], full: int, key: str, of: str) -> list[tuple[float, int]]:
    """(share, documents drawn) for each share below 1 of ``full`` documents; a share that
    draws fewer than :data:`MIN_SHARE_DOCS` documents, or as many as another share (or all
    ``full``), is refused in one line naming ``strength.<key>`` (before any work)."""
    out: list[tuple[float, int]] = []
    seen = {full: 1.0}
    for share in sorted(set(shares)):
        if share >= 1.0:
            continue
        n = round(share * full)
        if n < MIN_SHARE_DOCS:
            raise ValueError(
                f"strength.{key}: {share:g} of {of} ({full}) is {n} document(s), fewer than "
                f"{MIN_SHARE_DOCS}; give shares of at least {MIN_SHARE_DOCS / full:.3g}."
            )
        if n in seen:
            raise ValueError(
                f"strength.{key}: {share:g} and {seen[n]:g} of {of} ({full}) both draw {n} "
                "documents; give shares that draw different counts (drop one)."
            )
        seen[n] = share
        out.append((share, n))
    return out


def public_variants(
    attack: Attack, shares: list[float], plan: Mapping[str, Any]
) -> list[tuple[float, int, Attack]]:
    """For an attack that declares its public data (``Attack.public_data``): per share below
    1, (share, public documents, the attack rebuilt with that many); [] for any other. Shares
    that draw too few or the same documents are refused (:func:`share_counts`). ``plan`` is
    what the attack's plan-time hook resolved; a variant is fitted with the same one."""
    param = attack.public_data
    if not param:
        return []
    # Shares of what it actually pre-trains on under the plan (a public split may hold fewer
    # documents than the parameter asks: geia's ``public_corpus: auto`` on SynthPAI).
    full = attack.public_available(plan)
    of = f"{attack.name}'s public documents"
    return [
        (share, n, attack.with_public_data(n))
        for share, n in share_counts(shares, full, "public_fractions", of)
    ]


def check_shares(ctx: Context) -> None:
    """Refuse, before any cell, strength shares that draw too few or the same documents of the
    aux (its size is known once the corpus is loaded) or of an attack's public documents."""
    spec = ctx.config.strength
    if spec is None:
        return
    n_aux = len(ctx.aux) if ctx.aux is not None else 0
    if n_aux and any(a.needs_aux for a in ctx.attacks.values()):
        share_counts(spec.levels(), n_aux, "fractions", "the aux documents")
    for label, attack in ctx.attacks.items():
        public_variants(attack, spec.public_levels(), ctx.plans[label])


def strength_curve(
    ctx: Context, points: list[Point], frame: pd.DataFrame, *, progress: bool = True
) -> pd.DataFrame:
    """The curve's rows for ``ctx.config.strength`` (see the module docstring); ``frame`` is
    the run's finished results table, with intervals. Empty when the grid has no ``ok``
    aux-trained attack at an undefended point (or no aux split)."""
    import pandas as pd

    spec = ctx.config.strength
    assert spec is not None, "strength_curve needs a config with strength"
    shares = spec.levels()
    aux = ctx.aux
    n_aux = len(aux) if aux is not None else 0
    jobs = []  # (point, cell label, its ok rows in the results table)
    for point in points:
        if ctx.defense(point).name != NONE or not n_aux:
            continue
        _, cells = ctx.keys(point)
        for label, key in cells.items():
            rows = frame[(frame["cell"] == key) & (frame["status"] == "ok")]
            if ctx.attacks[label].needs_aux and len(rows):
                jobs.append((point, label, rows))
    out: list[dict[str, Any]] = []
    fits = [s for s in shares if s < 1.0]
    variants = {
        label: public_variants(ctx.attacks[label], spec.public_levels(), ctx.plans[label])
        for _, label, _ in jobs
    }
    total = sum(len(fits) + len(variants[label]) for _, label, _ in jobs)
    bar = StageProgress("strength", total, "fit", progress=progress)
    boot = Bootstrap(**ctx.config.bootstrap.model_dump(), units=ctx.units)
    weights = boot.weights(len(ctx.test_texts))
    try:
        for point, label, rows in jobs:
            public = test_release(ctx, point).public()
            cell = _Cell(ctx, point, label, public, weights, boot.level)
            order = np.random.default_rng(stable_seed(point.seed, NONE, "strength", label))
            perm = order.permutation(n_aux)
            attack = ctx.attacks[label]
            for share, n in share_counts(fits, n_aux, "fractions", "the aux documents"):
                bar.step(f"{label} · aux {share:g}")
                sub = aux.select(sorted(int(i) for i in perm[:n]))
                row = {"data": "aux", "fraction": share, "n_aux": n}
                out += _refit(cell, attack, sub, row)
                bar.advance()
            out += [_reused(point, r, n_aux, "aux") for _, r in rows.iterrows()]
            for share, n, variant in variants[label]:
                bar.step(f"{label} · public {share:g}")
                row = {"data": "public", "fraction": share, "n_aux": n_aux, "n_public": n}
                out += _refit(cell, variant, aux, row)
                bar.advance()
            if variants[label]:
                n_public = attack.public_available(ctx.plans[label])
                out += [_reused(point, r, n_aux, "public", n_public) for _, r in rows.iterrows()]
    finally:
        bar.close()
    table = pd.DataFrame(out, columns=STRENGTH_COLUMNS)
    keys = ["seed", "attack", "data", "fraction"]
    return table.sort_values(keys, kind="stable").reset_index(drop=True)


@dataclass(frozen=True)
class _Cell:
    """The grid cell a curve refits: the run's context, the cell's point and attack label,
    its victims' public release, and the bootstrap weights and level of its intervals."""

    ctx: Context
    point: Point
    label: str
    public: Any
    weights: np.ndarray
    level: float


def _refit(cell: _Cell, attack: Attack, aux: Any, row: dict[str, Any]) -> list[dict[str, Any]]:
    """``attack`` (``cell``'s, or its public-data variant) fitted on ``aux`` and scored on
    the cell's victims: one row per scored target, or one ``failed`` row. ``row`` says which
    data varied and by how much (data, fraction, n_aux, n_public)."""
    ctx, point, label, public = cell.ctx, cell.point, cell.label, cell.public
    base = {"seed": point.seed, "attack_metric": attack.metric, "reused": False} | row
    rng = attack_rng(point, ctx.defense(point), label)
    t0 = time.perf_counter()
    try:
        granted = knowledge(ctx, point, aux, label)  # a variant reads its original's plan
        predictions = fit_and_attack(attack, granted, rng, public, point.seed)
        scored = score_predictions(predictions, ctx.truth, attack.metric, public)
    except Exception as exc:  # a small share may be too little to learn from: say so, go on
        stored, full = failure_reason(exc)
        n = row.get("n_public", row["n_aux"])
        print(f"strength: {label} on {n} {row['data']} documents failed: {full}", file=sys.stderr)
        return [base | {"attack": label, "status": "failed", "reason": stored}]
    seconds = time.perf_counter() - t0
    rows = []
    for result in scored:
        target = result.get("target") or ""
        name = f"{label}[{target}]" if target else label
        if result.get("status", "ok") != "ok":
            rows.append(base | {"attack": name, "status": "n/a", "reason": result.get("reason")})
            continue
        lo, hi = interval(result["outcome"].resample(cell.weights), cell.level)
        rows.append(
            base
            | {
                "attack": name,
                "status": "ok",
                "reason": "",
                "attack_score": float(result["attack_score"]),
                "attack_score_ci_low": float(lo),
                "attack_score_ci_high": float(hi),
                "attack_baseline": float(result.get("attack_baseline", math.nan)),
                "attack_seconds": seconds,
            }
        )
    return rows


def _reused(
    point: Point, row: Any, n_aux: int, data: str, n_public: int | None = None
) -> dict[str, Any]:
    """The grid's own cell as the curve's last point (all of the aux, all of the public
    documents)."""
    return {
        "seed": point.seed,
        "attack": row["attack"],
        "attack_metric": row["attack_metric"],
        "data": data,
        "fraction": 1.0,
        "n_aux": n_aux,
        "n_public": n_public,
        "status": "ok",
        "reason": "",
        "reused": True,
        **{
            c: float(row.get(c, math.nan))
            for c in (
                "attack_score",
                "attack_score_ci_low",
                "attack_score_ci_high",
                "attack_baseline",
                "attack_seconds",
            )
        },
    }
