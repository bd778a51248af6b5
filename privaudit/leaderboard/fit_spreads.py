"""The between-fit spreads the board's intervals use: each random fit's declared spread (the
attack's or evaluator's class, :func:`privaudit.registry.attack_fit_sds`), or the spread a run
measured (:mod:`privaudit.audit.fit_noise`, as its upper confidence bound) when that is larger,
and the note that says which."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from privaudit.metrics.stats import FIT_SD_CONFIDENCE
from privaudit.registry import attack_fit_sds, utility_fit_sds

if TYPE_CHECKING:
    import pandas as pd


def declared_sds(
    frame: pd.DataFrame,
    fit_sd: Mapping[str, float] | None,
    utility_fit_sd: float | Mapping[str, float] | None,
) -> tuple[dict[str, float], float | Mapping[str, float], dict[str, float]]:
    """The attacks' and the utility evaluators' between-fit sds: as given, else as their
    classes declare them (:func:`privaudit.registry.attack_fit_sds`, ``utility_fit_sds``);
    then the evaluators' non-zero ones by evaluator."""
    sds = attack_fit_sds(frame["attack"]) if fit_sd is None else dict(fit_sd)
    if utility_fit_sd is None:
        evaluators = frame["utility_evaluator"].dropna() if "utility_evaluator" in frame else []
        utility_fit_sd = utility_fit_sds(evaluators)
    return sds, utility_fit_sd, nonzero_sds(utility_fit_sd)


def with_measured(
    declared: tuple[dict[str, float], float | Mapping[str, float], dict[str, float]],
    measured: Mapping[str, float] | None,
    measured_utility: float | None,
) -> tuple[dict[str, float], float | Mapping[str, float], dict[str, float]]:
    """Each spread as the larger of the declared and the measured one
    (:mod:`privaudit.audit.fit_noise`)."""
    sds, utility_fit_sd, _ = declared
    sds = dict(sds)
    for label, sd in (measured or {}).items():
        sds[label] = max(sds.get(label, 0.0), float(sd))
    if measured_utility is not None:
        if isinstance(utility_fit_sd, Mapping):
            utility_fit_sd = {k: max(v, measured_utility) for k, v in utility_fit_sd.items()}
        else:
            utility_fit_sd = max(float(utility_fit_sd or 0.0), measured_utility)
    return sds, utility_fit_sd, nonzero_sds(utility_fit_sd)


def nonzero_sds(utility_fit_sd: float | Mapping[str, float]) -> dict[str, float]:
    """The utility evaluators' non-zero between-fit sds, by evaluator (one number: ``utility``)."""
    u_sds = (
        dict(utility_fit_sd) if isinstance(utility_fit_sd, Mapping) else {"utility": utility_fit_sd}
    )
    return {e: sd for e, sd in u_sds.items() if sd}


def measured_notes(
    declared: Mapping[str, float],
    declared_utility: Mapping[str, float],
    measured: Mapping[str, float] | None,
    measured_utility: float | None,
) -> list[str]:
    """Which spread each random fit's intervals use: measured in this run, or declared."""
    if not measured and measured_utility is None:
        return []
    parts = []
    for label, sd in sorted((measured or {}).items()):
        was = declared.get(label, 0.0)
        used = "measured used" if sd > was else "declared used"
        parts.append(f"{label} {sd:.3g} measured, {was:.3g} declared ({used})")
    if measured_utility is not None:
        was = max(declared_utility.values(), default=0.0)
        used = "measured used" if measured_utility > was else "declared used"
        parts.append(f"the service {measured_utility:.3g} measured, {was:.3g} declared ({used})")
    return [
        "Fit noise measured in this run (refits at the undefended point; each measured spread "
        f"is the {FIT_SD_CONFIDENCE:.0%} upper confidence bound over its fits, and the larger "
        "of it and the declared between-fit sd enters the intervals): " + "; ".join(parts) + "."
    ]
