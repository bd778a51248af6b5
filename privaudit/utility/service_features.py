"""The service's frozen part, run once per split (:mod:`privaudit.utility.service`): the
pooled representation, and for an encoder release the states below the top layer that its
trainable top layer reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import Release, Space
from privaudit.models.backbone import mean_pool, top_model_forward
from privaudit.utility.peft_inputs import Inputs

if TYPE_CHECKING:
    from privaudit.models.backbone import Backbone


@dataclass
class Features:
    """One split as the trainable part reads it.

    ``pooled``: the frozen representation (the top layer's mean over the user's tokens, or
    the pooled release), one row per document. For an encoder release also the frozen
    layer-below-top states at the query positions (``queries``: [CLS], then the plain-word
    positions), the top layer's frozen keys and values (``keys``, ``values``) over the
    ``mask``ed positions, and the number of plain positions per row (``n_plain``)."""

    pooled: np.ndarray
    queries: Any = None  # FloatTensor (n, Q, H)
    keys: Any = None  # FloatTensor (n, L, H)
    values: Any = None
    mask: Any = None  # BoolTensor (n, L)
    n_plain: np.ndarray | None = None

    @property
    def encoder(self) -> bool:
        return self.queries is not None

    @classmethod
    def of(cls, bb: Backbone, release: Release, max_length: int, max_plain: int = 8) -> Features:
        import torch

        if release.kind == "pooled_vectors" or (
            release.kind == "token_vectors"
            and release.space not in (Space.TOKEN_EMBEDDINGS, Space.HIDDEN_STATES)
        ):
            vectors = [np.atleast_2d(np.asarray(v, np.float32)) for v in release.vectors or []]
            if not vectors:
                raise ValueError("The release has no vectors to train the service on.")
            return cls(np.stack([v.mean(axis=0) for v in vectors]))
        layer = int(release.layer or 0) if release.space is Space.HIDDEN_STATES else 0
        if layer >= bb.n_layers:  # released after the top layer: nothing left to tune in it
            return cls(np.stack([np.atleast_2d(v).mean(0) for v in release.vectors or []]))
        inputs = Inputs.build(bb, release, np.arange(len(release)), max_length)
        if len(inputs) == 0:
            raise ValueError("The release has no documents to train the service on.")
        top = bb.model.encoder.layer[-1]
        att = top.attention.self
        # The first max_plain plain words: RAPT's loss over a prefix of its positions (the
        # reconstruction of all 40 would cost the top layer at 41 positions per document).
        plain = [p[:max_plain] for p in inputs.plain]
        n_plain = np.asarray([len(p) for p in plain], np.int64)
        n_q = 1 + int(n_plain.max(initial=0))
        width = int(inputs.mask.shape[1])
        n = len(inputs)
        queries = torch.zeros((n, n_q, bb.dim))
        keys = torch.zeros((n, width, bb.dim))
        values = torch.zeros((n, width, bb.dim))
        pooled = np.zeros((n, bb.dim), np.float32)
        device = bb._on_device()
        order = np.argsort(inputs.mask.sum(1).numpy(), kind="stable")
        # A plain prefix's frozen representation is the text's own (below): no top layer here.
        prefixed = release.kind == "text" and bool(release.plain_prefix)
        with torch.no_grad():  # plain tensors: training reads them beside its parameters
            for start in range(0, n, 64):
                rows = torch.from_numpy(order[start : start + 64])
                batch = inputs.batch(rows)
                mask = batch["attention_mask"].to(device)
                below = _below_top(bb, batch, mask, layer)
                if not prefixed:
                    final = top_model_forward([top], below, mask)
                    pool = batch.get("pool_mask", batch["attention_mask"]).to(device)
                    pooled[rows.numpy()] = mean_pool(final, pool).cpu().numpy()
                w = below.shape[1]
                keys[rows, :w] = att.key(below).float().cpu()
                values[rows, :w] = att.value(below).float().cpu()
                for j, r in enumerate(rows.tolist()):
                    pos = [0, *plain[r]]
                    queries[r, : len(pos)] = below[j, pos].float().cpu()
        if prefixed:
            # The frozen representation is the probe's: the user's text alone. With RAPT's
            # 40 plain words in context a frozen encoder's mean is worse (.58 against .65 at
            # eta 50); only the trained top layer reads the prefix.
            pooled = bb.pooled(release.content_texts(), max_length=max_length)
        elif release.kind == "text":
            # The same mean the attacks' feature path computes: they need not encode it again.
            bb.remember_pooled(list(release.texts or []), pooled, max_length=max_length)
        elif release.space is Space.TOKEN_EMBEDDINGS and all(len(v) for v in release.vectors or []):
            # Likewise for input word embeddings ([CLS] and [SEP] added, every position pooled).
            bb.remember_pooled_from_word_embeddings(
                list(release.vectors or []), pooled, max_length=max_length
            )
        return cls(pooled, queries, keys, values, inputs.mask.bool(), n_plain)


def _below_top(bb: Backbone, batch: dict[str, Any], mask: Any, layer: int) -> Any:
    """The frozen encoder up to (not including) its top layer, from the release's inputs."""
    device = mask.device
    if "input_ids" in batch or layer == 0:
        # The embeddings and every layer but the top one (the whole model would run the top
        # layer too, only for the caller to run it again).
        if "input_ids" in batch:
            hidden = bb.model.embeddings(input_ids=batch["input_ids"].to(device))
        else:
            hidden = bb.model.embeddings(inputs_embeds=batch["inputs_embeds"].to(device))
        return top_model_forward(bb.model.encoder.layer[:-1], hidden, mask)
    hidden = batch["inputs_embeds"].to(device)  # a split model's hidden states after `layer`
    return top_model_forward(bb.model.encoder.layer[layer:-1], hidden, mask)
