"""Split-and-Privatize (SAP) and SAP with contributing-token identification (SAP-CTI)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Self

import numpy as np
from annotated_types import Ge

from privaudit.api import Defense, Release
from privaudit.guarantees import Guarantee, PerUnit, Unit, embedding_distance, guarantee_property
from privaudit.mechanisms.audited import DXNoise, UnitMechanism, text_units
from privaudit.mechanisms.batching import flatten, unflatten
from privaudit.mechanisms.inputs import check_rng, check_texts
from privaudit.mechanisms.noise import sample_dx_noise
from privaudit.models.backbone import backbone
from privaudit.params import NonNegativeInt, PositiveFloat


class SAP(Defense):
    """Split-and-Privatize: the customer runs the bottom of the model and perturbs its outputs.

    Paper: Shen et al., "A Split-and-Privatize Framework for Large Language Model Fine-Tuning"
    (SAP), 2023.

    Threat model: the backbone is split after layer k (``split_layer``). The customer runs the
    frozen bottom model locally and sends d_X-perturbed token representations; the service
    continues the forward pass in the top model (``Backbone.pooled_from_layer``). The service,
    or an eavesdropper, sees the released vectors and knows k and the bottom model (white box).

    Release: ``token_vectors`` with ``layer = k``.
    - k = 0 (embedding layer only): each token's word embedding plus d_X noise is replaced by its
      nearest neighbour in the embedding matrix (paper Eq. 4); the vectors are released in the
      input-word-embedding space (``layer = 0``), content tokens
      only, as in T2T.
    - k >= 1: the hidden states after encoder layer k (all positions, [CLS] and [SEP] included)
      plus d_X noise, released as they are (hidden states, ``layer = k``).

    Privacy knob: ``eta`` (η0; 1 / Euclidean distance in the space of the released layer).
    Guarantee: η0·d_X-privacy per token representation (w.r.t. the distance between the bottom
    model's outputs); η0 = inf gives the unsplit model's utility.

    Deviations: hidden states are noised at every position; the paper's per-layer hidden-state
    scale differs from the embedding scale, so equal η0 is not equal privacy across depths.
    """

    name: ClassVar[str] = "sap"
    gpu: ClassVar[float] = 0.25  # runs the bottom model (privaudit.runtime.devices)
    knob: ClassVar[str | None] = "eta"
    levels: ClassVar[tuple[float, ...]] = (60, 100)  # SAP-CTI too; ~50 s a point

    def __init__(
        self,
        eta: PositiveFloat = 100.0,
        split_layer: NonNegativeInt = 0,
        backbone: str | None = None,
        max_length: Annotated[int, Ge(3)] = 128,
    ) -> None:
        self.eta = eta
        self.split_layer = split_layer
        self.backbone = backbone
        self.max_length = max_length

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """eta0·d_X-privacy per token representation, in the space of the split layer."""
        return Guarantee.dx(
            "eta0",
            self.eta,
            unit=Unit.TOKEN_REPRESENTATION,
            metric=embedding_distance(self.backbone, int(self.split_layer)),
            composes_over=Unit.DOCUMENT,
            source="Shen et al.",
            mechanism="token_kernel",
        )

    def token_kernel(self) -> UnitMechanism | DXNoise:
        """For the guarantee audit: at split layer 0, ``privatize`` on one-token texts and its
        d_X noise step (each token at its own η, :meth:`token_etas`); at k >= 1 the noise step
        alone (the hidden state plus noise is the release; a state is not an input a user
        types, but it varies continuously with the context)."""
        bb = backbone(self.backbone)
        eta = float(self.eta)
        per_unit = None
        if type(self).token_etas is not SAP.token_etas:  # a budget per token (SAP-CTI)

            def per_unit(ids: np.ndarray) -> np.ndarray:
                return np.broadcast_to(self.token_etas(np.asarray(ids), eta), np.shape(ids))

        # sample_dx_noise as this module sees it when the audit runs (a patched one included)
        noise = DXNoise(
            lambda n, e, rng: sample_dx_noise(n, bb.dim, e, rng),
            bb.dim,
            eta,
            unit_eta=per_unit,
            released=int(self.split_layer) > 0,
            units=bb.candidate_ids,
        )
        if int(self.split_layer) > 0:
            return noise
        return text_units(self.privatize, bb, bb.candidate_ids, noise=noise)

    def token_etas(self, ids: np.ndarray, eta: float) -> float | np.ndarray:
        """The budget per token (SAP: the same η0 everywhere; SAP-CTI overrides)."""
        return eta

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        texts = check_texts(texts)
        check_rng(rng)
        eta = float(self.eta)
        bb = backbone(self.backbone)
        bb._check_layer(self.split_layer, lowest=0)
        k = int(self.split_layer)
        meta: dict[str, Any] = {"defense": self.name, "eta": eta, "backbone": bb.name}
        if k == 0:
            ids = [row[: self.max_length - 2] for row in bb.token_ids(texts)]
            flat, bounds = flatten(ids)
            noise = sample_dx_noise(len(flat), bb.dim, self.token_etas(flat, eta), rng)
            new = flat.copy()
            moved = np.linalg.norm(noise, axis=1) > 0
            if moved.any():
                new[moved] = bb.index.project(
                    bb.embeddings[flat[moved]] + noise[moved],
                    source_ids=flat[moved],
                    offsets=noise[moved],
                )
            released = unflatten(new, bounds)
            return Release(
                "token_vectors",
                vectors=[bb.embeddings[r] for r in released],
                layer=0,
                meta=meta,
                audit={
                    "replaced": [r != o for r, o in zip(released, ids, strict=True)],
                    "unit": "token",
                },
            )
        states = bb.hidden_at_layer(texts, k, max_length=self.max_length)
        flat_states, bounds = flatten(states, dim=bb.dim)
        ids = [
            np.asarray(e, dtype=np.int64)
            for e in bb.tokenizer(
                list(texts), truncation=True, max_length=self.max_length, verbose=False
            )["input_ids"]
        ]
        flat_ids, _ = flatten(ids)
        noise = sample_dx_noise(len(flat_states), bb.dim, self.token_etas(flat_ids, eta), rng)
        return Release(
            "token_vectors",
            vectors=unflatten(flat_states + noise, bounds),
            layer=k,
            meta=meta,
        )


class SAPCTI(SAP):
    """SAP with contributing-token identification: more budget for task-relevant tokens.

    Paper: Shen et al. (SAP), §CTI. In :meth:`fit`, each vocabulary token m gets a per-class
    utility importance from the labelled training split,
    UI_mc = 1/(N-1) Σ_{c'≠c} ln p(t_m|c) / p(t_m|c'), with add-``alpha`` (Laplace) smoothing
    of the class-conditional token distributions, and a budget
    η_mc = 2 η0 / (1 + exp(-UI_mc + c0)), c0 = (max UI + min UI) / 2.

    Label-free inference rule (the paper's budget is per class, but a customer does not know the
    label of the text it privatizes): η_m = max_c η_mc — a token that is important for *any*
    class keeps more of its signal. Tokens never seen in training get UI = 0 for every class.
    Special tokens ([CLS], [SEP]) at k >= 1 get η0.

    Guarantee: d_X-privacy per token with the token's own budget η_m ∈ (0, 2 η0); the budgets
    are derived from the training split (public to the customer), not from the text.
    """

    name: ClassVar[str] = "sap-cti"

    def __init__(
        self,
        eta: PositiveFloat = 100.0,
        split_layer: NonNegativeInt = 0,
        backbone: str | None = None,
        max_length: Annotated[int, Ge(3)] = 128,
        alpha: PositiveFloat = 1.0,
    ) -> None:
        super().__init__(eta=eta, split_layer=split_layer, backbone=backbone, max_length=max_length)
        self.alpha = alpha

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """eta_m·d_X-privacy per token, each token's eta_m in (0, 2·eta0)."""
        return Guarantee.dx(
            "eta0",
            self.eta,
            unit=Unit.TOKEN,
            per_unit=PerUnit("eta_m", 0.0, 2.0),
            metric=embedding_distance(self.backbone, int(self.split_layer)),
            composes_over=Unit.DOCUMENT,
            source="SAP-CTI",
            notes="η_m per token from the training split's token importances (the largest "
            "over classes); special tokens get η0",
            mechanism="token_kernel",
        )

    def fit(self, train: Any) -> Self:
        """Learn token importances from a labelled split (a Dataset with text and label)."""
        texts, labels = list(train["text"]), np.asarray(train["label"], dtype=np.int64)
        if len(texts) == 0:
            raise ValueError("SAP-CTI needs a non-empty labelled training split to fit.")
        classes = np.unique(labels)
        if len(classes) < 2:
            raise ValueError("SAP-CTI needs at least two classes in the training labels.")
        bb = backbone(self.backbone)
        vocab = bb.embeddings.shape[0]
        counts = np.zeros((len(classes), vocab))
        for ids, y in zip(bb.token_ids(texts), labels, strict=True):
            np.add.at(counts[np.searchsorted(classes, y)], ids, 1.0)
        seen = counts.sum(0) > 0
        log_p = np.log(counts + self.alpha) - np.log(
            (counts + self.alpha).sum(1, keepdims=True)
        )  # ln p(t_m | c), smoothed
        n = len(classes)
        # Σ_{c'≠c} (ln p_c − ln p_c') = n ln p_c − Σ_c' ln p_c'
        ui = (n * log_p - log_p.sum(0, keepdims=True)) / (n - 1)
        ui[:, ~seen] = 0.0
        c0 = (ui[:, seen].max() + ui[:, seen].min()) / 2 if seen.any() else 0.0
        self._ui = ui.astype(np.float32)
        self._budget_factor = (2.0 / (1.0 + np.exp(-ui + c0))).max(0)  # label-free: max over c
        self._classes = classes
        return self

    def token_etas(self, ids: np.ndarray, eta: float) -> float | np.ndarray:
        factor = getattr(self, "_budget_factor", None)
        if factor is None:
            raise ValueError(
                "SAP-CTI must be fitted on a labelled training split first: "
                "SAPCTI(...).fit(corpus.split('train'))."
            )
        if math.isinf(eta):
            return eta
        return eta * factor[ids]
