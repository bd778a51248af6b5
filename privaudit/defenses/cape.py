"""Context-Aware Private Embeddings (CAPE): Laplace-noised embeddings plus an adversary."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self

import numpy as np
from annotated_types import MinLen

from privaudit.api import Defense, Release, TrainingBatch
from privaudit.defenses.dpnr import MaxLength, laplace_step, pooled_ldp, resolve_sensitivity
from privaudit.guarantees import Guarantee, guarantee_property
from privaudit.mechanisms.audited import PooledLaplace
from privaudit.mechanisms.inputs import check_rng, check_texts
from privaudit.mechanisms.laplace import laplace_like, minmax_normalise_torch, pooled_release
from privaudit.models.backbone import backbone
from privaudit.params import FiniteNonNegativeFloat, FinitePositiveFloat, PositiveFloat, PositiveInt

if TYPE_CHECKING:
    import torch


@functools.cache
def _reversal_classes() -> tuple[Any, Any]:
    """The gradient-reversal Function and Module, built on first use so that importing this
    module does not import torch."""
    import torch

    class GradReverse(torch.autograd.Function):
        """Identity forward; backward multiplies the incoming gradient by −λ (Ganin et al.
        2016). The adversary descends its loss while everything before the layer ascends it."""

        @staticmethod
        def forward(ctx: Any, x: torch.Tensor, weight: float) -> torch.Tensor:
            ctx.weight = weight
            return x.view_as(x)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
            return -ctx.weight * grad, None

    class GradientReversal(torch.nn.Module):
        def __init__(self, weight: float) -> None:
            super().__init__()
            self.weight = weight

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return GradReverse.apply(x, self.weight)

        def extra_repr(self) -> str:
            return f"weight={self.weight}"

    return GradReverse, GradientReversal


@dataclass
class AdversarialObjective:
    """CAPE's service-side adversarial objective (Plant et al. 2021, §3.2).

    During fine-tuning an adversary ``head`` tries to predict the private ``attribute`` from
    the perturbed representation; a gradient-reversal layer in front of it (backward: × −λ)
    makes every trainable layer before it *maximise* the adversary's loss while the head
    minimises it. Total loss = L_task + L_adv, with λ = ``weight`` inside the reversal, as in
    CAPE's code. The head is discarded after training. Only layers upstream of the
    representation (a fine-tuned encoder, prompts, LoRA) are pushed to forget the attribute; a
    frozen encoder with a classifier on top gets nothing from the reversal.

    ``perturb`` is the client's mechanism in torch (min-max normalisation to [0, 1] and
    Laplace(Δ/ε) noise), differentiable w.r.t. the representation, so that training sees what
    the client releases. ``loss`` reads a representation that is already perturbed (the one
    the task head reads, as in CAPE where both heads share the noisy embedding), or perturbs it
    itself when given a ``generator``.
    """

    attribute: str
    weight: float
    hidden: int
    epsilon: float
    sensitivity: float = 1.0

    # ---- the Objective protocol (privaudit.api.Objective) ---------------------------------

    def applies_to(self, release: Release) -> str | None:
        if release.kind != "pooled_vectors":
            return "CAPE's adversary trains beside a head on pooled-vector releases"
        return None

    def targets(
        self, release: Release, rows: Sequence[int], attributes: Mapping[str, Sequence[Any]]
    ) -> list[Any]:
        """The attribute's class index (0..k-1, sorted by value) for each training row."""
        values = attributes.get(self.attribute)
        if values is None:
            raise ValueError(
                f"CAPE's adversary needs the train split's {self.attribute!r} labels; pass "
                f"train_attributes={{{self.attribute!r}: [...]}} or use_objective=False."
            )
        rows = np.asarray(rows, dtype=np.int64)
        if len(values) <= int(rows.max(initial=-1)):
            raise ValueError("train_attributes needs one value per released train document.")
        picked = np.asarray([str(values[i]) for i in rows])
        return [int(i) for i in np.unique(picked, return_inverse=True)[1]]

    def head(self, hidden_size: int, targets: Sequence[Any]) -> torch.nn.Module:
        return self.adversary(hidden_size, max(2, max(targets, default=0) + 1))

    def loss(self, batch: TrainingBatch, head: torch.nn.Module) -> torch.Tensor:
        return self.adversary_loss(batch.features, batch.targets, head)

    # ---- the adversary ----------------------------------------------------------------------

    def adversary(self, hidden_size: int, n_classes: int) -> torch.nn.Module:
        """Gradient reversal (λ = ``weight``), then an MLP adversary with one hidden layer."""
        import torch

        hidden_size, n_classes = int(hidden_size), int(n_classes)
        if hidden_size < 1:
            raise ValueError(f"hidden_size must be a positive integer, got {hidden_size}.")
        if n_classes < 2:
            raise ValueError(f"The adversary needs at least 2 attribute classes, got {n_classes}.")
        reversal = _reversal_classes()[1](self.weight)
        return torch.nn.Sequential(
            reversal,
            torch.nn.Linear(hidden_size, self.hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(self.hidden, n_classes),
        )

    @property
    def scale(self) -> float:
        """The Laplace scale Δ/ε (0 when ε is inf)."""
        return 0.0 if math.isinf(self.epsilon) else self.sensitivity / self.epsilon

    def perturb(self, pooled: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """Normalise each row of ``pooled`` (batch, hidden) to [0, 1] and add Laplace noise."""
        return minmax_normalise_torch(pooled) + laplace_like(pooled, self.scale, generator)

    def adversary_loss(
        self,
        pooled: torch.Tensor,
        attribute_labels: Any,
        head: torch.nn.Module,
        *,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Cross-entropy of ``head`` (which starts with the reversal) on the perturbed
        representation; ``attribute_labels`` are class indices, one per row."""
        import torch

        z = self.perturb(pooled, generator) if generator is not None else pooled
        logits = head(z)
        target = torch.as_tensor(attribute_labels, dtype=torch.long, device=logits.device)
        if target.shape != logits.shape[:1]:
            raise ValueError(
                f"Got {tuple(target.shape)} attribute labels for a batch of {logits.shape[0]}."
            )
        return torch.nn.functional.cross_entropy(logits, target)


class CAPE(Defense):
    """Context-Aware Private Embeddings.

    Paper: Plant, Gkatzia, Giuffrida, "CAPE: Context-Aware Private Embeddings for Private
    Language Learning", EMNLP 2021 (code: github.com/NapierNLP/CAPE, ``models.py``).

    Threat model: the user encodes text with the public frozen encoder and sends a noisy pooled
    embedding; the service trains its classifier on such embeddings with an adversary that
    tries to recover a private attribute (``attribute``, e.g. gender) through a gradient
    reversal layer. An attacker sees the released vectors and may know the mechanism.

    Perturbation (:meth:`privatize`, usable on its own): the attention-masked mean of the last
    hidden states (truncated to ``max_length`` tokens), min-max normalised over its d
    dimensions to [0, 1] (this is how CAPE bounds the embedding, following Lyu et al. 2020),
    plus i.i.d. Laplace(0, Δ/ε) noise per coordinate.

    Privacy knob: ``epsilon`` (Laplace ε; larger = less noise, ``inf`` = none). ``sensitivity``
    Δ defaults to 1, the value CAPE's code uses (noise Laplace(1/ε)).

    Guarantee: each coordinate of the normalised vector lies in [0, 1], so with Δ = 1 each
    released coordinate is ε-LDP on its own and the whole d-dimensional vector is d·ε-LDP
    (its L1 sensitivity is d; ``meta["vector_epsilon"]`` records d·ε/Δ); ``sensitivity=d``
    gives ε-LDP of the whole vector. The adversarial training (:meth:`training_objective`)
    reduces what a learned attacker recovers empirically but gives no formal guarantee.

    Deviations and choices:
    - CAPE's code takes the min and max over the whole batch tensor and draws one noise vector
      per batch; a local mechanism cannot depend on other users' documents, so we normalise
      each document's vector on its own and draw fresh noise per document.
    - CAPE's adversary reads features after two shared dense layers; ours reads the perturbed
      pooled representation (the trainers own any layers in between). It is a 2-class softmax
      even for binary attributes (CAPE uses a sigmoid), which is equivalent.
    - The encoder is frozen here (CAPE also freezes BERT).
    """

    name: ClassVar[str] = "cape"
    cost_prior: ClassVar[float] = 0.2  # s per 1,000 words (estimate)
    gpu: ClassVar[float] = 0.25  # encodes with the backbone (privaudit.runtime.devices)
    knob: ClassVar[str | None] = "epsilon"
    calibrates_by_rate: ClassVar[bool] = False  # vector releases replace no words
    levels: ClassVar[tuple[float, ...]] = (3, 10, 100)

    def __init__(
        self,
        epsilon: PositiveFloat = 1.0,
        adversary_weight: FiniteNonNegativeFloat = 1.0,
        attribute: Annotated[str, MinLen(1)] = "gender",
        adversary_hidden: PositiveInt = 768,
        backbone: str | None = None,
        max_length: MaxLength = 128,
        sensitivity: FinitePositiveFloat | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.adversary_weight = adversary_weight
        self.attribute = attribute
        self.adversary_hidden = adversary_hidden
        self.backbone = backbone
        self.max_length = max_length
        self.sensitivity = sensitivity

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """epsilon-LDP per coordinate (Δ = ``sensitivity``); d·ε/Δ for the whole vector."""
        return pooled_ldp(
            self.epsilon,
            self.sensitivity,
            self.backbone,
            source="Plant et al. 2021",
            notes="The adversarial training adds no formal guarantee",
            wording="Laplace noise: epsilon-LDP per coordinate of the [0,1]-normalised pooled "
            "representation (Δ=1, as in CAPE's code); d·epsilon for the whole d-dim vector "
            "unless sensitivity=d. The adversarial training adds no formal guarantee",
            mechanism="laplace_step",
        )

    def laplace_step(self) -> PooledLaplace:
        """For the guarantee audit: the Laplace step (``pooled_release``) the claim rests on."""
        dim = self.guarantee.dimension or backbone(self.backbone).dim
        # pooled_release as this module sees it when the audit runs (a patched one included)
        return laplace_step(lambda *a: pooled_release(*a), self.epsilon, self.sensitivity, dim)

    def fit(self, train: Any) -> Self:
        """Note which private attributes the training split carries, so that
        :meth:`training_objective` can say when ``attribute`` is not among them. The
        perturbation itself needs no fitting."""
        names: set[str] = set()
        if hasattr(train, "column_names") and "attributes" in train.column_names:
            for row in train["attributes"]:
                names.update(k for k, v in (row or {}).items() if v is not None)
            self._attributes = sorted(names)
        return self

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        texts = check_texts(texts)
        check_rng(rng)
        delta = resolve_sensitivity(self.sensitivity)
        bb = backbone(self.backbone)
        return pooled_release(
            bb.pooled(texts, max_length=self.max_length),
            float(self.epsilon),
            delta,
            rng,
            {"defense": self.name, "backbone": bb.name},
        )

    def training_objective(self) -> AdversarialObjective:
        seen = getattr(self, "_attributes", None)
        if seen is not None and self.attribute not in seen:
            raise ValueError(
                f"CAPE's adversary targets attribute {self.attribute!r}, which the fitted "
                f"training split does not carry; it has {seen}. Pass attribute=one of those."
            )
        return AdversarialObjective(
            attribute=self.attribute,
            weight=float(self.adversary_weight),
            hidden=int(self.adversary_hidden),
            epsilon=float(self.epsilon),
            sensitivity=resolve_sensitivity(self.sensitivity),
        )
