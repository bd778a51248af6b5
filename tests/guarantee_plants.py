"""Planted bugs for the guarantee audit: plugins whose stated guarantee is false.

Each declares its mechanism the way a built-in does (``Guarantee.mechanism`` names a method
returning a :mod:`privaudit.mechanisms.audited` declaration), so the audit reaches them
through the same path. Audited by ``tests/audit/test_guarantee_audit.py`` and
``benchmarks/guarantee_plants_table.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from privaudit.api import Defense, Release
from privaudit.defenses.cape import CAPE
from privaudit.defenses.dpnr import DPNR, laplace_step
from privaudit.defenses.sap import SAPCTI
from privaudit.defenses.t2t import T2T
from privaudit.guarantees import Guarantee, Unit, embedding_distance
from privaudit.mechanisms.audited import DXNoise, UnitMechanism, text_units
from privaudit.mechanisms.laplace import minmax_normalise, pooled_release, sample_laplace
from privaudit.mechanisms.noise import sample_dx_noise
from privaudit.models.backbone import backbone
from privaudit.params import PositiveFloat


class HalfNoiseWords(Defense):
    """d_X word replacement at half the stated noise (it draws at 2η), declaring its sampler."""

    name: ClassVar[str] = "half-noise-words"
    knob: ClassVar[str | None] = "eta"
    levels: ClassVar[tuple[float, ...]] = (50, 75, 100)

    def __init__(self, eta: PositiveFloat = 50.0, backbone: str | None = None) -> None:
        self.eta = eta
        self.backbone = backbone

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee.dx(
            "eta",
            self.eta,
            unit=Unit.WORD,
            mechanism="word_kernel",
            metric=embedding_distance(self.backbone),
        )

    def sample(self, n: int, eta: Any, rng: np.random.Generator) -> np.ndarray:
        dim = backbone(self.backbone).dim
        return sample_dx_noise(n, dim, 2 * np.asarray(eta, dtype=float), rng)  # BUG: 2η

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        bb = backbone(self.backbone)
        ids = [p for p in bb.token_ids(list(texts))]
        flat = np.concatenate([p[:1] for p in ids]) if ids else np.zeros(0, dtype=np.int64)
        z = self.sample(len(flat), float(self.eta), rng)
        new = bb.index.query((bb.embeddings[flat] + z).astype(np.float32))
        return Release("text", texts=[str(t) for t in bb.subwords.id_to_token(new.tolist())])

    def word_kernel(self) -> UnitMechanism:
        bb = backbone(self.backbone)
        noise = DXNoise(self.sample, bb.dim, float(self.eta))
        pool = bb.candidate_ids[bb.subwords.classes[bb.candidate_ids] == 0]
        return text_units(self.privatize, bb, pool, noise=noise)


class LeakyWords(T2T):
    """T2T that releases the original text 5 % of the time, whatever η."""

    name: ClassVar[str] = "leaky-words"

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        release = super().privatize(texts, rng=rng)
        keep = rng.random(len(texts)) < 0.05
        release.texts = [
            t if k else r for t, r, k in zip(texts, release.texts or [], keep, strict=True)
        ]
        return release


class ReusedNoiseWords(T2T):
    """T2T that draws one noise vector per call and adds it to every token of every text."""

    name: ClassVar[str] = "reused-noise-words"

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        bb = backbone(self.backbone)
        ids = bb.token_ids(list(texts))
        z = sample_dx_noise(1, bb.dim, float(self.eta), rng)  # BUG: one draw for all
        out = []
        for row in ids:
            new = bb.index.query((bb.embeddings[row] + z).astype(np.float32)) if len(row) else row
            out.append(" ".join(str(t) for t in bb.subwords.id_to_token(np.asarray(new).tolist())))
        return Release("text", texts=out)


class TwoBudgets(SAPCTI):
    """SAP-CTI's per-token budget without a fit: η_m = 0.2·η0 or 1.9·η0 by token parity. Each
    token's noise has its own normalising constant, so two tokens' densities differ by
    D·ln(η_u/η_v) at the same point: no η·d bound holds between them."""

    name: ClassVar[str] = "two-budgets"

    def token_etas(self, ids: np.ndarray, eta: float) -> float | np.ndarray:
        return eta * np.where(np.asarray(ids) % 2 == 0, 1.9, 0.2)


def _understated(pooled: Any, epsilon: float, sensitivity: float, rng: Any, meta: dict) -> Any:
    return pooled_release(pooled, epsilon, sensitivity / 2, rng, meta)  # BUG: noise at Δ/2


def _leaky(pooled: Any, epsilon: float, sensitivity: float, rng: Any, meta: dict) -> Any:
    out = np.stack(pooled_release(pooled, epsilon, sensitivity, rng, meta).vectors)
    leak = rng.random(len(out)) < 0.05  # BUG: the clean vector 5 % of the time
    out[leak] = minmax_normalise(pooled)[leak]
    return list(out)


def _shared(pooled: Any, epsilon: float, sensitivity: float, rng: Any, meta: dict) -> Any:
    clean = minmax_normalise(pooled)
    noise = sample_laplace((1, clean.shape[1]), sensitivity / epsilon, rng)  # BUG: one per call
    return list(clean + noise)


_FIXED: dict[int, np.ndarray] = {}


def _fixed(pooled: Any, epsilon: float, sensitivity: float, rng: Any, meta: dict) -> Any:
    clean = minmax_normalise(pooled)
    if clean.shape[1] not in _FIXED:  # BUG: one draw, reused by every call
        _FIXED[clean.shape[1]] = sample_laplace((1, clean.shape[1]), 1.0, np.random.default_rng(7))
    return list(clean + _FIXED[clean.shape[1]] * sensitivity / epsilon)


class UnderstatedLaplace(DPNR):
    name: ClassVar[str] = "understated-laplace"

    def laplace_step(self) -> Any:
        return laplace_step(_understated, self.epsilon, self.sensitivity, _dim(self))


class LeakyLaplace(CAPE):
    name: ClassVar[str] = "leaky-laplace"

    def laplace_step(self) -> Any:
        return laplace_step(_leaky, self.epsilon, self.sensitivity, _dim(self))


class SharedLaplace(CAPE):
    name: ClassVar[str] = "shared-laplace"

    def laplace_step(self) -> Any:
        return laplace_step(_shared, self.epsilon, self.sensitivity, _dim(self))


class FixedLaplace(CAPE):
    name: ClassVar[str] = "fixed-laplace"

    def laplace_step(self) -> Any:
        return laplace_step(_fixed, self.epsilon, self.sensitivity, _dim(self))


def _dim(defense: Any) -> int:
    return int(defense.guarantee.dimension or backbone(defense.backbone).dim)


#: (plant, its bug, the quick grid's knob values, a small one)
PLANTS: list[tuple[type, str, tuple[float, ...], float]] = [
    (HalfNoiseWords, "half noise (text, d_X)", (50, 75, 100), 5),
    (UnderstatedLaplace, "understated sensitivity Δ/2 (vector)", (3, 10, 100), 1),
    (LeakyWords, "5 % exact leak (text)", (50, 75, 100), 5),
    (LeakyLaplace, "5 % exact leak (vector)", (3, 10, 100), 1),
    (ReusedNoiseWords, "reused noise within a call (text)", (50, 75, 100), 5),
    (SharedLaplace, "reused noise within a call (vector)", (3, 10, 100), 1),
    (FixedLaplace, "one noise draw for every call (vector)", (3, 10, 100), 1),
    (TwoBudgets, "per-token η, own normalisation (SAP-CTI)", (60, 100), 1),
]


def _unperturbed(share: float) -> Any:
    """A Laplace release that returns ``share`` of its outputs unperturbed (the clean
    normalised vector, exact in float32) and the others with fresh noise. The leaked rows'
    1s carry a float64 jitter below float32's resolution, so no two noise vectors repeat:
    the leak is not caught through a repeated zero noise vector."""

    def release(pooled: Any, epsilon: float, sensitivity: float, rng: Any, meta: dict) -> Any:
        out = np.stack(pooled_release(pooled, epsilon, sensitivity, rng, meta).vectors)
        out = out.astype(np.float64)
        leak = rng.random(len(out)) < share  # BUG: the clean vector `share` of the time
        clean = minmax_normalise(pooled)[leak].astype(np.float64)
        jitter = rng.uniform(1e-11, 1e-10, clean.shape) * (clean == 1.0)
        out[leak] = clean + jitter
        return list(out)

    return release


class InputLeakLaplace(DPNR):
    """DPNR that releases 2 % of its vectors unperturbed: an input leak of a share the audit
    must resolve (:data:`privaudit.audit.guarantee_audit.stats.RESOLUTION`)."""

    name: ClassVar[str] = "input-leak-laplace"

    def laplace_step(self) -> Any:
        return laplace_step(_unperturbed(0.02), self.epsilon, self.sensitivity, _dim(self))
