"""The attribute metric: ``attribute_accuracy`` (attribute inference), one row per private
attribute, each its own family ``attribute[<name>]``.

Per-document statistics: per class (correct, count) → balanced accuracy over the victims
whose value is known (chance 1/K under any imbalance); baseline: the aux majority guessed for
everyone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from privaudit.api import Predictions, Release
from privaudit.metrics.linked import mode, person_rows
from privaudit.metrics.outcomes import Outcome
from privaudit.metrics.spec import Baseline, MetricSpec
from privaudit.metrics.truth import NotScorable, Truth


def score_attributes(
    truth: Mapping[str, Sequence[Any]], predictions: Predictions
) -> dict[str, dict[str, float]]:
    """Per attribute in ``truth``: ``balanced_accuracy`` (the mean recall over the classes
    present among the victims: the headline, meaningful under class imbalance),
    ``accuracy``, ``macro_f1``, ``majority_balanced_accuracy`` and ``majority_accuracy``
    (always guessing the aux majority recorded in ``predictions.meta``) and ``advantage``
    (accuracy - majority_accuracy). Victims whose true value is unknown (``None``) are left
    out; an attribute with no known value scores NaN throughout."""
    scores: dict[str, dict[str, float]] = {}
    for name, s in _attribute_outcomes(truth, predictions, np.arange(_n_victims(truth))).items():
        if s is None:
            nan = float("nan")
            scores[name] = dict(
                balanced_accuracy=nan,
                accuracy=nan,
                macro_f1=nan,
                majority_balanced_accuracy=nan,
                majority_accuracy=nan,
                advantage=nan,
            )
            continue
        scores[name] = {
            "balanced_accuracy": s["outcome"].value(),
            "accuracy": s["accuracy"],
            "macro_f1": s["macro_f1"],
            "majority_balanced_accuracy": s["baseline"].value()
            if s["baseline"] is not None
            else float("nan"),
            "majority_accuracy": s["majority_accuracy"],
            "advantage": s["accuracy"] - s["majority_accuracy"],
        }
    return scores


def _n_victims(truth: Mapping[str, Sequence[Any]]) -> int:
    return max((len(v) for v in truth.values()), default=0)


def _attribute_outcomes(
    truth: Mapping[str, Sequence[Any]], predictions: Predictions, docs: np.ndarray
) -> dict[str, dict[str, Any] | None]:
    """Per attribute: the balanced-accuracy outcome of the predictions and of the majority
    guess over the victims with a known value (``docs`` their test indices), plain and
    majority accuracy and macro-F1; None when no victim's value is known."""
    from sklearn.metrics import f1_score

    if predictions.kind != "attributes" or predictions.attributes is None:
        raise ValueError(f"Attribute predictions expected, got {predictions.kind!r} predictions.")
    majority = dict(predictions.meta.get("majority", {}))
    out: dict[str, dict[str, Any] | None] = {}
    for name, true_values in truth.items():
        if name not in predictions.attributes:
            raise ValueError(
                f"The attack predicted {sorted(predictions.attributes)} but not {name!r}."
            )
        guess = list(predictions.attributes[name])
        true_values = list(true_values)
        if len(guess) != len(true_values):
            raise ValueError(
                f"The attack returned {len(guess)} {name!r} predictions for "
                f"{len(true_values)} victims."
            )
        known = [d for d, t in enumerate(true_values) if t is not None]
        if not known:
            out[name] = None
            continue
        y_true = [str(true_values[d]) for d in known]
        y_pred = [str(guess[d]) for d in known]
        where = [int(docs[d]) for d in known]
        baseline = None
        majority_accuracy = float("nan")
        if name in majority:
            always = [str(majority[name])] * len(y_true)
            baseline = Outcome.classes(y_true, always, "balanced_accuracy", docs=where)
            majority_accuracy = float(
                np.mean([t == g for t, g in zip(y_true, always, strict=True)])
            )
        out[name] = {
            "outcome": Outcome.classes(y_true, y_pred, "balanced_accuracy", docs=where),
            "baseline": baseline,
            "accuracy": float(np.mean([t == g for t, g in zip(y_true, y_pred, strict=True)])),
            "macro_f1": float(f1_score(y_true, y_pred, average="macro", zero_division=0)),
            "majority_accuracy": majority_accuracy,
            "n_known": len(known),
        }
    return out


