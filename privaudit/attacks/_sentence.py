"""Shared frame of the sentence-embedding inversions (``bow-inversion``, ``geia``,
``vec2text``), composed from parts.

**Composition** — an inversion is a :class:`SentenceInversion` frame (features, the adapter,
the training skeleton, fit and attack) built from three parts: a :class:`Head` (what is learnt
and how a victim is read: ``bow-inversion``'s word-set classifier, ``geia``'s decoder), a
:class:`Source` (where the pre-trained head comes from and how a point's fine-tuning is
shared: :class:`AuxPretraining` in this process, or ``geia``'s disk-cached public inverter)
and a :class:`Schedule` (epochs, learning rates, batch size, weight decay). An attack
(:class:`EmbeddingInversion`) declares its parameters and composes the frame from them at
each fit; it inherits the shared contract facts, not behaviour through hooks.

**Features** — one vector per document in the public backbone's pooled space, whatever
the release, each row standardised on its own (:mod:`privaudit.attacks._pooled_features`).

**One clean space** — the model (MLP or decoder) is pre-trained once on the *clean* pooled
embeddings of the attacker's aux texts (:meth:`Backbone.pooled`, no privatization), and every
release is first mapped into that space by an :class:`Adapter`: a ridge regression from the
release's features to the clean pooled features of the same aux texts, shrunk towards the
identity when the release already lives there (every release read as above; pooled vectors
only when of the backbone's dimension) and towards zero otherwise (pooled vectors of another
dimension), its strength chosen on the held-out aux. For an untouched release the map is
exactly the identity; for a noisy release it is the attacker's best linear denoiser.

- **Adaptive** (the default): the adapter is fitted on the aux release queried through the
  mechanism at the victims' privacy level, then the pre-trained model is fine-tuned briefly on
  that mapped aux release (the schedule's ``epochs``; 0 = the adapter alone).
- **Non-adaptive** (``adaptive=False``; needs no queries): the clean model alone, its map the
  identity for every release in the pooled space (the clean aux features of that space are
  the clean pooled embeddings, :func:`clean_features`); pooled vectors of another dimension
  cannot be mapped without queries and are refused.

**Pre-training data** — the aux training documents and, with ``sentences`` (the attack's), each
of their sentences as an extra (embedding, text) pair: several times more pairs from the same
aux text, which the small models need; held-out documents stay whole.

**Aux split** — the first ``max_aux`` aux texts, split into a training part and a held-out part
(``val_fraction`` of the documents) by a permutation seeded from the texts' digest: the same
split in every cell of a run, so the shared pre-training never sees the held-out documents on
which thresholds, ridge strengths and early stopping are tuned. Victims are never used for
any choice.

**Pre-training cache** (the :class:`AuxPretraining` source; ``geia`` reads its public inverter
from disk instead) — :data:`PRETRAINED`, an in-process LRU memo keyed by a BLAKE2b digest
of the attack's name and version, every parameter that shapes the pre-trained model (all but
:attr:`EmbeddingInversion.finetune_only`), the backbone's name and fingerprint, and
the aux texts and split (:func:`privaudit.runtime.memo.digest`): a change to any of them is
a miss, so it is never stale. Its seed is drawn from that digest, so the pre-trained model is
a pure function of the key and every cell of a run (every defense point and release kind,
every seed, adaptive or not) shares it; the per-cell ``rng`` drives the fine-tuning. Hits are
deep copies. Nothing is written to disk (the model is trained on the user's aux text; the
project keeps nothing of a user's corpus on disk).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self

import numpy as np

from privaudit.api import ALL_SPACES, Attack, Knowledge, Predictions, Release, Space
from privaudit.attacks._adapter import Adapter, fit_adapter
from privaudit.attacks._pairs import TrainSettings, checked_release, train
from privaudit.attacks._pooled_features import (
    Scaler,
    clean_features,
    release_features,
    standardise_rows,
)
from privaudit.models.backbone import backbone
from privaudit.runtime.devices import current_device, torch_threads
from privaudit.runtime.memo import ObjectMemo, digest
from privaudit.runtime.memory import copy_sharing_frozen

if TYPE_CHECKING:
    import torch

    from privaudit.models.backbone import Backbone


# -------------------------------------------------------------------------------------------
# Aux texts, split, pre-training cache
# -------------------------------------------------------------------------------------------


@dataclass
class AuxSplit:
    """The attacker's aux texts and which of them train (``fit``) or are held out (``val``)."""

    texts: list[str]
    fit: np.ndarray  # indices into texts
    val: np.ndarray
    extra: int = 0  # trailing texts that are sentences of training documents (pre-training)

    @property
    def fit_docs(self) -> np.ndarray:
        """The training documents, without the extra sentences."""
        return self.fit[self.fit < len(self.texts) - self.extra]

    @property
    def key(self) -> str:
        return digest([*self.texts, self.fit, self.val])


