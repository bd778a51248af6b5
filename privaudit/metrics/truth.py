"""The truth the runner holds about the victims, and the part of it a release can be judged on.

**No score without truth.** When the truth lacks what a metric needs (no victim has an entity
annotation, no victim's attribute value is known, the victims have no tokens or words to
recover), the scorer raises :class:`NotScorable` with a one-line reason and the runner records
the cell as ``n/a`` with it, rather than scoring "nothing found" as perfect privacy.

**Score only what the release contains.** A token-vector release may hold fewer positions
than the victim has tokens: SAP and SAP-CTI truncate each document to ``max_length`` word
pieces ([CLS] and [SEP] included), i.e. 126 content tokens. The tokens past the cut never left
the user's device, so they are neither recovered nor protected by the mechanism; counting them
as protected would credit the defense with the truncation (token recovery 0.938 on long
reviews with 0.02 % of tokens changed). So, for every ``token_vectors`` release that lines up
with the victims, each victim's truth is cut to the part the release holds
(:func:`released_token_counts`, :meth:`Truth.cut`) before any metric is computed:

- layer 0 (input word-embedding space): one vector per content token, no special tokens
  (SAP at k = 0, T2T-style releases), so a victim keeps its first ``len(vectors)`` truth
  tokens;
- layer k >= 1 (hidden states): ``[CLS] pieces [SEP]``, so the release holds the first
  ``len(vectors) - 2`` word pieces, [UNK] pieces included (which the truth leaves out): a
  victim keeps the truth tokens among those pieces (by :attr:`Truth.piece_positions` when
  the runner recorded them, else its first ``len(vectors) - 2`` tokens).

The positions of nn-, mlp- and ae-inversion (one prediction per released vector at layer 0)
and of optimization-inversion (one per content position, specials excluded) then line up with
the cut truth one to one. Where the truth knows where each token ends in the text
(:attr:`Truth.token_ends`), the victim's text is cut there as well and entities that end past
the cut are dropped, so word- and entity-level scores (bow-inversion, geia) judge the same
released part; without it the texts are scored whole. ``attack_details`` report
``truncated_tokens`` and ``truncated_documents`` when anything was cut. Text releases and
pooled vectors are scored against the whole victim.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from privaudit.api import Release
from privaudit.records import truth_fields


class NotScorable(Exception):
    """The truth lacks what the metric needs (``str(exc)`` is the one-line reason): the cell
    is recorded as ``n/a`` with that reason, never as a score."""


@dataclass
class Truth:
    """What the runner knows about the victims (never shown to an attack).

    ``tokens``: per victim, its WordPiece ids (``Backbone.token_ids``: no specials, no [UNK]);
    ``piece_positions`` (optional): per victim, the index of each of those tokens among the
    tokenizer's pieces of the text with [UNK] kept (where a split model's release counts
    positions); ``token_ends`` (optional): per victim, the character offset in its text where
    each token ends (to cut the text where a truncated release ends); ``docs`` (optional): the
    test-split index of each victim (0..n-1 when None; :meth:`subset` sets it).

    The fields are declared in :mod:`privaudit.records` (how each is built and cut to a
    subset of victims); those beyond the built-ins above (``author``) are held in ``extra``
    and read as attributes (``truth.author``; the field's default when not built).
    :meth:`of` builds a truth from any declared fields by name.
    """

    tokens: list[np.ndarray]
    attributes: dict[str, list[Any]] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    entities: list[list[dict[str, Any]]] = field(default_factory=list)
    embeddings: np.ndarray | None = None  # the backbone's input-embedding matrix (for MSE)
    # The aux split's most frequent token: the guess of an attacker who ignores the release.
    frequent_token: int | None = None
    # The mean input embedding of the aux tokens: the least-squares constant guess of an
    # attacker who ignores the release (the reconstruction-MSE baseline).
    mean_embedding: np.ndarray | None = None
    piece_positions: list[np.ndarray] = field(default_factory=list)
    token_ends: list[np.ndarray] = field(default_factory=list)
    docs: list[int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, values: Mapping[str, Any], docs: list[int] | None = None) -> Truth:
        """A truth from declared fields by name (:mod:`privaudit.records`); ``tokens``
        defaults to none."""
        declared = truth_fields()
        unknown = sorted(set(values) - set(declared))
        if unknown:
            raise ValueError(
                f"Unknown truth fields {unknown}; declare them with "
                "privaudit.records.register_truth_field."
            )
        own = {k: v for k, v in values.items() if k in _OWN}
        extra = {k: v for k, v in values.items() if k not in _OWN}
        return cls(**({"tokens": []} | own), docs=docs, extra=extra)

    def get(self, name: str) -> Any:
        """The declared truth field ``name`` (its default when not built)."""
        if name in _OWN:
            return getattr(self, name)
        spec = truth_fields().get(name)
        if spec is None:
            raise AttributeError(f"The truth has no field {name!r}.")
        return self.extra[name] if name in self.extra else spec.default()

    def __getattr__(self, name: str) -> Any:
        # Declared fields beyond the built-in attributes live in ``extra``.
        if "extra" in self.__dict__ and name in truth_fields():
            return self.get(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def n_victims(self) -> int:
        """The number of victims (the longest per-victim field)."""
        counts = (spec.count(self.get(name)) for name, spec in truth_fields().items())
        return max(counts, default=0) or len(self.docs or [])

    def doc_indices(self) -> np.ndarray:
        """The test-split index of each victim."""
        if self.docs is not None:
            return np.asarray(self.docs, dtype=np.int64)
        return np.arange(self.n_victims(), dtype=np.int64)

    def subset(self, indices: Sequence[int]) -> Truth:
        """The truth of the victims an attack ran on, in its order."""
        idx = [int(i) for i in indices]
        n = self.n_victims()
        if any(not 0 <= i < n for i in idx):
            raise ValueError(f"doc_indices outside 0..{n - 1}: the attack's subset is invalid.")

        docs = self.doc_indices()
        values = {
            name: spec.subset(self.get(name), idx, n)
            for name, spec in truth_fields().items()
            if name in _OWN or name in self.extra
        }
        return Truth.of(values, docs=[int(docs[i]) for i in idx])

    def cut(self, keep: Sequence[int]) -> tuple[Truth, int, int]:
        """The truth of what a truncated release holds: victim ``d`` keeps its first
        ``keep[d]`` tokens; its text is cut where the last kept token ends and entities that
        end past that are dropped (when :attr:`token_ends` is known; else text and entities
        stay whole). Returns the cut truth, the number of tokens cut and of victims cut."""
        n = len(self.tokens)
        if len(keep) != n:
            raise ValueError(f"{len(keep)} kept lengths for {n} victims.")
        tokens, texts, entities = list(self.tokens), list(self.texts), list(self.entities)
        pieces, ends = list(self.piece_positions), list(self.token_ends)
        cut_tokens = cut_docs = 0
        for d, k in enumerate(keep):
            k = max(0, int(k))
            if k >= len(tokens[d]):
                continue
            cut_tokens += len(tokens[d]) - k
            cut_docs += 1
            tokens[d] = np.asarray(tokens[d])[:k]
            if len(pieces) == n:
                pieces[d] = np.asarray(pieces[d])[:k]
            if len(ends) == n and len(texts) == n:
                end = int(np.asarray(ends[d])[k - 1]) if k > 0 else 0
                texts[d] = texts[d][:end]
                ends[d] = np.asarray(ends[d])[:k]
                if len(entities) == n:
                    entities[d] = [e for e in entities[d] if _entity_within(e, texts[d], end)]
        truth = replace(
            self,
            tokens=tokens,
            texts=texts,
            entities=entities,
            piece_positions=pieces,
            token_ends=ends,
        )
        return truth, cut_tokens, cut_docs


#: The truth fields that are attributes of :class:`Truth` itself (the rest live in ``extra``).
_OWN = frozenset(f.name for f in fields(Truth)) - {"docs", "extra"}


def _entity_within(entity: Mapping[str, Any], text: str, end: int) -> bool:
    """Whether an entity lies in a text cut at character ``end``: by its span when it has one,
    else by its string."""
    if "end" in entity and entity["end"] is not None:
        return int(entity["end"]) <= end
    return str(entity.get("text", "")) in text


def released_token_counts(truth: Truth, release: Release) -> list[int]:
    """Per victim, how many of its truth tokens a ``token_vectors`` release holds (see the
    module docstring: layer 0 holds one vector per content token, layer k >= 1 holds
    ``[CLS]`` + pieces + ``[SEP]``). ``release`` must have one document per victim."""
    if release.kind != "token_vectors":
        raise ValueError(f"Only a token_vectors release is cut; this one is {release.kind!r}.")
    vectors = release.vectors or []
    if len(vectors) != len(truth.tokens):
        raise ValueError(
            f"The release has {len(vectors)} documents for {len(truth.tokens)} victims."
        )
    specials = 2 if int(release.layer or 0) >= 1 else 0
    pieces_known = len(truth.piece_positions) == len(truth.tokens)
    counts = []
    for d, v in enumerate(vectors):
        arr = np.asarray(v)
        positions = (arr.shape[0] if arr.ndim >= 2 else int(arr.size > 0)) - specials
        positions = max(0, positions)
        n_true = len(truth.tokens[d])
        if specials and pieces_known:
            counts.append(int(np.sum(np.asarray(truth.piece_positions[d]) < positions)))
        else:
            counts.append(min(n_true, positions))
    return counts
