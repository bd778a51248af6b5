"""White-box nearest-neighbour embedding inversion."""

from __future__ import annotations

from typing import Any, ClassVar, Self

import numpy as np

from privaudit.api import Attack, Knowledge, Predictions, Release
from privaudit.mechanisms.batching import flatten, unflatten
from privaudit.registry import ATTACKS


@ATTACKS.register("nn-inversion")
class NNInversion(Attack):
    """Nearest-neighbour inversion of token representations.

    Papers: the embedding-inversion attack of Song & Raghunathan, "Information Leakage in
    Embedding Models", CCS 2020 (white-box nearest neighbour), as used against T2T in RAPT
    (Li et al., §IV-A1).

    Threat model: white box. The attacker knows the backbone's input-embedding matrix. It sees
    a release of token vectors, or released text which it re-embeds token by token, and maps
    each vector to the nearest vocabulary token; those are its guesses of the original tokens.

    Metric: token recovery rate X (fraction of the victim's original tokens recovered, aligned
    by position, or by sequence alignment where the lengths differ); empirical privacy 1 - X.
    """

    name: ClassVar[str] = "nn-inversion"
    accepts: ClassVar[frozenset[str]] = frozenset({"text", "token_vectors"})
    metric: ClassVar[str] = "token_recovery"
    needs_white_box: ClassVar[bool] = True

    def __init__(self, backbone: str | None = None) -> None:
        self.backbone = backbone

    def applicable(
        self, release_kind: str, knowledge: Knowledge, meta: dict[str, Any] | None = None
    ) -> str | None:
        reason = super().applicable(release_kind, knowledge, meta)
        space = (meta or {}).get("space", "input_word_embeddings")
        if reason is None and release_kind == "token_vectors" and space != "input_word_embeddings":
            layer = (meta or {}).get("layer")
            return (
                f"nn-inversion maps vectors to the nearest input embedding, but this release is "
                f"{space} states of layer {layer}; use an inversion that models the bottom layers"
            )
        return reason

    def fit(self, knowledge: Knowledge) -> Self:
        if self.backbone is None:
            self.backbone = knowledge.backbone
        return self

    def attack(self, release: Release) -> Predictions:
        from privaudit.resources import backbone

        bb = backbone(self.backbone)
        if release.kind == "text":
            texts = release.content_texts()
            flat, bounds = flatten(bb.token_ids(texts))
            # Re-embedded text sits exactly on a vocabulary vector; the pruned projection
            # answers those without a search.
            guess = bb.index.project(
                bb.embeddings[flat], source_ids=flat, offsets=np.zeros((len(flat), 1))
            )
        elif release.kind == "token_vectors":
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
        else:
            raise ValueError(f"{self.name} cannot read a {release.kind!r} release.")
        tokens = [row.tolist() for row in unflatten(guess, bounds)]
        return Predictions("tokens", tokens=tokens, meta={"tokenizer": bb.name})
