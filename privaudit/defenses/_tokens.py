"""Token-level d_X noise over a backbone's embeddings, shared by t2t and embedding-dx."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.mechanisms.audited import DXNoise
from privaudit.mechanisms.batching import flatten
from privaudit.mechanisms.inputs import check_rng, check_texts
from privaudit.mechanisms.noise import sample_dx_noise
from privaudit.models.backbone import backbone


@dataclass
class TokenNoise:
    backbone: Any
    eta: float
    ids: list[np.ndarray]  # per document, WordPiece ids without specials and [UNK]
    flat: np.ndarray  # all ids, concatenated
    bounds: np.ndarray  # document i is flat[bounds[i]:bounds[i + 1]]
    noise: np.ndarray  # (len(flat), dim) d_X noise, one row per token
    layout: list[Any]  # per document, its Pieces: ids and where the original had a gap


def token_noise(
    texts: Sequence[str], eta: float, backbone_name: str | None, rng: np.random.Generator
) -> TokenNoise:
    """Check the inputs, tokenize, and draw one d_X noise vector per token (in order); ``eta``
    was checked by the defense's declaration."""
    texts = check_texts(texts)
    check_rng(rng)
    value = float(eta)
    bb = backbone(backbone_name)
    layout = bb.subwords.encode(texts)
    ids = [p.ids for p in layout]
    flat, bounds = flatten(ids)
    noise = sample_dx_noise(len(flat), bb.dim, value, rng)
    return TokenNoise(bb, value, ids, flat, bounds, noise, layout)


def token_dx_noise(dim: int, eta: float, *, released: bool = False) -> DXNoise:
    """The d_X noise step :func:`token_noise` draws, declared for the guarantee audit; sampled
    through this module's ``sample_dx_noise`` when the audit runs (a patched one included)."""
    return DXNoise(
        lambda n, e, rng: sample_dx_noise(n, dim, e, rng), dim, float(eta), released=released
    )