def _score_attribute_accuracy(
    spec: MetricSpec,
    predictions: Predictions,
    truth: Truth,
    details: dict[str, Any],
    release: Release | None,
) -> list[dict[str, Any]]:
    wanted = {k: v for k, v in truth.attributes.items() if k in (predictions.attributes or {})}
    outcomes = _attribute_outcomes(wanted, predictions, truth.doc_indices())
    return _attribute_rows(spec, outcomes, details)


def _attribute_rows(
    spec: MetricSpec, outcomes: dict[str, dict[str, Any] | None], details: dict[str, Any]
) -> list[dict[str, Any]]:
    """One scored row per attribute (n/a where no victim's value is known)."""
    rows: list[dict[str, Any]] = []
    unknown: list[str] = []
    for name, s in outcomes.items():
        family = spec.family_of(name)
        if s is None:
            reason = f"no victim's {name!r} is known: attribute inference has no truth to score"
            unknown.append(name)
            rows.append({"target": name, "family": family, "status": "n/a", "reason": reason})
            continue
        plain = {"accuracy": s["accuracy"], "majority_accuracy": s["majority_accuracy"]}
        row = spec.row(s["outcome"], details | plain, s["baseline"], target=name)
        row["attack_macro_f1"] = s["macro_f1"]
        rows.append(row)
    if rows and len(unknown) == len(rows):
        names = ", ".join(repr(n) for n in unknown)
        raise NotScorable(f"no victim's {names} is known: attribute inference has no truth")
    return rows


ATTRIBUTE_ACCURACY = MetricSpec(
    name="attribute_accuracy",
    family="attribute",
    higher_is_stronger=True,
    prediction_kind="attributes",
    needs=("attributes",),
    reducer="balanced_accuracy",
    scorer=_score_attribute_accuracy,
    baseline=Baseline("majority-guess attacker"),
    description="balanced accuracy of the inferred private attribute (chance 1/K)",
)


def _score_person_attribute_accuracy(
    spec: MetricSpec,
    predictions: Predictions,
    truth: Truth,
    details: dict[str, Any],
    release: Release | None,
) -> list[dict[str, Any]]:
    """Each person scored once: the person's value (their documents' most frequent known
    value) against the attack's prediction for the person (its most frequent over their
    documents), the outcome row standing at the person's first document, which carries the
    person's multiplicity under the run's bootstrap (:mod:`privaudit.metrics.units`)."""
    attributes = predictions.attributes or {}
    docs = truth.doc_indices()
    n = len(docs)
    for name, guess in attributes.items():
        if len(guess) != n:
            raise ValueError(
                f"The attack returned {len(guess)} {name!r} predictions for {n} victims."
            )
    groups = person_rows(truth.get("person"), n)
    first = np.asarray([g[0] for g in groups], dtype=np.int64)
    wanted = {
        k: [mode([v[i] for i in g]) for g in groups]
        for k, v in truth.attributes.items()
        if k in attributes
    }
    pooled = Predictions(
        "attributes",
        attributes={k: [mode([v[i] for i in g]) for g in groups] for k, v in attributes.items()},
        meta=dict(predictions.meta),
    )
    outcomes = _attribute_outcomes(wanted, pooled, docs[first] if n else docs)
    return _attribute_rows(spec, outcomes, details | {"n_people": len(groups)})


PERSON_ATTRIBUTE_ACCURACY = MetricSpec(
    name="person_attribute_accuracy",
    family="attribute",
    higher_is_stronger=True,
    prediction_kind="attributes",
    needs=("attributes", "person"),
    reducer="balanced_accuracy",
    scorer=_score_person_attribute_accuracy,
    baseline=Baseline("majority-guess attacker"),
    description="balanced accuracy of a person's inferred private attribute, each person once "
    "(chance 1/K)",
)
