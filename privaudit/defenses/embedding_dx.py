"""d_X noise on input token embeddings, released without projection."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import ClassVar

import numpy as np

from privaudit.api import Defense, Release
from privaudit.defenses._validate import check_rng, check_texts
from privaudit.mechanisms.noise import check_eta, sample_dx_noise
from privaudit.registry import DEFENSES


@DEFENSES.register("embedding-dx")
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
    [SEP]; ``meta["space"] = "input_word_embeddings"`` tells a service where to continue.
    """

    name: ClassVar[str] = "embedding-dx"
    knob: ClassVar[str | None] = "eta"
    knob_unit: ClassVar[str] = "1/embedding-distance"
    guarantee: ClassVar[str] = "eta·d_X-privacy per token embedding (Qu et al. 2021)"
    release_kind = "token_vectors"

    def __init__(self, eta: float = 100.0, backbone: str | None = None) -> None:
        self.eta = eta
        self.backbone = backbone

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        from privaudit.resources import backbone

        texts = check_texts(texts)
        check_rng(rng)
        eta = check_eta(self.eta)
        bb = backbone(self.backbone)
        ids = bb.token_ids(texts)
        flat = np.concatenate(ids) if ids else np.zeros(0, dtype=np.int64)
        noisy = bb.embeddings[flat] + sample_dx_noise(len(flat), bb.dim, eta, rng)
        bounds = np.cumsum([0, *(len(r) for r in ids)])
        return Release(
            "token_vectors",
            vectors=[noisy[a:b] for a, b in pairwise(bounds)],
            meta={
                "defense": self.name,
                "eta": eta,
                "backbone": bb.name,
                "space": "input_word_embeddings",
            },
        )
