"""Generative embedding inversion (GEIA): a pre-trained decoder writes the text back from its
vector; the shared engine of ``geia`` and ``vec2text`` (:mod:`privaudit.attacks._inverter`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Self

import numpy as np
from annotated_types import Ge, Gt, Le, Lt

from privaudit.api import MIN_VICTIMS, Knowledge, Predictions, Release
from privaudit.attacks import _inverter as inv
from privaudit.attacks._inverter.hypotheses import Decoding, State, invert
from privaudit.attacks._inverter.public_text import (
    by_seed,
    checked_public,
    overlap,
    params_json,
    public_text_of,
    resolve_public,
    same_path,
)
from privaudit.attacks._pooled_features import Scaler, release_features, standardise_rows
from privaudit.attacks._sentence import (
    AuxSplit,
    EmbeddingInversion,
    Objective,
    Pretrained,
    SentenceInversion,
    Trained,
)
from privaudit.guarantees import Kind
from privaudit.models.backbone import backbone
from privaudit.params import Fraction, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt
from privaudit.registry import CORPORA
from privaudit.runtime.devices import fast_precision, tensor, torch_threads
from privaudit.runtime.memo import ObjectMemo, digest

if TYPE_CHECKING:
    import torch

    from privaudit.models.backbone import Backbone


class GEIA(EmbeddingInversion):
    """Generative embedding inversion with a pre-trained decoder.

    Paper: Li, Xu & Song, "Sentence Embedding Leaks More Information than You Expect:
    Generative Embedding Inversion Attack to Recover the Whole Sentence", Findings of ACL 2023:
    a pre-trained language model, conditioned on the released sentence embedding, is trained
    to write the sentence back, and the attacker decodes each victim's vector.

    Threat model: black box. The attacker owns the *public* backbone (its weights, tokenizer
    and encoder) and public text; holds its own aux texts (never the victims'); may query the
    public privatizer on them at the victims' mechanism and privacy level
    (``Knowledge.query``); and sees only the victims' release. Every release kind is read
    through the one feature path of :mod:`privaudit.attacks._pooled_features`, so no built-in
    defense is ``n/a``.

    Model (:mod:`privaudit.attacks._inverter`): the backbone's embeddings and lowest
    ``n_layer`` layers warm-started as a BERT decoder with cross-attention to ``n_memory``
    vectors projected from the released embedding (Rothe et al., TACL 2020), pre-trained on
    at most ``public_docs`` documents of ``public_corpus`` (``auto``: the run corpus's held-out
    public split where it declares one, else the built-in generator at ``public_seed``; any
    corpus a run can take; never the run's own documents), cached on disk keyed by the
    backbone fingerprint, the public corpus and these parameters (``privaudit pretrain``
    builds it ahead of a run). What it can write at a point: ``vocabulary`` (``backbone``:
    every piece; ``public+aux``; ``public``), reported as reach in ``attack_details``.

    Per defense point (adaptive, the default): the release's features are mapped into the
    clean space by the ridge adapter learnt on the aux release queried through the mechanism,
    then the decoder is fine-tuned for ``epochs`` on that mapped aux release (learning rate
    ``finetune_lr``; the epoch with the lowest loss on the held-out aux documents is kept,
    the pre-trained decoder included). The row's ``attack_details`` also give the
    *non-adaptive* score beside it: the pre-trained decoder's greedy decoding of the release
    mapped by the non-adaptive adapter (no queries; no re-ranking or correction, whatever
    ``hypotheses`` and ``steps`` are).

    Decoding: ``hypotheses`` candidates per victim (the greedy one and ``hypotheses`` − 1
    drawn at ``temperature``), in one batch with the key/value cache; with more than one,
    each is re-embedded through the public encoder and the one closest to the (mapped)
    released vector is kept. ``vec2text`` adds correction steps.

    Victims: decoding costs per victim what training does not, so the row scores at most
    ``max_victims`` test documents (300 by default; the runner draws them with the run's
    seed, the same at every point and for ``vec2text`` and ``optimization-inversion``) and
    its interval is computed on them (``n_attacked`` in the details); ``max_victims: null``
    scores every victim. Decoding runs batched across victims (all of a batch's hypotheses
    in one pass with the key/value cache), in mixed precision where the device runs it
    natively (below). Measured on two cores at the quick grid's parameters (2026-11-27): a
    victim's greedy decoding over the backbone's 29,524 pieces costs 9 ms (5 ms over the
    public text's 2,111 in float32 before the widening), and ``vec2text``'s two hypotheses
    and one correction step about 70 ms with its re-embeddings, so 1,000 victims would cost
    the quick grid about 45 minutes more than these 300.

    Metric (``generation_f1``): word F1 of the decoded text against the original without stop
    words, with F1 with them, ROUGE-L, the exact-sentence rate and entity recovery in the
    details. No-information baseline: the pre-trained decoder decoding the zero vector (the
    public embeddings' mean), the same for every victim.

    Deviations and why: the paper fine-tunes GPT-2; no generator is available offline, so the
    decoder is the public encoder's own lower layers warm-started as a decoder (a documented
    alternative of Rothe et al.); its pre-training softmax covers the WordPieces of the public
    text, for speed on CPUs, and is widened at each point to every piece of the backbone
    (``vocabulary``; see :mod:`privaudit.attacks._inverter`), so it can write any word; the
    pre-training data are public text of the run's domain where the corpus holds some out
    (``public_corpus: auto``), else generated public reviews, not PersonaChat/QNLI. Where the
    device runs bfloat16 natively (:func:`privaudit.runtime.devices.bf16`; ``PRIVAUDIT_BF16=0``
    turns it off) the attacker decodes, fine-tunes and re-embeds its guesses in mixed
    precision, which two AVX512-BF16 cores do 4-5 times faster over the backbone's 29,524
    pieces (88 % of greedy decodings identical to float32's, word F1 unchanged); the
    release it reads and the victims' vectors stay float32.
    """

    name: ClassVar[str] = "geia"
    #: whether the row also scores the non-adaptive attacker (the pre-trained decoder alone)
    reports_non_adaptive: ClassVar[bool] = True
    cost_prior: ClassVar[float] = 0.5  # s per 1,000 words (estimate)
    gpu: ClassVar[float] = 0.5  # trains and decodes a transformer (privaudit.runtime.devices)
    metric: ClassVar[str] = "generation_f1"
    public_data: ClassVar[str | None] = "public_docs"
    # Between-fit sd with the per-point fine-tune seeded per fit (3 fits, quick corpus,
    # 2026-11-26; in a run that seed is a digest of the data): words .0026 / .0039, entities
    # .0042 / .0035 at none / t2t eta 100 (bootstrap SE .009, .014-.015). Greedy decoding
    # adds nothing.
    fit_sd: ClassVar[float] = 0.0042
    test_params: ClassVar[Mapping[str, Any]] = {
        "n_layer": 1,
        "n_memory": 2,
        "public_docs": 60,
        "pretrain_epochs": 1,
        "max_tokens": 16,
    }

    def __init__(
        self,
        adaptive: bool = True,
        hypotheses: PositiveInt = 1,
        steps: Annotated[NonNegativeInt, Le(50)] = 0,
        temperature: PositiveFloat = 0.7,
        n_layer: PositiveInt = 2,
        n_memory: PositiveInt = 8,
        max_tokens: PositiveInt = 48,
        public_corpus: str | dict[str, Any] = "auto",
        public_docs: PositiveInt = 8000,
        public_seed: NonNegativeInt = 104729,
        pretrain_epochs: PositiveInt = 3,
        correction_epochs: PositiveInt = 2,
        epochs: NonNegativeInt = 1,
        lr: NonNegativeFloat = 3e-4,
        finetune_lr: NonNegativeFloat = 1e-4,
        weight_decay: NonNegativeFloat = 0.01,
        batch_size: PositiveInt = 32,
        dropout: Fraction = 0.1,
        word_dropout: Fraction = 0.1,
        sentences: bool = True,
        max_aux: PositiveInt | None = 1000,
        val_fraction: Annotated[float, Gt(0), Lt(0.5)] = 0.1,
        max_victims: Annotated[int, Ge(MIN_VICTIMS)] | None = MIN_VICTIMS,
        vocabulary: Literal["backbone", "public+aux", "public"] = "backbone",
        backbone: str | None = None,
        threads: PositiveInt | None = None,
        progress: bool | None = None,
    ) -> None:
        self.adaptive = adaptive
        self.hypotheses = hypotheses
        self.steps = steps
        self.temperature = temperature
        self.n_layer = n_layer
        self.n_memory = n_memory
        self.max_tokens = max_tokens
        self.public_corpus = checked_public(public_corpus)
        self.public_docs = public_docs
        self.public_seed = public_seed
        self.pretrain_epochs = pretrain_epochs
        self.correction_epochs = correction_epochs
        self.epochs = epochs
        self.lr = lr
        self.finetune_lr = finetune_lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.dropout = dropout
        self.word_dropout = word_dropout
        self.sentences = sentences
        self.max_aux = max_aux
        self.val_fraction = val_fraction
        self.max_victims = max_victims
        self.vocabulary = vocabulary
        self.backbone = backbone
        self.threads = threads
        self.progress = progress
        self._plan: dict[str, Any] = {}  # Knowledge.plan, kept at fit
        self._decode_seed = 0
        self._laplace = False

    # ---------------------------------------------------------------------------------------
    # The pre-trained inverter
    # ---------------------------------------------------------------------------------------

    def spec(self, plan: Mapping[str, Any] | None = None) -> inv.InverterSpec:
        """What shapes the pre-trained inverter (shared by every attack with equal values),
        under ``plan`` (what :meth:`plan` resolved for the run's corpus; None: as configured)."""
        return inv.InverterSpec(
            public=self.public_text(plan),
            n_layer=int(self.n_layer),
            n_memory=int(self.n_memory),
            max_tokens=int(self.max_tokens),
            epochs=int(self.pretrain_epochs),
            correction_epochs=int(self.correction_epochs),
            lr=float(self.lr),
            weight_decay=float(self.weight_decay),
            batch_size=int(self.batch_size),
            dropout=float(self.dropout),
            word_dropout=float(self.word_dropout),
            sentences=bool(self.sentences),
        )

    def public_text(self, plan: Mapping[str, Any] | None = None) -> inv.PublicText:
        """The public pre-training text ``public_corpus`` names, as :meth:`plan` resolved it
        for the run's corpus (``auto``: the corpus's own public split where its loader
        declares one, e.g. ``synthpai``); with no plan, ``auto`` is the built-in generator
        (:data:`~privaudit.attacks._inverter.public_text.FALLBACK`) at ``public_seed``."""
        source = (plan or {}).get("public_corpus", self.public_corpus)
        return public_text_of(source, int(self.public_docs), int(self.public_seed))

    def public_available(self, plan: Mapping[str, Any] | None = None) -> int:
        """``public_docs``, or fewer where the public text holds fewer (SynthPAI's public
        split: 1,159 comments)."""
        return min(int(self.public_docs), self.public_text(plan).count())

    def plan(self, corpus: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """Resolve ``public_corpus`` for the run's corpus (``auto``: its declared public split,
        else :data:`~privaudit.attacks._inverter.public_text.FALLBACK`), then refuse a run
        whose attacker would be pre-trained on the victims' documents: the same generator at
        the same seed, the run's own corpus with no held-out public split (by name and
        parameters, or by path), or public text that holds documents of the run's train or
        test split (exact, whitespace- and case-normalised, at least
        :data:`~privaudit.attacks._inverter.public_text.OVERLAP_WORDS` words: a short
        stock phrase such as "Totally agree!" is no one's document)."""
        source = resolve_public(self.public_corpus, corpus, params)
        resolved = {"public_corpus": source}
        public = self.public_text(resolved)
        if by_seed(public.corpus):  # generated: other seeds, other documents
            if public.corpus == corpus and int(params.get("seed", 0)) == int(self.public_seed):
                raise ValueError(
                    f"the public pre-training text is the run's own corpus ({corpus}, "
                    f"seed {self.public_seed}); give this attack another public_seed."
                )
            return resolved
        if public.split:
            held_out = public.split not in ("train", "test")
        else:
            held_out = not public.is_file() and bool(
                getattr(CORPORA.get(public.corpus), "public_split", None)
            )
        same_file = public.is_file() and corpus == "file" and same_path(public.corpus, params)
        same_spec = (
            public.corpus == corpus and public.params == params_json(params) and not held_out
        )
        if same_file or same_spec:
            raise ValueError(
                f"the public pre-training corpus ({public.describe()}) is the run's own corpus; "
                "name another public corpus (public_corpus), or a held-out split of it."
            )
        found = overlap(public, corpus, params_json(params))
        if found:
            raise ValueError(
                f"{found} of the public pre-training documents ({public.describe()}) are "
                "documents of the run's own train or test split: the attacker would be "
                "pre-trained on the victims; remove them from the public text (public_corpus)."
            )
        return resolved

    def pretrain_cost(self, bb: Backbone, plan: Mapping[str, Any] | None = None) -> float | None:
        """Estimated seconds to pre-train the inverter on this machine, None when cached."""
        return inv.pretrain_estimate(bb, self.spec(plan))

    def cached(self, bb: Backbone, plan: Mapping[str, Any] | None = None) -> bool:
        """Whether the pre-trained inverter is on disk whole (a truncated one is rebuilt)."""
        return inv.cached(bb, self.spec(plan))

    def prepare(
        self, bb: Backbone | None = None, plan: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Build (or find) the pre-trained inverter in the disk cache; returns its note."""
        bb = bb if bb is not None else backbone(self.backbone)
        _, note = _INVERTERS.get(bb, self.spec(plan), self.threads, self.progress)
        return note

    # ---------------------------------------------------------------------------------------
    # The frame: the public inverter, fine-tuned per point, decoding
    # ---------------------------------------------------------------------------------------

    def frame(self) -> SentenceInversion:
        """The decoder head on the disk-cached public inverter, fine-tuned per point."""
        source = PublicInverter(self.spec(self._plan), self.vocabulary, int(self.max_tokens))
        return self.compose(self._head(None), source, finetune_lr=self.finetune_lr)

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        if isinstance(rng, np.random.Generator):
            self._decode_seed = int(rng.integers(2**62))
        g = getattr(knowledge, "guarantee", None)
        # The public noise model: epsilon-LDP Laplace noise on a min-max normalised vector.
        self._laplace = g is not None and g.kind == Kind.LDP
        # the public text the grid's plan resolved (a non-Knowledge is refused by the frame)
        self._plan = dict(getattr(knowledge, "plan", None) or {})
        return super().fit(knowledge, rng=rng)

    def attack(self, release: Release) -> Predictions:
        frame = self.fitted
        laplace = None
        if self._laplace and release.kind == "pooled_vectors":  # ranked by its noise model
            laplace = release_features(frame.load_backbone(), release, name=self.name)
        predictions = frame.attack(release, head=self._head(laplace))
        if self.adaptive and self.reports_non_adaptive:  # the non-adaptive attacker beside it
            bb = frame.load_backbone()
            base = frame.pretrained(bb)
            x = standardise_rows(release_features(bb, release, name=self.name))
            assert frame.release_format is not None
            adapter = frame.clean_adapted(bb, replace(frame.release_format, dim=x.shape[1]))[1]
            decoding = self._head(laplace).decoding
            with torch_threads(self.threads):
                texts, _ = invert(bb, base.state, adapter(x), decoding, steps=0, k=1)
            predictions.meta.setdefault("variants", {})["non_adaptive"] = texts
        return predictions

    def _head(self, laplace_release: np.ndarray | None) -> DecoderHead:
        """How this attack decodes: its settings, the point's seed, the release's noise model."""
        decoding = Decoding(
            max_tokens=int(self.max_tokens),
            temperature=float(self.temperature),
            seed=self._decode_seed,
            laplace_release=laplace_release,
        )
        return DecoderHead(int(self.max_tokens), int(self.hypotheses), int(self.steps), decoding)


@dataclass(frozen=True)
class PublicInverter:
    """Where geia's decoder comes from (a :class:`~privaudit.attacks._sentence.Source`): the
    inverter pre-trained on public text and cached on disk (``spec``), widened to the pieces
    the attacker can write (``vocabulary``); a point's fine-tuning is shared by every attack
    on this inverter at that point (``geia`` and ``vec2text``): a pure function of the
    pre-trained model, the mapped aux release and the fine-tuning schedule, so it is seeded
    from their digest, not from the cell's stream, and memoised in this process."""

    spec: inv.InverterSpec
    vocabulary: str
    max_tokens: int  # the prior's length: the no-information baseline decodes that many

    def pretrained(self, frame: SentenceInversion, bb: Backbone) -> Pretrained:
        aux = frame.aux
        inverter, note = _INVERTERS.get(bb, self.spec, frame.threads, frame.progress)
        clean = standardise_rows(
            release_features(bb, Release("text", texts=aux.texts), name=frame.name)
        )
        scaler = Scaler(inverter.mean, inverter.std)
        ids, decoder, corrector = self._writable(bb, inverter, aux.texts)
        state = State(
            inverter,
            decoder,
            scaler,
            dict(inverter.info)
            | {
                "pretrain_cache": note["cache"],
                "vocabulary": self.vocabulary,
                "output_pieces": len(ids),
            },
            vocab_ids=ids,
            corrector=corrector,
        )
        nothing = np.zeros((1, bb.dim), np.float32)  # the public embeddings' mean, scaled
        state.prior = bb.detokenize(inv.greedy(bb, state.model, ids, nothing, self.max_tokens))[0]
        return Pretrained(state, clean)

    def finetune(
        self,
        frame: SentenceInversion,
        bb: Backbone,
        x: np.ndarray,
        state: State,
        rng: np.random.Generator,
    ) -> State:
        aux, schedule = frame.aux, frame.schedule
        if not schedule.epochs:
            return frame.train(bb, aux, x, state, rng)
        key = digest(
            [
                self.spec.key(bb),
                x,
                aux.key,
                int(schedule.epochs),
                self.vocabulary,
                float(schedule.finetune_lr),
                int(schedule.batch_size),
            ]
        )
        seeded = np.random.default_rng(int(key[:12], 16))
        tuned = _FINETUNED.get(key, lambda: frame.train(bb, aux, x, state, seeded))
        tuned.key = key
        return tuned

    def _writable(
        self, bb: Backbone, inverter: inv.Inverter, aux_texts: list[str]
    ) -> tuple[np.ndarray, Any, Any]:
        """The pieces this attacker can write (``vocabulary``) and the decoder and corrector
        widened to them (:func:`privaudit.attacks._inverter.widen`): the public text's pieces
        alone, those and the aux's (the attacker's own, in the victims' domain), or every
        piece of the backbone. Memoised by the inverter and the pieces."""
        ids = np.asarray(inverter.vocab_ids, np.int64)
        if self.vocabulary == "public":
            return ids, inverter.decoder, inverter.corrector
        if self.vocabulary == "public+aux":
            rows = bb.token_ids(aux_texts)
            extra = np.unique(np.concatenate([np.asarray(r, np.int64) for r in rows] or [ids]))
        else:
            extra = inv.writable_ids(bb)
        new = np.setdiff1d(extra, ids)
        key = digest([self.spec.key(bb), new])

        def compute() -> tuple[np.ndarray, Any, Any]:
            emb = bb.embeddings
            return (
                np.concatenate([ids, new]),
                inv.widen(inverter.decoder, ids, new, emb),
                inv.widen(inverter.corrector, ids, new, emb),
            )

        return _WIDENED.get(key, compute)


@dataclass(frozen=True)
class DecoderHead:
    """geia's decoder as a :class:`~privaudit.attacks._sentence.Head`: teacher-forced
    cross-entropy on at most ``max_tokens`` pieces; ``hypotheses`` candidates per victim,
    ``steps`` correction steps, decoded as ``decoding`` says."""

    max_tokens: int
    hypotheses: int
    steps: int
    decoding: Decoding

    def objective(self, bb: Backbone, aux: AuxSplit, xs: np.ndarray, state: State) -> Objective:
        """Teacher-forced cross-entropy on the aux documents; held out: minus the loss."""
        cls, sep = inv.specials(bb)
        rows = [r[: self.max_tokens] for r in bb.token_ids(aux.texts)]
        seqs = tensor(inv.sequences(rows, cls, sep, self.max_tokens)).long()
        look = tensor(inv.output_lookup(state.vocab_ids, bb.embeddings.shape[0])).long()
        xt = tensor(xs)
        fit_rows, val_rows = tensor(aux.fit).long(), tensor(aux.val).long()

        def batch_loss(
            model: torch.nn.Module, rows_: torch.Tensor, per_row: float | None = None
        ) -> torch.Tensor:
            return inv.loss(model, xt[rows_], inv.trim(seqs[rows_]), look, per_row=per_row)

        per_row = inv.pieces_per_row(seqs[fit_rows])  # length-bucketed: each piece weighs 1

        def step_loss(model: torch.nn.Module, idx: torch.Tensor) -> torch.Tensor:
            with fast_precision():  # bfloat16 where the device runs it natively
                return batch_loss(model, fit_rows[idx], per_row)

        return step_loss, lambda model: -float(batch_loss(model, val_rows))

    def lengths(self, bb: Backbone, aux: AuxSplit) -> np.ndarray | None:
        rows = bb.token_ids([aux.texts[i] for i in aux.fit])
        return np.asarray([min(len(r), self.max_tokens) for r in rows])

    def trained(self, bb: Backbone, aux: AuxSplit, xs: np.ndarray, done: Trained) -> State:
        state = done.state
        return State(
            state.inverter,
            done.model,
            done.scaler,
            state.info
            | {
                "finetune_best_epoch": done.info["best_epoch"],
                "finetune_val_loss": round(-float(done.info["val_score"]), 4),
            },
            state.prior,
            vocab_ids=state.vocab_ids,
            corrector=state.corrector,
        )

    def predict(self, bb: Backbone, state: State, x: np.ndarray) -> Predictions:
        texts, variants = invert(bb, state, x, self.decoding, steps=self.steps, k=self.hypotheses)
        return Predictions(
            "texts",
            texts=texts,
            meta={
                "tokenizer": bb.name,
                "baseline_text": state.prior,
                # what it can write, and what its public text alone covers (the run's reach)
                "writable_ids": tuple(int(i) for i in state.vocab_ids),
                "public_ids": tuple(int(i) for i in state.inverter.vocab_ids),
                "variants": variants,
                "settings": state.info
                | {
                    "hypotheses": self.hypotheses,
                    "steps": self.steps,
                    "mean_decoded_words": round(float(np.mean([len(t.split()) for t in texts])), 2)
                    if texts
                    else 0.0,
                },
            },
        )


class _Inverters:
    """The process's pre-trained inverters (one read from disk per spec and backbone)."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[inv.Inverter, dict[str, Any]]] = {}

    def get(
        self, bb: Backbone, spec: inv.InverterSpec, threads: int | None, progress: bool | None
    ) -> tuple[inv.Inverter, dict[str, Any]]:
        key = spec.key(bb)
        if key not in self._entries:
            self._entries = {
                key: inv.load_or_pretrain(bb, spec, threads=threads, progress=progress)
            }
            return self._entries[key]
        return self._entries[key][0], {"cache": "hit", "seconds": 0.0}


_INVERTERS = _Inverters()
#: The point's fine-tuned decoder (geia's and vec2text's cells of a point share it), dropped
#: when the point's cells are done: an older point's model only held memory.
_FINETUNED = ObjectMemo(size=1, per_point=True)
#: The pre-trained decoder and corrector widened to the attacker's vocabulary.
_WIDENED = ObjectMemo(size=2)
