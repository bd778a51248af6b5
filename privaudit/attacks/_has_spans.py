"""Reading a Hide-and-Seek release: the replaced spans, their contexts, the aux diff.

The part of ``has-deanonymization`` that turns anonymized text into what its index learns
from and guesses for: placeholders and NER spans (:func:`find_spans`, with NER spans that one
surrogate split joined again by :func:`merge_spans`), each span's word context
(:func:`span_contexts`), and, for the attacker's own (original, anonymized) aux pairs, the
token-level diff that says which original a released span stands for (:class:`Aligner`).
"""

from __future__ import annotations

import difflib
import functools
import itertools
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privaudit.models.entities import PLACEHOLDER, repeats

TOKEN = re.compile(r"\w+|[^\w\s]")
Ner = tuple[int, int, str]  # an NER span: (start, end, label)


@dataclass
class ReplacedSpan:
    """A replaced span found in an anonymized text."""

    start: int
    end: int
    type: str  # the placeholder's type, or the NER label of the surrogate
    released: str  # the placeholder or surrogate string as released
    placeholder: bool


def find_spans(
    text: str, ner: Sequence[tuple[int, int, str]], labels: frozenset[str] | None
) -> list[ReplacedSpan]:
    """Placeholders by pattern, then NER spans (of ``labels``; all if None) that overlap none."""
    out = [
        ReplacedSpan(m.start(), m.end(), m.group(1), m.group(0), True)
        for m in PLACEHOLDER.finditer(text)
    ]
    taken = np.zeros(len(text) + 1, dtype=bool)
    for sp in out:
        taken[sp.start : sp.end] = True
    for s, e, t in ner:
        if (labels is None or t in labels) and not taken[s:e].any():
            out.append(ReplacedSpan(s, e, t, text[s:e], False))
            taken[s:e] = True
    return sorted(out, key=lambda sp: sp.start)


_MAX_GAP = 6  # characters between two NER spans that may still be one replacement


def _gap_key(text: str, end: int, start: int) -> str | None:
    """The normalised gap between two spans, if it is short and crosses no sentence end."""
    gap = text[end:start]
    if len(gap) > _MAX_GAP or any(c in gap for c in ".!?\n"):
        return None
    return " ".join(gap.split()).lower() or " "


def learn_merges(aligners: Sequence[Aligner], ner: Sequence[Sequence[Ner]]) -> frozenset[str]:
    """Gaps (", ", " and ", "-") that, between two NER spans of an anonymized aux text, mostly
    lie inside one replacement: both spans stand for the same original text."""
    inside: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    for al, spans in zip(aligners, ner, strict=True):
        for (s1, e1, _), (s2, e2, _) in itertools.pairwise(spans):
            key = _gap_key(al.anonymized, e1, s2)
            if key is None:
                continue
            seen[key] += 1
            inside[key] += int(al.one_replacement(s1, e2))
    return frozenset(k for k, n in seen.items() if n >= 2 and inside[k] / n >= 0.5)


def merge_spans(text: str, spans: Sequence[Ner], gaps: frozenset[str]) -> list[Ner]:
    """Join neighbouring NER spans across a learned gap; the first span's label names them."""
    out: list[Ner] = []
    for s, e, t in spans:
        if out and gaps and _gap_key(text, out[-1][1], s) in gaps:
            out[-1] = (out[-1][0], e, out[-1][2])
        else:
            out.append((s, e, t))
    return out


def propagate_spans(
    text: str, spans: list[ReplacedSpan], labels: frozenset[str]
) -> list[ReplacedSpan]:
    """White box: HaS hides every whole-word repeat of a detected string, so every repeat of
    a detected surrogate is that surrogate too."""
    seen: dict[str, str] = {}  # surrogate string → its type, in order of first detection
    for sp in spans:
        if not sp.placeholder and sp.type in labels:
            seen.setdefault(sp.released, sp.type)
    found = repeats(text, [(sp.start, sp.end) for sp in spans], seen)
    out = [*spans, *(ReplacedSpan(s, e, t, text[s:e], False) for s, e, t in found)]
    return sorted(out, key=lambda sp: sp.start)


def index_of(spans: list[ReplacedSpan], target: ReplacedSpan) -> int | None:
    for i, sp in enumerate(spans):
        if sp.start == target.start and sp.end == target.end:
            return i
    return None


def span_contexts(
    text: str, spans: Sequence[ReplacedSpan], k: int
) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]], str]:
    """Per span, its ``k`` lower-cased word tokens to the left and right (other spans read as
    ``<TYPE>``), and the document as one token string for TF-IDF."""
    tokens: list[str] = []
    at: list[int] = []
    pos = 0
    for sp in spans:
        tokens += [m.group(0).lower() for m in TOKEN.finditer(text, pos, sp.start)]
        at.append(len(tokens))
        tokens.append(f"<{sp.type}>")
        pos = sp.end
    tokens += [m.group(0).lower() for m in TOKEN.finditer(text, pos)]
    left = [tuple(tokens[max(0, i - k) : i]) for i in at]
    right = [tuple(tokens[i + 1 : i + 1 + k]) for i in at]
    return left, right, " ".join(tokens)


class Aligner:
    """Token-level diff of an original and its anonymized text (aux pairs only)."""

    def __init__(self, original: str, anonymized: str) -> None:
        self.original = original
        self.anonymized = anonymized
        self.o_tok = [(m.start(), m.end()) for m in TOKEN.finditer(original)]
        self.a_tok = [(m.start(), m.end()) for m in TOKEN.finditer(anonymized)]
        matcher = difflib.SequenceMatcher(
            None,
            [original[s:e] for s, e in self.o_tok],
            [anonymized[s:e] for s, e in self.a_tok],
            autojunk=False,
        )
        # Per anonymized token: the original token block it stands for, and whether it changed.
        self.block: list[tuple[int, int]] = [(0, 0)] * len(self.a_tok)
        self.changed: list[bool] = [False] * len(self.a_tok)
        self.regions: list[tuple[int, int]] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for n in range(j2 - j1):
                    self.block[j1 + n] = (i1 + n, i1 + n + 1)
            elif j2 > j1:
                for j in range(j1, j2):
                    self.block[j] = (i1, i2)
                    self.changed[j] = True
                self.regions.append((self.a_tok[j1][0], self.a_tok[j2 - 1][1]))

    def changed_regions(self) -> list[tuple[int, int]]:
        return self.regions

    def one_replacement(self, start: int, end: int) -> bool:
        """Is the anonymized stretch ``[start, end)`` inside a single changed region?"""
        return any(s <= start and end <= e for s, e in self.regions)

    def original_of(self, start: int, end: int) -> tuple[str, bool]:
        """The original text an anonymized char span stands for, and whether it changed."""
        js = [j for j, (s, e) in enumerate(self.a_tok) if s < end and e > start]
        blocks = [self.block[j] for j in js if self.block[j][1] > self.block[j][0]]
        changed = any(self.changed[j] for j in js)
        if not blocks:
            return "", changed
        i1 = min(b[0] for b in blocks)
        i2 = max(b[1] for b in blocks)
        return self.original[self.o_tok[i1][0] : self.o_tok[i2 - 1][1]], changed


@functools.lru_cache(maxsize=1 << 18)
def ratio(a: str | None, b: str | None) -> float:
    if a is None or b is None:
        return 0.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
