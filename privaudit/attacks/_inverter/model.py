"""The pre-trained inverter's model: every choice that shapes it (:class:`InverterSpec`, the
disk cache's key), the decoder warm-started from the backbone (:func:`build_model`), and its
output vocabulary widened at a defense point (:func:`writable_ids`, :func:`widen`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.attacks._inverter.public_text import PublicText
from privaudit.runtime.cache import cache_dir
from privaudit.runtime.devices import bf16, current_device
from privaudit.runtime.memo import digest
from privaudit.runtime.memory import copy_sharing_frozen

if TYPE_CHECKING:
    import torch

    from privaudit.models.backbone import Backbone

#: Bumped when the pre-training changes in a way its parameters do not show (2: length-
#: bucketed batches; 3: each piece weighs the same in them).
VERSION = 3
_UNUSED = re.compile(r"\[unused\d+\]")


@dataclass(frozen=True)
class InverterSpec:
    """Every choice that shapes the pre-trained inverter (the disk cache's key)."""

    public: PublicText
    n_layer: int
    n_memory: int
    max_tokens: int
    epochs: int
    correction_epochs: int
    lr: float
    weight_decay: float
    batch_size: int
    dropout: float
    word_dropout: float
    sentences: bool

    def key(self, bb: Backbone) -> str:
        fields = sorted((k, v) for k, v in self.__dict__.items() if k != "public")
        public = sorted((k, v) for k, v in self.public.__dict__.items() if v != "")
        precision = "bf16" if bf16() else "fp32"  # a model trained in mixed precision differs
        return digest(
            [
                "inverter",
                VERSION,
                fields,
                public,
                bb.name,
                bb.fingerprint,
                current_device(),
                precision,
            ]
        )

    def path(self, bb: Backbone) -> Path:
        return cache_dir() / "inverters" / f"{self.key(bb)[:24]}.pt"


@dataclass
class Inverter:
    """A pre-trained decoder and corrector, with the scaling of their conditioning."""

    decoder: Any  # torch.nn.ModuleDict (see build_model)
    corrector: Any
    vocab_ids: np.ndarray  # backbone ids of the output vocabulary
    mean: np.ndarray  # feature scaling, fitted on the public clean embeddings
    std: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    def scale(self, x: np.ndarray) -> np.ndarray:
        return ((np.asarray(x, np.float32) - self.mean) / self.std).astype(np.float32)


def build_model(bb: Backbone, spec: InverterSpec, n_vocab_ids: np.ndarray) -> torch.nn.Module:
    """The decoder warm-started from the backbone's embeddings and lowest ``n_layer`` layers."""
    import torch
    from transformers import BertConfig, BertModel

    base = bb.model
    config = BertConfig(**base.config.to_dict())
    n_layer = min(int(spec.n_layer), int(config.num_hidden_layers))
    config.num_hidden_layers = n_layer
    config.is_decoder = True
    config.add_cross_attention = True
    config.hidden_dropout_prob = float(spec.dropout)
    config.attention_probs_dropout_prob = float(spec.dropout)
    bert = BertModel(config, add_pooling_layer=False)
    # Warm start: the backbone's embeddings and its first n_layer layers; cross-attention new.
    bert.load_state_dict(_warm_weights(base.state_dict(), n_layer), strict=False)
    bert.embeddings.word_embeddings.weight.requires_grad_(False)
    hidden = int(config.hidden_size)
    dim = bb.dim
    m = int(spec.n_memory)
    out = torch.nn.Linear(hidden, len(n_vocab_ids))
    with torch.no_grad():
        out.weight.copy_(bert.embeddings.word_embeddings.weight[torch.from_numpy(n_vocab_ids)])
        out.bias.zero_()
    parts = {
        "bert": bert,
        "cond": torch.nn.Linear(dim, m * hidden),
        "cond_hyp": torch.nn.Linear(dim, m * hidden),
        "cond_diff": torch.nn.Linear(dim, m * hidden),
        "head": torch.nn.Sequential(
            torch.nn.Linear(hidden, hidden), torch.nn.GELU(), torch.nn.LayerNorm(hidden)
        ),
        "out": out,
    }
    for name in ("cond", "cond_hyp", "cond_diff"):  # memory on the scale of hidden states
        torch.nn.init.normal_(parts[name].weight, std=1.0 / math.sqrt(dim))
        torch.nn.init.zeros_(parts[name].bias)
    return torch.nn.ModuleDict(parts)


def _warm_weights(state: dict[str, Any], n_layer: int) -> dict[str, Any]:
    out = {}
    for k, v in state.items():
        keep = k.startswith("embeddings.") or (
            k.startswith("encoder.layer.") and int(k.split(".")[2]) < n_layer
        )
        if keep:
            out[k] = v
    return out


#: Which pieces the inverter can write at a defense point (``geia``'s ``vocabulary``).
VOCABULARIES = ("backbone", "public+aux", "public")


def writable_ids(bb: Backbone) -> np.ndarray:
    """Every backbone id a text can hold: the whole vocabulary but [PAD], [CLS], [MASK],
    [UNK] and the ``[unusedN]`` slots ([SEP] stays: it ends a sentence)."""
    tok = bb.tokenizer
    _, sep = specials(bb)
    special = set(int(i) for i in tok.all_special_ids) - {sep}
    unused = {i for t, i in tok.get_vocab().items() if _UNUSED.fullmatch(t)}
    ids = np.arange(bb.embeddings.shape[0], dtype=np.int64)
    return ids[~np.isin(ids, np.fromiter(special | unused, np.int64))]


def widen(model: Any, vocab_ids: np.ndarray, new_ids: np.ndarray, embeddings: np.ndarray) -> Any:
    """A copy of ``model`` whose output layer also writes ``new_ids`` (appended after
    ``vocab_ids``, whose rows are kept). A new piece's weight row is the ridge map from the
    backbone's input embedding to the trained output rows (fitted on ``vocab_ids``), so it
    scores like the trained pieces it resembles; its bias is the lowest trained bias (a piece
    the public text never used is rarer than the rarest it did use). The per-point
    fine-tune on the aux then teaches the pieces the aux uses."""
    import torch
    from sklearn.linear_model import Ridge

    new_ids = np.setdiff1d(np.asarray(new_ids, np.int64), vocab_ids)
    out = copy_sharing_frozen(model)  # the frozen word embeddings stay one tensor
    if not len(new_ids):
        return out
    old = model["out"]
    weight = old.weight.detach().cpu().numpy()
    bias = old.bias.detach().cpu().numpy()
    emb = np.asarray(embeddings, np.float32)
    ridge = Ridge(alpha=1.0).fit(emb[vocab_ids], weight)
    rows = ridge.predict(emb[new_ids]).astype(np.float32)
    layer = torch.nn.Linear(old.in_features, len(vocab_ids) + len(new_ids))
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(np.concatenate([weight, rows])))
        layer.bias.copy_(
            torch.from_numpy(np.concatenate([bias, np.full(len(new_ids), bias.min(), np.float32)]))
        )
    out["out"] = layer.to(old.weight.device)
    return out


def specials(bb: Backbone) -> tuple[int, int]:
    tok = bb.tokenizer
    cls = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
    sep = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id
    if cls is None or sep is None:
        raise ValueError(
            f"The backbone {bb.name!r} has no [CLS]/[SEP] (or BOS/EOS) tokens, which the "
            "pre-trained inverter uses to start and end a sentence; use a BERT-style backbone."
        )
    return int(cls), int(sep)
