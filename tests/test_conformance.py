"""Conformance suites over every built-in, the way scikit-learn's ``parametrize_with_checks``
runs ``check_estimator`` over its estimators.

- Defenses: the checks ``privaudit audit`` runs on a user's privatizer
  (:func:`privaudit.audit.plugin.conformance`), over every built-in defense (each of its
  variants), built and fitted as the attack matrix builds them.
- Attacks: the same rng seed gives the same predictions, and the predictions are of the kind
  the attack's metric scores (:func:`privaudit.metrics.metric_spec`).

A check that does not apply to a built-in is declared below with its reason (as scikit-learn
declares an estimator's tags), never skipped silently.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from privaudit.api import Predictions, Release
from privaudit.audit.cells import Context
from privaudit.audit.plugin import CHANGES_TEXT, Check, conformance
from privaudit.metrics import metric_spec
from privaudit.registry import ATTACKS, DEFENSES, build_component
from tests.conftest import TINY
from tests.test_attack_matrix import (
    attack_cell,
    builtin_defenses,
    matrix_context,
    matrix_defenses,
    runs_on,
)

# -------------------------------------------------------------------------------------------
# Defenses
# -------------------------------------------------------------------------------------------

#: Every check :func:`conformance` runs on a privatizer whose release is text.
TEXT_CHECKS = [
    "one output per input",
    "deterministic for a seed",
    CHANGES_TEXT,
    "empty text",
    "non-ASCII text",
    "speed",
]
#: Checks a built-in fails or warns on by design: (defense label, check) → (status, reason).
EXPECTED: dict[tuple[str, str], tuple[str, str]] = {
    ("none", CHANGES_TEXT): (
        "WARN",
        "the undefended baseline releases the text unchanged: that is its job",
    ),
}
#: Checks that do not apply to a release kind, and why.
NOT_APPLICABLE: dict[str, dict[str, str]] = {
    kind: {CHANGES_TEXT: "compares released words with the input's: a text release's check"}
    for kind in ("token_vectors", "hidden_states", "pooled_vectors")
}
BUILTIN_DEFENSES = builtin_defenses()  # each variant of each, as the attack matrix runs them


@pytest.fixture(scope="module")
def context() -> Context:
    return matrix_context()


def test_every_builtin_defense_is_checked() -> None:
    assert {d["name"] for d in BUILTIN_DEFENSES} == set(DEFENSES.builtins())
    labels = {d["label"] for d in BUILTIN_DEFENSES}
    assert {label for label, _ in EXPECTED} <= labels  # no stale exception


def _status(check: Check) -> str:
    return "FAIL" if not check.passed else "WARN" if check.warn else "pass"


@pytest.mark.parametrize("spec", BUILTIN_DEFENSES, ids=lambda d: d["label"])
def test_defense_conformance(spec: dict, context: Context) -> None:
    index = [d["label"] for d in matrix_defenses()].index(spec["label"])
    defense = context.base(index)  # built with the tiny backbone, fitted on the train split
    kind = defense.privatize(["A short text."], rng=np.random.default_rng(0)).kind
    checks = {c.name: c for c in conformance(defense)}
    expected = [c for c in TEXT_CHECKS if c not in NOT_APPLICABLE.get(kind, {})]
    assert list(checks) == expected, f"{spec['label']} ({kind} release) ran {list(checks)}"
    for name, check in checks.items():
        status, reason = EXPECTED.get((spec["label"], name), ("pass", ""))
        assert _status(check) == status, f"{spec['label']}: {check.line()} ({reason})"


def test_conformance_checks_can_fail() -> None:
    """The suite above is not vacuous: a privatizer drawing from a global RNG, or returning
    one output too few, fails its check."""

    class GlobalRandom(DEFENSES.get("none")):
        def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
            release = super().privatize(texts, rng=rng)
            release.texts = [f"{t} {np.random.random()}" for t in release.texts]
            return release

    checks = {c.name: c for c in conformance(build_component(DEFENSES, "none", {}, TINY, "x"))}
    assert checks["deterministic for a seed"].passed
    checks = {c.name: c for c in conformance(GlobalRandom())}
    assert not checks["deterministic for a seed"].passed


# -------------------------------------------------------------------------------------------
# Attacks
# -------------------------------------------------------------------------------------------

FIELDS = ("kind", "tokens", "attributes", "entities", "texts", "vectors", "meta")
#: Meta entries that may differ between two fits with one seed, and why.
UNSEEDED_META: dict[tuple[str, ...], str] = {
    ("seconds",): "wall-clock time the attack took (ner, has-deanonymization): not a prediction",
    ("settings", "attack_seconds"): "wall-clock time (optimization-inversion): not a prediction",
}


def _seeded(p: Predictions) -> Predictions:
    """``p`` without its :data:`UNSEEDED_META` entries."""
    meta = copy.deepcopy(p.meta)
    for *path, key in UNSEEDED_META:
        functools.reduce(lambda d, k: d.get(k, {}), path, meta).pop(key, None)
    return dataclasses.replace(p, meta=meta)


def _same(a: object, b: object) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, type(a)) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
        return True
    return a == b


@pytest.fixture(scope="module")
def fitted(context: Context) -> Callable[[str, int, int], Predictions]:
    """Predictions of a fresh instance of ``attack`` (its ``test_params``), fitted with the
    rng seed ``seed`` on the matrix defense it must run on; ``fit`` tells apart two fits."""

    @functools.cache
    def run(attack: str, seed: int, fit: int) -> Predictions:
        cls = ATTACKS.get(attack)
        if cls.needs_knowledge:  # e.g. background documents: the matrix corpus has none
            pytest.skip(f"{attack} needs {sorted(cls.needs_knowledge)}; tested on synthpai")
        instance = build_component(ATTACKS, attack, dict(cls.test_params), TINY, attack)
        return attack_cell(context, runs_on(attack), instance, seed)

    return run


@pytest.mark.parametrize("attack", ATTACKS.builtins())
def test_same_seed_same_predictions(attack: str, fitted) -> None:
    a, b = _seeded(fitted(attack, 0, 0)), _seeded(fitted(attack, 0, 1))
    different = [f for f in FIELDS if not _same(getattr(a, f), getattr(b, f))]
    assert not different, f"{attack}: two fits with default_rng(0) differ in {different}"


@pytest.mark.parametrize(
    "attack", [a for a in ATTACKS.builtins() if float(ATTACKS.get(a).fit_sd or 0.0) == 0.0]
)
def test_a_declared_fit_sd_of_zero_is_a_deterministic_fit(attack: str, context) -> None:
    """An attack that declares no between-fit spread must fit the same whatever its rng
    (issue 47): otherwise its refit noise would be left out of every interval."""
    cls = ATTACKS.get(attack)
    if cls.needs_knowledge:
        pytest.skip(f"{attack} needs {sorted(cls.needs_knowledge)}; tested on synthpai")
    fits = []
    for fit_seed in (0, 1):
        instance = build_component(ATTACKS, attack, dict(cls.test_params), TINY, attack)
        fits.append(_seeded(attack_cell(context, runs_on(attack), instance, 0, fit_seed)))
    a, b = fits
    different = [f for f in FIELDS if not _same(getattr(a, f), getattr(b, f))]
    assert not different, f"{attack} declares fit_sd 0 but two rngs fit differently: {different}"


@pytest.mark.parametrize("attack", ATTACKS.builtins())
def test_prediction_kind_matches_the_metric(attack: str, fitted) -> None:
    cls = ATTACKS.get(attack)
    predictions = fitted(attack, 0, 0)
    assert predictions.kind == metric_spec(cls.metric).prediction_kind, (attack, cls.metric)
    assert getattr(predictions, predictions.kind) is not None  # the field its kind names
