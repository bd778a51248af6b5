"""The pre-trained sentence-embedding inverter shared by ``geia`` and ``vec2text``.

**Decoder** — the public backbone's own weights, warm-started as a decoder (Rothe, Narayan &
Severyn, "Leveraging Pre-trained Checkpoints for Sequence Generation Tasks", TACL 2020): its
embeddings and its lowest ``n_layer`` transformer layers become a BERT decoder with a causal
self-attention mask and a cross-attention block per layer (new, randomly initialised), which
attends to a *memory* built from the released vector: ``n_memory`` vectors projected from the
(standardised) embedding. The output layer is a Linear whose rows start as the backbone's
input embeddings of the output vocabulary (tied in spirit, free to move). The word-embedding
matrix stays frozen (it is the backbone's lexical geometry and the largest tensor: freezing it
halves a training step).

Output vocabulary: pre-training writes every WordPiece of the public pre-training text plus
[SEP] (the end of a sentence) — 2,119 pieces for the default 8,000 generated reviews, a
softmax 14 times smaller than the backbone's 30,522 (with the full one, a 1-layer decoder's
training step took 0.58 s of a 2-layer's 0.71 s: the softmax dominates), which keeps the
one-time pre-training affordable on two CPU cores. But an attacker that can write only the
public text's pieces cannot write the rest of the victims' words: the generated world's
pieces hold 100 % of the quick corpus's tokens, and 48.6 % of SynthPAI's. So at a defense
point (``geia``'s ``vocabulary``, default ``backbone``) the decoder and the corrector are
*widened* (:func:`widen`) to every piece a text can hold (:func:`writable_ids`: the whole
vocabulary less [PAD]/[CLS]/[MASK]/[UNK] and the ``[unusedN]`` slots), or to the public and
the aux's pieces (``public+aux``; the aux is the attacker's own text of the victims' domain);
``public`` keeps the pre-trained vocabulary. A new piece's output row is the ridge map from
the backbone's input embedding to the trained rows, with the lowest trained bias; the per-point
fine-tune on the aux then teaches the pieces the aux uses. What each attack can write, and what
its public text alone holds, is recorded per row as its *reach*
(:func:`privaudit.metrics.words.reach_details`) and shown on the board.

**Corrector** (Morris, Kuleshov, Shmatikov & Rush, "Text Embeddings Reveal (Almost) As Much As
Text", EMNLP 2023, "Vec2Text") — a copy of the decoder whose memory also holds the current
hypothesis: projections of its re-embedding ê and of the difference e − ê, and the
hypothesis's own token embeddings (so it can copy what is right and change what is not). It is
trained after the decoder on (e, decoder's greedy hypothesis, ê) → the true text, for the
public training documents.

**Pre-training** — on *public text* only, never on the user's corpus: by default
(``public_corpus: auto``) the run corpus's own held-out ``public`` split when its loader
declares one (``public_split``: ``synthpai``'s other people's comments), else ``public_docs``
(8,000) documents of the built-in generator (``synthetic-reviews``) with ``public_seed``
(104729), for ``epochs`` 3 (the corrector: ``correction_epochs`` 2; the attacker is bound by
this data: 4,000 documents for 2 + 1 epochs gave greedy word F1 .385 on the quick corpus,
these .511). Its cost, and what cut it (issue 38; :data:`PRETRAIN_PRIOR` has the time): the
public texts are encoded by the attacker's own bfloat16 copy of the encoder where the CPU
runs it natively (:meth:`~privaudit.models.backbone.Backbone.own_pooled`; the documents are long,
and encoding them was a fifth of the pre-training); the batches are length-bucketed
(:func:`~privaudit.attacks._pairs.epoch_batches`: documents and their sentences, 12 pieces at
the median, had padded each step to its longest row: 2.8 times the cost per pair); the
training steps run in mixed precision where the device supports it
(:func:`~privaudit.runtime.devices.fast_precision`; validation in float32). Progress: a bar with an
ETA, or a line every half minute (:class:`PretrainProgress`). ``public_corpus`` may
name any corpus a run can take (:class:`PublicText`): a registered name with its parameters
and a split, a file (a bare path reads its ``text`` column; ``{name: file, params: {path,
text}}`` maps the column), a ``datasets`` name where a hub is reachable (``hf``). Advice: pre-
train on public text of the victims' domain. A run whose attacker would be pre-trained on its
own documents is refused when the grid is planned (``geia.check_corpus``: the generator at the
run's seed, the run's own corpus without a held-out split, by spec or by path, or public text
holding any of its train or test documents). As in :mod:`privaudit.attacks._sentence`, each
training document's sentences are extra pairs.
The result is cached on disk like a downloaded model, under
``cache_dir()/inverters/<key>.pt``, where ``key`` digests the backbone's name and fingerprint,
the public corpus, every parameter that shapes the pre-training and the device; a change to
any of them is a miss. The public corpus is public: nothing of the user's corpus is written.
``privaudit pretrain`` builds it ahead of time; ``privaudit run --estimate`` shows its
one-time cost when it is missing.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.attacks._pairs import train
from privaudit.attacks._sentence import standardise_rows
from privaudit.runtime.cache import cache_dir, cache_writable, locked
from privaudit.runtime.costs import pretrain_rate
from privaudit.runtime.devices import (
    bf16,
    current_device,
    fast_precision,
    module_device,
    tensor,
    torch_threads,
)
from privaudit.runtime.memo import digest

if TYPE_CHECKING:
    import torch

    from privaudit.models.backbone import Backbone

#: Bumped when the pre-training changes in a way its parameters do not show (2: length-
#: bucketed batches; 3: each piece weighs the same in them).
VERSION = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_UNUSED = re.compile(r"\[unused\d+\]")
_EPS = 1e-6


# -------------------------------------------------------------------------------------------
# Public text
# -------------------------------------------------------------------------------------------


#: Suffixes read as a file of public documents when ``public_corpus`` is a bare path.
FILE_SUFFIXES = (".txt", ".csv", ".jsonl", ".parquet")


@dataclass(frozen=True)
class PublicText:
    """Where the attacker's public pre-training text comes from (the defaults are ``geia``'s
    declared parameters, which build it): ``corpus`` is a registered corpus name (with its
    ``params``, JSON) or a file path; ``split`` one of its splits ("" : its ``public`` split
    when it has one, else every split)."""

    corpus: str
    n_docs: int
    seed: int
    params: str = ""  # JSON of the corpus's parameters ("" for none: keeps older cache keys)
    split: str = ""

    def describe(self) -> str:
        what = self.corpus + (f" {self.params}" if self.params else "")
        what += f", split {self.split}" if self.split else ""
        if self.corpus == "synthetic-reviews":
            return f"{what} ({self.n_docs} documents, seed {self.seed})"
        return f"{what} (at most {self.n_docs} documents)"

    def count(self) -> int:
        """How many documents :meth:`texts` gives: ``n_docs`` for the generator, else read
        (a held-out split may hold fewer than ``n_docs``)."""
        if self.corpus == "synthetic-reviews" and not self.params:
            return int(self.n_docs)
        return len(_public_texts(self))

    def is_file(self) -> bool:
        return not self.params and Path(self.corpus).suffix in FILE_SUFFIXES

    def texts(self) -> list[str]:
        """The public documents, at most ``n_docs``: the built-in generator at ``seed``, a
        file (``.txt``: one document per line; ``.csv``/``.jsonl``/``.parquet``: its
        ``text`` column), or any registered corpus built with ``params`` (its ``split``, else
        its ``public`` split when it has one, else every split in order)."""
        if self.is_file():
            out = _file_texts(Path(self.corpus))
        else:
            from privaudit.registry import CORPORA  # lazy: corpora load only when asked for

            params = json.loads(self.params) if self.params else {}
            if self.corpus == "synthetic-reviews":
                params = {"seed": int(self.seed), "n_docs": int(self.n_docs)} | params
            corpus = CORPORA.get(self.corpus)(**params)
            split = self.split or ("public" if "public" in corpus.splits else "")
            chosen = [corpus.split(split)] if split else list(corpus.splits.values())
            out = [str(t) for ds in chosen for t in ds["text"]]
        out = [t for t in out if t.strip()]
        if not out:
            raise ValueError(f"The public corpus {self.describe()} has no text.")
        return out[: int(self.n_docs)]


@functools.lru_cache(maxsize=4)
def _public_texts(public: PublicText) -> tuple[str, ...]:
    return tuple(public.texts())


def _file_texts(path: Path) -> list[str]:
    import pandas as pd

    if not path.is_file():
        raise ValueError(f"The public corpus file {path} does not exist; give a file path or a "
                         "corpus name (e.g. synthetic-reviews).")  # fmt: skip
    if path.suffix == ".txt":
        return path.read_text(encoding="utf-8").splitlines()
    frame = {".csv": pd.read_csv, ".jsonl": lambda p: pd.read_json(p, lines=True),
             ".parquet": pd.read_parquet}[path.suffix](path)  # fmt: skip
    if "text" not in frame.columns:
        raise ValueError(
            f"The public corpus file {path} has no 'text' column; name its column with "
            "public_corpus: {name: file, params: {path: ..., text: COLUMN}}."
        )
    return [str(t) for t in frame["text"].dropna()]


def sentences(text: str) -> list[str]:
    return [p for p in _SENTENCE_END.split(text.strip()) if p]


# -------------------------------------------------------------------------------------------
# The pre-trained model
# -------------------------------------------------------------------------------------------


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
        return digest(["inverter", VERSION, fields, public, bb.name, bb.fingerprint,
                       current_device(), precision])  # fmt: skip

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
    out = copy.deepcopy(model)
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
        layer.bias.copy_(torch.from_numpy(
            np.concatenate([bias, np.full(len(new_ids), bias.min(), np.float32)])))  # fmt: skip
    out["out"] = layer.to(old.weight.device)
    return out


# -------------------------------------------------------------------------------------------
# Memory, loss, decoding
# -------------------------------------------------------------------------------------------


@dataclass
class Hypothesis:
    """The corrector's view of the current guess: its re-embedding (scaled) and its pieces."""

    embedding: torch.Tensor  # (n, dim)
    ids: torch.Tensor  # (n, T) backbone ids, right-padded with 0
    mask: torch.Tensor  # (n, T) 1 on real pieces