def aux_split(
    knowledge: Knowledge, *, max_aux: int | None, val_fraction: float, name: str
) -> AuxSplit:
    """The first ``max_aux`` aux texts and their fixed train/held-out split."""
    if knowledge.aux is None:
        raise ValueError(f"{name} needs the attacker's auxiliary split (Knowledge.aux).")
    aux = knowledge.aux
    if "text" not in getattr(aux, "column_names", []):
        raise ValueError(f"{name} needs an aux split with a 'text' column.")
    if max_aux is not None and len(aux) > max_aux:
        aux = aux.select(range(max_aux))
    texts = [str(t) for t in aux["text"]]
    if len(texts) < 4:
        raise ValueError(
            f"{name} got {len(texts)} aux documents: it learns the inversion from the "
            "attacker's own aux texts and holds some out to tune itself, so give it more "
            "(a few hundred)."
        )
    n_val = min(max(round(val_fraction * len(texts)), 1), len(texts) - 2)
    seed = int(digest(texts)[:8], 16)
    order = np.random.default_rng(seed).permutation(len(texts))
    return AuxSplit(texts=texts, fit=np.sort(order[n_val:]), val=np.sort(order[:n_val]))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def with_sentences(aux: AuxSplit) -> AuxSplit:
    """``aux`` plus, as extra training texts, the sentences of each training document that
    has more than one (the held-out documents stay as they are)."""
    extra: list[str] = []
    for i in aux.fit:
        parts = [p for p in _SENTENCE_END.split(aux.texts[i].strip()) if p]
        if len(parts) > 1:
            extra.extend(parts)
    n = len(aux.texts)
    return AuxSplit(
        texts=[*aux.texts, *extra],
        fit=np.concatenate([aux.fit, np.arange(n, n + len(extra))]),
        val=aux.val,
        extra=len(extra),
    )


#: The pre-trained models of this process, shared by every cell of a run.
PRETRAINED = ObjectMemo()


# -------------------------------------------------------------------------------------------
# The frame
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Format:
    """What the attacker learns of a release's format: container, space, layer, dimension."""

    kind: str
    space: Space
    layer: int | None
    dim: int


#: What a head trains for: ``(loss(model, idx), validate(model))``.
Objective = tuple["Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]", "Callable[..., float]"]


@dataclass
class Pretrained:
    """The cached pre-training: the head's state and the clean pooled aux features."""

    state: Any
    clean: np.ndarray  # (n_aux, dim) row-standardised pooled embeddings of every aux text


# -------------------------------------------------------------------------------------------
# The parts an inversion is composed of
# -------------------------------------------------------------------------------------------


class Head(Protocol):
    """What an inversion learns on the clean pooled space and how it reads a victim: the
    word-set classifier of ``bow-inversion``, the decoder of ``geia``. A state has ``model``
    (None before pre-training) and ``scaler`` attributes."""

    def objective(self, bb: Backbone, aux: AuxSplit, xs: np.ndarray, state: Any) -> Objective:
        """For the scaled features ``xs`` of every aux text: the batch loss at positions
        ``idx`` of ``aux.fit``, and the score on ``aux.val`` (higher is better)."""
        ...

    def lengths(self, bb: Backbone, aux: AuxSplit) -> np.ndarray | None:
        """Each ``aux.fit`` row's sequence length, for length-bucketed batches
        (:func:`~privaudit.attacks._pairs.epoch_batches`); None: plain shuffled batches."""
        ...

    def trained(self, bb: Backbone, aux: AuxSplit, xs: np.ndarray, done: Trained) -> Any:
        """The state of the trained model (``done.stage``: pretrain or finetune)."""
        ...

    def predict(self, bb: Backbone, state: Any, x: np.ndarray) -> Predictions:
        """Predictions for the victims' features ``x`` in the clean pooled space."""
        ...


class Source(Protocol):
    """Where the pre-trained state comes from, and how a point's fine-tuning is shared."""

    def pretrained(self, frame: SentenceInversion, bb: Backbone) -> Pretrained:
        """The model pre-trained for ``frame`` (cached)."""
        ...

    def finetune(
        self,
        frame: SentenceInversion,
        bb: Backbone,
        x: np.ndarray,
        state: Any,
        rng: np.random.Generator,
    ) -> Any:
        """``frame``'s fine-tuning of ``state`` on the mapped aux release ``x``."""
        ...


