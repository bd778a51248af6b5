"""Linear-probe utility: frozen backbone features + logistic regression."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from privaudit.api import Defense, Release, Space, UtilityEvaluator
from privaudit.mechanisms.seeding import draw_seed
from privaudit.params import PositiveFloat, PositiveInt


class Probe(UtilityEvaluator):
    """Utility as a service would get it from a frozen encoder and a linear classifier.

    The released train split is encoded by the frozen backbone (attention-masked mean of the
    last hidden states; pooled releases are used as they are, token-vector releases are
    mean-pooled), a logistic regression is fitted on those features and the released train
    labels, and accuracy (and macro-F1) is measured on the released test split. A public
    plain-word prefix (RAPT's ``plain_prefix``) is skipped before encoding: it serves
    only RAPT's reconstruction objective, which a frozen encoder does not train. It is the
    cheap stand-in for the papers' service-side fine-tuning (see the peft evaluators).
    """

    name: ClassVar[str] = "probe"
    metric: ClassVar[str] = "accuracy"

    def __init__(
        self, backbone: str | None = None, max_length: PositiveInt = 128, c: PositiveFloat = 1.0
    ) -> None:
        self.backbone = backbone
        self.max_length = max_length
        self.c = c

    def features(self, release: Release) -> np.ndarray:
        from privaudit.resources import backbone

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
    ) -> dict[str, float]:
        from sklearn.linear_model import LogisticRegression
        from sklearn.metrics import accuracy_score, f1_score
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
        return {
            "accuracy": float(accuracy_score(y_test, pred)),
            "macro_f1": float(f1_score(y_test, pred, average="macro")),
        }
