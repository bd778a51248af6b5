"""The inverter's memory, teacher-forced loss and decoding (greedy and sampled)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.attacks._inverter.model import specials
from privaudit.runtime.devices import bf16, fast_precision, module_device, tensor

if TYPE_CHECKING:
    import torch

    from privaudit.models.backbone import Backbone


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
        input_ids=inputs,
        attention_mask=attn,
        encoder_hidden_states=mem,
        encoder_attention_mask=mem_mask,
    ).last_hidden_state
    # Logits only where a label counts: a [PAD] position's row over the output vocabulary
    # (30k pieces for an attacker that can write any word) is memory and time for nothing.
    scored = labels != -100
    logits = model["out"](model["head"](h[scored]))
    flat = (logits, labels[scored])
    if per_row is None:
        return torch.nn.functional.cross_entropy(*flat)
    total = torch.nn.functional.cross_entropy(*flat, reduction="sum")
    return total / (float(per_row) * len(seqs))


def pieces_per_row(seqs: Any) -> float:
    """The mean number of scored pieces per row of padded ``seqs`` (all but [CLS] and [PAD]):
    :func:`loss`'s ``per_row`` for length-bucketed batches."""
    return float(((seqs[:, 1:] != 0).sum()).item()) / max(len(seqs), 1)


@dataclass(frozen=True)
class Bounds:
    """The decoded sequences' bounds: each starts after [CLS] (``cls``), ends at [SEP]
    (``sep``) and holds at most ``max_tokens`` pieces."""

    cls: int
    sep: int
    max_tokens: int


@dataclass(frozen=True)
class Sampling:
    """Which decodings :func:`generate` makes of each target: the greedy one (unless
    ``with_greedy`` is False), then ``samples`` drawn at ``temperature`` from ``generator``
    (one generator for all of them: the draws follow one another in its stream)."""

    samples: int = 0
    temperature: float = 0.7
    generator: torch.Generator | None = None
    with_greedy: bool = True


#: The greedy decoding alone (:func:`generate`'s default).
GREEDY_ONLY = Sampling()


def generate(
    model: Any,
    e: np.ndarray,
    vocab_ids: np.ndarray,
    bounds: Bounds,
    *,
    hyp: Hypothesis | None = None,
    sampling: Sampling = GREEDY_ONLY,
    batch: int = 1024,
) -> list[list[np.ndarray]]:
    """Per target row of ``e`` (scaled): the decodings ``sampling`` asks for (the greedy one
    first), each a backbone-id array up to [SEP] within ``bounds``. All of a batch's
    hypotheses run as one batch with the key/value cache (self- and cross-attention); a
    hypothesis that has ended leaves the batch and its cache, so the steps cost what the
    unfinished ones need."""
    import torch

    model.eval()
    device = module_device(model)
    with_greedy = sampling.with_greedy
    k = int(with_greedy) + int(sampling.samples)
    if k < 1:
        raise ValueError("generate needs the greedy decoding or at least one sample.")
    vocab = torch.from_numpy(np.asarray(vocab_ids, np.int64)).to(device)
    # The output layer (29,524 rows when widened) cast once, not by autocast at every step.
    dtype = torch.bfloat16 if bf16() else torch.float32
    out_w, out_b = model["out"].weight.to(dtype), model["out"].bias.to(dtype)
    sep_index = int(np.flatnonzero(np.asarray(vocab_ids) == bounds.sep)[0])
    head = _Output(vocab, sep_index, out_w, out_b, dtype)
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
            tokens, length = _decode(model, head, mem, mem_mask, greedy, bounds, sampling)
            for j, row in enumerate(_until_sep(head, tokens, length)):
                out[start + j // k].append(row)
    return out


@dataclass(frozen=True)
class _Output:
    """The output layer as :func:`generate`'s steps read it: its weight and bias cast once to
    ``dtype``, the output vocabulary's backbone ids (on the model's device) and [SEP]'s
    index in it."""

    vocab: torch.Tensor
    sep_index: int
    weight: torch.Tensor
    bias: torch.Tensor
    dtype: torch.dtype

    def logits(self, model: Any, hidden: torch.Tensor) -> torch.Tensor:
        import torch

        return torch.nn.functional.linear(
            model["head"](hidden).to(self.dtype), self.weight, self.bias
        )


def _decode(
    model: Any,
    head: _Output,
    mem: torch.Tensor,
    mem_mask: torch.Tensor,
    greedy: torch.Tensor,
    bounds: Bounds,
    sampling: Sampling,
) -> tuple[torch.Tensor, int]:
    """One batch of hypotheses (one per row of ``mem``; a ``greedy`` row takes the argmax,
    the others draw as ``sampling`` says), decoded step by step with the key/value cache:
    the output indices, [SEP] after the end, and the number of steps taken."""
    import torch
    from transformers import DynamicCache, EncoderDecoderCache

    cls, max_tokens = bounds.cls, bounds.max_tokens
    temperature, generator = sampling.temperature, sampling.generator
    device = head.vocab.device
    n = len(mem)
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    cur = torch.full((n, 1), cls, dtype=torch.long, device=device)
    tokens = torch.full((n, max_tokens), head.sep_index, dtype=torch.long, device=device)
    live = torch.arange(n, device=device)  # the unfinished hypotheses' rows
    length = 0
    for step in range(max_tokens):
        hidden = model["bert"](
            input_ids=cur,
            attention_mask=torch.ones(len(live), step + 1, dtype=torch.long, device=device),
            encoder_hidden_states=mem,
            encoder_attention_mask=mem_mask,
            cache=cache,
            use_cache=True,
        ).last_hidden_state[:, -1]
        logits = head.logits(model, hidden)
        # max's indices are argmax's (the first maximum on ties), at 2.4x its speed on
        # bfloat16 rows of 29,524 logits (one CPU thread); argmax was a quarter of a decode
        nxt = logits.max(dim=-1).indices
        drawing = ~greedy[live]
        if bool(drawing.any()):
            drawn = _draw(logits[drawing] / float(temperature), generator)
            nxt[drawing] = drawn.to(device)
        tokens[live, step] = nxt
        length = step + 1
        going = nxt != head.sep_index
        if not bool(going.any()):
            break
        if not bool(going.all()):  # the ended ones leave the batch and the cache
            keep = torch.nonzero(going).squeeze(1)
            cache.reorder_cache(keep)
            live, nxt = live[keep], nxt[keep]
            mem, mem_mask = mem[keep], mem_mask[keep]
        cur = head.vocab[nxt][:, None]
    return tokens, length


def _until_sep(head: _Output, tokens: torch.Tensor, length: int) -> list[np.ndarray]:
    """Each row of ``tokens`` (its first ``length`` steps) as backbone ids up to its [SEP]."""
    ids = head.vocab[tokens[:, :length]].cpu().numpy()
    ended = (tokens[:, :length] == head.sep_index).cpu().numpy()
    rows = []
    for j in range(len(tokens)):
        stop_at = np.flatnonzero(ended[j])
        row = ids[j, : stop_at[0] if len(stop_at) else length]
        rows.append(row.astype(np.int64))
    return rows


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


def greedy(
    bb: Backbone, model: Any, vocab_ids: np.ndarray, x: np.ndarray, max_tokens: int
) -> list[np.ndarray]:
    """The greedy decoding of each scaled row of ``x`` (backbone ids up to [SEP])."""
    cls, sep = specials(bb)
    out = generate(model, x, vocab_ids, Bounds(cls, sep, max_tokens))
    return [h[0] for h in out]
