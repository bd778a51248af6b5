"""Black-box MLP inversion: a classifier from released token vectors to original tokens."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

import numpy as np
from annotated_types import Ge, Lt

from privaudit.api import Knowledge
from privaudit.attacks._pairs import PairInversion, TrainSettings, aux_pairs, holdout, train
from privaudit.params import Fraction, NonNegativeFloat, PositiveInt
from privaudit.runtime.devices import module_device, tensor

_EPS = 1e-6


class MLPInversion(PairInversion):
    """Learned embedding inversion: an MLP maps each released token vector to an original token.

    Paper: the black-box MLP inversion of RAPT (Li et al., "Privacy-Preserving Prompt Tuning for
    Large Language Model Services", §IV-A1): the attacker privatizes text of its own with the
    public mechanism, trains an MLP on (privatized token representation → original token)
    pairs, and applies it to the victims' release.

    Threat model: black box. The attacker may query the public privatizer on its aux texts (never
    the victims'), at the victims' mechanism and privacy level, and holds the backbone's
    *public* input-embedding matrix, with which it embeds released text (as attribute-inference
    does; it uses no other weights, and no mechanism internals). Reads ``text`` releases and
    ``token_vectors`` in the input-word-embedding space; hidden-layer states are ``n/a`` (use
    optimization-inversion) and so are pooled vectors.

    Featurisation (:mod:`privaudit.attacks._pairs`): released text → WordPiece ids (RAPT's
    plain-token prefix skipped) → input embeddings; released vectors as they are. Aux positions
    are paired with the original aux tokens by sequence alignment. Per position the MLP reads
    ``[v, v - e(r)]``, standardised with aux statistics, where ``v`` is the released vector and
    ``r`` the token it shows (text: the released token; vectors: its nearest vocabulary token,
    so ``v - e(r)`` is the visible noise).

    Output classes (a choice, documented): the distinct original token ids of the attacker's aux
    pairs (at most ``max_classes``, the most frequent), which keeps the softmax small (about
    1,300 classes on the default quick corpus instead of 30,522), **plus one "keep" class**
    meaning "the original is the released token ``r`` itself". Training targets are "keep"
    wherever the aux original equals ``r`` and the original's class otherwise (pairs whose
    original is outside the classes and differs from ``r`` are dropped). At attack time the
    score of ``r`` is p(keep) + p(class r), of every other class its probability, and the
    argmax is the guess. The keep class is a residual path: a victim token the aux never saw,
    but that the mechanism left unchanged, is still recovered, and against ``none`` the
    attack recovers every token. Without it, recovery would be capped by the aux vocabulary
    coverage of the victims' tokens (about 0.98 on the default quick corpus).

    Model: Linear(2·dim, ``hidden``) → ReLU → Dropout(``dropout``) → Linear(``hidden``,
    n_classes + 1), cross-entropy (optional ``label_smoothing``), AdamW (``lr``,
    ``weight_decay``), at most ``epochs`` passes over minibatches of ``batch_size`` positions.
    Early stopping: the pairs of a random ``val_fraction`` of the aux documents are held out and
    the weights of the epoch with the best held-out token recovery are kept (with only a few
    hundred aux documents the classifier overfits after 1-3 epochs, and at a strong privacy
    level the held-out check lets it fall back to what is learnable, e.g. the frequent tokens).
    The held-out documents, initialisation, dropout and shuffling all derive from the ``rng``
    given to ``fit``, without touching the process-wide torch random state. Training and
    inference run with ``threads`` torch threads (restored afterwards; ``None`` leaves torch's
    setting). ``max_aux`` caps the aux documents (the first ones).

    Metric: token recovery X (fraction of the victims' original tokens recovered; positional
    when the lengths agree, else aligned) → empirical privacy 1 - X.

    Deviations: the direct reading is a softmax over the whole vocabulary; here it is over the
    aux tokens plus the keep class (above). The per-position input adds the visible noise
    ``v - e(r)``; early stopping on held-out aux documents is ours.
    """

    name: ClassVar[str] = "mlp-inversion"
    cost_prior: ClassVar[float] = 0.29  # s per 1,000 words (estimate)
    gpu: ClassVar[float] = 0.25  # trains its MLP with torch (privaudit.runtime.devices)
    metric: ClassVar[str] = "token_recovery"
    # Between-fit sd (rng seeds 1000-1004, quick corpus, n_test 300, 2026-11-26): .0018 at
    # t2t eta 100 (bootstrap SE there .004); 0 at none (recovers every token).
    fit_sd: ClassVar[float] = 0.002
    # The quick grid's budget: fewer epochs (recovery against `none` stays 1.000), and torch's
    # thread count as the grid's worker set it.
    quick_params: ClassVar[Mapping[str, Any]] = {"threads": None, "epochs": 2}
    test_params: ClassVar[Mapping[str, Any]] = {"epochs": 2}

    def __init__(
        self,
        hidden: PositiveInt = 512,
        epochs: PositiveInt = 6,
        lr: NonNegativeFloat = 2e-3,
        weight_decay: NonNegativeFloat = 1e-4,
        batch_size: PositiveInt = 256,
        max_aux: PositiveInt | None = 1000,
        max_classes: PositiveInt | None = None,
        dropout: Fraction = 0.1,
        label_smoothing: Fraction = 0.0,
        val_fraction: Annotated[float, Ge(0), Lt(0.5)] = 0.1,
        backbone: str | None = None,
        threads: PositiveInt | None = 1,
        progress: bool | None = None,
    ) -> None:
        self.hidden = hidden
        self.epochs = epochs
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_aux = max_aux
        self.max_classes = max_classes
        self.dropout = dropout
        self.label_smoothing = label_smoothing
        self.val_fraction = val_fraction
        self.backbone = backbone
        self.threads = threads
        self.progress = progress
        self._model: Any = None
        self._classes: np.ndarray | None = None
        self._mean: np.ndarray | None = None
        self._std: np.ndarray | None = None
        self._kind: str | None = None
        self._settings: dict[str, Any] = {}

    # ---------------------------------------------------------------------------------------
    # Fitting
    # ---------------------------------------------------------------------------------------

    def _fit(self, knowledge: Knowledge, bb: Any, rng: np.random.Generator) -> None:
        import torch

        pairs = aux_pairs(bb, knowledge, max_aux=self.max_aux, name=self.name)
        val = holdout(pairs.docs, float(self.val_fraction), rng)
        fit_rows = ~val

        # Output classes: the aux originals (most frequent first when capped), plus "keep".
        uniq, counts = np.unique(pairs.original_ids[fit_rows], return_counts=True)
        if self.max_classes is not None and len(uniq) > self.max_classes:
            top = np.argsort(-counts, kind="stable")[: self.max_classes]
            uniq = np.sort(uniq[top])
        classes = uniq.astype(np.int64)
        self._classes = classes
        keep_class = len(classes)
        pos, in_classes = self._class_positions(pairs.original_ids)
        kept = pairs.original_ids == pairs.released_ids
        target = np.where(kept, keep_class, pos)
        use = fit_rows & (kept | in_classes)
        if not use.any():
            raise ValueError(
                f"{self.name} has no usable aux pairs: every original is outside the "
                f"{len(classes)} output classes and was replaced; raise max_classes or max_aux."
            )
        features = self._features(bb, pairs.released, pairs.released_ids)

        self._mean = features[use].mean(axis=0)
        self._std = features[use].std(axis=0) + _EPS
        x_all = np.ascontiguousarray((features - self._mean) / self._std, dtype=np.float32)
        x = tensor(x_all[use])  # on the current device, as the model train() builds
        y = tensor(target[use].astype(np.int64))
        in_dim, hidden, n_out = x.shape[1], int(self.hidden), keep_class + 1

        def build() -> torch.nn.Module:
            return torch.nn.Sequential(
                torch.nn.Linear(in_dim, hidden),
                torch.nn.ReLU(),
                torch.nn.Dropout(float(self.dropout)),
                torch.nn.Linear(hidden, n_out),
            )

        validate = None
        if val.any():
            x_val, ids_val, truth_val = x_all[val], pairs.released_ids[val], pairs.original_ids[val]

            def validate(model: torch.nn.Module) -> float:
                return float(np.mean(self._predict(model, x_val, ids_val) == truth_val))

        ce = torch.nn.CrossEntropyLoss(label_smoothing=float(self.label_smoothing))
        self._model, info = train(
            build,
            lambda model, idx: ce(model(x[idx]), y[idx]),
            len(y),
            TrainSettings.of(self),
            rng=rng,
            validate=validate,
        )
        self._kind = pairs.kind
        self._settings = {
            "max_aux": self.max_aux,
            "n_aux_docs": pairs.n_docs,
            "n_pairs": len(y),
            "n_val_pairs": int(val.sum()),
            "n_classes": len(classes),
            "hidden": hidden,
            "epochs": int(self.epochs),
            "best_epoch": info["best_epoch"],
        }

    def _class_positions(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per token id, its class position and whether it is one of the classes."""
        classes = self._classes
        assert classes is not None
        pos = np.minimum(np.searchsorted(classes, ids), len(classes) - 1)
        return pos, classes[pos] == ids

    @staticmethod
    def _features(bb: Any, vectors: np.ndarray, ids: np.ndarray) -> np.ndarray:
        vectors = np.asarray(vectors, dtype=np.float32)
        return np.hstack([vectors, vectors - bb.embeddings[ids]]).astype(np.float32)

    def _predict(self, model: Any, x: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """The guessed original token per position: the released token ``ids`` scores
        p(keep) + p(its class), every other class its probability; argmax."""
        import torch

        device = module_device(model)
        classes = self._classes
        assert classes is not None
        keep_class = len(classes)
        pos, r_in = self._class_positions(ids)
        guess = np.zeros(len(ids), dtype=np.int64)
        with torch.inference_mode():
            for start in range(0, len(ids), 8192):
                sl = slice(start, start + 8192)
                xb = torch.from_numpy(np.ascontiguousarray(x[sl], dtype=np.float32))
                prob = torch.softmax(model(xb.to(device)), dim=1).cpu().numpy()
                rows = np.arange(len(prob))
                p_keep = prob[:, keep_class] + np.where(r_in[sl], prob[rows, pos[sl]], 0.0)
                best = prob[:, :keep_class].argmax(axis=1)
                guess[sl] = np.where(p_keep >= prob[rows, best], ids[sl], classes[best])
        return guess

    def _invert(self, bb: Any, vectors: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, None]:
        x = (self._features(bb, vectors, ids) - self._mean) / self._std
        return self._predict(self._model, x, ids), None