def memory(
    model: Any, e: torch.Tensor, hyp: Hypothesis | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The cross-attention memory (and its mask) for targets ``e`` (scaled embeddings)."""
    import torch

    n = len(e)
    hidden = model["out"].in_features
    parts = [model["cond"](e).view(n, -1, hidden)]
    if hyp is not None:
        parts += [
            model["cond_hyp"](hyp.embedding).view(n, -1, hidden),
            model["cond_diff"](e - hyp.embedding).view(n, -1, hidden),
        ]
    head = torch.cat(parts, dim=1)
    mask = torch.ones(n, head.shape[1], dtype=torch.long, device=e.device)
    if hyp is None:
        return head, mask
    tokens = model["bert"].embeddings(input_ids=hyp.ids)
    return torch.cat([head, tokens], dim=1), torch.cat([mask, hyp.mask.long()], dim=1)


def sequences(rows: Sequence[np.ndarray], cls: int, sep: int, max_tokens: int) -> np.ndarray:
    """[CLS] + pieces (at most ``max_tokens``) + [SEP], right-padded with 0 ([PAD])."""
    width = max((min(len(r), max_tokens) for r in rows), default=0) + 2
    out = np.zeros((len(rows), width), dtype=np.int64)
    for i, r in enumerate(rows):
        r = np.asarray(r, np.int64)[:max_tokens]
        out[i, 0] = cls
        out[i, 1 : 1 + len(r)] = r
        out[i, 1 + len(r)] = sep
    return out


def output_lookup(vocab_ids: np.ndarray, n_backbone: int) -> np.ndarray:
    """Backbone id → output index, −100 (ignored by the loss) outside the output vocabulary."""
    out = np.full(int(n_backbone), -100, np.int64)
    out[vocab_ids] = np.arange(len(vocab_ids))
    return out


def trim(seqs: torch.Tensor) -> torch.Tensor:
    """Padded sequences cut to their batch's longest row (0 is [PAD])."""
    return seqs[:, : int((seqs != 0).sum(1).max())]


def loss(
    model: Any,
    e: torch.Tensor,
    seqs: torch.Tensor,
    lookup: torch.Tensor,
    hyp: Hypothesis | None = None,
    word_dropout: float = 0.0,
    generator: torch.Generator | None = None,
    per_row: float | None = None,
) -> torch.Tensor:
    """Teacher-forced next-piece cross-entropy over the output vocabulary (``lookup``: backbone
    id → output index, −100 outside it); [PAD] is masked out of attention and loss. The mean
    over the batch's pieces, or with ``per_row`` (the training set's mean pieces per row) their
    sum over ``per_row`` × rows: every piece then weighs the same whatever batch it is in, as
    in a random batch, where a length-bucketed batch's mean would give a short sentence's
    pieces several times a long document's weight."""
    import torch

    inputs, targets = seqs[:, :-1], seqs[:, 1:]
    attn = (inputs != 0).long()
    attn[:, 0] = 1
    labels = lookup[targets]
    labels[targets == 0] = -100
    if word_dropout > 0:  # lean on the memory, not only on the history (Bowman et al.)
        drop = torch.rand(inputs.shape, generator=generator).to(inputs.device) < word_dropout
        drop[:, 0] = False
        inputs = inputs.masked_fill(drop & (inputs != 0), 100)  # [UNK]
    mem, mem_mask = memory(model, e, hyp)
    h = model["bert"](
        input_ids=inputs, attention_mask=attn, encoder_hidden_states=mem,
        encoder_attention_mask=mem_mask,
    ).last_hidden_state  # fmt: skip
    logits = model["out"](model["head"](h))
    flat = (logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
    if per_row is None:
        return torch.nn.functional.cross_entropy(*flat, ignore_index=-100)
    total = torch.nn.functional.cross_entropy(*flat, ignore_index=-100, reduction="sum")
    return total / (float(per_row) * len(seqs))


def pieces_per_row(seqs: Any) -> float:
    """The mean number of scored pieces per row of padded ``seqs`` (all but [CLS] and [PAD]):
    :func:`loss`'s ``per_row`` for length-bucketed batches."""
    return float(((seqs[:, 1:] != 0).sum()).item()) / max(len(seqs), 1)


def generate(
    model: Any,
    e: np.ndarray,
    vocab_ids: np.ndarray,
    *,
    cls: int,
    sep: int,
    max_tokens: int,
    hyp: Hypothesis | None = None,
    samples: int = 0,
    temperature: float = 0.7,
    generator: torch.Generator | None = None,
    batch: int = 1024,
    with_greedy: bool = True,
) -> list[list[np.ndarray]]:
    """Per target row of ``e`` (scaled): the greedy decoding (unless ``with_greedy`` is
    False), then ``samples`` decodings drawn at ``temperature``; each a backbone-id array up
    to [SEP]. All of a batch's hypotheses run as one batch with the key/value cache (self-
    and cross-attention); a hypothesis that has ended leaves the batch and its cache, so the
    steps cost what the unfinished ones need."""
    import torch
    from transformers import DynamicCache, EncoderDecoderCache

    model.eval()
    device = module_device(model)
    k = int(with_greedy) + int(samples)
    if k < 1:
        raise ValueError("generate needs the greedy decoding or at least one sample.")
    vocab = torch.from_numpy(np.asarray(vocab_ids, np.int64)).to(device)
    # The output layer (29,524 rows when widened) cast once, not by autocast at every step.
    dtype = torch.bfloat16 if bf16() else torch.float32
    out_w, out_b = model["out"].weight.to(dtype), model["out"].bias.to(dtype)
    sep_index = int(np.flatnonzero(np.asarray(vocab_ids) == sep)[0])
    out: list[list[np.ndarray]] = [[] for _ in range(len(e))]
    with torch.inference_mode(), fast_precision():
        for start in range(0, len(e), max(1, batch // k)):
            stop = min(len(e), start + max(1, batch // k))
            rows = torch.from_numpy(np.ascontiguousarray(e[start:stop])).to(device)
            h = None
            if hyp is not None:
                h = Hypothesis(hyp.embedding[start:stop], hyp.ids[start:stop], hyp.mask[start:stop])
            mem, mem_mask = memory(model, rows, h)
            # Each row's k hypotheses side by side: row-major repeat.
            mem = mem.repeat_interleave(k, dim=0)
            mem_mask = mem_mask.repeat_interleave(k, dim=0)
            n = len(mem)
            greedy = (torch.arange(n, device=device) % k == 0) & with_greedy
            cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
            cur = torch.full((n, 1), cls, dtype=torch.long, device=device)
            tokens = torch.full((n, max_tokens), sep_index, dtype=torch.long, device=device)
            live = torch.arange(n, device=device)  # the unfinished hypotheses' rows
            length = 0
            for step in range(max_tokens):
                hidden = model["bert"](
                    input_ids=cur,
                    attention_mask=torch.ones(len(live), step + 1, dtype=torch.long,
                                              device=device),
                    encoder_hidden_states=mem, encoder_attention_mask=mem_mask,
                    cache=cache, use_cache=True,
                ).last_hidden_state[:, -1]  # fmt: skip
                logits = torch.nn.functional.linear(model["head"](hidden).to(dtype), out_w, out_b)
                nxt = logits.argmax(dim=-1)
                drawing = ~greedy[live]
                if bool(drawing.any()):
                    drawn = _draw(logits[drawing] / float(temperature), generator)
                    nxt[drawing] = drawn.to(device)
                tokens[live, step] = nxt
                length = step + 1
                going = nxt != sep_index
                if not bool(going.any()):
                    break
                if not bool(going.all()):  # the ended ones leave the batch and the cache
                    keep = torch.nonzero(going).squeeze(1)
                    cache.reorder_cache(keep)
                    live, nxt = live[keep], nxt[keep]
                    mem, mem_mask = mem[keep], mem_mask[keep]
                cur = vocab[nxt][:, None]
            ids = vocab[tokens[:, :length]].cpu().numpy()
            ended = (tokens[:, :length] == sep_index).cpu().numpy()
            for j in range(n):
                stop_at = np.flatnonzero(ended[j])
                row = ids[j, : stop_at[0] if len(stop_at) else length]
                out[start + j // k].append(row.astype(np.int64))
    return out


def _draw(logits: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One draw per row from softmax(``logits``), by the inverse of its cumulative
    distribution (one uniform and a binary search per row; at 2,000 classes 30 times faster
    on a CPU than ``torch.multinomial``, which cost a quarter of a sampling decode)."""
    import torch

    cdf = torch.softmax(logits.float(), dim=-1).cpu().cumsum(dim=-1)
    u = torch.rand((len(cdf), 1), generator=generator) * cdf[:, -1:]
    # right=True: a class of probability 0 (an empty interval) is never drawn
    return torch.searchsorted(cdf, u, right=True)[:, 0].clamp_(max=cdf.shape[1] - 1)


def hypothesis(ids: Sequence[np.ndarray], embedding: np.ndarray, max_tokens: int) -> Hypothesis:
    """The corrector's input for the chosen guesses ``ids`` with scaled ``embedding``."""
    import torch

    width = max(1, max((min(len(r), max_tokens) for r in ids), default=1))
    arr = np.zeros((len(ids), width), np.int64)
    mask = np.zeros((len(ids), width), np.int64)
    for i, r in enumerate(ids):
        r = np.asarray(r, np.int64)[:max_tokens]
        arr[i, : len(r)] = r
        mask[i, : len(r)] = 1
    mask[:, 0] = 1  # an empty guess still has one (padding) slot to attend to
    return Hypothesis(tensor(embedding), tensor(arr).to(torch.long), tensor(mask).to(torch.long))


# -------------------------------------------------------------------------------------------
# Pre-training and the disk cache
# -------------------------------------------------------------------------------------------


def load_or_pretrain(
    bb: Backbone,
    spec: InverterSpec,
    *,
    threads: int | None = None,
    progress: bool | None = None,
) -> tuple[Inverter, dict[str, Any]]:
    """The pre-trained inverter for ``bb`` and ``spec``: read from the disk cache, or trained
    (its seed drawn from the cache key, so the model is a pure function of the key) and saved
    there. Returns the inverter and a note (``cache``: hit or miss, ``seconds``).

    A read-only cache (:func:`~privaudit.runtime.memo.cache_writable`) is read without a
    lock (nobody can write the entry), and a model it lacks is trained and not kept."""

    path = spec.path(bb)
    if not cache_writable():
        return _load_or_pretrain(bb, spec, path, threads, progress, keep=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One pre-training per machine: a pool's other workers wait for it, then read it.
    with locked(path.with_suffix(".lock")):
        return _load_or_pretrain(bb, spec, path, threads, progress)


def _load_or_pretrain(
    bb: Backbone, spec: InverterSpec, path: Path, threads: int | None, progress: bool | None,
    *, keep: bool = True,
) -> tuple[Inverter, dict[str, Any]]:  # fmt: skip
    start = time.perf_counter()
    if path.exists():
        try:
            inv = _read(path, bb, spec)
        except Exception as exc:  # a torn or stale file: rebuild it rather than fail the run
            # Said, not silent: the rebuild costs a pre-training (minutes).
            why = f"{type(exc).__name__}: {str(exc)[:200]}"
            print(f"privaudit: the cached inverter {path} cannot be read ({why}); it is "
                  + ("rebuilt." if keep else "trained again and not kept (read-only cache)."),
                  file=sys.stderr, flush=True)  # fmt: skip
            if keep:
                path.unlink(missing_ok=True)
        else:
            return inv, {"cache": "hit", "seconds": round(time.perf_counter() - start, 2)}
    with torch_threads(threads):
        inv = pretrain(bb, spec, progress=progress)
    seconds = time.perf_counter() - start
    if keep:
        _write(path, inv)
        _record_timing(spec, time.perf_counter() - start)
    inv.info["pretrain_seconds"] = round(seconds, 1)
    return inv, {"cache": "miss", "seconds": round(seconds, 1)}


def cached(bb: Backbone, spec: InverterSpec) -> bool:
    return spec.path(bb).exists()


#: Seconds per public document and epoch before any measurement here: the default inverter
#: (8,000 documents, 3 + 2 epochs) took 738 s on two quiet AVX512-BF16 CPU cores with
#: bucketed batches and mixed precision (2026-11-27; 1,330 s in float32 with random batches).
PRETRAIN_PRIOR = 0.0185


def pretrain_estimate(bb: Backbone, spec: InverterSpec) -> float | None:
    """Estimated seconds to pre-train ``spec`` here: the latest measured rate (seconds per
    public document per epoch, :func:`load_or_pretrain` records it), else the shipped
    reference machine's × this machine's speed ratio, else the prior
    (:func:`privaudit.runtime.costs.pretrain_rate`); None when the model is cached."""
    if cached(bb, spec):
        return None
    epochs = int(spec.epochs) + int(spec.correction_epochs)
    return pretrain_rate(_timings_path(), PRETRAIN_PRIOR) * spec.public.count() * epochs


def _timings_path() -> Path:
    return cache_dir() / "inverters" / "timings.json"


def _record_timing(spec: InverterSpec, seconds: float) -> None:
    epochs = int(spec.epochs) + int(spec.correction_epochs)
    rate = seconds / max(1, spec.public.count() * epochs)
    path = _timings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"seconds_per_doc_epoch": rate}))


def pretrain(bb: Backbone, spec: InverterSpec, *, progress: bool | None = None) -> Inverter:
    """Pre-train the decoder on the public text's clean pooled embeddings, then the corrector
    on the decoder's own hypotheses (see the module docstring)."""
    import torch

    key = spec.key(bb)
    rng = np.random.default_rng(int(key[:12], 16))
    docs = spec.public.texts()
    order = rng.permutation(len(docs))
    n_val = max(1, len(docs) // 20)
    val_docs = [docs[i] for i in order[:n_val]]
    fit_docs = [docs[i] for i in order[n_val:]]
    fit_texts = list(fit_docs)
    if spec.sentences:
        for d in fit_docs:
            parts = sentences(d)
            if len(parts) > 1:
                fit_texts.extend(parts)
    texts = fit_texts + val_docs
    n_docs = len(fit_docs)
    n_corr = n_docs + len(val_docs)
    ids = bb.token_ids(texts)
    pieces = np.minimum([len(r) + 2 for r in ids], 128)  # what the encoder reads of each
    report = PretrainProgress(
        [Stage("encoding", int(pieces.sum()), 1, "pieces"),
         Stage("decoder", len(fit_texts), int(spec.epochs)),
         Stage("decoding", n_corr, 1, "documents", "decoding and re-encoding"),
         Stage("corrector", n_docs, int(spec.correction_epochs))], progress,
    )  # fmt: skip
    report.say(f"encoding {len(texts):,} public texts ({len(docs):,} documents and their "
               f"sentences), then {spec.epochs} + {spec.correction_epochs} epochs")  # fmt: skip
    clean = standardise_rows(_encoded(bb, texts, pieces, report.stage("encoding")))
    mean, std = clean[: len(fit_texts)].mean(0), clean[: len(fit_texts)].std(0) + _EPS
    xs = ((clean - mean) / std).astype(np.float32)
    cls, sep = specials(bb)
    rows = [r[: int(spec.max_tokens)] for r in ids]
    vocab_ids = np.unique(np.concatenate([*rows, np.asarray([sep], np.int64)])).astype(np.int64)
    lookup_np = output_lookup(vocab_ids, bb.embeddings.shape[0])
    seqs_np = sequences(rows, cls, sep, int(spec.max_tokens))
    xt, seqs, lookup = tensor(xs), tensor(seqs_np).long(), tensor(lookup_np).long()
    fit = np.arange(len(fit_texts))
    val = np.arange(len(fit_texts), len(texts))
    fit_t, val_t = tensor(fit).long(), tensor(val).long()
    fit_lengths = np.asarray([len(r) for r in rows[: len(fit_texts)]])
    fit_per_row = pieces_per_row(seqs[fit_t])  # bucketed batches: each piece weighs the same
    drop_gen = torch.Generator().manual_seed(int(key[12:24], 16))

    def trimmed(idx: torch.Tensor) -> torch.Tensor:
        return trim(seqs[idx])

    def base_loss(model: torch.nn.Module, idx: torch.Tensor) -> torch.Tensor:
        rows_ = fit_t[idx]
        wd = float(spec.word_dropout) if model.training else 0.0
        with fast_precision():  # the steps in bfloat16 where it pays; validation in float32
            return loss(model, xt[rows_], trimmed(rows_), lookup, None, wd, drop_gen, fit_per_row)

    def base_val(model: torch.nn.Module) -> float:
        return -float(_chunked(lambda r: loss(model, xt[r], trimmed(r), lookup), val_t))

    decoder, info = train(
        lambda: build_model(bb, spec, vocab_ids), base_loss, len(fit),
        epochs=int(spec.epochs), batch_size=int(spec.batch_size), lr=float(spec.lr),
        weight_decay=float(spec.weight_decay), rng=rng, desc="pretrain inverter",
        progress=False, validate=base_val, lengths=fit_lengths,
        advance=report.stage("decoder"),
    )  # fmt: skip
    inv = Inverter(decoder, None, vocab_ids, mean.astype(np.float32), std.astype(np.float32))
    inv.info = {
        "public_corpus": spec.public.describe(),
        "public_pairs": len(fit_texts),
        "vocabulary": len(vocab_ids),
        "decoder_layers": int(decoder["bert"].config.num_hidden_layers),
        "pretrain_val_loss": round(-float(info["val_score"]), 4),
        "pretrain_curve": info["curve"],
    }
    # The corrector: trained on the decoder's greedy guesses for the public documents.
    corr_rows = np.concatenate([np.arange(n_docs), val])
    advance = report.stage("decoding")
    report.say(f"decoding and re-encoding {len(corr_rows):,} public documents for the corrector")
    guesses: list[np.ndarray] = []
    pooled: list[np.ndarray] = []
    for s in range(0, len(corr_rows), _CHUNK):  # in chunks: the progress report moves
        part = greedy(bb, decoder, vocab_ids, xs[corr_rows[s : s + _CHUNK]], int(spec.max_tokens))
        guesses += part
        pooled.append(bb.own_pooled(bb.detokenize(part)))
        advance(len(part))
    g_emb = inv.scale(standardise_rows(np.concatenate(pooled)))
    hyp_all = hypothesis(guesses, g_emb, int(spec.max_tokens))
    c_fit = tensor(np.arange(n_docs)).long()
    c_val = tensor(np.arange(n_docs, len(corr_rows))).long()
    corr_t = tensor(corr_rows).long()
    corr_per_row = pieces_per_row(seqs[corr_t[c_fit]])

    def hyp_at(i: torch.Tensor) -> Hypothesis:
        ids, mask = hyp_all.ids[i], hyp_all.mask[i]
        width = int(mask.sum(1).max())
        return Hypothesis(hyp_all.embedding[i], ids[:, :width], mask[:, :width])

    def corr_loss(model: torch.nn.Module, idx: torch.Tensor) -> torch.Tensor:
        i = c_fit[idx]
        r = corr_t[i]
        with fast_precision():
            return loss(model, xt[r], trimmed(r), lookup, hyp_at(i), per_row=corr_per_row)

    def corr_val(model: torch.nn.Module) -> float:
        return -float(
            _chunked(lambda i: loss(model, xt[corr_t[i]], trimmed(corr_t[i]), lookup, hyp_at(i)),
                     c_val)
        )  # fmt: skip

    corrector, cinfo = train(
        lambda: copy.deepcopy(decoder), corr_loss, n_docs,
        epochs=int(spec.correction_epochs), batch_size=int(spec.batch_size), lr=float(spec.lr),
        weight_decay=float(spec.weight_decay), rng=rng, desc="pretrain corrector",
        progress=False, validate=corr_val, lengths=fit_lengths[:n_docs],
        advance=report.stage("corrector"),
    )  # fmt: skip
    report.close()
    inv.corrector = corrector
    inv.info["corrector_val_loss"] = round(-float(cinfo["val_score"]), 4)
    inv.info["corrector_curve"] = cinfo["curve"]
    return inv


@dataclass(frozen=True)
class Stage:
    """A step of the pre-training that :class:`PretrainProgress` follows: ``rows`` per epoch
    (texts encoded, pairs trained on, documents decoded), ``epochs`` of them, and what the
    logs call it."""

    name: str
    rows: int
    epochs: int = 1
    unit: str = "documents"
    doing: str = ""  # the log's verb phrase ("" : the name)

    @property
    def weight(self) -> float:
        """Seconds a row costs relative to a decoder training pair (:data:`STAGE_COST`)."""
        return STAGE_COST.get(self.name, 1.0)


#: Relative cost per row of each pre-training stage, against a decoder training pair (a
#: public text: 17 pieces on average), so the ETA weighs what is left by what it costs: an
#: encoded piece, a document decoded and re-encoded, a corrector pair (a whole document,
#: its memory holding the guess). Measured on two quiet CPU cores, default inverter: 80 s to
#: encode 663,549 pieces, 120 s a decoder epoch of 34,024 pairs, 50 s to decode and re-encode
#: 8,000 documents, 65 s a corrector epoch of 7,600 (2026-11-27).
STAGE_COST = {"encoding": 0.034, "decoder": 1.0, "decoding": 1.8, "corrector": 2.4}


class PretrainProgress:
    """The one-time pre-training's progress through its :class:`Stage` s: a bar with an ETA
    on the terminal (``progress`` True), else a line on stderr every :data:`LOG_EVERY`
    seconds (``--no-progress`` logs) with the stage, its epoch and rows, the time elapsed
    and the time left. The ETA extrapolates the cost-weighted rate so far
    (:data:`STAGE_COST`) over the weighted rows left."""

    def __init__(self, stages: list[Stage], progress: bool | None) -> None:
        from tqdm.auto import tqdm

        self.stages = {st.name: st for st in stages}
        self.total = sum(st.rows * st.epochs * st.weight for st in stages)
        self.done = 0.0
        self.start = self.last_log = time.perf_counter()
        self.current: Stage | None = None
        self.stage_done = 0
        self.bar: Any = None
        if progress:
            self.bar = tqdm(total=round(self.total), desc="pre-training the inverter",
                            unit="pair", leave=False, file=sys.stderr)  # fmt: skip

    def say(self, what: str) -> None:
        line = f"privaudit: pre-training the inverter (once; cached after): {what}"
        if self.bar is None:
            print(line, file=sys.stderr, flush=True)
        else:
            self.bar.write(line, file=sys.stderr)

    def stage(self, name: str) -> Callable[[int], None]:
        """Start stage ``name``; returns its ``advance(rows)``."""
        self.current, self.stage_done = self.stages[name], 0
        return self.advance

    def where(self) -> str:
        st = self.current
        assert st is not None
        if st.epochs > 1:
            epoch = min(st.epochs, max(self.stage_done - 1, 0) // max(st.rows, 1) + 1)
            return f"{st.doing or st.name} epoch {epoch}/{st.epochs}, " + (
                f"{self.stage_done - (epoch - 1) * st.rows:,}/{st.rows:,} {st.unit}"
            )
        return f"{st.doing or st.name} {self.stage_done:,}/{st.rows:,} {st.unit}"

    def advance(self, rows: int) -> None:
        assert self.current is not None
        self.stage_done += rows
        step = rows * self.current.weight
        self.done += step
        now = time.perf_counter()
        if self.bar is not None:
            self.bar.set_postfix_str(self.where(), refresh=False)
            self.bar.update(step)
        elif now - self.last_log >= LOG_EVERY:
            self.last_log = now
            elapsed = now - self.start
            left = elapsed / self.done * (self.total - self.done)
            print(f"privaudit: pre-training the inverter: {self.where()}; {_clock(elapsed)} "
                  f"elapsed, about {_clock(left)} left", file=sys.stderr, flush=True)  # fmt: skip

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


#: Seconds between two progress lines of a pre-training run without a progress bar.
LOG_EVERY = 30.0


def _clock(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"


#: Texts encoded (or documents decoded) between two progress reports of a pre-training.
_CHUNK = 1024


def _encoded(
    bb: Backbone, texts: list[str], pieces: np.ndarray, advance: Callable[[int], None]
) -> np.ndarray:
    """The pooled embeddings of ``texts`` (the attacker's own encoding,
    :meth:`~privaudit.models.backbone.Backbone.own_pooled`), in chunks that report their
    ``pieces`` (what a text costs to encode: documents are long, sentences short)."""
    out = []
    for s in range(0, len(texts), _CHUNK):
        out.append(bb.own_pooled(texts[s : s + _CHUNK]))
        advance(int(pieces[s : s + _CHUNK].sum()))
    return np.concatenate(out) if out else np.zeros((0, bb.dim), np.float32)


def _chunked(fn: Callable[[Any], Any], idx: Any, size: int = 256) -> float:
    total, n = 0.0, 0
    for s in range(0, len(idx), size):
        part = idx[s : s + size]
        total += float(fn(part)) * len(part)
        n += len(part)
    return total / max(n, 1)


def greedy(
    bb: Backbone, model: Any, vocab_ids: np.ndarray, x: np.ndarray, max_tokens: int
) -> list[np.ndarray]:
    """The greedy decoding of each scaled row of ``x`` (backbone ids up to [SEP])."""
    cls, sep = specials(bb)
    out = generate(model, x, vocab_ids, cls=cls, sep=sep, max_tokens=max_tokens)
    return [h[0] for h in out]


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


def _write(path: Path, inv: Inverter) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "decoder": _own_weights(inv.decoder),
            "corrector": _own_weights(inv.corrector),
            "vocab_ids": inv.vocab_ids,
            "mean": inv.mean,
            "std": inv.std,
            "info": json.dumps(inv.info),
        },
        tmp,
    )
    tmp.replace(path)  # atomic: a killed run leaves no torn cache entry


def _own_weights(model: Any) -> dict[str, Any]:
    """The weights to save: all but the frozen word embeddings (the backbone's own, 47 MB)."""
    return {k: v for k, v in model.state_dict().items() if "word_embeddings" not in k}


def _read(path: Path, bb: Backbone, spec: InverterSpec) -> Inverter:
    import torch

    blob = torch.load(path, map_location="cpu", weights_only=False)
    vocab_ids = np.asarray(blob["vocab_ids"], np.int64)
    models = []
    for name in ("decoder", "corrector"):
        m = build_model(bb, spec, vocab_ids)
        # strict but for the frozen word embeddings, which build_model took from the backbone
        result = m.load_state_dict(blob[name], strict=False)
        if [k for k in result.missing_keys if "word_embeddings" not in k] or result.unexpected_keys:
            raise ValueError(f"{path} does not hold this inverter's weights")
        m.to(module_device(m) if current_device() == "cpu" else current_device())
        m.eval()
        models.append(m)
    return Inverter(
        models[0], models[1], vocab_ids, np.asarray(blob["mean"], np.float32),
        np.asarray(blob["std"], np.float32), json.loads(blob["info"]),
    )  # fmt: skip
