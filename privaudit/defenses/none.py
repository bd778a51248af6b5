"""The undefended baseline: the release is the original text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import numpy as np

from privaudit.api import NONE, Defense, Release
from privaudit.guarantees import Guarantee
from privaudit.mechanisms.inputs import check_rng, check_texts


class NoDefense(Defense):
    """No privatization: the reference point every frontier is compared with.

    Threat model: the service (and anyone who sees the request) reads the text as written.
    Privacy knob: none. Guarantee: none.
    """

    name: ClassVar[str] = NONE
    cost_prior: ClassVar[float] = 0.0  # s per 1,000 words (estimate)
    knob: ClassVar[str | None] = None
    guarantee: ClassVar[Guarantee] = Guarantee.none()

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        texts = check_texts(texts)
        check_rng(rng)
        return Release("text", texts=list(texts), meta={"defense": self.name})
