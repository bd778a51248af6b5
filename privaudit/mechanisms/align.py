"""Position alignment between an original token sequence and a released one.

Written once for the attacks that learn (original → released) pairs on their own aux data and
for the runner's scoring, which must pair a reconstruction with the victim's original token.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import numpy as np


def align_positions(
    original: Sequence[int] | np.ndarray, released: Sequence[int] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs ``(i, j)``: released position ``j`` stands for original position ``i``.

    Equal lengths pair position by position (word- and token-level replacement keep the
    sequence). Otherwise (released text re-tokenized to another length) a sequence alignment
    pairs the equal blocks, and each replaced block position by position up to the shorter
    side; insertions and deletions stay unpaired.
    """
    a, b = list(np.asarray(original).tolist()), list(np.asarray(released).tolist())
    if len(a) == len(b):
        idx = np.arange(len(a), dtype=np.int64)
        return idx, idx.copy()
    src: list[int] = []
    dst: list[int] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "replace"):
            n = min(i2 - i1, j2 - j1)
            src.extend(range(i1, i1 + n))
            dst.extend(range(j1, j1 + n))
    return np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
