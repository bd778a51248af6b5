"""Token-to-token d_X-privacy replacement (T2T)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from privaudit.api import Defense, Release
from privaudit.defenses._tokens import token_noise
from privaudit.mechanisms.batching import unflatten
from privaudit.params import PositiveFloat


class T2T(Defense):
    """Text-to-text privatization by d_X-private token replacement.

    Paper: Feyisetan, Balle, Drake, Diethe, "Privacy- and Utility-Preserving Textual Analysis via
    Calibrated Multivariate Perturbations", WSDM 2020; applied to a transformer's WordPiece
    vocabulary as in RAPT (Li et al., "Privacy-Preserving Prompt Tuning for Large Language
    Model Services"), which perturbs BERT's input embedding layer.

    Threat model: the user privatizes text locally and sends only the result; the service, and
    any attacker, sees the released text and may know the mechanism and the backbone.

    Mechanism: each WordPiece token w becomes argmin_{w'} ||phi(w) + z - phi(w')|| with z drawn
    from the d_X noise (density ~ exp(-eta ||z||)); phi is the backbone's input embedding.

    Privacy knob: ``eta`` (units: 1 / Euclidean distance in the backbone's input-embedding
    space). Guarantee: eta * d_X-privacy per token, d_X the embedding distance; a document of n
    tokens gets n-fold composition.

    Deviations and choices:
    - The candidate vocabulary excludes special tokens ([CLS], [SEP], [PAD], [MASK], [UNK]) and
      [unused*] slots, so they are never emitted; pieces the tokenizer maps to [UNK] (emoji,
      unsupported scripts) carry no recoverable identity and are dropped.
    - Replacement is per WordPiece token, not per word, so a replaced sub-word may change how
      the released text re-tokenizes; the release's ``audit`` records the exact ids for the
      runner's scoring only, never for the attacker.
    - The output is the detokenized text, lower-cased and accent-stripped by the uncased
      tokenizer.
    """

    name: ClassVar[str] = "t2t"
    knob: ClassVar[str | None] = "eta"
    guarantee: ClassVar[str] = "eta·d_X-privacy per token (Feyisetan et al. 2020)"
    levels: ClassVar[tuple[float, ...]] = (50, 75, 100)

    def __init__(self, eta: PositiveFloat = 100.0, backbone: str | None = None) -> None:
        self.eta = eta
        self.backbone = backbone

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        tn = token_noise(texts, self.eta, self.backbone, rng)
        bb, flat = tn.backbone, tn.flat
        if math.isinf(tn.eta) or len(flat) == 0:
            new = flat.copy()
        else:
            new = bb.index.project(
                bb.embeddings[flat] + tn.noise, source_ids=flat, offsets=tn.noise
            )
        released = unflatten(new, tn.bounds)
        return Release(
            "text",
            texts=bb.detokenize(released),
            meta={"defense": self.name, "eta": tn.eta, "backbone": bb.name},
            audit={
                "released_ids": released,
                "replaced": [r != o for r, o in zip(released, tn.ids, strict=True)],
                "unit": "token",
            },
        )
