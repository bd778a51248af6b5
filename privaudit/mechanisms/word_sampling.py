"""Word-level metric-DP replacement, shared by SanText, CusText, TEM, Mahalanobis and Vickrey.

These mechanisms (Yue et al. 2021; Chen et al. 2023; Carvalho et al. 2023; Xu et al. 2020,
2021) replace each *word* of a text by a word of a candidate vocabulary. What they share is
written once here, vectorised:

- :class:`WordVocabulary` — the candidate words and their vectors. By default the backbone's
  single-piece alphabetic whole words (the ids that tokenize as exactly themselves) with
  their input embeddings: the space t2t's and pct2t's guarantees are stated in.
- :class:`WordBatch` — the words of a batch of texts (runs of letters), each with its vector:
  its vocabulary row, or the mean of its WordPiece embeddings for a word outside the
  vocabulary (as PCT2T embeds rare words); everything between words is kept verbatim, so a
  release has the original's layout and number of words.
- :func:`exponential_choice` / :func:`exponential_log_probs` — the exponential mechanism over
  the candidates with score ``-min(d, cap)`` (SanText: no cap; TEM: the truncation γ):
  P(y | x) ∝ exp(−ε·min(‖φ(x) − φ(y)‖, cap)/2), drawn exactly by inverse CDF, one uniform per
  occurrence, each distinct input's distribution computed once per call.

Randomness: every function takes its uniforms or an explicit ``numpy.random.Generator``; the
draw order is fixed (one uniform per word occurrence, in text order).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privaudit.mechanisms.audited import one_token_words

#: A word: a run of letters (any script); digits, punctuation and spaces are kept as they are.
WORD = re.compile(r"[^\W\d_]+")
_BLOCK = 256  # distinct inputs per block of the (inputs x candidates) probability matrix


@dataclass(frozen=True)
class WordVocabulary:
    """Candidate words (lower case), their vectors (float32, one row each) and, where they come
    from a backbone, their WordPiece ids (``ids``; empty otherwise)."""

    words: tuple[str, ...]
    vectors: np.ndarray
    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2 or len(self.words) != self.vectors.shape[0]:
            raise ValueError("A word vocabulary needs one vector row per word.")
        if len(self.words) < 2:
            raise ValueError("A word vocabulary needs at least two words.")

    @functools.cached_property
    def row(self) -> dict[str, int]:
        return {w: i for i, w in enumerate(self.words)}

    def __len__(self) -> int:
        return len(self.words)


_VOCABULARIES: dict[str, WordVocabulary] = {}


def backbone_words(bb: Any) -> WordVocabulary:
    """A backbone's single-piece alphabetic whole words (each tokenizes as exactly itself)
    with their input embeddings, in vocabulary order (for BERT's WordPiece vocabulary roughly
    by frequency: ``the``, ``of``, ``and``, ...); built once per backbone fingerprint."""
    if bb.fingerprint not in _VOCABULARIES:
        pool = bb.candidate_ids[bb.subwords.classes[bb.candidate_ids] == 0]
        ids, words = one_token_words(bb, pool)
        vectors = np.ascontiguousarray(bb.embeddings[ids], dtype=np.float32)
        vectors.setflags(write=False)
        _VOCABULARIES[bb.fingerprint] = WordVocabulary(tuple(words), vectors, ids)
    return _VOCABULARIES[bb.fingerprint]


def match_case(template: str, word: str) -> str:
    """``word`` with the casing pattern of ``template`` (the vocabulary is lower case)."""
    if len(template) > 1 and template.isupper():
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


@dataclass
class WordBatch:
    """The words of ``texts``, flattened: ``words[k]`` as written, ``lower[k]``, its
    vocabulary row (``row[k]``, -1 outside the vocabulary), its vector, and whether it has one
    (``embeddable``: False for a word none of whose pieces the tokenizer knows)."""

    texts: list[str]
    spans: list[list[tuple[int, int]]]
    words: list[str]
    lower: list[str]
    row: np.ndarray
    vectors: np.ndarray
    embeddable: np.ndarray

    @classmethod
    def of(cls, texts: Sequence[str], vocab: WordVocabulary, bb: Any) -> WordBatch:
        """``texts``' words; ``bb`` (a backbone) embeds the words outside ``vocab``."""
        spans = [[m.span() for m in WORD.finditer(t)] for t in texts]
        words = [t[a:b] for t, s in zip(texts, spans, strict=True) for a, b in s]
        lower = [w.lower() for w in words]
        row = np.asarray([vocab.row.get(w, -1) for w in lower], dtype=np.int64)
        dim = vocab.vectors.shape[1]
        vectors = np.zeros((len(words), dim), dtype=np.float32)
        known = row >= 0
        vectors[known] = vocab.vectors[row[known]]
        embeddable = known.copy()
        unknown = sorted({w for w, r in zip(lower, row, strict=True) if r < 0})
        if unknown:
            means = {
                w: bb.embeddings[p].mean(0)
                for w, p in zip(unknown, bb.token_ids(unknown), strict=True)
                if len(p)
            }
            for k in np.flatnonzero(~known):
                vec = means.get(lower[k])
                if vec is not None:
                    vectors[k] = vec
                    embeddable[k] = True
        return cls(list(texts), spans, words, lower, row, vectors, embeddable)

    def render(self, new_words: Sequence[str]) -> tuple[list[str], list[np.ndarray]]:
        """The texts with each word replaced by ``new_words[k]`` (in the original's casing),
        and per text the mask of words that changed."""
        out, masks, k = [], [], 0
        for text, spans in zip(self.texts, self.spans, strict=True):
            parts, last, mask = [], 0, []
            for a, b in spans:
                new = new_words[k]
                changed = new != self.lower[k]
                parts += [text[last:a], match_case(self.words[k], new) if changed else text[a:b]]
                mask.append(changed)
                last, k = b, k + 1
            parts.append(text[last:])
            out.append("".join(parts))
            masks.append(np.asarray(mask, dtype=bool))
        return out, masks


