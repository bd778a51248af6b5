"""A made-up attack scored by the made-up lower-is-stronger metric: it reads the released
text's tokens as its guess of the original ones. One module; registering it is one line,
``ATTACKS.add_builtin("edit-reader", "tests.made_up.edit_reader:EditReader")``."""

from __future__ import annotations

from typing import ClassVar, Self

import numpy as np

from privaudit.api import Attack, Knowledge, Predictions, Release, Space


class EditReader(Attack):
    """The released text's tokens, taken as the original ones (made up, for tests)."""

    name: ClassVar[str] = "edit-reader"
    accepts: ClassVar[frozenset[Space]] = frozenset({Space.TEXT})
    metric: ClassVar[str] = "token_edit_distance"

    def __init__(self, backbone: str | None = None) -> None:
        self.backbone = backbone

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        return self

    def attack(self, release: Release) -> Predictions:
        from privaudit.resources import backbone

        ids = backbone(self.backbone).token_ids(release.content_texts())
        return Predictions("tokens", tokens=[list(map(int, d)) for d in ids])
