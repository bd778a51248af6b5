"""From an anonymizer's output text to the spans of the original it masked: the original and
the output aligned on words, whitespace runs and symbols (:func:`align`), the spans the output
does not carry over verbatim (:func:`masked_spans`); :mod:`privaudit.metrics.tab` scores them."""

from __future__ import annotations

import difflib
import re
from collections import Counter
from typing import Any

import numpy as np

#: A (start, end) character span of a text.
Span = tuple[int, int]
REFINE_MAX = 4_000_000  # unit pairs of a gap difflib aligns without autojunk (~1 s)
_ALIGN = re.compile(r"\w+|\s+|[^\w\s]")  # alignment units: words, whitespace runs, symbols


def masked_spans(original: str, anonymized: str) -> list[Span]:
    """The spans of ``original`` that ``anonymized`` does not carry over (see :func:`align`)."""
    return align(original, anonymized)[0]


def align(original: str, anonymized: str) -> tuple[list[Span], int]:
    """The spans of ``original`` that ``anonymized`` does not carry over verbatim, and the
    number of characters that could not be aligned (counted as NOT masked).

    An anonymizer keeps the order of what it keeps, so the two texts are aligned as a diff:
    both are cut into units (``\\\\w+`` words, single symbols, whitespace runs; whitespace runs
    compare equal whatever their content, so re-spacing masks nothing) and matched by patience
    diffing: common leading and trailing units are matched, then the units that occur exactly
    once in both remaining stretches anchor the match (their longest increasing run), and each
    stretch between anchors is aligned the same way; a stretch with no such anchor is aligned
    by :class:`difflib.SequenceMatcher` (no autojunk). Where the units of the original and
    the output still differ (a replaced stretch), common leading and trailing characters are
    kept too (``Smiths`` → ``<PERSON_1>s`` masks ``Smith``). Every other character of the
    original is masked. Verbatim text is never taken for masked because an alignment crossed
    itself (difflib's longest-block heuristic did that: one misplaced " Section" made a
    paragraph count as masked).

    Errs towards "not masked", and counts what it could not align: in a replaced stretch
    whose replacement holds whitespace (``15 May 1990 the Ankara Court`` → ``<DATE_1>
    <ORG_1>``), which of the original's spaces was kept is unknown, so none is masked; and a
    stretch aligned by difflib (no unique anchor) leaves unmasked every unit its output stretch
    also holds (``, Mr`` among names: which "Mr" was kept is unknown); a stretch too long to
    align unit by unit (over
    :data:`REFINE_MAX` unit pairs without an anchor: a text rewritten at length) keeps every
    unit that occurs in the output's stretch, and those characters are counted as unaligned.
    Limits: a surrogate that repeats the original's words or letters (``12 October 1999`` for
    ``15 October 2004``, ``Jane`` for ``John``) leaves them unmasked, and a word moved
    elsewhere counts as masked. A defense that reports its own spans is scored on those.
    """
    a_units = [(m.start(), m.end()) for m in _ALIGN.finditer(original)]
    b_units = [(m.start(), m.end()) for m in _ALIGN.finditer(anonymized)]
    a_keys = [" " if original[s].isspace() else original[s:e] for s, e in a_units]
    b_keys = [" " if anonymized[s].isspace() else anonymized[s:e] for s, e in b_units]
    kept = np.zeros(len(original), dtype=bool)
    unaligned = np.zeros(len(original), dtype=bool)
    for i1, i2, j1, j2, exact, scope in _diff(a_keys, b_keys):
        if exact:  # matched units (a diff's equal stretch)
            if i1 < i2:
                kept[a_units[i1][0] : a_units[i2 - 1][1]] = True
            continue
        if i1 == i2:
            continue  # an insertion: nothing of the original
        lo, hi = a_units[i1][0], a_units[i2 - 1][1]
        if exact is None:  # too long to align: keep what the output's stretch holds
            present = set(b_keys[j1:j2])
            for k in range(i1, i2):
                if a_keys[k] in present:
                    unaligned[a_units[k][0] : a_units[k][1]] = True
            continue
        if j1 < j2:  # a replacement: common leading/trailing characters stay unmasked
            blo, bhi = b_units[j1][0], b_units[j2 - 1][1]
            old, new = original[lo:hi], anonymized[blo:bhi]
            head = _common_prefix(old, new)
            tail = _common_prefix(old[head:][::-1], new[head:][::-1])
            kept[lo : lo + head] = True
            kept[hi - tail : hi] = True
            # A unit the output's stretch also holds may be the one it kept (which of the
            # original's spaces, or of two "Mr", is unknown): not masked, and counted.
            sj1, sj2 = scope or (j1, j2)
            maybe = set(b_keys[sj1:sj2]) if scope else {" "} & set(b_keys[j1:j2])
            for k in range(i1, i2):
                s, e = a_units[k]
                if a_keys[k] in maybe and lo + head <= s and e <= hi - tail:
                    unaligned[s:e] = True
    masked = ~kept & ~unaligned
    return _runs(masked), int(unaligned.sum())


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _diff(a: list[str], b: list[str]) -> list[tuple[Any, ...]]:
    """A patience diff of two unit lists: ``(i1, i2, j1, j2, exact, scope)`` stretches in
    order; ``exact`` True for matched units, False for a replaced stretch, None for a stretch
    too long to align; ``scope``, for a stretch difflib aligned, the (j1, j2) of the whole
    anchorless stretch of ``b`` it came from, else None (see :func:`align`)."""
    out: list[tuple[Any, ...]] = []
    # depth first, left to right, so `out` comes in order: a stretch still to diff is
    # (False, bounds), a finished one (True, result)
    stack: list[tuple[bool, tuple[Any, ...]]] = [(False, (0, len(a), 0, len(b)))]
    while stack:
        done, item = stack.pop()
        if done:
            out.append(item if len(item) == 6 else (*item, None))
            continue
        alo, ahi, blo, bhi = item
        p = 0
        while alo + p < ahi and blo + p < bhi and a[alo + p] == b[blo + p]:
            p += 1
        q = 0
        while ahi - q > alo + p and bhi - q > blo + p and a[ahi - q - 1] == b[bhi - q - 1]:
            q += 1
        pieces: list[tuple[Any, ...]] = []
        if p:
            pieces.append((alo, alo + p, blo, blo + p, True))
        mid = (alo + p, ahi - q, blo + p, bhi - q)
        if mid[0] == mid[1] or mid[2] == mid[3]:
            if mid[0] < mid[1] or mid[2] < mid[3]:
                pieces.append((*mid, False))
        else:
            pieces += _split_on_anchors(a, b, *mid)
        if q:
            pieces.append((ahi - q, ahi, bhi - q, bhi, True))
        stack += [(len(piece) >= 5, piece) for piece in reversed(pieces)]
    return out


