"""d_X noise on input token embeddings, released without projection."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from privaudit.api import Defense, Release
from privaudit.defenses._tokens import token_dx_noise, token_noise
from privaudit.guarantees import Guarantee, Unit, embedding_distance, guarantee_property
from privaudit.mechanisms.audited import UnitMechanism, text_units
from privaudit.mechanisms.batching import unflatten
from privaudit.models.backbone import backbone
from privaudit.params import PositiveFloat


class EmbeddingDX(Defense):
    """Noisy input embeddings: the "fine-tuning" baseline of RAPT's comparison.

    Paper: Qu et al., "Natural Language Understanding with Privacy-Preserving BERT", CIKM 2021
    (d_X-privacy on token embeddings), as the embedding-perturbation baseline in RAPT (Li et al.).

    Threat model: the user embeds its text with the backbone's public input-embedding matrix,
    adds d_X noise to each token vector and sends the vectors; the service continues the
    forward pass from them. An attacker sees the noisy vectors and may know the embedding
    matrix (white box).

    Privacy knob: ``eta`` (1 / Euclidean distance in the input-embedding space). Guarantee:
    eta·d_X-privacy per token (the release is the noisy vector itself, so no projection is
    needed for the guarantee; nearest-neighbour projection would be post-processing).

    Release: ``token_vectors``, one (n_tokens, dim) array per document, in the space of the
    backbone's word embeddings (before position embeddings and layer norm), without [CLS] and
    [SEP]; ``layer=0`` (the input word-embedding space) tells a service where to continue.
    """

    name: ClassVar[str] = "embedding-dx"
    cost_prior: ClassVar[float] = 0.03  # s per 1,000 words (estimate)
    knob: ClassVar[str | None] = "eta"
    calibrates_by_rate: ClassVar[bool] = False  # vector releases replace no words
    # Two levels: its utility sits at chance at every η the quick grid can afford.
    levels: ClassVar[tuple[float, ...]] = (50, 100)

    def __init__(self, eta: PositiveFloat = 100.0, backbone: str | None = None) -> None:
        self.eta = eta
        self.backbone = backbone

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """eta·d_X-privacy per token embedding; n tokens compose."""
        return Guarantee.dx(
            "eta",
            self.eta,
            unit=Unit.TOKEN_EMBEDDING,
            metric=embedding_distance(self.backbone),
            composes_over=Unit.DOCUMENT,
            source="Qu et al. 2021",
            mechanism="token_kernel",
        )

    def token_kernel(self) -> UnitMechanism:
        """For the guarantee audit: ``privatize`` on one-token texts (the noisy vector is the
        release) and its d_X noise step."""
        bb = backbone(self.backbone)
        noise = token_dx_noise(bb.dim, self.eta, released=True)
        return text_units(self.privatize, bb, bb.candidate_ids, noise=noise, vectors=True)

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        tn = token_noise(texts, self.eta, self.backbone, rng)
        bb = tn.backbone
        noisy = bb.embeddings[tn.flat] + tn.noise
        return Release(
            "token_vectors",
            vectors=unflatten(noisy, tn.bounds),
            layer=0,
            meta={"defense": self.name, "eta": tn.eta, "backbone": bb.name},
        )