@dataclass(frozen=True)
class Schedule:
    """How the frame trains: pre-training and fine-tuning epochs and learning rates, and the
    optimiser's weight decay and batch size (:func:`privaudit.attacks._pairs.train`)."""

    pretrain_epochs: int
    epochs: int
    lr: float
    finetune_lr: float
    weight_decay: float
    batch_size: int

    def stage(self, pretraining: bool) -> tuple[int, float]:
        """The epochs and learning rate of pre-training, or of fine-tuning."""
        if pretraining:
            return int(self.pretrain_epochs), float(self.lr)
        return int(self.epochs), float(self.finetune_lr)


@dataclass(frozen=True)
class Trained:
    """What a training run hands to :meth:`Head.trained`: the state it started from, the
    scaling, the trained model, the trainer's info (``best_epoch``, ``val_score``) and the
    stage (``pretrain`` or ``finetune``)."""

    state: Any
    scaler: Scaler
    model: torch.nn.Module
    info: dict[str, Any]
    stage: str


@dataclass(frozen=True)
class AuxPretraining:
    """The default source: the head pre-trained in this process on the clean pooled
    embeddings of the aux training documents (and, with ``sentences``, of their sentences),
    memoised in :data:`PRETRAINED` by ``identity`` (the attack's name, version and the
    parameters that shape the pre-training), the backbone, the aux and the device; seeded
    from that key. ``new_state`` starts it (vocabulary, baseline; ``model`` None) and
    ``new_model`` builds the fresh network for ``dim`` features."""

    identity: tuple[Any, ...]
    new_state: Callable[[Backbone, AuxSplit, int], Any]
    new_model: Callable[[Any, int], torch.nn.Module]
    sentences: bool

    def pretrained(self, frame: SentenceInversion, bb: Backbone) -> Pretrained:
        aux = frame.aux
        key = digest(  # the device too: a GPU's numbers may differ from the CPU's
            [*self.identity, bb.name, bb.fingerprint, aux.key, current_device()]
        )

        def compute() -> Pretrained:
            clean = standardise_rows(
                release_features(bb, Release("text", texts=aux.texts), name=frame.name)
            )
            seed_rng = np.random.default_rng(int(key[:12], 16))
            data, x = aux, clean
            if self.sentences:
                data = with_sentences(aux)
                extra = Release("text", texts=data.texts[len(aux.texts) :])
                x = np.concatenate(
                    [clean, standardise_rows(release_features(bb, extra, name=frame.name))]
                )
            with torch_threads(frame.threads):
                state = self.new_state(bb, data, x.shape[1])
                state = frame.train(bb, data, x, state, seed_rng, new_model=self.new_model)
            return Pretrained(state, clean)

        return PRETRAINED.get(key, compute)

    def finetune(
        self,
        frame: SentenceInversion,
        bb: Backbone,
        x: np.ndarray,
        state: Any,
        rng: np.random.Generator,
    ) -> Any:
        return frame.train(bb, frame.aux, x, state, rng)


# -------------------------------------------------------------------------------------------
# The frame
# -------------------------------------------------------------------------------------------


