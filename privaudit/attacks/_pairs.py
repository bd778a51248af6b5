"""Shared pieces of the black-box learned inversions (``mlp-inversion``, ``ae-inversion``).

Featurisation, written once for the attacker's aux release and the victims' release:

- a ``text`` release is re-tokenized with the backbone's tokenizer (:meth:`Backbone.token_ids`,
  so no specials and no ``[UNK]``), after skipping RAPT's public plain-word prefix
  (:meth:`Release.content_texts`), and each released token is re-embedded with the backbone's
  *public* input-embedding matrix;
- a release in the input word-embedding space (``Space.TOKEN_EMBEDDINGS``) is read as it is;
  the nearest vocabulary token of each vector (``bb.index.query``) serves only as that
  position's identity, for aligning it with the aux originals and as a candidate guess, never
  as a known original;
- hidden states and pooled vectors have no per-token input-embedding reading, so these attacks
  do not accept them (``n/a``).

Aux training pairs: the attacker privatizes its own aux texts with ``knowledge.query_mechanism``
(same mechanism and privacy level as the victims'), featurises that release as above, takes its
original token ids ``bb.token_ids(aux_texts)`` and pairs released with original positions by
:func:`privaudit.mechanisms.align.align_positions`.

Also here: the seeded minibatch training loop (:func:`train`, scheduled by a
:class:`TrainSettings`) and :class:`PairInversion`, the fit/attack frame both attacks share.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np

from privaudit.api import Attack, Knowledge, Predictions, Release, Space
from privaudit.mechanisms.align import align_positions
from privaudit.mechanisms.batching import unflatten
from privaudit.mechanisms.inputs import check_texts
from privaudit.mechanisms.seeding import seeded_torch
from privaudit.models.backbone import backbone
from privaudit.runtime.devices import torch_device, torch_threads

if TYPE_CHECKING:
    import torch

    from privaudit.models.backbone import Backbone


@dataclass
class ReleasedTokens:
    """Per document, the released token vectors and the vocabulary token each position shows."""

    vectors: list[np.ndarray]  # (n_i, dim) float32
    ids: list[np.ndarray]  # (n_i,) int64: the released token (text) or nearest token (vectors)

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """All positions concatenated: ``(vectors, ids, bounds)``; document i is
        ``bounds[i]:bounds[i + 1]``."""
        bounds = np.cumsum([0, *(len(i) for i in self.ids)]).astype(np.int64)
        dim = self.vectors[0].shape[1] if self.vectors else 0
        vecs = (
            np.concatenate(self.vectors).astype(np.float32, copy=False)
            if self.vectors
            else np.zeros((0, dim), np.float32)
        )
        ids = np.concatenate(self.ids) if self.ids else np.zeros(0, np.int64)
        return vecs, ids.astype(np.int64, copy=False), bounds


@dataclass
class AuxPairs:
    """The attacker's training pairs: released position ↔ original token of its aux texts."""

    released: np.ndarray  # (n, dim) released vectors
    released_ids: np.ndarray  # (n,) the token each released position shows
    original_ids: np.ndarray  # (n,) the original aux token it stands for
    docs: np.ndarray  # (n,) the aux document each pair comes from
    kind: str  # the release kind the mechanism produced
    n_docs: int  # aux documents used
    meta: dict[str, Any] = field(default_factory=dict)  # the aux release's public meta


def checked_release(release: object, *, name: str, nonempty: bool = False) -> Release:
    """``release`` itself, after checking that it is a Release (with documents, when
    ``nonempty``) whose texts (a text release's) are strings: what every attack reads first."""
    if not isinstance(release, Release):
        raise TypeError(f"{name} attacks a Release, got {type(release).__name__}.")
    if nonempty and len(release) == 0:
        raise ValueError(f"{name} got a release with no documents: nothing to attack.")
    if release.kind == "text":
        check_texts(list(release.texts or []), name)
    return release


