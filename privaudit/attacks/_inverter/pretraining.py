"""The pre-training: the decoder on the public text's clean pooled embeddings, then the
corrector on the decoder's own hypotheses (see :mod:`privaudit.attacks._inverter`)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.attacks._inverter.decoding import (
    Hypothesis,
    greedy,
    hypothesis,
    loss,
    output_lookup,
    pieces_per_row,
    sequences,
    trim,
)
from privaudit.attacks._inverter.model import Inverter, InverterSpec, build_model, specials
from privaudit.attacks._inverter.progress import PretrainProgress, Stage
from privaudit.attacks._inverter.public_text import sentences
from privaudit.attacks._pairs import TrainSettings, train
from privaudit.attacks._pooled_features import standardise_rows
from privaudit.runtime.devices import fast_precision, tensor

if TYPE_CHECKING:
    import torch

    from privaudit.models.backbone import Backbone

_EPS = 1e-6


def pretrain(bb: Backbone, spec: InverterSpec, *, progress: bool | None = None) -> Inverter:
    """Pre-train the decoder on the public text's clean pooled embeddings, then the corrector
    on the decoder's own hypotheses (see :mod:`privaudit.attacks._inverter`)."""
    import torch

    key = spec.key(bb)
    rng = np.random.default_rng(int(key[:12], 16))
    docs = spec.public.texts()
    fit_texts, val_docs, n_docs = _split_public(docs, spec, rng)
    texts = fit_texts + val_docs
    ids = bb.token_ids(texts)
    pieces = np.minimum([len(r) + 2 for r in ids], 128)  # what the encoder reads of each
    report = PretrainProgress(
        _stages(spec, pieces, len(fit_texts), n_docs, n_docs + len(val_docs)), progress
    )
    report.say(
        f"encoding {len(texts):,} public texts ({len(docs):,} documents and their "
        f"sentences), then {spec.epochs} + {spec.correction_epochs} epochs"
    )
    data = _encode_pairs(bb, spec, texts, ids, pieces, len(fit_texts), report.stage("encoding"))
    drop_gen = torch.Generator().manual_seed(int(key[12:24], 16))
    decoder, info = _train_decoder(bb, spec, data, rng, drop_gen, report.stage("decoder"))
    inv = Inverter(
        decoder, None, data.vocab_ids, data.mean.astype(np.float32), data.std.astype(np.float32)
    )
    inv.info = {
        "public_corpus": spec.public.describe(),
        "public_pairs": len(fit_texts),
        "vocabulary": len(data.vocab_ids),
        "decoder_layers": int(decoder["bert"].config.num_hidden_layers),
        "pretrain_val_loss": round(-float(info["val_score"]), 4),
        "pretrain_pairs": round(report.total),
        "pretrain_curve": info["curve"],
    }
    # The corrector: trained on the decoder's greedy guesses for the public documents.
    corr_rows = np.concatenate([np.arange(n_docs), data.val])
    guesses, pooled = _guesses(bb, spec, decoder, data, corr_rows, report)
    g_emb = inv.scale(standardise_rows(pooled))
    hyp_all = hypothesis(guesses, g_emb, int(spec.max_tokens))
    corrector, cinfo = _train_corrector(
        spec, decoder, data, hyp_all, corr_rows, n_docs, rng, report.stage("corrector")
    )
    report.close()
    inv.corrector = corrector
    inv.info["corrector_val_loss"] = round(-float(cinfo["val_score"]), 4)
    inv.info["corrector_curve"] = cinfo["curve"]
    return inv


def _split_public(
    docs: list[str], spec: InverterSpec, rng: np.random.Generator
) -> tuple[list[str], list[str], int]:
    """The public documents drawn apart: the training texts (the training documents, then,
    with ``spec.sentences``, the sentences of those with several), the validation documents,
    and how many training documents lead the training texts."""
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
    return fit_texts, val_docs, len(fit_docs)


