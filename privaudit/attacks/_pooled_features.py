"""The features of the sentence-embedding inversions: any release read as one row per document
in the public backbone's pooled space, and the rows standardised.

One vector per document in one space, the public backbone's pooled last-layer embedding
(:meth:`Backbone.pooled`: attention-masked mean of the last hidden states, ``max_length`` 128,
as the probe encodes), whatever the release: the attacker, who owns the
public encoder, finishes its forward pass from wherever the release sits (one function for the
attacker's aux release and the victims'):

- ``text`` → re-encoded (RAPT's public plain-word prefix skipped);
- ``token_vectors`` at ``layer`` 0 (input word-embedding space, without [CLS]/[SEP]) → the
  whole encoder run on them as ``inputs_embeds``: [CLS] and [SEP] added, positions, token
  types and LayerNorm by the model's embedding layer (:meth:`Backbone.pooled_from_word_embeddings`,
  the first 126 vectors kept, as the text's truncation keeps);
- ``token_vectors`` at ``layer`` k >= 1 (hidden states after layer k, every position) → layers
  k+1..L, then the masked mean (:meth:`Backbone.pooled_from_layer`);
- ``pooled_vectors`` → as released.

So an untouched release reads exactly as the text it came from, and a nearly untouched one
cannot score above the undefended text for reading other features. The mean of the released
vectors would: it is a bag-of-words read the text's reading lacks (on the quick corpus it
scored SAP-CTI at η 150, 0.4 % of tokens changed, .046 above the undefended text, and SAP at
η 100 .047 above this path); the token attacks (``nn-``, ``mlp-``, ``optimization-inversion``)
read such releases token by token and set their family's worst case. Token vectors must have
the backbone's dimension and a layer it has; vectors that are not numeric or not finite are
refused. Both finishing passes are memoised by content on the backbone (the probe and both
attacks read the same release at a point). Every row is then standardised on its own (zero
mean and unit variance across its coordinates; CAPE and DPNR min-max normalise each pooled row
before noising it, an affine map this undoes). Empty documents give zero rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from privaudit.api import Release, Space
from privaudit.attacks._pairs import checked_release

if TYPE_CHECKING:
    from collections.abc import Sequence

    from privaudit.models.backbone import Backbone

_EPS = 1e-6


def release_features(bb: Backbone, release: Release, *, name: str) -> np.ndarray:
    """One row per document in the public backbone's pooled space (see the module
    docstring), before any standardisation; empty documents give zero rows."""
    checked_release(release, name=name)
    if release.kind == "text":
        content = release.content_texts()
        out = np.zeros((len(content), bb.dim), dtype=np.float32)
        full = [i for i, t in enumerate(content) if t.strip()]
        if full:
            out[full] = bb.pooled([content[i] for i in full])
        return out
    arrays = _numeric_vectors(release, name=name)
    if release.kind == "pooled_vectors":
        return _pooled_rows(arrays)
    # Token vectors: finish the public encoder's forward pass from where the release sits.
    layer = int(release.layer or 0)
    if layer > bb.n_layers:
        raise ValueError(
            f"{name} got hidden states after layer {layer}, but the public backbone "
            f"{bb.name!r} has {bb.n_layers} layers: give the attack the defense's backbone."
        )
    seqs = []
    for d, arr in enumerate(arrays):
        if arr.ndim > 2 or (arr.size and arr.shape[-1] != bb.dim):
            raise ValueError(
                f"{name} finishes the public backbone {bb.name!r}'s forward pass from released "
                f"token vectors of its dimension {bb.dim}, but document {d} has shape "
                f"{arr.shape}: give the attack the defense's backbone."
            )
        seqs.append(arr.reshape(-1, bb.dim))
    out = np.zeros((len(seqs), bb.dim), dtype=np.float32)
    full = [i for i, v in enumerate(seqs) if len(v)]
    if full:
        kept = [seqs[i] for i in full]
        # Layer 0 is the input word-embedding space (no [CLS]/[SEP]): the model's embedding
        # layer adds them, positions and LayerNorm; k >= 1 runs layers k+1..L.
        if layer == 0:
            out[full] = bb.pooled_from_word_embeddings(kept)
        else:
            out[full] = bb.pooled_from_layer(kept, layer)
    return out


def _numeric_vectors(release: Release, *, name: str) -> list[np.ndarray]:
    """The released arrays as float32, refused when not numeric or not finite."""
    arrays = []
    for d, v in enumerate(release.vectors or []):
        arr = np.asarray(v)
        if arr.dtype.kind not in "fiu":
            raise TypeError(f"Released document {d} is not numeric (dtype {arr.dtype}).")
        arr = arr.astype(np.float32, copy=False)
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} got released vectors with NaN or infinite values.")
        arrays.append(arr)
    return arrays


def _pooled_rows(arrays: list[np.ndarray]) -> np.ndarray:
    """One released vector per document, as released (empty ones as zero rows)."""
    rows = [a.reshape(-1) for a in arrays]
    dims = {len(r) for r in rows if len(r)}
    if len(dims) > 1:
        raise ValueError(f"The released vectors mix dimensions {sorted(dims)}.")
    out = np.zeros((len(rows), dims.pop() if dims else 0), dtype=np.float32)
    for i, r in enumerate(rows):
        if len(r):
            out[i] = r
    return out


def clean_features(
    bb: Backbone, texts: Sequence[str], space: Space, layer: int | None
) -> np.ndarray | None:
    """The aux texts' features for a release in ``space`` without privatization: every space
    is read in the pooled space, so these are the clean pooled embeddings; None when the
    public backbone cannot produce that space (a hidden layer it does not have)."""
    if space is Space.HIDDEN_STATES and (layer is None or not 1 <= int(layer) <= bb.n_layers):
        return None
    return release_features(bb, Release("text", texts=list(texts)), name="clean")


def standardise_rows(x: np.ndarray) -> np.ndarray:
    """Each row to zero mean and unit variance across its coordinates (zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float32)
    if x.shape[1] == 0:
        return x
    centred = x - x.mean(axis=1, keepdims=True)
    return (centred / (centred.std(axis=1, keepdims=True) + _EPS)).astype(np.float32)


@dataclass
class Scaler:
    """Per-coordinate standardisation with the statistics of one (row-standardised) release."""

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, x: np.ndarray) -> Scaler:
        return cls(mean=x.mean(axis=0), std=x.std(axis=0) + _EPS)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray((x - self.mean) / self.std, dtype=np.float32)
