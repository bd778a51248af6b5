"""The guarantee audit over defenses (:mod:`.core` audits one): a defense built and fitted
(:func:`build`, :func:`fitted`), at each of its levels (:func:`audit_levels`); every built-in
(:func:`audit_builtins`); each defense point of a results table (:func:`audit_points`)."""

from __future__ import annotations

import inspect
import json
import math
from collections.abc import Sequence
from typing import Any

from privaudit.api import Defense
from privaudit.audit.guarantee_audit.core import (
    QUICK_SIZES,
    GuaranteeAudit,
    Sizes,
    audit_guarantee,
    declaration,
)
from privaudit.audit.guarantee_audit.ldp import check_only
from privaudit.audit.wrapper import UserDefense
from privaudit.guarantees import Guarantee
from privaudit.registry import DEFENSES, build_defense


def fitted(defense: Defense) -> Defense:
    """The defense, fitted where its declared mechanism needs it (:func:`declaration`), so
    that its levels (``with_knob`` copies) share the fit."""
    g = defense.guarantee
    if g.formal and g.mechanism and not math.isinf(g.largest):
        declaration(defense)
    return defense


def build(name: str, params: dict[str, Any], backbone_name: str | None) -> Defense:
    """A registered defense, a ``file.py:Class`` / ``module:Class`` deriving from Defense, or a
    user's plain privatizer class wrapped as ``privaudit audit`` wraps it (its knob: its own
    ``knob`` attribute, else its guarantee's parameter)."""
    found = DEFENSES.get(name)
    if isinstance(found, type) and issubclass(found, Defense):
        return build_defense(name, params, backbone_name)
    wrapped = UserDefense(name, None, **params)
    wrapped.fit([])
    impl = wrapped._load()
    takes = inspect.signature(type(impl)).parameters
    if backbone_name is not None and "backbone" in takes and "backbone" not in params:
        wrapped = UserDefense(name, None, **params, backbone=backbone_name)
        wrapped.fit([])
    knob = getattr(impl, "knob", None) or wrapped.guarantee.parameter or None
    if knob is not None and knob in takes:
        wrapped.knob = knob  # type: ignore[misc]
        if knob not in wrapped.options:  # its default value, for the one level
            default = takes[knob].default
            wrapped.options = {**wrapped.options, knob: getattr(impl, knob, default)}
    return wrapped


def audit_levels(
    name: str,
    values: Sequence[float] | None = None,
    *,
    params: dict[str, Any] | None = None,
    backbone: str | None = None,
    alpha: float = 0.05,
    seed: int = 0,
    sizes: Sizes | None = None,
    tests: Sequence[str] | None = None,
) -> list[GuaranteeAudit]:
    """A defense (registered, or a plugin's ``file.py:Class``) at each of ``values`` of its
    knob (default: its quick ``levels``, a plugin's own ``levels`` or its current value; one
    audit without a knob); ``tests`` as in :func:`audit_guarantee`."""

    check_only(tests)  # a misspelt test name: one line, before the defense is built
    base = fitted(build(name, dict(params or {}), backbone))
    knob = base.knob if isinstance(base.knob, str) and not base.knob.startswith("(") else None
    if knob is None:
        return [
            audit_guarantee(
                base, alpha=alpha, seed=seed, sizes=sizes, backbone=backbone, tests=tests
            )
        ]
    impl = getattr(base, "_impl", None)
    levels = (
        list(values)
        if values
        else list(
            getattr(type(base), "levels", ()) or getattr(impl, "levels", ()) or [base.knob_value]
        )
    )
    return [
        audit_guarantee(
            base.with_knob(v), alpha=alpha, seed=seed, sizes=sizes, backbone=backbone, tests=tests
        )
        for v in levels
    ]


def audit_builtins(
    names: Sequence[str] | None = None,
    *,
    backbone: str | None = None,
    alpha: float = 0.05,
    seed: int = 0,
    sizes: Sizes | None = None,
) -> list[GuaranteeAudit]:
    """Every built-in defense (or ``names``) at its quick levels."""

    out: list[GuaranteeAudit] = []
    for name in names or DEFENSES.builtins():
        out.extend(audit_levels(name, backbone=backbone, alpha=alpha, seed=seed, sizes=sizes))
    return out


def audit_points(
    frame: Any,
    *,
    alpha: float = 0.05,
    seed: int = 0,
    sizes: Sizes | None = None,
) -> list[GuaranteeAudit]:
    """Each defense point of a results table once (its ``defense``, ``defense_params`` — the
    knob value among them — ``label`` and ``guarantee``): what a run's outputs add as
    ``guarantees.csv``. A user's privatizer (parameters with its ``target``) is rebuilt
    through its wrapper; a defense that cannot be rebuilt here (registered only in another
    process) is a row "not tested" with the reason, and the others are still audited."""
    points = frame[["defense", "defense_params", "label", "guarantee"]].drop_duplicates(
        ["defense", "defense_params", "label"]
    )
    out = []
    # One fitted defense per (name, parameters but the knob): its levels are with_knob copies,
    # so SAP-CTI's token importances are learned once, not once per level.
    bases: dict[tuple[str, str], Defense] = {}
    for name, params_json, label, stated in points.itertuples(index=False):
        shown_as = str(label) if isinstance(label, str) and label else str(name)
        params = json.loads(params_json) if isinstance(params_json, str) else {}
        try:
            if "target" in params:
                defense: Defense = UserDefense(**params)
                defense.fit([])
            else:
                knob = getattr(DEFENSES.get(str(name)), "knob", None)
                rest = {k: v for k, v in params.items() if k != knob}
                key = (str(name), json.dumps(rest, sort_keys=True, default=str))
                if key not in bases:
                    bases[key] = fitted(build_defense(str(name), params, params.get("backbone")))
                defense = bases[key]
                if knob is not None and knob in params:
                    defense = defense.with_knob(params[knob])
        except (ValueError, TypeError, ImportError) as exc:
            skipped = GuaranteeAudit(
                shown_as,
                None,
                None,
                Guarantee.stated(str(stated)),
                alpha,
                seed,
                note=f"not rebuilt: {exc}",
                skipped=True,
            )
            out.append(skipped)
            continue
        out.append(
            audit_guarantee(
                defense, alpha=alpha, seed=seed, sizes=sizes or QUICK_SIZES, label=shown_as
            )
        )
    return out