def work(bb: Backbone, spec: InverterSpec) -> float:
    """The pre-training's work in cost-weighted pairs (:class:`PretrainProgress`'s total): the
    public texts with their sentences, the pieces the encoder reads, each stage's epochs, each
    weighed by what a row of it costs (:data:`~.progress.STAGE_COST`). What the estimate
    prices, at a measured rate per pair: a count of documents was blind to the sentences and
    the lengths (34,451 review texts of 8,000 documents cost 20× SynthPAI's 795 comments)."""
    rng = np.random.default_rng(int(spec.key(bb)[:12], 16))
    fit_texts, val_docs, n_docs = _split_public(spec.public.texts(), spec, rng)
    ids = bb.token_ids(fit_texts + val_docs)
    pieces = np.minimum([len(r) + 2 for r in ids], 128)
    return sum(
        st.rows * st.epochs * st.weight
        for st in _stages(spec, pieces, len(fit_texts), n_docs, n_docs + len(val_docs))
    )


def _stages(
    spec: InverterSpec, pieces: np.ndarray, n_fit: int, n_docs: int, n_corr: int
) -> list[Stage]:
    """The pre-training's four stages, each with its rows and epochs."""
    return [
        Stage("encoding", int(pieces.sum()), 1, "pieces"),
        Stage("decoder", n_fit, int(spec.epochs)),
        Stage("decoding", n_corr, 1, "documents", "decoding and re-encoding"),
        Stage("corrector", n_docs, int(spec.correction_epochs)),
    ]


@dataclass
class _Pairs:
    """The public texts as training pairs: their scaled embeddings (``xs``, and ``xt`` on the
    device), their piece sequences and the output vocabulary; rows ``fit`` (the training
    texts) then ``val`` (the validation documents)."""

    xs: np.ndarray
    xt: torch.Tensor
    seqs: torch.Tensor  # [CLS] + pieces + [SEP], right-padded with [PAD]
    lookup: torch.Tensor  # backbone id -> output index
    vocab_ids: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    val: np.ndarray
    fit_t: torch.Tensor
    val_t: torch.Tensor
    fit_lengths: np.ndarray
    fit_per_row: float  # bucketed batches: each piece weighs the same

    def trimmed(self, idx: torch.Tensor) -> torch.Tensor:
        return trim(self.seqs[idx])


def _encode_pairs(
    bb: Backbone,
    spec: InverterSpec,
    texts: list[str],
    ids: list[np.ndarray],
    pieces: np.ndarray,
    n_fit: int,
    advance: Callable[[int], None],
) -> _Pairs:
    """Encode ``texts`` (the first ``n_fit`` the training texts) and build their pairs."""
    clean = standardise_rows(_encoded(bb, texts, pieces, advance))
    mean, std = clean[:n_fit].mean(0), clean[:n_fit].std(0) + _EPS
    xs = ((clean - mean) / std).astype(np.float32)
    cls, sep = specials(bb)
    rows = [r[: int(spec.max_tokens)] for r in ids]
    vocab_ids = np.unique(np.concatenate([*rows, np.asarray([sep], np.int64)])).astype(np.int64)
    lookup_np = output_lookup(vocab_ids, bb.embeddings.shape[0])
    seqs_np = sequences(rows, cls, sep, int(spec.max_tokens))
    xt, seqs, lookup = tensor(xs), tensor(seqs_np).long(), tensor(lookup_np).long()
    fit = np.arange(n_fit)
    val = np.arange(n_fit, len(texts))
    fit_t, val_t = tensor(fit).long(), tensor(val).long()
    fit_lengths = np.asarray([len(r) for r in rows[:n_fit]])
    fit_per_row = pieces_per_row(seqs[fit_t])
    return _Pairs(
        xs, xt, seqs, lookup, vocab_ids, mean, std, val, fit_t, val_t, fit_lengths, fit_per_row
    )


