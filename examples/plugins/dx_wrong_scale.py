"""A user's d_X word replacement with a planted bug, to show the guarantee audit.

``NoisyWords`` replaces each one-piece word by the nearest vocabulary word to its embedding
plus d_X noise, and declares η·d_X-privacy per word (Feyisetan et al. 2020). The bug: the
noise magnitude is drawn as Gamma(shape=1, scale=1/η) where d_X noise in D dimensions needs
Gamma(shape=D, scale=1/η): the noise is D (384) times too small, so words almost never
change. Every attack would see that too, but only the guarantee audit says the *claim* is
false:

    privaudit audit examples/plugins/dx_wrong_scale.py:NoisyWords --knob eta=5,10 --strict

prints a red first line naming the pair of words and the output event that contradict the
claim, and exits 6 before any grid is run. ``correct=True`` draws the right magnitude.
"""

from __future__ import annotations

import numpy as np

from privaudit.guarantees import Guarantee, Unit, embedding_distance
from privaudit.models.backbone import backbone


class NoisyWords:
    name = "noisy-words"

    def __init__(self, eta: float = 10.0, backbone: str | None = None, correct: bool = False):
        if not eta > 0:
            raise ValueError(f"eta is a positive number, got {eta!r}.")
        self.eta, self.backbone, self.correct = float(eta), backbone, bool(correct)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee.dx(
            "eta", self.eta, unit=Unit.WORD, metric=embedding_distance(self.backbone)
        )

    def privatize(self, texts: list[str], rng: np.random.Generator) -> list[str]:
        bb = backbone(self.backbone)
        words = [t.split() for t in texts]
        flat = [w for ws in words for w in ws]
        ids = bb.token_ids([w.lower() for w in flat])
        one = [k for k, p in enumerate(ids) if len(p) == 1]  # one-piece words are replaced
        out = list(flat)
        if one:
            directions = rng.standard_normal((len(one), bb.dim))
            directions /= np.linalg.norm(directions, axis=1, keepdims=True)
            shape = bb.dim if self.correct else 1  # BUG (correct=False): shape 1, not dim
            magnitudes = rng.gamma(shape, 1.0 / self.eta, size=(len(one), 1))
            vectors = bb.embeddings[[int(ids[k][0]) for k in one]] + directions * magnitudes
            new = bb.index.query(vectors.astype(np.float32))
            for k, token in zip(one, bb.subwords.id_to_token(new.tolist()), strict=True):
                out[k] = str(token)
        it = iter(out)
        return [" ".join(next(it) for _ in ws) for ws in words]