def released_tokens(bb: Backbone, release: Release, *, name: str) -> ReleasedTokens:
    """The released token vectors and ids of each document (see the module docstring)."""
    checked_release(release, name=name)
    if release.kind == "text":
        texts = release.content_texts()
        ids = bb.token_ids(texts)
        return ReleasedTokens(vectors=[bb.embeddings[i] for i in ids], ids=ids)
    if release.space is Space.HIDDEN_STATES:
        raise ValueError(
            f"{name} maps released vectors in the input word-embedding space to tokens, but this "
            f"release is hidden states of layer {release.layer}; use optimization-inversion, "
            "which models the bottom layers."
        )
    if release.kind == "token_vectors":
        vectors = []
        for d, v in enumerate(release.vectors or []):
            arr = np.asarray(v, dtype=np.float32)
            if arr.size == 0:
                arr = arr.reshape(0, bb.dim)
            if arr.ndim == 1:
                arr = arr.reshape(1, -1)
            if arr.ndim != 2 or arr.shape[1] != bb.dim:
                raise ValueError(
                    f"Released document {d} has token vectors of shape {arr.shape}, but backbone "
                    f"{bb.name!r} embeds in {bb.dim} dimensions: attack with the backbone the "
                    "defense used."
                )
            vectors.append(arr)
        if not vectors:
            return ReleasedTokens(vectors=[], ids=[])
        flat = np.concatenate(vectors)
        nearest = bb.index.query(flat) if len(flat) else np.zeros(0, np.int64)
        bounds = np.cumsum([0, *(len(v) for v in vectors)])
        ids = [r.astype(np.int64) for r in unflatten(nearest, bounds)]
        return ReleasedTokens(vectors=vectors, ids=ids)
    raise ValueError(
        f"{name} reads 'text' and 'token_vectors' releases, not {release.kind!r}: a pooled "
        "vector has no per-token reading; use attribute-inference."
    )


def aux_pairs(bb: Backbone, knowledge: Knowledge, *, max_aux: int | None, name: str) -> AuxPairs:
    """Query the mechanism on the attacker's aux texts and pair released with original tokens."""
    if knowledge.query_mechanism is None:
        raise ValueError(
            f"{name} needs query access to the mechanism (Knowledge.query_mechanism) to "
            "privatize its aux text at the victims' privacy level."
        )
    if knowledge.aux is None:
        raise ValueError(f"{name} needs the attacker's auxiliary split (Knowledge.aux).")
    aux = knowledge.aux
    if "text" not in getattr(aux, "column_names", []):
        raise ValueError(f"{name} needs an aux split with a 'text' column.")
    if max_aux is not None and len(aux) > max_aux:
        aux = aux.select(range(max_aux))
    texts = [str(t) for t in aux["text"]]
    if not texts:
        raise ValueError(
            f"{name} got an empty aux split: it learns the inversion from the attacker's own "
            "privatized aux texts, so give it some (a few hundred documents)."
        )
    release = knowledge.query(texts)
    rel = released_tokens(bb, release, name=name)
    originals = bb.token_ids(texts)
    src_vecs, src_ids, dst_ids, docs = [], [], [], []
    for d, (orig, vecs, ids) in enumerate(zip(originals, rel.vectors, rel.ids, strict=True)):
        i, j = align_positions(orig, ids)
        if len(i):
            src_vecs.append(vecs[j])
            src_ids.append(ids[j])
            dst_ids.append(orig[i])
            docs.append(np.full(len(i), d, dtype=np.int64))
    if not src_vecs:
        raise ValueError(
            f"{name} found no token pairs in its {len(texts)} aux documents (are they all empty "
            "after tokenization?); give it an aux split with text."
        )
    return AuxPairs(
        released=np.concatenate(src_vecs).astype(np.float32, copy=False),
        released_ids=np.concatenate(src_ids).astype(np.int64, copy=False),
        original_ids=np.concatenate(dst_ids).astype(np.int64, copy=False),
        docs=np.concatenate(docs),
        kind=release.kind,
        n_docs=len(texts),
        meta=dict(release.meta),
    )