def _train_decoder(
    bb: Backbone,
    spec: InverterSpec,
    data: _Pairs,
    rng: np.random.Generator,
    drop_gen: torch.Generator,
    advance: Callable[[int], None],
) -> tuple[Any, dict[str, Any]]:
    """The decoder trained on the training texts (word dropout drawn from ``drop_gen``),
    validated on the validation documents."""

    def base_loss(model: torch.nn.Module, idx: torch.Tensor) -> torch.Tensor:
        rows_ = data.fit_t[idx]
        wd = float(spec.word_dropout) if model.training else 0.0
        with fast_precision():  # the steps in bfloat16 where it pays; validation in float32
            return loss(
                model,
                data.xt[rows_],
                data.trimmed(rows_),
                data.lookup,
                None,
                wd,
                drop_gen,
                data.fit_per_row,
            )

    def base_val(model: torch.nn.Module) -> float:
        return -float(
            _chunked(lambda r: loss(model, data.xt[r], data.trimmed(r), data.lookup), data.val_t)
        )

    return train(
        lambda: build_model(bb, spec, data.vocab_ids),
        base_loss,
        len(data.fit_t),
        _settings(spec, spec.epochs, "pretrain inverter"),
        rng=rng,
        validate=base_val,
        lengths=data.fit_lengths,
        advance=advance,
    )


def _guesses(
    bb: Backbone,
    spec: InverterSpec,
    decoder: Any,
    data: _Pairs,
    corr_rows: np.ndarray,
    report: PretrainProgress,
) -> tuple[list[np.ndarray], np.ndarray]:
    """The decoder's greedy guesses for rows ``corr_rows`` and their re-embeddings."""
    advance = report.stage("decoding")
    report.say(f"decoding and re-encoding {len(corr_rows):,} public documents for the corrector")
    guesses: list[np.ndarray] = []
    pooled: list[np.ndarray] = []
    for s in range(0, len(corr_rows), _CHUNK):  # in chunks: the progress report moves
        part = greedy(
            bb, decoder, data.vocab_ids, data.xs[corr_rows[s : s + _CHUNK]], int(spec.max_tokens)
        )
        guesses += part
        pooled.append(bb.own_pooled(bb.detokenize(part)))
        advance(len(part))
    return guesses, np.concatenate(pooled)


def _train_corrector(
    spec: InverterSpec,
    decoder: Any,
    data: _Pairs,
    hyp_all: Hypothesis,
    corr_rows: np.ndarray,
    n_docs: int,
    rng: np.random.Generator,
    advance: Callable[[int], None],
) -> tuple[Any, dict[str, Any]]:
    """The corrector, a copy of the decoder, trained on the first ``n_docs`` rows of
    ``corr_rows`` (the training documents) with their guesses ``hyp_all``, validated on the
    rest."""
    c_fit = tensor(np.arange(n_docs)).long()
    c_val = tensor(np.arange(n_docs, len(corr_rows))).long()
    corr_t = tensor(corr_rows).long()
    corr_per_row = pieces_per_row(data.seqs[corr_t[c_fit]])

    def hyp_at(i: torch.Tensor) -> Hypothesis:
        ids, mask = hyp_all.ids[i], hyp_all.mask[i]
        width = int(mask.sum(1).max())
        return Hypothesis(hyp_all.embedding[i], ids[:, :width], mask[:, :width])

    def corr_loss(model: torch.nn.Module, idx: torch.Tensor) -> torch.Tensor:
        i = c_fit[idx]
        r = corr_t[i]
        with fast_precision():
            return loss(
                model, data.xt[r], data.trimmed(r), data.lookup, hyp_at(i), per_row=corr_per_row
            )

    def corr_val(model: torch.nn.Module) -> float:
        return -float(
            _chunked(
                lambda i: loss(
                    model, data.xt[corr_t[i]], data.trimmed(corr_t[i]), data.lookup, hyp_at(i)
                ),
                c_val,
            )
        )

    return train(
        lambda: copy.deepcopy(decoder),
        corr_loss,
        n_docs,
        _settings(spec, spec.correction_epochs, "pretrain corrector"),
        rng=rng,
        validate=corr_val,
        lengths=data.fit_lengths[:n_docs],
        advance=advance,
    )


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


def _settings(spec: InverterSpec, epochs: int, desc: str) -> TrainSettings:
    """A pre-training stage's settings: ``epochs`` at the spec's learning rate, weight decay
    and batch size, with no bar of its own (the stage reports its progress itself)."""
    lr, decay = float(spec.lr), float(spec.weight_decay)
    return TrainSettings(int(epochs), int(spec.batch_size), lr, decay, desc, progress=False)
