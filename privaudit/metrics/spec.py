"""Metrics and attack families as declared objects: one :class:`MetricSpec` per metric, one
:class:`FamilySpec` per family, each registered once.

An attack names its ``metric``; the registry resolves it when the attack is registered
(:func:`metric_spec`; an unknown name fails there, listing the known ones). Everything
downstream — the scorers' rows, normalised and worst-case privacy, the Pareto plots, the
leaderboard — reads the declaration (its direction, boundedness, family, baseline and its
label) and never compares metric names. A new metric is one module that builds a spec and
calls :func:`register_metric`, as lm-evaluation-harness registers a metric with
``higher_is_better`` and its aggregation.

**Direction.** ``higher_is_stronger`` says whether a higher score means a stronger attack
(recovery, accuracy, F1) or a weaker one (an error such as the embedding MSE). Empirical
privacy follows from it: ``1 − score`` for the first, the score itself for the second
(:meth:`MetricSpec.privacy`). A ``bounded`` metric scores in [0, 1]; an unbounded one (an
error) has no perfect privacy, so plots start its axis at 0 and the per-attack view scales it
by the largest value seen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.metrics.outcomes import REDUCERS
from privaudit.records import prediction_kinds, register_once, truth_fields

if TYPE_CHECKING:
    from privaudit.api import Predictions, Release
    from privaudit.metrics.outcomes import Outcome
    from privaudit.metrics.truth import Truth

#: A prediction kind's name: one declared in :mod:`privaudit.records` (as the truth fields a
#: metric may need are), so a new family adds both there, not here.
PredictionKind = str

#: A scorer: (its spec, predictions, truth of the attacked victims, details so far, the public
#: release when it lines up with that truth, else None) → one scored row per target (see
#: :func:`privaudit.metrics.scoring.score_predictions`); raises
#: :class:`~privaudit.metrics.truth.NotScorable` when the truth cannot judge it.
Scorer = Callable[
    ["MetricSpec", "Predictions", "Truth", dict[str, Any], "Release | None"], list[dict[str, Any]]
]


@dataclass(frozen=True)
class FamilySpec:
    """An attack family: attacks that recover the same kind of secret, over which a defense
    point's worst-case privacy is taken. ``per_target``: one family per target of a row
    (attribute inference: ``attribute[<name>]``)."""

    name: str
    description: str
    per_target: bool = False

    def of(self, target: str = "") -> str:
        """The family name of a row for ``target``."""
        if self.per_target:
            return f"{self.name}[{target}]" if target else self.name
        return self.name


@dataclass(frozen=True)
class Baseline:
    """The no-information baseline a metric's scorer reports: what an attacker gets without
    the release (``label``, as plots and tables name it). ``per_point``: it depends on the
    defense point (HaS's anonymized text taken as it is), so plots draw it per point rather
    than as one line."""

    label: str
    per_point: bool = False


#: Reducers whose headline is not what a metric's name says (a class-balanced score): axes
#: and columns name the reducer (see :attr:`MetricSpec.display`).
SCORED_AS: Mapping[str, str] = {"balanced_accuracy": "balanced accuracy", "macro_f1": "macro-F1"}


@dataclass(frozen=True)
class MetricSpec:
    """One metric, declared once (see the module docstring).

    ``name``: the key attacks use. ``family``: a registered :class:`FamilySpec` name.
    ``higher_is_stronger``: the direction. ``prediction_kind``: the
    :class:`~privaudit.api.Predictions` kind its scorer reads. ``needs``: the truth fields it
    reads. ``reducer``: the per-document :class:`~privaudit.metrics.outcomes.Outcome` reducer
    of its headline. ``baseline``: its no-information baseline, or None. ``scorer``: predictions
    → rows. ``bounded``: scores in [0, 1]. ``display``: how axes, columns and notes name
    what is scored: by default the reducer where it is not the plain one its name implies
    (:data:`SCORED_AS`: ``attribute_accuracy`` is balanced accuracy), else the name.
    ``target_families``: rows of a target that belong to another family (the
    ``entities`` rows of bow-inversion and geia are entity recovery).
    """

    name: str
    family: str
    higher_is_stronger: bool
    prediction_kind: PredictionKind
    needs: tuple[str, ...]
    reducer: str
    scorer: Scorer
    baseline: Baseline | None = None
    bounded: bool = True
    display: str = ""
    description: str = ""
    target_families: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        known = truth_fields()
        unknown = set(self.needs) - set(known)
        if unknown:
            raise ValueError(
                f"Metric {self.name!r} needs unknown truth fields {sorted(unknown)}; the truth "
                f"holds {', '.join(sorted(known))} (privaudit.records.register_truth_field "
                "adds one)."
            )
        if self.prediction_kind not in prediction_kinds():
            raise ValueError(
                f"Metric {self.name!r} scores unknown {self.prediction_kind!r} predictions; "
                f"the kinds are {', '.join(prediction_kinds())} "
                "(privaudit.records.register_prediction_kind adds one)."
            )
        if self.reducer not in REDUCERS:
            raise ValueError(
                f"Metric {self.name!r} has reducer {self.reducer!r}; use one of {REDUCERS}."
            )
        if not self.display:
            object.__setattr__(self, "display", SCORED_AS.get(self.reducer, self.name))

    # -- what follows from the direction ----------------------------------------------------

    def privacy(self, score: Any) -> Any:
        """Empirical privacy of a score (scalar or array): ``1 − score`` when a higher score
        is a stronger attack, the score itself (an error) otherwise."""
        return 1.0 - score if self.higher_is_stronger else score

    @property
    def perfect(self) -> float:
        """The score of an attacker that recovers everything (1; an error's 0)."""
        return 1.0 if self.higher_is_stronger else 0.0

    @property
    def null_score(self) -> float:
        """The score of an attacker that recovers nothing, taken as the baseline when a row
        declares none: 0 for a success score, 1 for a bounded error, undefined (NaN) for an
        unbounded one."""
        if self.higher_is_stronger:
            return 0.0
        return 1.0 if self.bounded else float("nan")

    @property
    def sign(self) -> float:
        """+1 when a higher score is a stronger attack, −1 otherwise (advantages in one
        direction: ``sign · (score − baseline)`` > 0 means the attack learned something)."""
        return 1.0 if self.higher_is_stronger else -1.0

    @property
    def privacy_label(self) -> str:
        """The privacy axis's unit: ``1 − <what is scored>`` or the error's name."""
        return f"1 − {self.display}" if self.higher_is_stronger else self.display

    def family_of(self, target: str = "") -> str:
        """The family of this metric's row for ``target``."""
        family = families()[self.target_families.get(target, self.family)]
        return family.of(target) if target not in self.target_families else family.of()

    def score(
        self,
        predictions: Predictions,
        truth: Truth,
        details: dict[str, Any],
        release: Release | None,
    ) -> list[dict[str, Any]]:
        """Scored rows (see :data:`Scorer`), after checking the predictions' kind."""
        if predictions.kind != self.prediction_kind:
            raise ValueError(
                f"Metric {self.name!r} scores {self.prediction_kind!r} predictions, got "
                f"{predictions.kind!r} ones."
            )
        return self.scorer(self, predictions, truth, details, release)

    def row(
        self,
        outcome: Outcome,
        details: dict[str, Any],
        baseline: Outcome | None = None,
        *,
        target: str = "",
    ) -> dict[str, Any]:
        """A scored row from its outcome: the score is the outcome's value, its privacy by
        the direction (:meth:`privacy`), its family by :meth:`family_of`; the baseline is
        kept when it is defined."""
        score = outcome.value()
        row: dict[str, Any] = {
            "target": target,
            "family": self.family_of(target),
            "attack_score": score,
            "empirical_privacy": self.privacy(score),
            "attack_details": details,
            "outcome": outcome,
            "baseline_outcome": None,
        }
        if baseline is not None:
            value = baseline.value()
            if np.isfinite(value):
                row["attack_baseline"] = value
                row["baseline_outcome"] = baseline
        return row


# -------------------------------------------------------------------------------------------
# The registries
# -------------------------------------------------------------------------------------------

_METRICS: dict[str, MetricSpec] = {}
_FAMILIES: dict[str, FamilySpec] = {}


def register_family(spec: FamilySpec) -> FamilySpec:
    """Register a family (once; the same object again is a no-op)."""
    return register_once(_FAMILIES, spec, "family")


def register_metric(spec: MetricSpec) -> MetricSpec:
    """Register a metric (once; the same object again is a no-op). Its family must be
    registered."""
    if spec.family not in _FAMILIES:
        raise ValueError(
            f"Metric {spec.name!r} names the unknown family {spec.family!r}; the families are "
            f"{', '.join(_FAMILIES)} (register_family adds one)."
        )
    return register_once(_METRICS, spec, "metric")


def unregister_metric(name: str) -> None:
    """Forget a metric (tests that add one and take it away again)."""
    _METRICS.pop(name, None)


def metric_spec(name: str) -> MetricSpec:
    """The declared metric ``name``; an unknown name is a ``ValueError`` listing the known."""
    if not isinstance(name, str):
        raise TypeError(f"A metric name must be a string, got {type(name).__name__}.")
    spec = _METRICS.get(name)
    if spec is None:
        raise ValueError(
            f"Unknown metric {name!r}; the known metrics are {', '.join(_METRICS)} "
            "(privaudit.metrics.register_metric adds one)."
        )
    return spec


def find_metric(name: Any) -> MetricSpec | None:
    """The declared metric ``name``, or None when no such metric is registered (a row of an
    older run, an empty table)."""
    return _METRICS.get(str(name))


def metrics() -> dict[str, MetricSpec]:
    """Every registered metric, by name."""
    return dict(_METRICS)


def families() -> dict[str, FamilySpec]:
    """Every registered family, by name."""
    return dict(_FAMILIES)


def family_of(metric: str, target: str = "") -> str:
    """The attack family of a row of ``metric`` for ``target`` (``attribute[<target>]`` for an
    attribute row, ``attribute`` when the attribute is not known, e.g. an inapplicable cell)."""
    return metric_spec(metric).family_of(target)