def holdout(docs: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray:
    """A boolean mask over pairs: those of a random ``fraction`` of the aux documents (drawn
    from ``rng``), held out for early stopping (all ``False``, and nothing drawn, when
    ``fraction`` is 0 or there are fewer than 2 documents)."""
    unique = np.unique(docs)
    n_val = round(fraction * len(unique))
    if fraction <= 0 or len(unique) < 2:
        return np.zeros(len(docs), dtype=bool)
    n_val = min(max(n_val, 1), len(unique) - 1)
    chosen = rng.choice(unique, size=n_val, replace=False)
    return np.isin(docs, chosen)


# -------------------------------------------------------------------------------------------
# Training
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainSettings:
    """How :func:`train` trains: ``epochs`` of AdamW (``lr``, ``weight_decay``) on
    minibatches of ``batch_size`` rows, with a bar labelled ``desc`` (``progress``: True
    shows it, False hides it, None lets tqdm decide)."""

    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    desc: str
    progress: bool | None

    @classmethod
    def of(cls, component: Any) -> TrainSettings:
        """The settings a component declares as its ``epochs``, ``batch_size``, ``lr``,
        ``weight_decay`` and ``progress``, its bar labelled with its ``name``."""
        c = component
        return cls(c.epochs, c.batch_size, c.lr, c.weight_decay, c.name, c.progress)


def train(
    build: Callable[[], torch.nn.Module],
    loss_fn: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor],
    n: int,
    settings: TrainSettings,
    *,
    rng: np.random.Generator,
    validate: Callable[[torch.nn.Module], float] | None = None,
    lengths: np.ndarray | None = None,
    advance: Callable[[int], None] | None = None,
) -> tuple[torch.nn.Module, dict[str, Any]]:
    """Build a model and train it with AdamW on minibatches of row indices ``0..n-1``, as
    ``settings`` say.

    ``lengths`` (each row's sequence length) makes the batches length-bucketed
    (:func:`epoch_batches`); ``advance(k)`` is told after each step that ``k`` more rows are
    done (a caller's own progress report). ``info["curve"]`` is the validation loss
    (minus ``validate``) after each epoch with the seconds since training started.

    Initialisation, dropout and shuffling are seeded from ``rng`` without touching the
    process-wide torch random state (:func:`seeded_torch`; the batch order comes from its
    private ``torch.Generator``). ``loss_fn(model, idx)`` returns the batch loss; the model
    is built on the current device (:func:`privaudit.runtime.devices.current_device`), where ``idx``
    is handed over too (the data it indexes belongs there).
    """
    import torch
    from tqdm.auto import tqdm

    s = settings
    epochs, lr, weight_decay = s.epochs, s.lr, s.weight_decay
    device = torch_device()

    # Layer init and dropout draw from the global torch RNG: seeded_torch scopes and seeds it.
    with seeded_torch(rng) as generator:
        model = build().to(device)
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=float(lr), weight_decay=float(weight_decay)
        )
        bs = int(s.batch_size)
        disable = None if s.progress is None else not s.progress
        best_score, best_epoch, best_state = -np.inf, int(epochs), None
        curve: list[tuple[float, float]] = []
        t0 = time.perf_counter()
        if validate is not None:  # epoch 0: the initial model is a candidate too
            model.eval()
            with torch.inference_mode():
                best_score, best_epoch = float(validate(model)), 0
            best_state = {k: t.detach().clone() for k, t in model.state_dict().items()}
            curve.append((0.0, -best_score))
        for epoch in tqdm(range(1, int(epochs) + 1), desc=s.desc, disable=disable, leave=False):
            model.train()
            for idx in epoch_batches(n, bs, generator, lengths):
                optimizer.zero_grad(set_to_none=True)
                loss = loss_fn(model, idx.to(device))
                loss.backward()
                optimizer.step()
                if advance is not None:
                    advance(len(idx))
            if validate is not None:
                model.eval()
                with torch.inference_mode():
                    score = float(validate(model))
                curve.append((round(time.perf_counter() - t0, 2), -score))
                if score > best_score:
                    best_score, best_epoch = score, epoch
                    best_state = {k: t.detach().clone() for k, t in model.state_dict().items()}
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    info = {"best_epoch": best_epoch, "val_score": best_score if validate else None}
    return model, info | {"curve": curve}


#: A length-bucketed epoch sorts its shuffled rows by length within pools of this many
#: batches: the batches pad to near-equal lengths but still mix the pool's documents.
BUCKET_POOL = 50


