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
own documents is refused when the grid is planned (``geia.plan``: the generator at the
run's seed, the run's own corpus without a held-out split, by spec or by path, or public text
holding any of its train or test documents). As in :mod:`privaudit.attacks._sentence`, each
training document's sentences are extra pairs.
The result is cached on disk like a downloaded model, under
``cache_dir()/inverters/<key>.pt``, where ``key`` digests the backbone's name and fingerprint,
the public corpus, every parameter that shapes the pre-training and the device; a change to
any of them is a miss. The public corpus is public: nothing of the user's corpus is written.
``privaudit pretrain`` builds it ahead of time; ``privaudit run --estimate`` shows its
one-time cost when it is missing.

The modules: :mod:`.public_text` (where the public text comes from), :mod:`.model` (the spec
that keys the cache, the warm-started decoder, widening), :mod:`.decoding` (memory, loss,
greedy and sampled decoding), :mod:`.pretraining` (the decoder, then the corrector),
:mod:`.progress` (its bar or log lines with an ETA) and :mod:`.disk_cache` (the cached model
and its one-time cost). Their public names are re-exported here.
"""

from privaudit.attacks._inverter.decoding import (
    Bounds,
    Hypothesis,
    Sampling,
    generate,
    greedy,
    hypothesis,
    loss,
    memory,
    output_lookup,
    pieces_per_row,
    sequences,
    trim,
)
from privaudit.attacks._inverter.disk_cache import (
    PRETRAIN_PRIOR,
    cached,
    load_or_pretrain,
    pretrain_estimate,
)
from privaudit.attacks._inverter.model import (
    VERSION,
    VOCABULARIES,
    Inverter,
    InverterSpec,
    build_model,
    specials,
    widen,
    writable_ids,
)
from privaudit.attacks._inverter.pretraining import pretrain
from privaudit.attacks._inverter.progress import STAGE_COST, PretrainProgress, Stage
from privaudit.attacks._inverter.public_text import FILE_SUFFIXES, PublicText, sentences

__all__ = [
    "FILE_SUFFIXES",
    "PRETRAIN_PRIOR",
    "STAGE_COST",
    "VERSION",
    "VOCABULARIES",
    "Bounds",
    "Hypothesis",
    "Inverter",
    "InverterSpec",
    "PretrainProgress",
    "PublicText",
    "Sampling",
    "Stage",
    "build_model",
    "cached",
    "generate",
    "greedy",
    "hypothesis",
    "load_or_pretrain",
    "loss",
    "memory",
    "output_lookup",
    "pieces_per_row",
    "pretrain",
    "pretrain_estimate",
    "sentences",
    "sequences",
    "specials",
    "trim",
    "widen",
    "writable_ids",
]