@dataclass
class SentenceInversion:
    """The frame of the sentence-embedding inversions, composed from a :class:`Head` (what
    is learnt and decoded) and a :class:`Source` (where the pre-trained head comes from):
    every release kind read as one vector per document and mapped into the clean pooled
    space; when ``adaptive``, the map and a brief fine-tuning learnt on the aux release
    queried through the mechanism (see the module docstring). An attack builds one per fit
    from its declared parameters."""

    name: str
    head: Head
    source: Source
    schedule: Schedule
    adaptive: bool
    max_aux: int | None
    val_fraction: float
    backbone: str | None
    threads: int | None = None
    progress: bool | None = None
    _aux: AuxSplit | None = field(default=None, init=False)
    _state: Any = field(default=None, init=False)
    _adapter: Adapter | None = field(default=None, init=False)
    release_format: Format | None = field(default=None, init=False)

    @property
    def aux(self) -> AuxSplit:
        """The fitted aux split."""
        if self._aux is None:
            raise ValueError(f"{self.name} is not fitted: call fit(knowledge) before attack().")
        return self._aux

    # -- the training skeleton ---------------------------------------------------------------

    def train(
        self,
        bb: Backbone,
        aux: AuxSplit,
        x: np.ndarray,
        state: Any,
        rng: np.random.Generator,
        *,
        new_model: Callable[[Any, int], torch.nn.Module] | None = None,
    ) -> Any:
        """Train on features ``x`` of every aux text in the clean pooled space (``aux.fit``
        rows train, ``aux.val`` rows are held out): pre-train a network ``new_model`` builds
        (``state.model`` None), or fine-tune ``state.model`` for the schedule's ``epochs``.
        Returns the new state."""
        pretraining = new_model is not None
        epochs, lr = self.schedule.stage(pretraining)
        if not pretraining and not epochs:
            return state
        # Pre-training fixes the scaling; fine-tuning keeps it (its features are mapped into
        # the clean space already).
        scaler = Scaler.fit(x[aux.fit]) if pretraining else state.scaler
        xs = scaler(x)
        loss, validate = self.head.objective(bb, aux, xs, state)
        pretrained, dim = state.model, x.shape[1]

        def build() -> torch.nn.Module:  # initialised in train()'s seeded torch scope
            if new_model is not None:
                return new_model(state, dim)
            return copy_sharing_frozen(pretrained)

        schedule = self.schedule
        settings = TrainSettings(
            epochs, schedule.batch_size, lr, schedule.weight_decay, self.name, self.progress
        )
        model, info = train(
            build,
            loss,
            len(aux.fit),
            settings,
            rng=rng,
            validate=validate,
            lengths=self.head.lengths(bb, aux),
        )
        stage = "pretrain" if pretraining else "finetune"
        return self.head.trained(bb, aux, xs, Trained(state, scaler, model, info, stage))

    # -- fit / attack ------------------------------------------------------------------------

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> SentenceInversion:
        if not isinstance(knowledge, Knowledge):
            raise TypeError(f"fit() takes a Knowledge, got {type(knowledge).__name__}.")
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}.")
        if self.backbone is None:
            self.backbone = knowledge.backbone
        bb = self.load_backbone()  # first load sets torch's thread count: do it outside
        self._aux = aux_split(
            knowledge, max_aux=self.max_aux, val_fraction=float(self.val_fraction), name=self.name
        )
        if not self.adaptive:
            return self  # the clean model, mapped when the release's format is seen
        if knowledge.query_mechanism is None:
            raise ValueError(
                f"{self.name} (adaptive) needs query access to the mechanism "
                "(Knowledge.query_mechanism) to privatize its aux text at the victims' privacy "
                "level; pass adaptive=False for the attacker trained on clean embeddings only."
            )
        release = knowledge.query(self._aux.texts)
        x = standardise_rows(release_features(bb, release, name=self.name))
        fmt = Format(release.kind, release.space, release.layer, int(x.shape[1]))
        if fmt.dim == 0:
            raise ValueError(
                f"{self.name}: the mechanism released empty vectors for every aux text."
            )
        base = self.pretrained(bb)
        adapter = fit_adapter(x, base.clean, self._aux, identity_prior=_same_space(fmt, bb))
        with torch_threads(self.threads):  # the backbone's encoding keeps torch's setting
            self._state = self.source.finetune(self, bb, adapter(x), base.state, rng)
        self._adapter, self.release_format = adapter, fmt
        return self

    def attack(self, release: Release, head: Head | None = None) -> Predictions:
        """Invert ``release`` (decoded by ``head`` where given, e.g. with the release's
        noise model; else the frame's own)."""
        aux = self.aux
        checked_release(release, name=self.name, nonempty=True)
        bb = self.load_backbone()
        x = standardise_rows(release_features(bb, release, name=self.name))
        fmt = Format(release.kind, release.space, release.layer, int(x.shape[1]))
        if not self.adaptive and self.release_format != fmt:
            self._state, self._adapter = self.clean_adapted(bb, fmt)
            self.release_format = fmt
        if fmt != self.release_format:
            seen = self.release_format
            assert seen is not None
            raise ValueError(
                f"{self.name} was fitted on a {seen.kind!r} aux release "
                f"({seen.space}, dimension {seen.dim}) but is attacking a "
                f"{release.kind!r} one ({release.space}, dimension {fmt.dim}); query the "
                "same mechanism the victims used."
            )
        assert self._adapter is not None
        with torch_threads(self.threads):
            reader = head if head is not None else self.head
            predictions = reader.predict(bb, self._state, self._adapter(x))
        settings = dict(predictions.meta.get("settings", {}))
        adapter = self._adapter
        predictions.meta["settings"] = settings | {
            "adaptive": bool(self.adaptive),
            "n_aux_docs": len(aux.texts),
            "n_heldout_docs": len(aux.val),
            "adapter_alpha": adapter.alpha,
            "adapter_val_mse": None if adapter.val_mse is None else round(adapter.val_mse, 4),
        }
        return predictions

    # -- pre-training ------------------------------------------------------------------------

    def pretrained(self, bb: Backbone) -> Pretrained:
        """The pre-trained model and the clean pooled aux features (from the source)."""
        return self.source.pretrained(self, bb)

    def clean_adapted(self, bb: Backbone, fmt: Format) -> tuple[Any, Adapter]:
        """The non-adaptive attacker: the clean pre-trained model, and a map into its space
        learnt from clean aux features of the release's space (the identity when the release
        is text or pooled vectors of the backbone's dimension)."""
        aux = self.aux
        base = self.pretrained(bb)
        if _same_space(fmt, bb):
            return base.state, Adapter.identity(fmt.dim)
        clean = clean_features(bb, aux.texts, fmt.space, fmt.layer)
        if clean is None or clean.shape[1] != fmt.dim:
            raise ValueError(
                f"{self.name} (adaptive=False) maps the release into the clean embedding space "
                f"with clean aux features that the public backbone {bb.name!r} computes, but "
                f"this {fmt.space} release (dimension {fmt.dim}, layer {fmt.layer}) is not in a "
                "space it can reproduce; use adaptive=True."
            )
        return base.state, fit_adapter(
            standardise_rows(clean), base.clean, aux, identity_prior=False
        )

    def load_backbone(self) -> Backbone:
        return backbone(self.backbone)


