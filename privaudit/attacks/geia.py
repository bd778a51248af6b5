"""Generative embedding inversion (GEIA): a causal decoder writes the text back from its vector."""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import numpy as np
from annotated_types import Gt, Lt

from privaudit.api import Predictions
from privaudit.attacks._sentence import AuxSplit, Objective, Scaler, SentenceInversion
from privaudit.devices import module_device, tensor
from privaudit.params import Fraction, NonNegativeFloat, NonNegativeInt, PositiveInt

if TYPE_CHECKING:
    import torch

    from privaudit.resources import Backbone

# The decoder's own specials; the rest of its vocabulary are backbone WordPiece ids.
BOS, EOS, UNK = 0, 1, 2
N_SPECIAL = 3


@dataclass
class _State:
    """A trained decoder: its output vocabulary, the feature scaling, and the weights."""

    vocab_ids: np.ndarray  # backbone ids; decoder index = position + N_SPECIAL
    scaler: Scaler
    model: Any  # torch.nn.ModuleDict {"proj": Linear(d, prefix·n_embd), "lm": GPT2LMHeadModel}
    info: dict[str, Any] = field(default_factory=dict)
    prior: str = ""  # what the pre-trained decoder writes with no conditioning


class GEIA(SentenceInversion):
    """Generative embedding inversion: a small causal decoder conditioned on the released vector.

    Paper: Li, Xu & Song, "Sentence Embedding Leaks More Information than You Expect:
    Generative Embedding Inversion Attack to Recover the Whole Sentence", Findings of ACL 2023.
    The released sentence embedding, projected into the decoder's input space, is the prefix
    of a causal language model trained by teacher forcing on (embedding of aux text, aux text);
    the attacker decodes each victim's vector into a sentence.

    Threat model: black box, as ``bow-inversion``: the attacker holds its own aux texts (never
    the victims'), may query the public privatizer on them at the victims' mechanism and
    privacy level (``Knowledge.query``), and owns the *public* backbone (its tokenizer, and its
    encoder to re-encode released text and compute clean aux embeddings). It sees only the
    victims' public release. Every release kind is read
    (:mod:`privaudit.attacks._sentence`): text re-encoded with the backbone's pooled encoder,
    token-vector and hidden-state releases mean-pooled, pooled vectors as released; so no
    built-in defense is ``n/a``.

    Model: ``transformers``' GPT-2 (``GPT2Config``/``GPT2LMHeadModel``), *randomly
    initialised*: ``n_layer`` blocks, ``n_head`` heads, width ``n_embd``, tied input/output
    embeddings, dropout ``dropout``. A Linear(d, ``prefix_len``·``n_embd``) maps the
    standardised release vector to ``prefix_len`` input embeddings (``inputs_embeds``), then
    [BOS] and the text's WordPiece ids (the backbone's tokenizer, at most ``max_tokens``)
    follow; cross-entropy on every next token and a final [EOS]. AdamW (``lr``,
    ``weight_decay``), minibatches of ``batch_size`` texts. Decoding: greedy, with the
    key/value cache, up to ``max_tokens`` tokens or [EOS]; the text is the backbone
    tokenizer's decoding (uncased for the default backbone).

    Output vocabulary (a choice, documented): the WordPiece ids that occur in the aux training
    texts (about 1,200 on the quick corpus instead of 30,522) plus [BOS], [EOS] and [UNK]
    ([UNK] and [BOS] are never emitted). A randomly initialised decoder trained on aux text
    can learn to emit no other token, so this loses nothing and makes the softmax 25 times
    smaller.

    Training (:mod:`privaudit.attacks._sentence`): pre-trained for ``pretrain_epochs`` on the
    *clean* pooled embeddings of the aux training documents (and, with ``sentences``, of each
    of their sentences), once per run, cached by content
    (:data:`privaudit.attacks._sentence.PRETRAINED`); with ``word_dropout`` of the teacher-forced
    input tokens replaced by [UNK] so that the decoder leans on the conditioning (Bowman et
    al.'s word dropout). Adaptive (the default): the release's features are mapped into the
    clean space by a ridge map learnt on the aux release queried through the mechanism at the
    victims' privacy level, and the decoder is fine-tuned for ``epochs`` on that mapped aux
    release (the per-cell ``rng`` seeds dropout and shuffling). Both keep the weights of the
    epoch with the lowest loss on the held-out aux documents (``val_fraction``, never trained
    on). ``adaptive=False`` is the non-adaptive attacker: the clean pre-trained decoder alone.

    Metric (``generation_f1``, :func:`privaudit.audit.scoring.generation_scores`): word F1 of
    the decoded text against the original without stop words (the headline, as
    ``bow-inversion``'s: a decoder that learnt the corpus's templates scores a high F1 on
    function words from its prior alone; empirical privacy 1 − F1), the word F1 with them
    (``f1_all``), ROUGE-L, the exact-sentence rate and the fraction of the victims' entity
    strings that appear in the decoded text. No-information baseline (``attack_baseline``):
    the pre-trained decoder decoding with no conditioning (the zero vector, i.e. the clean aux
    embeddings' mean after standardisation): the sentence its prior alone writes, the same for
    every victim and, as the pre-training is shared, at every defense point of a run.

    Deviations and why: the paper fine-tunes a pretrained GPT-2 (it also reports a randomly
    initialised one); no pretrained generator is available offline, so the decoder is
    randomly initialised and small (two layers, width 128: it must train in seconds on two
    CPU cores, on a few hundred aux texts), with the vocabulary restricted as above; greedy
    decoding (the paper also uses beam search and sampling); the aux sentences as extra
    training pairs and word dropout, since a few hundred aux texts are all the decoder
    learns language from; pre-training on clean embeddings, then a ridge map and a brief
    fine-tuning through the mechanism, is our affordable adaptive attacker.
    """

    name: ClassVar[str] = "geia"
    cost_prior: ClassVar[float] = 0.36  # s per 1,000 words (estimate)
    gpu: ClassVar[float] = 0.5  # trains a GPT-2 decoder (privaudit.devices)
    metric: ClassVar[str] = "generation_f1"
    # The quick grid pre-trains for 8 epochs instead of 10 (its 20-minute budget); the other
    # defaults are its budget too (one torch thread: a small model gains little
    # from more, and loses a lot when the cores are shared); the pre-training is paid once.
    quick_params: ClassVar[Mapping[str, Any]] = {"pretrain_epochs": 8}
    test_params: ClassVar[Mapping[str, Any]] = {
        "n_layer": 1,
        "n_head": 2,
        "n_embd": 32,
        "pretrain_epochs": 1,
        "max_tokens": 16,
    }

    def __init__(
        self,
        adaptive: bool = True,
        n_layer: PositiveInt = 2,
        n_head: PositiveInt = 4,
        n_embd: PositiveInt = 128,
        prefix_len: PositiveInt = 4,
        pretrain_epochs: PositiveInt = 10,
        epochs: NonNegativeInt = 1,
        lr: NonNegativeFloat = 2e-3,
        weight_decay: NonNegativeFloat = 0.01,
        batch_size: PositiveInt = 32,
        dropout: Fraction = 0.1,
        word_dropout: Fraction = 0.25,
        sentences: bool = True,
        max_tokens: PositiveInt = 64,
        max_aux: PositiveInt | None = 1000,
        val_fraction: Annotated[float, Gt(0), Lt(0.5)] = 0.1,
        backbone: str | None = None,
        threads: PositiveInt | None = 1,
        progress: bool | None = None,
    ) -> None:
        self.adaptive = adaptive
        self.n_layer = n_layer
        self.n_head = n_head
        self.n_embd = n_embd
        self.prefix_len = prefix_len
        self.pretrain_epochs = pretrain_epochs
        self.epochs = epochs
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.dropout = dropout
        self.word_dropout = word_dropout
        self.sentences = sentences
        self.max_tokens = max_tokens
        self.max_aux = max_aux
        self.val_fraction = val_fraction
        self.backbone = backbone
        self.threads = threads
        self.progress = progress
        self._settings: dict[str, Any] = {}

    # ---------------------------------------------------------------------------------------
    # Training
    # ---------------------------------------------------------------------------------------

    def _new_state(self, bb: Backbone, aux: AuxSplit, dim: int) -> _State:
        """The output vocabulary: the WordPiece ids of the aux training texts."""
        if int(self.n_embd) % int(self.n_head):
            raise ValueError(
                f"{self.name}: n_embd={self.n_embd} must be a multiple of n_head={self.n_head}."
            )
        ids = self._token_ids(bb, aux)
        seen = np.unique(np.concatenate([ids[i] for i in aux.fit] + [np.zeros(0, np.int64)]))
        if not len(seen):
            raise ValueError(f"{self.name}: the aux training texts contain no tokens.")
        return _State(
            vocab_ids=seen.astype(np.int64),
            scaler=Scaler(np.zeros(dim, np.float32), np.ones(dim, np.float32)),
            model=None,
            info={"vocabulary": len(seen) + N_SPECIAL},
        )

    def _token_ids(self, bb: Backbone, aux: AuxSplit) -> list[np.ndarray]:
        return [row[: int(self.max_tokens)] for row in bb.token_ids(aux.texts)]

    def _new_model(self, state: _State, dim: int) -> torch.nn.Module:
        return self._build(dim, len(state.vocab_ids) + N_SPECIAL)

    def _objective(self, bb: Backbone, aux: AuxSplit, xs: np.ndarray, state: _State) -> Objective:
        """Teacher-forced next-token cross-entropy (word dropout while training); held out:
        minus the loss."""
        lookup = _lookup(state.vocab_ids, bb.embeddings.shape[0])
        seqs, lengths = _sequences([lookup[row] for row in self._token_ids(bb, aux)])
        # On the current device, as the model train() builds (privaudit.devices).
        xt = tensor(xs)
        fit_rows = tensor(aux.fit)
        val_rows = tensor(aux.val)
        seqs, lengths = seqs.to(xt.device), lengths.to(xt.device)

        def batch_loss(model: torch.nn.Module, rows: torch.Tensor) -> torch.Tensor:
            return _loss(
                model, xt[rows], seqs[rows], lengths[rows], int(self.prefix_len),
                float(self.word_dropout) if model.training else 0.0,
            )  # fmt: skip

        def validate(model: torch.nn.Module) -> float:
            return -float(batch_loss(model, val_rows))

        return lambda model, idx: batch_loss(model, fit_rows[idx]), validate

    def _trained(
        self,
        bb: Backbone,
        aux: AuxSplit,
        xs: np.ndarray,
        state: _State,
        *,
        scaler: Scaler,
        model: torch.nn.Module,
        info: dict[str, Any],
        stage: str,
    ) -> _State:
        """The decoder; after pre-training, also its prior (the baseline)."""
        new = _State(
            vocab_ids=state.vocab_ids,
            scaler=scaler,
            model=model,
            info=state.info
            | {
                f"{stage}_best_epoch": info["best_epoch"],
                f"{stage}_val_loss": round(-float(info["val_score"]), 4),
            },
            prior=state.prior,
        )
        if stage == "pretrain":  # the baseline: the clean decoder's prior, the same at every point
            new.prior = self._decode(bb, new, np.zeros((1, xs.shape[1]), np.float32))[0]
        return new

    def _build(self, dim: int, n_vocab: int) -> torch.nn.Module:
        import torch
        from transformers import GPT2Config, GPT2LMHeadModel

        p = float(self.dropout)
        config = GPT2Config(
            vocab_size=n_vocab,
            n_positions=int(self.prefix_len) + int(self.max_tokens) + 2,
            n_embd=int(self.n_embd),
            n_layer=int(self.n_layer),
            n_head=int(self.n_head),
            n_inner=4 * int(self.n_embd),
            resid_pdrop=p,
            embd_pdrop=p,
            attn_pdrop=p,
            bos_token_id=BOS,
            eos_token_id=EOS,
            tie_word_embeddings=True,
        )
        parts = {
            "proj": torch.nn.Linear(dim, int(self.prefix_len) * int(self.n_embd)),
            "lm": GPT2LMHeadModel(config),
        }
        # The prefix on the scale of GPT-2's input embeddings (std 0.02).
        torch.nn.init.normal_(parts["proj"].weight, std=0.02 / math.sqrt(dim))
        torch.nn.init.zeros_(parts["proj"].bias)
        return torch.nn.ModuleDict(parts)

    # ---------------------------------------------------------------------------------------
    # Attacking
    # ---------------------------------------------------------------------------------------

    def _predict(self, bb: Backbone, state: _State, x: np.ndarray) -> Predictions:
        texts = self._decode(bb, state, state.scaler(x))
        return Predictions(
            "texts",
            texts=texts,
            meta={
                "tokenizer": bb.name,
                "baseline_text": state.prior,
                "settings": state.info
                | {
                    "n_layer": int(self.n_layer),
                    "n_embd": int(self.n_embd),
                    "mean_decoded_words": round(float(np.mean([len(t.split()) for t in texts])), 2),
                },
            },
        )

    def _decode(self, bb: Backbone, state: _State, xs: np.ndarray) -> list[str]:
        """Greedy decoding of standardised features ``xs`` into texts."""
        decoded = _greedy(state.model, xs, int(self.prefix_len), int(self.max_tokens))
        ids = [state.vocab_ids[np.asarray(row, np.int64) - N_SPECIAL] for row in decoded]
        return bb.detokenize(ids)