def _split_on_anchors(
    a: list[str], b: list[str], alo: int, ahi: int, blo: int, bhi: int
) -> list[Any]:
    """The stretch ``a[alo:ahi]`` / ``b[blo:bhi]`` cut at its unique common units (their
    longest increasing run): sub-stretches to diff again and the anchors (matched); without
    an anchor, difflib's alignment (no autojunk) as results, or one unalignable result."""
    ca, cb = Counter(a[alo:ahi]), Counter(b[blo:bhi])
    where_b = {b[j]: j for j in range(blo, bhi) if cb[b[j]] == 1 and ca[b[j]] == 1}
    pairs = [(i, where_b[a[i]]) for i in range(alo, ahi) if a[i] in where_b]
    anchors = _increasing(pairs)
    if not anchors:
        if (ahi - alo) * (bhi - blo) > REFINE_MAX:
            return [(alo, ahi, blo, bhi, None)]
        out: list[Any] = []
        i0, j0 = alo, blo
        sm = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
        for fi, fj, n in sm.get_matching_blocks():
            if n and all(k == " " for k in a[alo + fi : alo + fi + n]):
                continue  # whitespace alone anchors nothing: which space it was is unknown
            i, j = alo + fi, blo + fj
            if i > i0 or j > j0:
                out.append((i0, i, j0, j, False, (blo, bhi)))
            if n:
                out.append((i, i + n, j, j + n, True))
            i0, j0 = i + n, j + n
        return out
    out = []
    i0, j0 = alo, blo
    for i, j in anchors:
        if i > i0 or j > j0:
            out.append((i0, i, j0, j))
        out.append((i, i + 1, j, j + 1, True))
        i0, j0 = i + 1, j + 1
    if i0 < ahi or j0 < bhi:
        out.append((i0, ahi, j0, bhi))
    return out


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of ``pairs`` (sorted by the first) increasing in the second."""
    import bisect

    tails: list[int] = []  # tails[k]: index in pairs of the smallest end of a run of k + 1
    prev = [-1] * len(pairs)
    ends: list[int] = []
    for k, (_, j) in enumerate(pairs):
        pos = bisect.bisect_left(ends, j)
        if pos:
            prev[k] = tails[pos - 1]
        if pos == len(ends):
            ends.append(j)
            tails.append(k)
        else:
            ends[pos] = j
            tails[pos] = k
    run: list[tuple[int, int]] = []
    k = tails[-1] if tails else -1
    while k >= 0:
        run.append(pairs[k])
        k = prev[k]
    return run[::-1]


def _runs(masked: np.ndarray) -> list[Span]:
    """The maximal runs of True in a boolean array, as (start, end) spans."""
    edges = np.diff(np.concatenate(([0], masked.astype(np.int8), [0])))
    return list(
        zip(np.flatnonzero(edges == 1).tolist(), np.flatnonzero(edges == -1).tolist(), strict=True)
    )
