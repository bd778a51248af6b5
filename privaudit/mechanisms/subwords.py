"""A backbone's sub-word tokenizer as the ``tokenizers`` library runs it (no ``transformers``,
no torch: the lean privatize path), and word-aligned rendering of a token release.

**Word classes.** A WordPiece vocabulary has two kinds of pieces: those that start a word
(``play``, ``.``) and continuation pieces (``##ing``) that glue onto the piece before them. A
token mechanism that swaps one kind for the other changes the text's words: ``play ##ing``
with ``play`` replaced by ``##ed`` decodes as one glued word, and a continuation replaced by a
word-initial piece splits a word in two (at η 50, 605 of 705 T2T releases changed their word
count that way). :attr:`Subwords.classes` labels every vocabulary id with its class
(:data:`WORD_START`, :data:`CONTINUATION`) so a mechanism can replace a piece only by a piece
of the same class (see :class:`~privaudit.defenses.t2t.T2T`).

**Layout.** :meth:`Subwords.encode` keeps, per token, whether any text (whitespace, or a piece
dropped as ``[UNK]``) lay between it and the token before. :meth:`Subwords.render` writes a
release with that layout: a word-initial piece follows a space exactly where the original had
one, a continuation piece glues on. With class-preserving replacement the released text has
exactly the original's number of whitespace-separated words (every [UNK]-only word aside,
which is dropped as before). The layout is structure the user's text already shows (spacing
and punctuation attachment, as PCT2T keeps them), not the identity of any token.

A tokenizer that is not WordPiece (BPE, Unigram) has no continuation prefix: every piece is of
one class, and :meth:`Subwords.render` falls back to the tokenizer's own decoder.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

WORD_START, CONTINUATION = 0, 1


@dataclass(frozen=True)
class Pieces:
    """One text's tokens: ``ids`` without special tokens and without ``[UNK]`` pieces, and
    ``gap[i]``: whether any text lay between token ``i`` and token ``i - 1`` in the original
    (always ``False`` for the first token)."""

    ids: np.ndarray  # int64
    gap: np.ndarray  # bool


class Subwords:
    """The backbone's tokenizer (a ``tokenizers.Tokenizer``), with no truncation or padding:
    the ids it gives equal ``transformers``' fast tokenizer's for the same ``tokenizer.json``
    (a test checks)."""

    def __init__(self, raw: Any) -> None:
        raw.no_truncation()
        raw.no_padding()
        self.raw = raw
        self.vocab_size = int(raw.get_vocab_size(with_added_tokens=True))
        self.special_ids = frozenset(
            int(i) for i, tok in raw.get_added_tokens_decoder().items() if tok.special
        )
        self.unk_id = raw.token_to_id(str(getattr(raw.model, "unk_token", "[UNK]")))
        self.prefix: str | None = getattr(raw.model, "continuing_subword_prefix", None) or None

    @classmethod
    def from_file(cls, path: str | Path) -> Subwords:
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(path)))

    @classmethod
    def from_transformers(cls, tokenizer: Any) -> Subwords:
        """The ``tokenizers`` backend of a ``transformers`` fast tokenizer (a copy)."""
        from tokenizers import Tokenizer

        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise ValueError(
                f"The backbone's tokenizer ({type(tokenizer).__name__}) has no fast "
                "(`tokenizers`) version; use a model whose tokenizer has one."
            )
        return cls(Tokenizer.from_str(backend.to_str()))

    def id_to_token(self, ids: Sequence[int]) -> list[str | None]:
        return [self.raw.id_to_token(int(i)) for i in ids]

    @functools.cached_property
    def classes(self) -> np.ndarray:
        """Per vocabulary id: :data:`CONTINUATION` for a continuation piece, else
        :data:`WORD_START` (every id, when the tokenizer has no continuation prefix)."""
        out = np.full(self.vocab_size, WORD_START, dtype=np.int8)
        if self.prefix:
            for i in range(self.vocab_size):
                tok = self.raw.id_to_token(i)
                if tok is not None and tok.startswith(self.prefix) and len(tok) > len(self.prefix):
                    out[i] = CONTINUATION
        return out

    def encode(self, texts: Sequence[str]) -> list[Pieces]:
        """Every text's :class:`Pieces` (one batched call into the Rust tokenizer)."""
        if not texts:
            return []
        out = []
        for enc in self.raw.encode_batch(list(texts), add_special_tokens=False):
            ids = np.asarray(enc.ids, dtype=np.int64)
            offsets = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
            keep = ids != self.unk_id
            ids, offsets = ids[keep], offsets[keep]
            gap = np.zeros(len(ids), dtype=bool)
            gap[1:] = offsets[1:, 0] > offsets[:-1, 1]
            out.append(Pieces(ids, gap))
        return out

    def token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        return [p.ids for p in self.encode(texts)]

    def decode(self, rows: Sequence[np.ndarray]) -> list[str]:
        """The tokenizer's own decoder (joins continuation pieces, cleans up spaces)."""
        return self.raw.decode_batch([list(map(int, r)) for r in rows])

    def render(self, rows: Sequence[np.ndarray], layout: Sequence[Pieces]) -> list[str]:
        """Released ids written in the original's layout (see the module docstring): a
        continuation piece glues onto the text before it; any other piece is preceded by a
        space where the original had text between it and the token before."""
        if not self.prefix:
            return self.decode(rows)
        strip = len(self.prefix)
        vocab = self.raw.id_to_token
        out = []
        for row, pieces in zip(rows, layout, strict=True):
            if len(row) != len(pieces.ids):
                raise ValueError("A release must have one id per token of its layout.")
            parts = []
            for i, (token_id, gap) in enumerate(
                zip(row.tolist(), pieces.gap.tolist(), strict=True)
            ):
                tok = vocab(token_id) or ""
                if tok.startswith(self.prefix) and len(tok) > strip:
                    parts.append(tok[strip:])
                else:
                    parts.append(f" {tok}" if gap and i else tok)
            out.append("".join(parts))
        return out
