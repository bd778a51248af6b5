"""What both sides of the reference comparison share: the mechanisms compared, their
parameters and ε, the input words, and the shared vocabulary's files (see README.md).

Plain Python and numpy only: imported by ``ours.py`` (privaudit's environment) and by
``theirs.py`` (the reference packages' environment, never a dependency of privaudit).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: (mechanism, ε values): one shared vocabulary of GloVe 6B 50d words, so ε means the same.
EPSILONS: dict[str, tuple[float, ...]] = {
    "santext": (1.0, 2.0, 3.0),
    "custext": (1.0, 3.0, 6.0),
    "tem": (1.0, 2.0, 3.0),
    "mahalanobis": (10.0, 20.0, 40.0),
    "vickrey": (10.0, 20.0, 40.0),
    "diffractor": (0.2, 1.1, 2.5),  # 1 / position in the 1-D list: no embedding scale
}
#: The parameters both sides use (the papers' defaults where they state one).
PARAMS: dict[str, dict[str, float]] = {
    "santext": {},
    "custext": {"k": 20},
    "tem": {"beta": 0.001},
    "mahalanobis": {"lam": 0.2},
    "vickrey": {"t": 0.75, "lam": 0.0},
    "diffractor": {"k": 50},
}
#: Fixed input words whose replacement distributions are compared.
INPUTS = ("good", "city", "john", "music")


def load_vocabulary(folder: Path) -> tuple[list[str], np.ndarray]:
    words = (folder / "words.txt").read_text(encoding="utf-8").split("\n")
    return words, np.load(folder / "vectors.npy")


def load_words10k(folder: Path) -> list[str]:
    return (folder / "words10k.txt").read_text(encoding="utf-8").split()
