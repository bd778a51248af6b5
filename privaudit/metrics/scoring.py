"""Scoring attack predictions against the truth the runner holds.

Every attack declares a ``metric``, a registered :class:`~privaudit.metrics.spec.MetricSpec`
whose scorer turns predictions into rows; this module is the one entry point the runner calls
(:func:`score_predictions`): it cuts the truth to what the release holds and to the victims an
attack ran on (:mod:`privaudit.metrics.truth`), then hands over to the metric's scorer.

**Per-document outcomes.** Every scored row carries, beside its ``attack_score``, an
``outcome`` (:class:`privaudit.metrics.outcomes.Outcome`): the per-victim statistics the score
is a function of, indexed by the victims' positions in the test split, so that the bootstrap
(and any later statistic) needs no re-run. ``outcome.value()`` *is* the score: every scorer
computes its headline from the outcome it returns. The no-information baseline, where a
metric has one, is an outcome too (``baseline_outcome``, its value ``attack_baseline``), over
the same victims. Each row's ``empirical_privacy`` follows from the metric's direction, and its
``family`` from the metric's declaration (:meth:`MetricSpec.family_of`).
"""

from __future__ import annotations

from typing import Any

from privaudit.api import Predictions, Release
from privaudit.metrics.spec import metric_spec
from privaudit.metrics.truth import Truth, released_token_counts


def score_predictions(
    predictions: Predictions,
    truth: Truth,
    metric: str,
    release: Release | None = None,
) -> list[dict[str, Any]]:
    """One scored row per target: ``target`` ("", an attribute, or ``"entities"`` for
    bow-inversion's and geia's entity recovery), ``family`` (see the module docstring),
    ``attack_score``, ``empirical_privacy``, ``outcome`` (an :class:`Outcome` whose value is
    ``attack_score``), ``baseline_outcome`` (an :class:`Outcome` whose value is
    ``attack_baseline``, or None), ``attack_details`` (a dict of secondary measures) and,
    where defined, ``attack_baseline`` and ``attack_macro_f1``. An attribute whose victims'
    values are all unknown gets a row with ``status: "n/a"`` and a ``reason`` instead (when
    every attribute is so, :class:`NotScorable` is raised).

    ``metric`` is the attack's declared metric (a registered :class:`MetricSpec`); ``release`` the
    public release it read, one document per victim: a ``token_vectors`` release cuts each
    victim's truth to the part it holds (module docstring), and a text release gives
    baselines such as the similarity of the anonymized text itself. Predictions for a subset
    (``meta["doc_indices"]``) are scored against those victims, whose test indices become the
    outcomes' documents. Raises :class:`NotScorable` when the truth cannot judge the metric.
    """
    spec = metric_spec(metric)
    details: dict[str, Any] = {}
    keep = None  # per victim, the truth tokens a truncating release holds
    if (
        release is not None
        and release.kind == "token_vectors"
        and len(release) == len(truth.tokens)
    ):
        keep = released_token_counts(truth, release)
    indices = predictions.meta.get("doc_indices")
    if indices is not None:
        truth = truth.subset(indices)
        keep = None if keep is None else [keep[int(i)] for i in indices]
        details["n_attacked"] = len(indices)
    if keep is not None:
        truth, cut_tokens, cut_docs = truth.cut(keep)
        if cut_tokens:
            details |= {"truncated_tokens": cut_tokens, "truncated_documents": cut_docs}
    if "settings" in predictions.meta:
        details["settings"] = predictions.meta["settings"]
    # The release lines up with the truth only when every victim was attacked.
    return spec.score(predictions, truth, details, release if indices is None else None)
