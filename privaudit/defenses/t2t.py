"""Token-to-token d_X-privacy replacement (T2T)."""

from __future__ import annotations

import math
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
    - Word-aligned replacement: a WordPiece token is replaced only by a token of its own word
      class (:mod:`privaudit.mechanisms.subwords`): a word-initial piece by a word-initial
      piece, a continuation piece (``##ing``) by a continuation piece. Without it a
      replacement glues ``##`` pieces onto neighbouring words or splits words (605 of 705
      releases changed their word count at η 50), so the service re-tokenized something
      other than the privatized sequence. The guarantee holds within each class, and the
      class sequence is released, as PCT2T releases its category sequence (RAPT §III-A2).
    - The released text keeps the original's layout: a word-initial piece follows a space
      where the original had text before it, a continuation piece glues on; so a release
      has the original's number of whitespace-separated words (a word made only of [UNK]
      pieces aside). Words are lower-cased and accent-stripped by the uncased tokenizer.
    - The release's ``audit`` records the exact ids for the runner's scoring only, never for
      the attacker.
    """

    name: ClassVar[str] = "t2t"
    version: ClassVar[str] = "2"  # 2: word-aligned (class-preserving) replacement
    knob: ClassVar[str | None] = "eta"
    levels: ClassVar[tuple[float, ...]] = (50, 75, 100)

    def __init__(self, eta: PositiveFloat = 100.0, backbone: str | None = None) -> None:
        self.eta = eta
        self.backbone = backbone

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """eta·d_X-privacy per token, within its word class; n tokens compose."""
        return Guarantee.dx(
            "eta",
            self.eta,
            unit=Unit.TOKEN,
            within="its word class",
            metric=embedding_distance(self.backbone),
            composes_over=Unit.DOCUMENT,
            source="Feyisetan et al. 2020",
            notes="The word-class sequence is released",
            mechanism="token_kernel",
        )

    def token_kernel(self) -> UnitMechanism:
        """What the guarantee is proved for, for the guarantee audit: ``privatize`` on
        one-token texts of word-initial pieces, and the d_X noise step it draws."""
        bb = backbone(self.backbone)
        pool = bb.candidate_ids[bb.subwords.classes[bb.candidate_ids] == 0]
        return text_units(self.privatize, bb, pool, noise=token_dx_noise(bb.dim, self.eta))

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        tn = token_noise(texts, self.eta, self.backbone, rng)
        bb, flat = tn.backbone, tn.flat
        new = flat.copy()
        if not math.isinf(tn.eta) and len(flat):
            queries = bb.embeddings[flat] + tn.noise
            classes = bb.subwords.classes[flat]
            for word_class in np.unique(classes):
                rows = np.flatnonzero(classes == word_class)
                new[rows] = bb.class_index(int(word_class)).project(
                    queries[rows], source_ids=flat[rows], offsets=tn.noise[rows]
                )
        released = unflatten(new, tn.bounds)
        return Release(
            "text",
            texts=bb.subwords.render(released, tn.layout),
            meta={"defense": self.name, "eta": tn.eta, "backbone": bb.name},
            audit={
                "released_ids": released,
                "replaced": [r != o for r, o in zip(released, tn.ids, strict=True)],
                "unit": "token",
            },
        )