def distances(queries: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Euclidean distances (float64; the products in float32) of every query row to every
    candidate row."""
    q = np.asarray(queries, dtype=np.float32)
    c = np.asarray(candidates, dtype=np.float32)
    # the product in float32 (the cost: BLAS over the vocabulary), the sums in float64
    dot = (q @ c.T).astype(np.float64)
    q_sq = np.einsum("ij,ij->i", q.astype(np.float64), q.astype(np.float64))
    c_sq = np.einsum("ij,ij->i", c.astype(np.float64), c.astype(np.float64))
    sq = q_sq[:, None] - 2.0 * dot + c_sq
    return np.sqrt(np.maximum(sq, 0.0))


def _log_weights(
    queries: np.ndarray, candidates: np.ndarray, epsilon: float, cap: float | None
) -> np.ndarray:
    d = distances(queries, candidates)
    if cap is not None:
        np.minimum(d, cap, out=d)
    return -0.5 * epsilon * d


def exponential_log_probs(
    queries: np.ndarray,
    candidates: np.ndarray,
    epsilon: float,
    *,
    cap: float | None = None,
) -> np.ndarray:
    """ln P(y | x) of the exponential mechanism, P ∝ exp(−ε·min(d(x, y), cap)/2), for every
    query row x (rows) and candidate y (columns)."""
    logw = _log_weights(queries, candidates, epsilon, cap)
    top = logw.max(1, keepdims=True)
    return logw - (top + np.log(np.exp(logw - top).sum(1, keepdims=True)))


def exponential_choice(
    queries: np.ndarray,
    candidates: np.ndarray,
    epsilon: float,
    uniforms: np.ndarray,
    *,
    cap: float | None = None,
    inverse: np.ndarray | None = None,
) -> np.ndarray:
    """One draw per occurrence of the exponential mechanism over ``candidates`` (their row
    positions). ``queries`` are the distinct inputs, ``inverse[k]`` the query of occurrence k
    (default: one occurrence per query), ``uniforms[k]`` its U(0, 1) draw: the inverse CDF of
    its query's distribution, exactly (the distribution is computed once per distinct query,
    in blocks)."""
    queries = np.atleast_2d(queries)
    inverse = np.arange(len(queries)) if inverse is None else np.asarray(inverse, dtype=np.int64)
    uniforms = np.asarray(uniforms, dtype=np.float64)
    if uniforms.shape != inverse.shape:
        raise ValueError("exponential_choice needs one uniform per occurrence.")
    out = np.zeros(len(inverse), dtype=np.int64)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(0, len(queries) + _BLOCK, _BLOCK))
    for b, start in enumerate(range(0, len(queries), _BLOCK)):
        occ = order[bounds[b] : bounds[b + 1]]
        if not len(occ):
            continue
        logw = _log_weights(queries[start : start + _BLOCK], candidates, epsilon, cap)
        logw -= logw.max(1, keepdims=True)
        cdf = np.cumsum(np.exp(logw), axis=1)
        cdf /= cdf[:, -1:]
        cdf[:, -1] = 1.0
        # Row r's CDF shifted by r: one monotone array, searched once for every occurrence.
        cdf += np.arange(len(cdf))[:, None]
        local = inverse[occ] - start
        flat = np.searchsorted(cdf.ravel(), local + uniforms[occ], side="right")
        out[occ] = np.minimum(flat - local * cdf.shape[1], cdf.shape[1] - 1)
    return out
