"""What every utility evaluator returns: balanced accuracy as the headline (item 6b), the
per-document predictions behind it (item 1), and whether the defense's service-side objective
was trained (item 6d)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from privaudit.api import Release
from privaudit.defenses.cape import CAPE
from privaudit.defenses.none import NoDefense
from privaudit.metrics.outcomes import Outcome
from privaudit.registry import UTILITY
from privaudit.utility.peft_tuning import PeftUtility
from privaudit.utility.probe import Probe, classification_result
from tests.conftest import TINY


def _no_signal(
    n: int, shares: Sequence[float], seed: int, dim: int = 4
) -> tuple[Release, np.ndarray]:
    """Pooled vectors of pure noise and labels drawn with ``shares``: the release carries
    nothing about the label."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    labels = rng.choice(len(shares), size=n, p=list(shares))
    return Release("pooled_vectors", vectors=list(vectors)), labels


def test_every_evaluator_declares_balanced_accuracy_as_its_headline() -> None:
    for name in UTILITY.names():
        assert UTILITY.get(name).metric == "balanced_accuracy", name


def test_probe_on_an_imbalanced_label_the_text_does_not_predict() -> None:
    """Before: the headline was accuracy, 0.85 here — a number that looks like utility but is
    the majority share. After: balanced accuracy says chance (0.5), accuracy stays beside it."""
    train, y_train = _no_signal(600, [0.85, 0.15], seed=0)
    test, y_test = _no_signal(400, [0.85, 0.15], seed=1)
    result = Probe().evaluate_releases(train, y_train, test, y_test, rng=np.random.default_rng(0))
    majority = float(np.mean(y_test == 0))
    assert 0.8 < majority < 0.9
    assert result["accuracy"] >= majority - 0.03  # at (or near) the majority level ...
    assert abs(result["balanced_accuracy"] - 0.5) < 0.05  # ... and at chance, as it should be
    assert Probe.metric == "balanced_accuracy"


def test_balanced_accuracy_chance_is_one_over_k_whatever_the_imbalance() -> None:
    train, y_train = _no_signal(900, [0.7, 0.2, 0.1], seed=2)
    test, y_test = _no_signal(600, [0.7, 0.2, 0.1], seed=3)
    result = Probe().evaluate_releases(train, y_train, test, y_test, rng=np.random.default_rng(0))
    assert abs(result["balanced_accuracy"] - 1 / 3) < 0.05
    assert result["accuracy"] > 0.6


def test_predictions_are_one_int_per_test_document_and_give_the_scores() -> None:
    train, y_train = _no_signal(200, [0.6, 0.4], seed=4)
    test, y_test = _no_signal(70, [0.6, 0.4], seed=5)
    result = Probe().evaluate_releases(train, y_train, test, y_test, rng=np.random.default_rng(0))
    pred = result["predictions"]
    assert len(pred) == len(test) and all(type(p) is int for p in pred)
    assert result["test_indices"] == list(range(len(test)))
    assert result["accuracy"] == pytest.approx(np.mean(np.asarray(pred) == y_test))
    # The stored predictions recompute the headline exactly (what the bootstrap resamples).
    outcome = Outcome.classes(y_test, pred, "balanced_accuracy", docs=result["test_indices"])
    assert outcome.value() == pytest.approx(result["balanced_accuracy"], abs=1e-12)
    macro = Outcome.classes(y_test, pred, "macro_f1")
    assert macro.value() == pytest.approx(result["macro_f1"], abs=1e-12)


def test_classification_result_checks_lengths_and_tolerates_a_missing_class() -> None:
    with pytest.raises(ValueError, match="3 predictions for 2 test labels"):
        classification_result([0, 1], [0, 1, 1], "none")
    # A class predicted but absent from the test labels: scored, no warning, no error.
    result = classification_result([0, 0, 0], [0, 1, 0], "none")
    assert result["balanced_accuracy"] == pytest.approx(2 / 3)
    assert result["predictions"] == [0, 1, 0] and result["objective"] == "none"


# --- the objective label (item 6d) ------------------------------------------------------------


