"""Black-box autoencoder inversion: regress released token vectors back to original embeddings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

import numpy as np
from annotated_types import Ge, Lt

from privaudit.api import Knowledge
from privaudit.attacks._pairs import PairInversion, TrainSettings, aux_pairs, holdout, train
from privaudit.params import NonNegativeFloat, PositiveInt
from privaudit.runtime.devices import module_device, tensor

_EPS = 1e-6


class AEInversion(PairInversion):
    """Learned embedding inversion by regression: an encoder/decoder MLP maps each released
    token vector back to the input embedding of the original token (MSE loss).

    Paper: the learning-based black-box inversion idea of Song & Raghunathan ("Information
    Leakage in Embedding Models", CCS 2020): train a model on the attacker's own (input,
    representation) pairs, then apply it to the victims' representations. Here the model
    regresses token embeddings (an autoencoder-shaped MLP with an MSE loss), the black-box
    counterpart of ``nn-inversion`` scored by reconstruction error; the architecture is this
    project's choice, not a paper's.

    Threat model: black box, as ``mlp-inversion``. The attacker queries the public privatizer
    on its own aux texts (never the victims') at the victims' mechanism and privacy level and
    holds the backbone's *public* input-embedding matrix, with which it embeds released text and
    reads reconstructions as tokens (as attribute-inference does; no other weights, no
    mechanism internals). Reads ``text`` releases and ``token_vectors`` in the
    input-word-embedding space; hidden-layer states are ``n/a`` (use optimization-inversion),
    and so are pooled vectors.

    Featurisation and aux pairs: :mod:`privaudit.attacks._pairs` (released text → WordPiece ids,
    RAPT's plain-token prefix skipped, → input embeddings; vectors as they are; aux positions
    aligned with the original aux tokens). Inputs are standardised with aux statistics.

    Model: encoder Linear(dim, ``hidden``) → ReLU → Linear(``hidden``, ``bottleneck``) → ReLU,
    decoder Linear(``bottleneck``, ``hidden``) → ReLU → Linear(``hidden``, dim), plus a linear
    skip Linear(dim, dim), all reading the released vector ``v`` standardised with aux
    statistics. The output is a *residual* correction: reconstruction = v + s ⊙ (decoder(
    encoder(x)) + skip(x)), with ``s`` the aux targets' per-coordinate scale. The decoder's last
    layer starts at zero and the skip at the closed-form ridge regression (penalty ``ridge`` ·
    n_pairs) of the scaled residual (original - released) on ``x``, so training starts from the
    best linear inversion: for ``none`` that is exactly the identity (every token recovered,
    MSE 0), and for a release that carries no information it is about the aux mean embedding.
    Trained with MSE against the original tokens' embeddings, AdamW (``lr``,
    ``weight_decay``), at most ``epochs`` passes over minibatches of ``batch_size`` positions;
    the weights of the epoch with the lowest MSE on the held-out pairs of a random
    ``val_fraction`` of the aux documents are kept (early stopping). The held-out documents,
    initialisation and shuffling derive from the ``rng`` given to ``fit``, without touching
    the process-wide torch random state. Training and inference run with ``threads``
    torch threads (restored afterwards; ``None`` leaves torch's setting). ``max_aux`` caps the
    aux documents (the first ones).

    Output: ``Predictions("tokens")`` with ``vectors`` (per document, one reconstruction per
    released position) and ``tokens`` (the nearest vocabulary token of each reconstruction,
    ``bb.index.query``); ``meta["released_tokens"]`` lets the runner align positions.

    Metric: ``embedding_mse``, the mean squared error per coordinate between reconstructions
    and the original tokens' embeddings; higher is more private (empirical privacy = the MSE).
    The runner also reports the token recovery of the nearest-token reading.

    Deviations: the residual output, the ridge-initialised skip and early stopping are our
    choices, so that neither a weak mechanism looks stronger through a lossy bottleneck nor a
    strong one looks weaker through an under-trained regressor. The nearest-token reading of
    an MSE-optimal reconstruction shrinks towards the mean embedding when the release is very
    noisy, so its token recovery can fall below reading the released tokens as they are; that
    is expected of a regressor (use ``mlp-inversion`` for token recovery).
    """

    name: ClassVar[str] = "ae-inversion"
    cost_prior: ClassVar[float] = 0.27  # s per 1,000 words (estimate)
    gpu: ClassVar[float] = 0.25  # trains its MLP with torch (privaudit.runtime.devices)
    reconstructs: ClassVar[bool] = True
    metric: ClassVar[str] = "embedding_mse"
    # Between-fit sd of the MSE (rng seeds 1000-1004, quick corpus, 2026-11-26): 1.3e-6 at
    # t2t eta 100 (score 5.5e-4, bootstrap SE 1.8e-5); 0 at none.
    fit_sd: ClassVar[float] = 1.3e-6
    # The quick grid's budget: fewer epochs (recovery against `none` stays 1.000), and torch's
    # thread count as the grid's worker set it.
    quick_params: ClassVar[Mapping[str, Any]] = {"threads": None, "epochs": 2}
    test_params: ClassVar[Mapping[str, Any]] = {"epochs": 2}

    def __init__(
        self,
        hidden: PositiveInt = 512,
        bottleneck: PositiveInt = 256,
        epochs: PositiveInt = 10,
        lr: NonNegativeFloat = 1e-3,
        weight_decay: NonNegativeFloat = 1e-4,
        batch_size: PositiveInt = 256,
        max_aux: PositiveInt | None = 1000,
        ridge: NonNegativeFloat = 1e-3,
        val_fraction: Annotated[float, Ge(0), Lt(0.5)] = 0.1,
        backbone: str | None = None,
        threads: PositiveInt | None = 1,
        progress: bool | None = None,
    ) -> None:
        self.hidden = hidden
        self.bottleneck = bottleneck
        self.epochs = epochs
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_aux = max_aux
        self.val_fraction = val_fraction
        self.ridge = ridge
        self.backbone = backbone
        self.threads = threads
        self.progress = progress
        self._model: Any = None
        self._mean: np.ndarray | None = None
        self._std: np.ndarray | None = None
        self._scale: np.ndarray | None = None
        self._kind: str | None = None
        self._settings: dict[str, Any] = {}

    # ---------------------------------------------------------------------------------------
    # Fitting
    # ---------------------------------------------------------------------------------------

    def _fit(self, knowledge: Knowledge, bb: Any, rng: np.random.Generator) -> None:
        import torch

        pairs = aux_pairs(bb, knowledge, max_aux=self.max_aux, name=self.name)
        val = holdout(pairs.docs, float(self.val_fraction), rng)
        released = pairs.released[~val]
        target = bb.embeddings[pairs.original_ids[~val]]
        self._mean = released.mean(axis=0)
        self._std = released.std(axis=0) + _EPS
        self._scale = target.std(axis=0) + _EPS  # the decoder's output unit, per coordinate
        # On the current device, as the model train() builds (privaudit.runtime.devices).
        x = tensor((released - self._mean) / self._std)
        v = tensor(released)
        t = tensor(target)
        scale = tensor(self._scale.astype(np.float32))
        dim, hidden, bottleneck = released.shape[1], int(self.hidden), int(self.bottleneck)

        # The linear skip starts at the ridge solution of (target - released) / scale on x:
        # a closed-form linear inversion the network then refines (zero for `none`).
        xs = x.cpu().double()  # float64 on the CPU (MPS has none); the model copies it
        eye = torch.eye(dim, dtype=torch.float64)
        gram = xs.T @ xs + float(self.ridge) * len(xs) * eye
        residual = ((t - v) / scale).cpu().double()
        centre = residual.mean(0)
        weight = torch.linalg.solve(gram, xs.T @ (residual - centre)).T.float()
        # x is standardised on these rows, so its mean is ~0 and the bias is the centre.
        bias = centre.float()

        def build() -> torch.nn.Module:
            return _ResidualAutoencoder(dim, hidden, bottleneck, weight, bias)

        def loss(model: torch.nn.Module, idx: torch.Tensor) -> torch.Tensor:
            # MSE in units of the target scale (the same minimiser, better conditioned).
            return torch.mean(((v[idx] - t[idx]) / scale + model(x[idx])) ** 2)

        validate = None
        if val.any():
            v_val = pairs.released[val]
            t_val = bb.embeddings[pairs.original_ids[val]]

            def validate(model: torch.nn.Module) -> float:
                return -float(np.mean((self._reconstruct(model, v_val) - t_val) ** 2))

        self._model, info = train(
            build,
            loss,
            len(t),
            TrainSettings.of(self),
            rng=rng,
            validate=validate,
        )
        self._kind = pairs.kind
        self._settings = {
            "max_aux": self.max_aux,
            "n_aux_docs": pairs.n_docs,
            "n_pairs": len(t),
            "n_val_pairs": int(val.sum()),
            "hidden": hidden,
            "bottleneck": bottleneck,
            "epochs": int(self.epochs),
            "best_epoch": info["best_epoch"],
        }

    def reconstruct(self, vectors: np.ndarray) -> np.ndarray:
        """Reconstructed input embeddings for released vectors ``(n, dim)``."""
        if self._model is None:
            raise ValueError(f"{self.name} is not fitted: call fit(knowledge) before attack().")
        return self._reconstruct(self._model, vectors)

    def _reconstruct(self, model: Any, vectors: np.ndarray) -> np.ndarray:
        import torch

        device = module_device(model)
        vectors = np.asarray(vectors, dtype=np.float32)
        out = np.empty_like(vectors)
        x = (vectors - self._mean) / self._std
        with torch.inference_mode():
            for start in range(0, len(vectors), 8192):
                sl = slice(start, start + 8192)
                xb = torch.from_numpy(np.ascontiguousarray(x[sl])).to(device)
                delta = model(xb).cpu().numpy()
                out[sl] = vectors[sl] + delta * self._scale
        return out

    def _invert(
        self, bb: Any, vectors: np.ndarray, ids: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        recon = self.reconstruct(vectors)
        return bb.index.query(recon), recon


def _ResidualAutoencoder(dim: int, hidden: int, bottleneck: int, weight: Any, bias: Any) -> Any:
    """The correction network: encoder/decoder MLP (zero at the output) plus a linear skip
    initialised to ``weight``, ``bias`` (the ridge solution)."""
    import torch

    class ResidualAutoencoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = torch.nn.Sequential(
                torch.nn.Linear(dim, hidden),
                torch.nn.ReLU(),
                torch.nn.Linear(hidden, bottleneck),
                torch.nn.ReLU(),
            )
            self.decoder = torch.nn.Sequential(
                torch.nn.Linear(bottleneck, hidden),
                torch.nn.ReLU(),
                torch.nn.Linear(hidden, dim),
            )
            self.skip = torch.nn.Linear(dim, dim)
            torch.nn.init.zeros_(self.decoder[-1].weight)
            torch.nn.init.zeros_(self.decoder[-1].bias)
            with torch.no_grad():
                self.skip.weight.copy_(weight)
                self.skip.bias.copy_(bias)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.decoder(self.encoder(x)) + self.skip(x)

    return ResidualAutoencoder()