class EmbeddingInversion(Attack):
    """The contract every sentence-embedding inversion shares: it reads every release kind,
    is black box, queries the mechanism (adaptive) and needs the attacker's aux. Each attack
    composes its :class:`SentenceInversion` from its declared parameters in :meth:`frame`;
    ``fit`` builds it and ``attack`` hands the release to it."""

    accepts: ClassVar[frozenset[Space]] = ALL_SPACES
    needs_white_box: ClassVar[bool] = False
    needs_query: ClassVar[bool] = True
    needs_aux: ClassVar[bool] = True
    #: The parameters the pre-training ignores (kept out of its cache key).
    finetune_only: ClassVar[frozenset[str]] = frozenset(
        {"adaptive", "epochs", "threads", "progress", "backbone"}
    )
    adaptive: bool
    pretrain_epochs: int
    epochs: int
    lr: float
    weight_decay: float
    batch_size: int
    max_aux: int | None
    val_fraction: float
    backbone: str | None
    threads: int | None
    progress: bool | None
    _frame: SentenceInversion | None = None

    def frame(self) -> SentenceInversion:
        """A new frame composed from this attack's parameters (:meth:`compose`)."""
        raise NotImplementedError

    def compose(self, head: Head, source: Source, finetune_lr: float) -> SentenceInversion:
        """The frame of ``head`` and ``source`` with this attack's declared schedule (its
        fine-tuning at ``finetune_lr``), aux, backbone and threads."""
        schedule = Schedule(
            self.pretrain_epochs,
            self.epochs,
            self.lr,
            finetune_lr,
            self.weight_decay,
            self.batch_size,
        )
        return SentenceInversion(
            name=self.name,
            head=head,
            source=source,
            schedule=schedule,
            adaptive=self.adaptive,
            max_aux=self.max_aux,
            val_fraction=self.val_fraction,
            backbone=self.backbone,
            threads=self.threads,
            progress=self.progress,
        )

    def pretraining_identity(self) -> tuple[Any, ...]:
        """What identifies the pre-training: the attack's name and version and every
        parameter that shapes it."""
        params = {k: v for k, v in self.params().items() if k not in self.finetune_only}
        return (self.name, self.version, sorted(params.items()))

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        self._frame = None  # a failed fit leaves no model, and the last one is not held
        if not isinstance(knowledge, Knowledge):
            raise TypeError(f"fit() takes a Knowledge, got {type(knowledge).__name__}.")
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}.")
        self._frame = self.frame().fit(knowledge, rng=rng)
        return self

    @property
    def fitted(self) -> SentenceInversion:
        """The frame the latest :meth:`fit` built."""
        if self._frame is None:
            raise ValueError(f"{self.name} is not fitted: call fit(knowledge) before attack().")
        return self._frame

    def attack(self, release: Release) -> Predictions:
        return self.fitted.attack(release)


def _same_space(fmt: Format, bb: Backbone) -> bool:
    """Whether the release's features are in the clean pooled space (text re-encoded, token
    vectors finished through the encoder, pooled vectors of the backbone's dimension): then
    the map starts from the identity."""
    return fmt.kind != "pooled_vectors" or fmt.dim == bb.dim
