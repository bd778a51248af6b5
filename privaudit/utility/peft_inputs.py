"""What the peft trainers train on: a release turned into model inputs.

:class:`Inputs` pads one split's encoder inputs: token ids for a text release (with RAPT's public
plain prefix left out of the pooled positions and the length budget), or input embeddings for a
token-vector release (between the [CLS] and [SEP] embeddings; a split model's hidden states as
they are). :func:`stack_vectors` stacks a pooled release, :func:`subset` picks the first
``max_train``/``max_test`` documents, and :func:`split_layer` reads the split layer of a
hidden-state release. Used by :class:`privaudit.utility.peft_tuning.PeftUtility`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.api import Release, Space


def subset(n: int, cap: int | None) -> np.ndarray:
    """The first ``cap`` documents (all when ``cap`` is None): a deterministic subset."""
    return np.arange(n if cap is None else min(n, int(cap)))


def split_layer(train: Release, test: Release) -> int | None:
    """The split layer of a hidden-state release (SAP at k > 0), else None."""
    hidden = [r.space is Space.HIDDEN_STATES for r in (train, test)]
    if not any(hidden):
        return None
    layers = {r.layer for r in (train, test)}
    if not all(hidden) or len(layers) != 1:
        raise ValueError(
            f"train and test must be hidden states of one split layer, got layers {layers}."
        )
    return int(layers.pop())


def stack_vectors(release: Release, idx: np.ndarray) -> np.ndarray:
    """The pooled vectors of the documents ``idx``, one float32 row each."""
    vectors = release.vectors or []
    return np.stack([np.asarray(vectors[i], np.float32).reshape(-1) for i in idx])


def _prefix_positions(offsets: Sequence[tuple[int, int]], text: str, n_words: int) -> list[int]:
    """Token index of the first piece of each of the first ``n_words`` words of ``text`` (the
    release's public plain prefix), from a fast tokenizer's offset mapping (special tokens
    have offsets (0, 0)); words cut off by truncation have no position."""
    starts, pos = [], 0
    for word in text.split()[:n_words]:
        pos = text.index(word, pos)
        starts.append(pos)
        pos += len(word)
    out = []
    for start in starts:
        for k, (a, b) in enumerate(offsets):
            if b > a and a <= start < b:
                out.append(k)
                break
    return out


@dataclass
class Inputs:
    """Padded encoder inputs for one split: ids (text) or input embeddings (vectors), the
    attention mask, and per row the token positions of the release's public plain prefix
    (empty lists when it has none)."""

    ids: Any  # LongTensor (n, L) or None
    embeds: Any  # FloatTensor (n, L, dim) or None
    mask: Any  # LongTensor (n, L)
    plain: list[list[int]]
    pool: Any = None  # LongTensor (n, L): the positions the classifier pools; None = mask

    def __len__(self) -> int:
        return int(self.mask.shape[0])

    @classmethod
    def build(cls, bb: Any, release: Release, idx: np.ndarray, max_length: int) -> Inputs:
        import torch

        if release.kind == "text":
            texts = [(release.texts or [])[i] for i in idx]
            n_words = release.plain_prefix
            if not n_words:
                enc = bb.tokenizer(
                    texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt"
                )
                return cls(enc["input_ids"], None, enc["attention_mask"], [[] for _ in texts])
            # RAPT's public plain prefix: ``max_length`` budgets the user's text alone, and the
            # classifier pools over the user's text only (the service knows where the prefix is).
            prefixes = [" ".join(t.split()[:n_words]) for t in texts]
            room = max(
                (len(p) for p in bb.tokenizer(prefixes, add_special_tokens=False)["input_ids"]),
                default=0,
            )
            enc = bb.tokenizer(
                texts,
                padding=True,
                truncation=True,
                max_length=max_length + room,
                return_tensors="pt",
                return_offsets_mapping=True,
            )
            offsets = enc.pop("offset_mapping").tolist()
            pool = enc["attention_mask"].clone()
            plain: list[list[int]] = []
            for r, (off, text, prefix) in enumerate(zip(offsets, texts, prefixes, strict=True)):
                pool[r, [k for k, (a, b) in enumerate(off) if b > a and a < len(prefix)]] = 0
                plain.append(_prefix_positions(off, text, n_words))
            return cls(enc["input_ids"], None, enc["attention_mask"], plain, pool)
        if release.kind != "token_vectors":
            raise ValueError(f"Cannot train on a {release.kind!r} release here.")
        given = release.vectors or []
        vectors = [np.asarray(given[i], np.float32).reshape(-1, bb.dim) for i in idx]
        if release.space is Space.HIDDEN_STATES:
            # A split model's hidden states already hold every position, specials included.
            seqs = [v[:max_length] for v in vectors]
        else:
            cls_v = bb.embeddings[bb.tokenizer.cls_token_id]
            sep_v = bb.embeddings[bb.tokenizer.sep_token_id]
            seqs = [np.vstack([cls_v, v[: max_length - 2], sep_v]) for v in vectors]
        width = max((len(s) for s in seqs), default=2)
        embeds = np.zeros((len(seqs), width, bb.dim), np.float32)
        mask = np.zeros((len(seqs), width), np.int64)
        for r, s in enumerate(seqs):
            embeds[r, : len(s)], mask[r, : len(s)] = s, 1
        return cls(None, torch.from_numpy(embeds), torch.from_numpy(mask), [[] for _ in seqs])

    def batch(self, rows: Any) -> dict[str, Any]:
        mask = self.mask[rows]
        width = int(mask.sum(1).max()) if len(rows) else 1  # trim shared padding
        out = {"attention_mask": mask[:, :width]}
        if self.pool is not None:
            out["pool_mask"] = self.pool[rows][:, :width]
        if self.ids is not None:
            out["input_ids"] = self.ids[rows][:, :width]
        else:
            out["inputs_embeds"] = self.embeds[rows][:, :width]
        return out
