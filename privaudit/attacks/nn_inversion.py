"""White-box nearest-neighbour embedding inversion."""

from __future__ import annotations

from typing import ClassVar, Self

import numpy as np

from privaudit.api import Attack, Knowledge, Predictions, Release, Space
from privaudit.mechanisms.batching import flatten, unflatten
from privaudit.models.backbone import backbone


class NNInversion(Attack):
    """Nearest-neighbour inversion of token representations.

    Papers: the embedding-inversion attack of Song & Raghunathan, "Information Leakage in
    Embedding Models", CCS 2020 (white-box nearest neighbour), as used against T2T in RAPT
    (Li et al., §IV-A1).

    Threat model: white box. The attacker knows the backbone's input-embedding matrix. It sees
    a release of token vectors in the input word-embedding space, or released text which it
    re-embeds token by token, and maps each vector to the nearest vocabulary token; those are
    its guesses of the original tokens. Hidden states (a split model's, layer k >= 1) are not
    input embeddings: use optimization-inversion, which models the bottom layers.

    Metric: token recovery rate X (fraction of the victim's original tokens recovered, aligned
    by position, or by sequence alignment where the lengths differ); empirical privacy 1 - X.
    """

    name: ClassVar[str] = "nn-inversion"
    cost_prior: ClassVar[float] = 0.05  # s per 1,000 words (estimate)
    accepts: ClassVar[frozenset[Space]] = frozenset({Space.TEXT, Space.TOKEN_EMBEDDINGS})
    metric: ClassVar[str] = "token_recovery"
    # Deterministic given its data (nearest neighbour): 5 fits at none, sd 0 (quick corpus,
    # 2026-11-26, /work/tools/fit_sd27.py).
    fit_sd: ClassVar[float] = 0.0
    needs_white_box: ClassVar[bool] = True

    def __init__(self, backbone: str | None = None) -> None:
        self.backbone = backbone
        self._backbone: str | None = backbone  # resolved by fit: declared, else knowledge's

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        self._backbone = self.backbone if self.backbone is not None else knowledge.backbone
        return self

    def attack(self, release: Release) -> Predictions:
        if release.space not in self.accepts:
            raise ValueError(
                f"{self.name} maps released vectors to the nearest input embedding; it cannot "
                f"read {release.space} releases."
            )
        bb = backbone(self._backbone)
        if release.kind == "text":
            texts = release.content_texts()
            flat, bounds = flatten(bb.token_ids(texts))
            # Re-embedded text sits exactly on a vocabulary vector; the pruned projection
            # answers those without a search.
            guess = bb.index.project(
                bb.embeddings[flat], source_ids=flat, offsets=np.zeros((len(flat), 1))
            )
        else:  # token vectors in the input word-embedding space
            vectors = [
                np.atleast_2d(np.asarray(v, dtype=np.float32)) for v in release.vectors or []
            ]
            dims = {v.shape[1] for v in vectors if len(v)}
            if dims - {bb.dim}:
                raise ValueError(
                    f"Released vectors have dimension {sorted(dims)}, but backbone "
                    f"{bb.name!r} embeds in {bb.dim}: attack with the backbone the defense used."
                )
            flat_vecs, bounds = flatten(vectors, dim=bb.dim)
            guess = bb.index.query(flat_vecs)
        tokens = [row.tolist() for row in unflatten(guess, bounds)]
        return Predictions("tokens", tokens=tokens, meta={"tokenizer": bb.name})