# -------------------------------------------------------------------------------------------
# Decoder helpers
# -------------------------------------------------------------------------------------------


def _lookup(vocab_ids: np.ndarray, backbone_vocab: int) -> np.ndarray:
    """Backbone id → decoder index ([UNK] for ids outside the output vocabulary)."""
    lookup = np.full(backbone_vocab, UNK, dtype=np.int64)
    lookup[vocab_ids] = np.arange(len(vocab_ids)) + N_SPECIAL
    return lookup


def _sequences(rows: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """[BOS] + row + [EOS] per document, right-padded with [EOS]; and each full length."""
    import torch

    lengths = np.asarray([len(r) + 2 for r in rows], dtype=np.int64)
    out = np.full((len(rows), int(lengths.max()) if len(rows) else 2), EOS, dtype=np.int64)
    for i, r in enumerate(rows):
        out[i, 0] = BOS
        out[i, 1 : 1 + len(r)] = r
    return torch.from_numpy(out), torch.from_numpy(lengths)


def _loss(
    model: Any,
    x: torch.Tensor,
    seqs: torch.Tensor,
    lengths: torch.Tensor,
    prefix: int,
    word_dropout: float = 0.0,
) -> torch.Tensor:
    """Teacher-forced next-token cross-entropy: the prefix and [BOS] + text predict text +
    [EOS]; padding is masked out of attention and loss. ``word_dropout``: that fraction of
    the input tokens after [BOS] is replaced by [UNK] (the targets are not), so the decoder
    must lean on the conditioning rather than on its own history."""
    import torch

    width = int(lengths.max())
    inputs, labels = seqs[:, : width - 1], seqs[:, 1:width].clone()
    steps = torch.arange(width - 1, device=seqs.device)[None, :]
    valid = steps < (lengths[:, None] - 1)
    labels[~valid] = -100
    if word_dropout > 0:
        # The seeded global CPU RNG (train()), moved: the same draws on every device.
        drop = (torch.rand(inputs.shape) < word_dropout).to(inputs.device)
        drop[:, 0] = False
        inputs = inputs.masked_fill(drop, UNK)
    lm = model["lm"]
    n = len(x)
    head = model["proj"](x).view(n, prefix, -1)
    embeds = torch.cat([head, lm.transformer.wte(inputs)], dim=1)
    ones = torch.ones(n, prefix, dtype=torch.long, device=valid.device)
    mask = torch.cat([ones, valid.long()], dim=1)
    logits = lm(inputs_embeds=embeds, attention_mask=mask).logits[:, prefix:]
    return torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100
    )