class _Objective:
    """A stand-in objective that trains on pooled vectors only (never trained here)."""

    def applies_to(self, release: Release) -> str | None:
        return None if release.kind == "pooled_vectors" else "pooled vectors only,\nsorry"

    def targets(
        self, release: Release, rows: Sequence[int], attributes: Mapping[str, Sequence[Any]]
    ) -> list[Any]:
        return [0 for _ in rows]

    def head(self, hidden_size: int, targets: Sequence[Any]) -> Any:
        raise AssertionError("not trained in these tests")

    def loss(self, batch: Any, head: Any) -> Any:
        raise AssertionError("not trained in these tests")


class _WithObjective(NoDefense):
    def training_objective(self) -> Any:
        return _Objective()


def test_probe_says_whether_the_defense_objective_was_applied() -> None:
    train, y_train = _no_signal(120, [0.5, 0.5], seed=6)
    test, y_test = _no_signal(40, [0.5, 0.5], seed=7)
    probe = Probe()

    def status(defense: Any) -> str:
        result = probe.evaluate_releases(
            train, y_train, test, y_test, rng=np.random.default_rng(0), defense=defense
        )
        return str(result["objective"])

    assert status(None) == "none"
    assert status(NoDefense()) == "none"
    # The probe trains no objective, even one that would apply to this release.
    assert status(_WithObjective()) == (
        "not applied: the probe (a logistic regression on frozen features) does not train "
        "_Objective; use a peft evaluator"
    )
    cape = status(CAPE(backbone=TINY, epsilon=10.0))
    assert cape.startswith("not applied: ") and "AdversarialObjective" in cape
    # A CAPE whose attribute the training split lacks: still labelled, on one line.
    broken = CAPE(backbone=TINY, attribute="age")
    broken._attributes = ["gender"]
    label = status(broken)
    assert label.startswith("not applied: ") and "'age'" in label and "\n" not in label


def test_probe_labels_cape_end_to_end(tiny) -> None:
    texts = [f"review number {i} {'good' if i % 2 else 'bad'}" for i in range(40)]
    labels = [i % 2 for i in range(40)]
    result = Probe(backbone=TINY).evaluate(
        CAPE(backbone=TINY, epsilon=10.0),
        texts[:30],
        labels[:30],
        texts[30:],
        labels[30:],
        rng=np.random.default_rng(0),
    )
    assert result["objective"].startswith("not applied: ")
    assert len(result["predictions"]) == 10


def test_peft_objective_status_without_training() -> None:
    pooled = Release("pooled_vectors", vectors=[np.zeros(4, np.float32)])
    text = Release("text", texts=["a review"])
    on, off = PeftUtility(method="lora"), PeftUtility(method="lora", use_objective=False)
    assert on._objective(None, pooled) == (None, "none")
    assert on._objective(NoDefense(), pooled) == (None, "none")
    objective, status = on._objective(CAPE(backbone=TINY), pooled)
    assert status == "applied" and type(objective).__name__ == "AdversarialObjective"
    assert on._objective(CAPE(backbone=TINY), text) == (
        None,
        "not applied: CAPE's adversary trains beside a head on pooled-vector releases",
    )
    assert on._objective(_WithObjective(), text) == (
        None,
        "not applied: pooled vectors only, sorry",
    )
    assert off._objective(CAPE(backbone=TINY), pooled) == (
        None,
        "not applied: use_objective=False",
    )
    assert off._objective(NoDefense(), pooled) == (None, "none")


def test_peft_head_on_pooled_vectors_reports_the_same_result() -> None:
    """The peft trainers share the probe's result (a head on pooled vectors is cheap to
    train); with ``max_test`` the predictions cover the first test documents."""
    train, y_train = _no_signal(300, [0.85, 0.15], seed=8)
    test, y_test = _no_signal(200, [0.85, 0.15], seed=9)
    util = UTILITY.get("lora")(backbone=TINY, epochs=1, max_test=120, progress=False)
    result = util.evaluate_releases(train, y_train, test, y_test, rng=np.random.default_rng(0))
    assert result["test_indices"] == list(range(120)) and len(result["predictions"]) == 120
    assert result["objective"] == "none"
    expected = classification_result(y_test[:120], result["predictions"], "none")
    assert {k: result[k] for k in expected} == expected
    assert abs(result["balanced_accuracy"] - 0.5) < 0.1
