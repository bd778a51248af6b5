"""A worked example of a user's privatizer for `privaudit audit`.

It knows nothing of privaudit: a class with ``privatize(texts, rng)`` that returns one string
per input. Audit it with

    privaudit audit examples/plugins/mask_words.py:MaskWords --knob p=0.2,0.5,0.8

``MaskWords`` replaces each word, independently with probability ``p``, by a word drawn
uniformly from a small public list of filler words. It has no formal guarantee (a word kept
is kept verbatim); the audit shows how far that is from the d_X-private defenses.
"""

from __future__ import annotations

import numpy as np

FILLERS = ["thing", "stuff", "someone", "somewhere", "it", "good", "went", "made", "the", "a"]


class MaskWords:
    name = "mask-words"
    guarantee = "none (each word is hidden with probability p)"

    def __init__(self, p: float = 0.5) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p is a probability, got {p!r}.")
        self.p = p

    def privatize(self, texts: list[str], rng: np.random.Generator) -> list[str]:
        out = []
        for text in texts:
            words = text.split()
            hide = rng.random(len(words)) < self.p
            fill = rng.integers(len(FILLERS), size=len(words))
            out.append(
                " ".join(FILLERS[f] if h else w for w, h, f in zip(words, hide, fill, strict=True))
            )
        return out
