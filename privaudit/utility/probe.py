"""Linear-probe utility: frozen backbone features + logistic regression.

Also the result every utility evaluator returns (:func:`classification_result`): the headline
is **balanced accuracy**, the mean recall over the classes of the test labels. Under class
imbalance plain accuracy can sit at or below the majority-class level while the text carries
nothing about the label (a classifier that always answers the majority class scores its
share, 0.887 on one real corpus); balanced accuracy is 1/K for any classifier that ignores the
text, whatever the imbalance, so "better than chance" means the same on every corpus. Plain
accuracy and macro-F1 stay beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from privaudit.api import Defense, Objective, Release, Space, UtilityEvaluator
from privaudit.mechanisms.seeding import draw_seed
from privaudit.models.backbone import backbone
from privaudit.params import PositiveFloat, PositiveInt


class Probe(UtilityEvaluator):
    """Utility as a service would get it from a frozen encoder and a linear classifier.

    The released train split is encoded by the frozen backbone (attention-masked mean of the
    last hidden states; pooled releases are used as they are, token-vector releases are
    mean-pooled), a logistic regression is fitted on those features and the released train
    labels, and balanced accuracy (the headline ``metric``: chance is 1/K however imbalanced
    the labels; see the module docstring), accuracy and macro-F1 are measured on the released
    test split, with the per-document predictions (:func:`classification_result`). A public
    plain-word prefix (RAPT's ``plain_prefix``) is skipped before encoding: it serves
    only RAPT's reconstruction objective, which a frozen encoder does not train. It is the
    cheap stand-in for the papers' service-side fine-tuning (see the peft evaluators).

    A defense's service-side objective (:meth:`~privaudit.api.Defense.training_objective`:
    RAPT's reconstruction, CAPE's adversary) is never trained here: there is no trainable
    layer for it to act on. The result says so (``"objective": "not applied: ..."``), so a
    row is not presented as the defense's full recipe when only its release was measured.
    """

    name: ClassVar[str] = "probe"
    cost_prior: ClassVar[float] = 0.35  # s per 1,000 words (estimate)
    gpu: ClassVar[float] = 0.25  # encodes with the backbone (privaudit.runtime.devices)
    metric: ClassVar[str] = "balanced_accuracy"
    # Deterministic: identical balanced accuracy over rng seeds 1000-1002 at none and t2t
    # eta 100 on the quick corpus (2026-11-26, /work/tools/utility_fit_sd.py); lbfgs does
    # not use its random_state.
    fit_sd: ClassVar[float] = 0.0

    def __init__(
        self, backbone: str | None = None, max_length: PositiveInt = 128, c: PositiveFloat = 1.0
    ) -> None:
        self.backbone = backbone
        self.max_length = max_length
        self.c = c

    def features(self, release: Release) -> np.ndarray:
        if release.kind == "text":
            # RAPT's public plain-word prefix is protocol for a reconstruction head a frozen
            # encoder does not have: the service skips it, as the peft evaluators' pooling does.
            return backbone(self.backbone).pooled(
                release.content_texts(), max_length=self.max_length
            )
        vectors = [np.asarray(v, dtype=np.float32) for v in release.vectors or []]
        if release.space is Space.TOKEN_EMBEDDINGS:
            # The service continues the forward pass from the released input embeddings.
            return backbone(self.backbone).pooled_from_word_embeddings(
                vectors, max_length=self.max_length
            )
        if release.space is Space.HIDDEN_STATES:
            # A split model's hidden states: the service runs the top model from that layer.
            return backbone(self.backbone).pooled_from_layer(vectors, int(release.layer or 0))
        if release.kind == "token_vectors":
            vectors = [np.atleast_2d(v).mean(axis=0) for v in vectors]
        return np.stack(vectors) if vectors else np.zeros((0, 1), dtype=np.float32)

    def evaluate_releases(
        self,
        train: Release,
        train_labels: Sequence[int],
        test: Release,
        test_labels: Sequence[int],
        *,
        rng: np.random.Generator,
        defense: Defense | None = None,
        train_attributes: Mapping[str, Sequence[Any]] | None = None,
    ) -> dict[str, Any]:
        """Fit on ``train``, score on ``test``: :func:`classification_result` (balanced
        accuracy, accuracy, macro-F1, predictions, objective)."""
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        y_train, y_test = np.asarray(train_labels), np.asarray(test_labels)
        if len(y_train) != len(train) or len(y_test) != len(test):
            raise ValueError("Each released document needs exactly one label.")
        if len(np.unique(y_train)) < 2:
            raise ValueError("The probe needs at least two classes in the training labels.")
        seed = draw_seed(rng)
        clf = make_pipeline(
            StandardScaler(),
            LogisticRegression(C=self.c, max_iter=2000, random_state=seed),
        )
        clf.fit(self.features(train), y_train)
        pred = clf.predict(self.features(test))
        return classification_result(y_test, pred, objective_status(defense, self._not_trained))

    @staticmethod
    def _not_trained(objective: Objective) -> str:
        return (
            f"the probe (a logistic regression on frozen features) does not train "
            f"{type(objective).__name__}; use a peft evaluator"
        )


def one_line(text: object) -> str:
    """``text`` on one line (whitespace runs collapsed), for a status string."""
    return " ".join(str(text).split())


def objective_status(defense: Defense | None, reason: Callable[[Objective], str | None]) -> str:
    """``"none"`` when ``defense`` is None or has no service-side objective, ``"applied"``
    when ``reason(objective)`` is None (the evaluator trains it), else ``"not applied: "`` and
    that reason on one line. An objective the defense cannot even build (CAPE asked for an
    attribute its training split lacks) is not applied either, with the error as the reason."""
    if defense is None:
        return "none"
    try:
        objective = defense.training_objective()
    except ValueError as exc:
        return f"not applied: {one_line(exc)}"
    if objective is None:
        return "none"
    why = reason(objective)
    return "applied" if why is None else f"not applied: {one_line(why)}"


def classification_result(
    y_true: Sequence[Any] | np.ndarray,
    y_pred: Sequence[Any] | np.ndarray,
    objective: str,
    test_indices: Sequence[int] | np.ndarray | None = None,
) -> dict[str, Any]:
    """What every utility evaluator returns for predictions ``y_pred`` of the test labels
    ``y_true``: ``balanced_accuracy`` (the headline: mean recall over the classes present in
    ``y_true``, scikit-learn's), ``accuracy``, ``macro_f1`` (``zero_division=0``),
    ``predictions`` (int labels, test order), ``test_indices`` (the test documents they are
    for: all of them, or the first ``max_test`` under a peft profile) and ``objective``
    (``"applied"``, ``"none"`` or ``"not applied: <reason>"``)."""
    import warnings

    from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score

    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(f"{len(y_pred)} predictions for {len(y_true)} test labels.")
    docs = np.arange(len(y_true)) if test_indices is None else np.asarray(test_indices)
    with warnings.catch_warnings():
        # A class the model predicts but the (small) test split lacks: not an error here.
        warnings.filterwarnings("ignore", message=".*y_pred contains classes not in y_true.*")
        balanced = balanced_accuracy_score(y_true, y_pred)
    return {
        "balanced_accuracy": float(balanced),
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "macro_f1": float(f1_score(y_true, y_pred, average="macro", zero_division=0)),
        "predictions": [int(p) for p in y_pred],
        "test_indices": [int(i) for i in docs],
        "objective": objective,
    }