@functools.cache
def _cache_argument() -> str:
    """The name under which this ``transformers`` passes a key/value cache (``cache`` from
    5.x's renaming, ``past_key_values`` before)."""
    from transformers import GPT2LMHeadModel

    params = inspect.signature(GPT2LMHeadModel.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _greedy(model: Any, x: np.ndarray, prefix: int, max_tokens: int) -> list[list[int]]:
    """Greedy decoding from the prefix of each row of ``x``: decoder indices up to [EOS]."""
    import torch
    from transformers import DynamicCache

    model.eval()
    lm = model["lm"]
    device = module_device(model)
    out: list[list[int]] = []
    name = _cache_argument()
    with torch.inference_mode():
        for start in range(0, len(x), 256):
            xb = torch.from_numpy(np.ascontiguousarray(x[start : start + 256])).to(device)
            n = len(xb)
            head = model["proj"](xb).view(n, prefix, -1)
            bos = lm.transformer.wte(torch.full((n, 1), BOS, dtype=torch.long, device=device))
            cache = DynamicCache()
            width = prefix + 1
            logits = lm(
                inputs_embeds=torch.cat([head, bos], dim=1),
                attention_mask=torch.ones(n, width, dtype=torch.long, device=device),
                use_cache=True,
                **{name: cache},
            ).logits[:, -1]
            tokens = torch.zeros((n, max_tokens), dtype=torch.long, device=device)
            done = torch.zeros(n, dtype=torch.bool, device=device)
            for step in range(max_tokens):
                logits[:, BOS] = -torch.inf
                logits[:, UNK] = -torch.inf
                nxt = logits.argmax(dim=-1)
                nxt[done] = EOS
                tokens[:, step] = nxt
                done |= nxt == EOS
                if bool(done.all()) or step == max_tokens - 1:
                    break
                width += 1
                logits = lm(
                    input_ids=nxt[:, None],
                    attention_mask=torch.ones(n, width, dtype=torch.long, device=device),
                    use_cache=True,
                    **{name: cache},
                ).logits[:, -1]
            for row in tokens.tolist():
                seq = []
                for t in row:
                    if t == EOS:
                        break
                    seq.append(t)
                out.append(seq)
    return out