def epoch_batches(
    n: int, batch_size: int, generator: torch.Generator, lengths: np.ndarray | None = None
) -> list[torch.Tensor]:
    """One epoch's minibatches of the rows ``0..n-1``, shuffled by ``generator``. With
    ``lengths``, length-bucketed: the shuffled rows are cut into pools of
    :data:`BUCKET_POOL` batches, each pool is sorted by length (stable) and cut into
    batches, and the batches are shuffled. The inverter's public pairs are documents and
    their sentences (12 pieces at the median, 48 at most): random batches pad each to its
    longest row, and a pre-training step cost 2.8 times as much per pair (measured on two
    CPU cores, batch 32)."""
    import torch

    order = torch.randperm(n, generator=generator)
    bs = int(batch_size)
    if lengths is None:
        return [order[s : s + bs] for s in range(0, n, bs)]
    length = torch.as_tensor(np.asarray(lengths), dtype=torch.long)
    out: list[torch.Tensor] = []
    for s in range(0, n, bs * BUCKET_POOL):
        pool = order[s : s + bs * BUCKET_POOL]
        pool = pool[torch.argsort(length[pool], stable=True)]
        out.extend(pool[i : i + bs] for i in range(0, len(pool), bs))
    shuffle = torch.randperm(len(out), generator=generator)
    return [out[int(i)] for i in shuffle]


class PairInversion(Attack):
    """Common frame of the learned black-box inversions: what they read (text and input
    word-embedding vectors), ``fit`` (backbone resolved, torch threads bounded), and an
    ``attack`` that validates the release, reads its tokens and hands the flat positions to
    :meth:`_invert`.

    Subclasses set ``_model``/``_kind``/``_settings`` in :meth:`_fit` and implement
    :meth:`_fit` and :meth:`_invert`.
    """

    accepts: ClassVar[frozenset[Space]] = frozenset({Space.TEXT, Space.TOKEN_EMBEDDINGS})
    needs_white_box: ClassVar[bool] = False
    needs_query: ClassVar[bool] = True
    needs_aux: ClassVar[bool] = True
    #: whether :meth:`_invert` returns reconstructed vectors (then ``Predictions.vectors``)
    reconstructs: ClassVar[bool] = False
    backbone: str | None
    threads: int | None
    progress: bool | None
    _backbone: str | None = None  # the backbone fit resolved (declared one, else knowledge's)
    _model: Any = None
    _kind: str | None = None
    _settings: dict[str, Any]

    def _fit(self, knowledge: Knowledge, bb: Any, rng: np.random.Generator) -> None:
        raise NotImplementedError

    def _invert(
        self, bb: Any, vectors: np.ndarray, ids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Per released position (``vectors``, shown token ``ids``; at least one): the guessed
        original token ids and, where the attack makes them, reconstructed vectors."""
        raise NotImplementedError

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        if not isinstance(knowledge, Knowledge):
            raise TypeError(f"fit() takes a Knowledge, got {type(knowledge).__name__}.")
        self._backbone = self.backbone if self.backbone is not None else knowledge.backbone
        bb = self._load_backbone()  # first load sets torch's thread count: do it outside
        with torch_threads(self.threads):
            self._fit(knowledge, bb, rng)
        return self

    def attack(self, release: Release) -> Predictions:
        if self._model is None:
            raise ValueError(f"{self.name} is not fitted: call fit(knowledge) before attack().")
        checked_release(release, name=self.name, nonempty=True)
        if release.kind != self._kind:
            raise ValueError(
                f"{self.name} was fitted on a {self._kind!r} aux release but is attacking a "
                f"{release.kind!r} release; query the same mechanism the victims used."
            )
        bb = self._load_backbone()
        with torch_threads(self.threads):
            rel = released_tokens(bb, release, name=self.name)
            vectors, ids, bounds = rel.flat()
            guess = np.zeros(0, dtype=np.int64)
            recon = np.zeros((0, bb.dim), np.float32) if self.reconstructs else None
            if len(ids):
                guess, recon = self._invert(bb, vectors, ids)
        return Predictions(
            "tokens",
            tokens=[row.tolist() for row in unflatten(guess, bounds)],
            vectors=None if recon is None else unflatten(recon, bounds),
            meta={
                "tokenizer": bb.name,
                "released_tokens": [r.tolist() for r in rel.ids],
                "settings": dict(self._settings),
            },
        )

    def _load_backbone(self) -> Any:
        return backbone(self._backbone if self._backbone is not None else self.backbone)
