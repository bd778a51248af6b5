"""The format reference: the undefended release in a vector format, with no noise."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import numpy as np

from privaudit.api import CLEAN, Defense, Release
from privaudit.defenses.dpnr import MaxLength
from privaudit.guarantees import Guarantee
from privaudit.mechanisms.inputs import check_rng, check_texts
from privaudit.mechanisms.laplace import minmax_normalise
from privaudit.models.backbone import backbone
from privaudit.params import ParamError, PositiveInt

#: The vector formats a release can take (privaudit.api.Space, text aside: that is ``none``).
Format = Literal["token_embeddings", "hidden_states", "pooled"]


class CleanRelease(Defense):
    """The original text released as vectors, with no mechanism: a format reference.

    What it is for: a vector release is harder to read than text even without noise, so part
    of a vector defense's measured privacy comes from the release format, not from its
    mechanism (on a real corpus CAPE at ε = 10⁶, effectively no noise, scored the same gender
    privacy as at ε = 100). ``clean`` releases exactly what the vector defenses release at no
    noise (ε = ∞, η = ∞); the board reads it as a reference, never ranked, and splits each
    vector defense's privacy into the format's share (this reference's) and the mechanism's
    (the rest) (:mod:`privaudit.leaderboard.formats`). Not a published method.

    Releases (``release``), each what another defense releases at no noise:
    - ``token_embeddings``: each token's input word embedding (WordPieces without [CLS],
      [SEP] and [UNK], truncated to ``max_length`` − 2 as SAP truncates), ``layer = 0``:
      SAP's release at ``split_layer=0`` and η = ∞, embedding-dx's at η = ∞;
    - ``hidden_states``: the hidden states after encoder layer ``layer`` ≥ 1 (every position,
      [CLS] and [SEP] included, truncated to ``max_length``): SAP's release at
      ``split_layer=layer`` and η = ∞;
    - ``pooled``: the attention-masked mean of the last hidden states (truncated to
      ``max_length``), min-max normalised to [0, 1] over its dimensions: CAPE's release at
      ε = ∞ (DPNR's too, at ε = ∞ and dropout 0: both call the same release function).

    Threat model: that of the defenses sharing the format: the service, or an eavesdropper,
    sees the vectors and knows the backbone (white box) and the release function (query
    access). Privacy knob: none. Guarantee: none.

    Deviations: embedding-dx does not truncate, so on documents longer than ``max_length`` − 2
    WordPieces its clean tokens are more than these. CAPE's adversary is a service-side
    objective: it changes no release, so the privacy reference is exact, but the service
    trains no objective on ``clean``'s releases, so its utility is the format's alone.
    """

    name: ClassVar[str] = CLEAN
    cost_prior: ClassVar[float] = 0.2  # s per 1,000 words (estimate; encodes for two formats)
    gpu: ClassVar[float] = 0.25  # encodes with the backbone (privaudit.runtime.devices)
    knob: ClassVar[str | None] = None
    calibrates_by_rate: ClassVar[bool] = False  # vector releases replace no words
    guarantee: ClassVar[Guarantee] = Guarantee.none()
    # One reference per vector format the quick grid's defenses release (its SAP splits at 0).
    variants: ClassVar[tuple[dict[str, Any], ...]] = (
        {"release": "token_embeddings"},
        {"release": "pooled"},
    )

    def __init__(
        self,
        release: Format = "token_embeddings",
        layer: PositiveInt | None = None,
        backbone: str | None = None,
        max_length: MaxLength = 128,
    ) -> None:
        if release == "hidden_states" and layer is None:
            raise ParamError(
                "clean (CleanRelease): release='hidden_states' needs layer=k (k >= 1, the "
                "encoder layer the states follow, as SAP's split_layer)."
            )
        if release != "hidden_states" and layer is not None:
            raise ParamError(
                f"clean (CleanRelease): layer={layer!r} applies only to "
                f"release='hidden_states'; remove it for release={release!r}."
            )
        self.release = release
        self.layer = layer
        self.backbone = backbone
        self.max_length = max_length

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        texts = check_texts(texts)
        check_rng(rng)  # draws nothing: the release is deterministic
        bb = backbone(self.backbone)
        meta: dict[str, Any] = {"defense": self.name, "release": self.release, "backbone": bb.name}
        if self.release == "token_embeddings":
            ids = [row[: self.max_length - 2] for row in bb.token_ids(texts)]
            return Release(
                "token_vectors", vectors=[bb.embeddings[r] for r in ids], layer=0, meta=meta
            )
        if self.release == "hidden_states":
            k = int(self.layer or 0)
            bb._check_layer(k, lowest=1)
            states = bb.hidden_at_layer(texts, k, max_length=self.max_length)
            return Release("token_vectors", vectors=states, layer=k, meta=meta)
        pooled = minmax_normalise(bb.pooled(texts, max_length=self.max_length))
        return Release("pooled_vectors", vectors=[row.copy() for row in pooled], meta=meta)
