"""Utility by training the service's model on the release: prompt tuning, prefix tuning, LoRA
or full fine-tuning of the backbone (``peft``), with the defense's service-side objective.

The evaluator (:class:`PeftUtility` and one registered class per method), its settings
(:data:`PROFILES`) and the peft configuration of each method live here; the inputs built from a
release are in :mod:`privaudit.utility.peft_inputs`, the models and the training loop in
:mod:`privaudit.utility.peft_training`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, get_args

import numpy as np

from privaudit.api import Defense, Objective, Release, UtilityEvaluator
from privaudit.mechanisms.seeding import draw_seed
from privaudit.models.backbone import backbone
from privaudit.params import Fraction, NonNegativeFloat, PositiveFloat, PositiveInt
from privaudit.runtime.devices import torch_threads
from privaudit.utility.peft_inputs import Inputs, split_layer, stack_vectors, subset
from privaudit.utility.peft_training import (
    Run,
    predict_encoder,
    predict_head,
    train_encoder,
    train_head,
    train_top,
)
from privaudit.utility.probe import classification_result, objective_status, one_line

Method = Literal["prompt-tuning", "prefix-tuning", "lora", "fine-tuning"]
METHODS: tuple[str, ...] = get_args(Method)


@dataclass(frozen=True)
class Profile:
    """Training sizes and optimiser settings of one profile (per-method learning rates)."""

    epochs: int
    batch_size: int
    max_length: int
    max_train: int | None
    max_test: int | None
    lr: dict[str, float]


#: ``paper``: the published settings where the papers give them (RAPT: prompt tuning with 150
#: virtual tokens; LoRA r=16, α=32, dropout 0.05; prefix length 10), with the learning rates
#: commonly used for each method on BERT-sized encoders (RAPT does not list its own), full
#: splits, 10 epochs, batch 32, 128 tokens. ``quick``: the same methods sized for 2 CPU cores
#: (a cell in a few minutes): at most 600 train / 400 test documents, 3 epochs, batch 16, 96
#: tokens, higher learning rates to converge in fewer steps.
PROFILES: dict[str, Profile] = {
    "paper": Profile(
        epochs=10,
        batch_size=32,
        max_length=128,
        max_train=None,
        max_test=None,
        lr={"prompt-tuning": 1e-2, "prefix-tuning": 1e-2, "lora": 5e-4, "fine-tuning": 3e-5},
    ),
    "quick": Profile(
        epochs=3,
        batch_size=16,
        max_length=96,
        max_train=600,
        max_test=400,
        lr={"prompt-tuning": 3e-2, "prefix-tuning": 1e-2, "lora": 1e-3, "fine-tuning": 5e-5},
    ),
}


class PeftUtility(UtilityEvaluator):
    """Utility by training the service's classifier on the release (prompt/prefix tuning, LoRA,
    fine-tuning; ``method``), scored on the released test split: balanced accuracy (the
    headline ``metric``), accuracy and macro-F1, with the per-document predictions
    (:func:`privaudit.utility.probe.classification_result`).

    Paper: the service side of RAPT (Li et al., "Privacy-Preserving Prompt Tuning for Large
    Language Model Services", §III-B, Table II) — prompt tuning on privatized text, with the
    privatized-token reconstruction objective — and the PEFT variants of its extended version
    (prefix tuning, LoRA), plus full fine-tuning as the upper reference.

    Model: a copy of the backbone encoder (the shared cached one is never modified), wrapped
    by ``peft`` for ``prompt-tuning`` (``num_virtual_tokens`` soft tokens prepended, default
    150), ``prefix-tuning`` (``num_virtual_tokens`` key/value prefixes per layer, default 10)
    or ``lora`` (``lora_r`` 16, ``lora_alpha`` 32, ``lora_dropout`` 0.05 on the attention
    query/key/value and dense projections); ``fine-tuning`` trains every weight. A linear head
    reads the attention-masked mean of the last hidden states of the input tokens (the
    backbone is a mean-pooling sentence encoder; virtual tokens are left out of the mean) and
    is trained in every method. AdamW, ``lr``, ``weight_decay``, ``epochs``, ``batch_size``,
    ``max_length``, and subsets ``max_train``/``max_test`` default to the ``profile``'s values
    (``quick`` or ``paper``; see :data:`PROFILES`).

    RAPT's releases start with ``plain_prefix`` public plain words (a typed Release field): the
    service knows where they are, so the classifier's mean leaves them out and
    ``max_length`` budgets the user's text alone (the prefix gets its own room). Without
    this the 40-word prefix would fill half of every mean and push the review's end past
    ``max_length`` — a cost of our mean-pooling head that RAPT's verbalizer-style head does
    not pay.

    Releases: ``text`` is tokenized as it is; ``token_vectors`` in the input-word-embedding
    space (``embedding-dx``, SAP at layer 0) enter as ``inputs_embeds`` between the [CLS] and
    [SEP] embeddings; ``pooled_vectors`` (CAPE, DPNR) train a classifier head (one hidden
    layer, 256 units) on the vectors, the encoder being on the client side. Hidden-layer
    token vectors (SAP at split layer k > 0) are SAP's setting: the service continues through
    the top model (encoder layers k..n-1, :func:`privaudit.models.backbone.top_model_forward`, the
    same continuation ``probe`` uses) and trains LoRA on those layers plus the head, whatever
    ``method`` says (soft prompts and prefixes enter at the input, which the service of a
    split model never runs; ``fine-tuning`` trains the top layers' every weight); the
    learning rate is then the profile's LoRA rate unless ``lr`` is given.

    Defense objectives: when ``use_objective`` and the defense's ``training_objective()``
    returns an :class:`~privaudit.api.Objective` that ``applies_to`` the release, the trainer
    builds its head, computes its per-row ``targets`` once and adds its ``loss`` on every
    minibatch (a :class:`~privaudit.api.TrainingBatch`: the encoder's token states, the pooled
    features, the token positions of the release's public plain prefix, the rows' targets);
    the head is dropped after training. RAPT's reconstruction (W_up: h→c, W_down: c→|V_r| at
    the plain-token positions, loss = L_task + weight·L_rec) applies to its text releases;
    CAPE's adversary behind gradient reversal (λ) reads the hidden layer of the head trained on
    its pooled release and predicts the private attribute from ``train_attributes`` (the
    service's own labels of its training data, as in CAPE); the client holds the encoder, so
    that hidden layer is the only trainable part upstream of the adversary (a deviation from
    CAPE, which fine-tunes the encoder end to end). The trainer knows neither class. The
    result's ``objective`` says what happened: ``"applied"``, ``"none"`` (the defense has no
    objective), or ``"not applied: <reason>"`` (``use_objective=False``, or the objective's
    ``applies_to`` gave that reason for this release), so a row trained without the defense's
    recipe is never presented as the full defense.

    Metric: the headline is balanced accuracy, the mean recall over the test classes. Under
    class imbalance plain accuracy can sit at or below the majority-class share while the
    text carries nothing about the label; balanced accuracy is 1/K for any classifier that
    ignores the text, whatever the imbalance. Accuracy and macro-F1 stay beside it. With a
    ``max_test`` cap the scores and ``predictions`` cover the first ``max_test`` test
    documents (``test_indices``).

    Determinism: the seed is drawn from the ``rng`` the runner passes; initialisation, dropout
    and batch order are seeded without touching the process-wide torch random state.
    """

    name: ClassVar[str] = "peft"
    gpu: ClassVar[float] = 0.5  # trains the encoder (privaudit.runtime.devices)
    metric: ClassVar[str] = "balanced_accuracy"
    default_method: ClassVar[str] = "prompt-tuning"
    # Between-fit sd not measured (~4 min a fit on two cores for prompt tuning, 5 fits × 2
    # points × 4 methods): 0 here, so these intervals cover the test documents only.
    fit_sd: ClassVar[float] = 0.0
    #: Rough seconds per 1,000 train + test words on two CPU cores with the quick profile
    #: (docs/usage.md: prompt tuning ~4 min a cell on the quick grid's 33k words).
    COST_QUICK: ClassVar[dict[str, float]] = {
        "prompt-tuning": 7.2,
        "prefix-tuning": 1.8,
        "lora": 1.8,
        "fine-tuning": 3.6,
    }

    @property
    def cost_prior(self) -> float:  # type: ignore[override]
        """The estimate's prior (:attr:`privaudit.api.Component.cost_prior`), by method and
        profile: ``paper`` trains on ~23 times the tokens of ``quick`` (10 epochs, full
        splits, 128 tokens), about 5 times more per 1,000 words of the paper corpus."""
        quick = self.COST_QUICK.get(str(self.method), 3.6)
        return quick * (5.0 if self.profile == "paper" else 1.0)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # The per-method evaluators are named after their method.
        super().__init_subclass__(**kwargs)
        if cls.name in METHODS:
            cls.default_method = cls.name

    def __init__(
        self,
        method: Method | None = None,
        profile: Literal["quick", "paper"] = "quick",
        backbone: str | None = None,
        num_virtual_tokens: PositiveInt | None = None,
        lora_r: PositiveInt = 16,
        lora_alpha: PositiveInt = 32,
        lora_dropout: Fraction = 0.05,
        lr: PositiveFloat | None = None,
        weight_decay: NonNegativeFloat = 0.01,
        epochs: PositiveInt | None = None,
        batch_size: PositiveInt | None = None,
        max_length: PositiveInt | None = None,
        max_train: PositiveInt | None = None,
        max_test: PositiveInt | None = None,
        use_objective: bool = True,
        threads: PositiveInt | None = None,
        progress: bool | None = None,
    ) -> None:
        self.method = method if method is not None else self.default_method
        self.profile = profile
        self.backbone = backbone
        self.num_virtual_tokens = num_virtual_tokens
        self.lora_r = lora_r
        self.lora_alpha = lora_alpha
        self.lora_dropout = lora_dropout
        self.lr = lr
        self.weight_decay = weight_decay
        self.epochs = epochs
        self.batch_size = batch_size
        self.max_length = max_length
        self.max_train = max_train
        self.max_test = max_test
        self.use_objective = use_objective
        self.threads = threads
        self.progress = progress
        self.last_info: dict[str, Any] = {}

    # ---------------------------------------------------------------------------------------
    # Settings
    # ---------------------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """The effective training settings: explicit parameters over the profile's values (the
        parameters themselves are checked by their declaration, on construction)."""
        p = PROFILES[self.profile]
        virtual = self.num_virtual_tokens
        if virtual is None:
            virtual = {"prompt-tuning": 150, "prefix-tuning": 10}.get(self.method, 0)
        return {
            "method": self.method,
            "profile": self.profile,
            "num_virtual_tokens": int(virtual),
            "lr": float(self.lr if self.lr is not None else p.lr[self.method]),
            "weight_decay": float(self.weight_decay),
            "epochs": int(self.epochs if self.epochs is not None else p.epochs),
            "batch_size": int(self.batch_size if self.batch_size is not None else p.batch_size),
            "max_length": int(self.max_length if self.max_length is not None else p.max_length),
            "max_train": self.max_train if self.max_train is not None else p.max_train,
            "max_test": self.max_test if self.max_test is not None else p.max_test,
        }

    # ---------------------------------------------------------------------------------------
    # Evaluation
    # ---------------------------------------------------------------------------------------

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
        """Train on ``train`` (with the defense's objective where it applies), score on
        ``test``: balanced accuracy, accuracy, macro-F1, predictions, test_indices, objective
        (see the class docstring)."""
        cfg = self.settings()
        y_train, y_test = _checked_labels(train, train_labels, test, test_labels, rng)
        layer = split_layer(train, test)
        train_idx = subset(len(train), cfg["max_train"])
        test_idx = subset(len(test), cfg["max_test"])
        y_fit, y_eval = y_train[train_idx], y_test[test_idx]
        if len(np.unique(y_fit)) < 2:
            raise ValueError("Training needs at least two classes in the training labels.")
        classes = np.unique(y_fit)
        seed = draw_seed(rng)
        bb = backbone(self.backbone)
        objective, status = self._objective(defense, train)
        targets: list[Any] = []
        if objective is not None:
            targets = list(objective.targets(train, train_idx, train_attributes or {}))
            if len(targets) != len(train_idx):
                raise ValueError(
                    f"{type(objective).__name__}.targets gave {len(targets)} targets for "
                    f"{len(train_idx)} training documents; it must give one per row."
                )
        with torch_threads(self.threads):
            if train.kind == "pooled_vectors":
                data_fit = stack_vectors(train, train_idx)
                data_eval = stack_vectors(test, test_idx)
                run = Run(cfg, seed, self.progress, objective, targets)
                model, info = train_head(data_fit, y_fit, classes, run)
                pred = classes[predict_head(model, data_eval)]
            else:
                inputs_fit = Inputs.build(bb, train, train_idx, cfg["max_length"])
                inputs_eval = Inputs.build(bb, test, test_idx, cfg["max_length"])
                if layer is not None:
                    if self.lr is None and cfg["method"] != "fine-tuning":
                        cfg = cfg | {"lr": PROFILES[self.profile].lr["lora"]}  # LoRA on the top
                    run = Run(cfg, seed, self.progress, objective, targets)
                    lora = self._lora_config(range(layer, bb.n_layers))
                    model, info = train_top(bb, layer, inputs_fit, y_fit, classes, run, lora)
                else:
                    run = Run(cfg, seed, self.progress, objective, targets)
                    peft = self._peft_config(cfg)
                    model, info = train_encoder(bb, inputs_fit, y_fit, classes, run, peft)
                pred = classes[predict_encoder(model, inputs_eval, cfg["batch_size"])]
        trained = type(objective).__name__ if objective else None
        self.last_info = cfg | info | {"objective": trained, "objective_status": status}
        return classification_result(y_eval, pred, status, test_idx)

    def _objective(self, defense: Defense | None, train: Release) -> tuple[Objective | None, str]:
        """The defense's service-side objective, when ``use_objective`` and it can train on
        this release (RAPT's reconstruction on text with a plain prefix, CAPE's adversary on
        pooled vectors), else None; and the result's ``objective`` status (``"applied"``,
        ``"none"`` or ``"not applied: <reason>"``). The trainer knows the objective only
        through the Objective protocol."""
        if defense is None:
            return None, "none"
        if not self.use_objective:
            # Asked only to label the row: a defense that cannot build its objective (CAPE
            # without its attribute) still trains here, as it did without the label.
            return None, objective_status(defense, lambda _: "use_objective=False")
        objective = defense.training_objective()
        if objective is None:
            return None, "none"
        reason = objective.applies_to(train)
        if reason is not None:
            return None, f"not applied: {one_line(reason)}"
        return objective, "applied"

    def _peft_config(self, cfg: dict[str, Any]) -> Any:
        from peft import PrefixTuningConfig, PromptTuningConfig, TaskType

        task = TaskType.FEATURE_EXTRACTION
        if cfg["method"] == "prompt-tuning":
            return PromptTuningConfig(task_type=task, num_virtual_tokens=cfg["num_virtual_tokens"])
        if cfg["method"] == "prefix-tuning":
            return PrefixTuningConfig(task_type=task, num_virtual_tokens=cfg["num_virtual_tokens"])
        if cfg["method"] == "lora":
            return self._lora_config(None)
        return None

    def _lora_config(self, layers: range | None) -> Any:
        """LoRA on the attention and dense projections (of ``layers`` only, when given)."""
        from peft import LoraConfig, TaskType

        if self.method == "fine-tuning" or (layers is not None and len(layers) == 0):
            return None
        extra = (
            {}
            if layers is None
            else {"layers_to_transform": list(layers), "layers_pattern": "layer"}
        )
        return LoraConfig(
            task_type=TaskType.FEATURE_EXTRACTION,
            r=int(self.lora_r),
            lora_alpha=int(self.lora_alpha),
            lora_dropout=float(self.lora_dropout),
            target_modules=["query", "key", "value", "dense"],
            **extra,
        )


class PromptTuning(PeftUtility):
    """Prompt tuning on the release (150 soft tokens as in RAPT): peft, method=prompt-tuning."""

    name: ClassVar[str] = "prompt-tuning"


class PrefixTuning(PeftUtility):
    """Prefix tuning on the release (prefix length 10): peft, method=prefix-tuning."""

    name: ClassVar[str] = "prefix-tuning"


class LoRA(PeftUtility):
    """LoRA on the release (r=16, alpha=32, dropout 0.05): peft, method=lora."""

    name: ClassVar[str] = "lora"


class FineTuning(PeftUtility):
    """Full fine-tuning on the release (every weight): peft, method=fine-tuning."""

    name: ClassVar[str] = "fine-tuning"


def _checked_labels(
    train: Release,
    train_labels: Sequence[int],
    test: Release,
    test_labels: Sequence[int],
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """The train and test labels as arrays, after checking what ``evaluate_releases`` was
    given: two releases of one kind, one label per document, a numpy generator."""
    if not isinstance(train, Release) or not isinstance(test, Release):
        raise TypeError("evaluate_releases takes two Release objects (train, test).")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}.")
    y_train, y_test = np.asarray(train_labels), np.asarray(test_labels)
    if len(y_train) != len(train) or len(y_test) != len(test):
        raise ValueError("Each released document needs exactly one label.")
    if train.kind != test.kind:
        raise ValueError(f"train is a {train.kind!r} release but test a {test.kind!r} one.")
    return y_train, y_test
