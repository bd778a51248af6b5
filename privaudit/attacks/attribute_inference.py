"""Black-box attribute inference: an MLP on the release predicts its author's private attributes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self

import numpy as np
from annotated_types import Ge

from privaudit.api import ALL_SPACES, Attack, Knowledge, Predictions, Release, Space
from privaudit.mechanisms.seeding import seeded_torch
from privaudit.models.backbone import backbone
from privaudit.params import NonNegativeFloat, PositiveInt
from privaudit.runtime.devices import module_device, tensor, torch_device

if TYPE_CHECKING:
    import datasets

    from privaudit.models.backbone import Backbone

_EPS = 1e-6


@dataclass
class _Head:
    """One trained classifier: its classes, the aux majority, and the MLP weights."""

    classes: list[Any]
    majority: Any
    model: Any  # torch.nn.Sequential


class AttributeInference(Attack):
    """Attribute inference from a privatized release with an MLP trained on the attacker's aux.

    Papers: the attribute-inference attack of RAPT (Li et al., "Privacy-Preserving Prompt Tuning
    for Large Language Model Services", §IV-A2), which follows Plant, Gkatzia & Giuffrida,
    "CAPE: Context-Aware Private Embeddings for Private Language Learning", EMNLP 2021: a
    two-layer MLP reads the mean of the released token embeddings and predicts a private
    attribute of the author (gender, age bin, ...).

    Threat model: black box. The attacker holds an auxiliary split with attribute labels (never
    the victims' documents or authors) and may query the public privatizer on its own aux text,
    at the same mechanism and privacy level as the victims'. It uses no model internals beyond
    the backbone's *public* input-embedding matrix, with which it embeds released text; vector
    releases are read as they are. It trains one MLP per attribute on (privatized aux release,
    aux attributes) and applies it to the victims' release.

    Features (one function for aux and victims): released text → WordPiece ids → mean of their
    input embeddings (the leading plain-token prefix of RAPT, public protocol, is skipped);
    ``token_vectors`` → mean over tokens (whatever space they are in); ``pooled_vectors`` → the
    vector. Empty documents give zeros. Features are standardised with aux statistics only.

    Model: per attribute, Linear(d, ``hidden``) → ReLU → Linear(``hidden``, n_classes), AdamW
    (``lr``, ``weight_decay``), cross-entropy, ``epochs`` passes of minibatches of
    ``batch_size``; each attribute's initialisation and shuffling are seeded from the ``rng``
    given to ``fit`` (in attribute order), without touching the process-wide torch random
    state. ``max_aux`` caps the aux documents used (the first ones).

    Metric: balanced accuracy A on the victims (chance 1/K whatever the balance) → empirical
    privacy 1 - A, with plain accuracy and macro-F1 in the details and the aux majority
    guess as the baseline (the metric's scorer, :mod:`privaudit.metrics.attributes`), since
    accuracy alone hides class imbalance.
    """

    name: ClassVar[str] = "attribute-inference"
    cost_prior: ClassVar[float] = 0.09  # s per 1,000 words (estimate)
    gpu: ClassVar[float] = 0.25  # encodes text, trains a head (privaudit.runtime.devices)
    accepts: ClassVar[frozenset[Space]] = ALL_SPACES
    metric: ClassVar[str] = "attribute_accuracy"
    # Between-fit sd (rng seeds 1000-1004, quick corpus, n_test 300, 2026-11-26): gender
    # .0098 at none, .0061 at t2t eta 100; age_bin .0077, .0063 (bootstrap SE .027-.029).
    fit_sd: ClassVar[float] = 0.01
    test_params: ClassVar[Mapping[str, Any]] = {"epochs": 2, "hidden": 32}
    needs_white_box: ClassVar[bool] = False
    needs_query: ClassVar[bool] = True
    needs_aux: ClassVar[bool] = True

    def __init__(
        self,
        attributes: Sequence[str] | None = None,
        hidden: PositiveInt = 768,
        epochs: PositiveInt = 30,
        lr: NonNegativeFloat = 1e-3,
        weight_decay: NonNegativeFloat = 1e-4,
        batch_size: PositiveInt = 64,
        backbone: str | None = None,
        max_aux: Annotated[int, Ge(2)] | None = None,
    ) -> None:
        self.attributes = attributes
        self.hidden = hidden
        self.epochs = epochs
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.backbone = backbone
        self.max_aux = max_aux
        self._backbone_name: str | None = None
        self._heads: dict[str, _Head] = {}
        self._mean: np.ndarray | None = None
        self._std: np.ndarray | None = None
        self._kind: str | None = None

    # ---------------------------------------------------------------------------------------
    # Fitting
    # ---------------------------------------------------------------------------------------

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        if knowledge.query_mechanism is None:
            raise ValueError(
                f"{self.name} needs query access to the mechanism (Knowledge.query_mechanism) "
                "to privatize its aux text at the victims' privacy level."
            )
        if knowledge.aux is None:
            raise ValueError(
                f"{self.name} needs the attacker's auxiliary labelled split (Knowledge.aux)."
            )
        self._backbone_name = self.backbone if self.backbone is not None else knowledge.backbone
        aux = knowledge.aux
        if self.max_aux is not None and len(aux) > self.max_aux:
            aux = aux.select(range(self.max_aux))
        labels = aux_labels(aux, self.attributes)
        texts = [str(t) for t in aux["text"]]
        release = knowledge.query(texts)
        features = self._features(release)
        self._kind = release.kind
        self._mean = features.mean(axis=0)
        self._std = features.std(axis=0) + _EPS
        x = (features - self._mean) / self._std
        self._heads = {}
        for name, values in labels.items():
            self._heads[name] = self._train_head(x, values, rng=rng)
        return self

    def _train_head(self, x: np.ndarray, values: list[Any], *, rng: np.random.Generator) -> _Head:
        import torch

        keep = [i for i, v in enumerate(values) if v is not None]
        kept = [values[i] for i in keep]
        classes = sorted(set(kept), key=_sort_key)
        index = {c: i for i, c in enumerate(classes)}
        y = np.asarray([index[v] for v in kept], dtype=np.int64)
        counts = np.bincount(y, minlength=len(classes))
        majority = classes[int(np.argmax(counts))]  # ties: the first class in sorted order

        device = torch_device()  # the current device: the head and its data live there
        xt = tensor(x[keep].astype(np.float32))
        yt = tensor(y)
        with seeded_torch(rng) as generator:  # layer init draws from the global RNG: scoped
            model = torch.nn.Sequential(
                torch.nn.Linear(xt.shape[1], int(self.hidden)),
                torch.nn.ReLU(),
                torch.nn.Linear(int(self.hidden), len(classes)),
            ).to(device)
            optimizer = torch.optim.AdamW(
                model.parameters(), lr=float(self.lr), weight_decay=float(self.weight_decay)
            )
            loss_fn = torch.nn.CrossEntropyLoss()
            n, bs = len(yt), int(self.batch_size)
            model.train()
            for _ in range(int(self.epochs)):
                order = torch.randperm(n, generator=generator)
                for start in range(0, n, bs):
                    idx = order[start : start + bs].to(device)
                    optimizer.zero_grad(set_to_none=True)
                    loss = loss_fn(model(xt[idx]), yt[idx])
                    loss.backward()
                    optimizer.step()
        model.eval()
        return _Head(classes=classes, majority=majority, model=model)

    # ---------------------------------------------------------------------------------------
    # Attacking
    # ---------------------------------------------------------------------------------------

    def attack(self, release: Release) -> Predictions:
        import torch

        if not self._heads or self._mean is None or self._std is None:
            raise ValueError(f"{self.name} is not fitted: call fit(knowledge) before attack().")
        if release.kind != self._kind:
            raise ValueError(
                f"{self.name} was fitted on a {self._kind!r} aux release but is attacking a "
                f"{release.kind!r} release; query the same mechanism the victims used."
            )
        features = self._features(release)
        if features.shape[1] != self._mean.shape[0]:
            raise ValueError(
                f"The released features have dimension {features.shape[1]}, but the aux release "
                f"had {self._mean.shape[0]}: query the same mechanism the victims used."
            )
        x = torch.from_numpy(
            np.ascontiguousarray((features - self._mean) / self._std, dtype=np.float32)
        )
        attributes: dict[str, list[Any]] = {}
        with torch.inference_mode():
            for name, head in self._heads.items():
                if len(x) == 0:
                    attributes[name] = []
                    continue
                pred = head.model(x.to(module_device(head.model))).argmax(dim=1).cpu().numpy()
                attributes[name] = [head.classes[int(i)] for i in pred]
        return Predictions(
            "attributes",
            attributes=attributes,
            meta={
                "majority": {name: head.majority for name, head in self._heads.items()},
                "classes": {name: list(head.classes) for name, head in self._heads.items()},
            },
        )

    # ---------------------------------------------------------------------------------------
    # Features
    # ---------------------------------------------------------------------------------------

    def _features(self, release: Release) -> np.ndarray:
        """One feature row per document: the mean released token embedding, or the vector."""
        return release_features(release, self._load_backbone, self.name)

    def _load_backbone(self) -> Backbone:
        return backbone(self._backbone_name or self.backbone)


def release_features(
    release: Release, load_backbone: Callable[[], Backbone], who: str = "attribute-inference"
) -> np.ndarray:
    """One feature row per released document: text → the mean of its WordPiece ids' input
    embeddings (``load_backbone()``'s public matrix; RAPT's plain prefix skipped);
    ``token_vectors`` → the mean over tokens; ``pooled_vectors`` → the vector. Empty
    documents give zeros."""
    if release.kind == "text":
        bb = load_backbone()
        texts = release.content_texts()
        return _mean_rows([bb.embeddings[ids] for ids in bb.token_ids(texts)], bb.dim)
    if release.kind == "token_vectors":
        rows = [np.asarray(v, dtype=np.float32) for v in release.vectors or []]
        rows = [r.reshape(0, 0) if r.size == 0 else np.atleast_2d(r) for r in rows]
        dims = {r.shape[1] for r in rows if r.size}
        if len(dims) > 1:
            raise ValueError(f"Released token vectors mix dimensions {sorted(dims)}.")
        return _mean_rows(rows, dims.pop() if dims else 0)
    if release.kind == "pooled_vectors":
        flat = [np.asarray(v, dtype=np.float32).reshape(-1) for v in release.vectors or []]
        sizes = {len(r) for r in flat if len(r)}
        if len(sizes) > 1:
            raise ValueError(f"Released pooled vectors mix dimensions {sorted(sizes)}.")
        dim = sizes.pop() if sizes else 0
        out = np.zeros((len(flat), dim), dtype=np.float32)
        for i, r in enumerate(flat):
            if len(r):
                out[i] = r
        return out
    raise ValueError(f"{who} cannot read a {release.kind!r} release.")


def _mean_rows(rows: Sequence[np.ndarray], dim: int) -> np.ndarray:
    out = np.zeros((len(rows), dim), dtype=np.float32)
    for i, r in enumerate(rows):
        if len(r):
            out[i] = r.mean(axis=0)
    return out


def _sort_key(value: Any) -> tuple[str, str]:
    return (type(value).__name__, str(value))


def aux_labels(aux: datasets.Dataset, wanted: Sequence[str] | None) -> dict[str, list[Any]]:
    """Per requested attribute, one value per aux document (``None`` where it is missing)."""
    if "attributes" not in aux.column_names:
        raise ValueError(
            "The aux split has no 'attributes' column, so there is nothing to learn; give an aux "
            "split whose rows carry attribute dicts such as {'gender': 'F', 'age_bin': ...}."
        )
    dicts: list[Mapping[str, Any]] = [a or {} for a in aux["attributes"]]
    present = sorted({k for d in dicts for k, v in d.items() if v is not None})
    names = present if wanted is None else list(wanted)
    if not names:
        raise ValueError("The aux split carries no attribute values to learn from.")
    labels: dict[str, list[Any]] = {}
    for name in names:
        if name not in present:
            raise ValueError(
                f"The aux split has no attribute {name!r}; it has {present}. Ask for one of "
                "those (or leave `attributes` unset for all of them)."
            )
        values = [d.get(name) for d in dicts]
        distinct = {v for v in values if v is not None}
        if len(distinct) < 2:
            raise ValueError(
                f"Attribute {name!r} takes a single value ({sorted(map(str, distinct))}) in the "
                "aux split, so no classifier can be trained; use a larger or more varied aux."
            )
        labels[name] = values
    return labels
