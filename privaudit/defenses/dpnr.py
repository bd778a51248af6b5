"""Differentially Private Neural Representation (DPNR): word dropout, [0, 1] bounding, Laplace."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any, ClassVar

import numpy as np
from annotated_types import Ge

from privaudit.api import Defense, Release
from privaudit.guarantees import (
    Guarantee,
    Sensitivity,
    Unit,
    embedding_distance,
    guarantee_property,
)
from privaudit.mechanisms.audited import PooledLaplace
from privaudit.mechanisms.inputs import check_rng, check_texts
from privaudit.mechanisms.laplace import pooled_release
from privaudit.models.backbone import backbone
from privaudit.params import FinitePositiveFloat, Fraction, PositiveFloat

PAPER_SENSITIVITY = 1.0  # Lyu et al. 2020: Δ = 1 for the [0, 1]-normalised representation


#: [CLS], at least one token, [SEP].
MaxLength = Annotated[int, Ge(3)]


def resolve_sensitivity(sensitivity: float | None) -> float:
    """``None`` means the papers' Δ = 1."""
    return PAPER_SENSITIVITY if sensitivity is None else float(sensitivity)


def pooled_ldp(
    epsilon: float, sensitivity: float | None, backbone: str | None, **fields: str
) -> Guarantee:
    """ε-LDP per coordinate of the [0,1]-normalised pooled vector, Laplace noise at scale Δ/ε
    (DPNR's and CAPE's guarantee): one coordinate moves by at most 1 in L1, the whole
    d-dimensional vector by at most d, so the vector is d·ε/Δ-LDP."""
    return Guarantee.ldp(
        "epsilon",
        epsilon,
        unit=Unit.COORDINATE,
        sensitivity=Sensitivity(
            resolve_sensitivity(sensitivity), "L1", "the [0,1]-normalised pooled vector"
        ),
        metric=embedding_distance(
            backbone, pooled="L1 distance between [0,1]-normalised mean-pooled last hidden states"
        ),
        composes_over=Unit.VECTOR,
        **fields,
    )


def laplace_step(
    release: Callable[..., Any], epsilon: float, sensitivity: float | None, dim: int
) -> PooledLaplace:
    """The Laplace step of DPNR and CAPE declared for the guarantee audit: ``release`` is
    ``pooled_release`` as the defense's module reaches it when the audit runs."""
    eps, delta = float(epsilon), resolve_sensitivity(sensitivity)

    def run(batch: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        out = release(batch, eps, delta, rng, {})
        return np.stack([np.asarray(v, dtype=np.float64) for v in getattr(out, "vectors", out)])

    return PooledLaplace(run, int(dim), eps, delta)


class DPNR(Defense):
    """Differentially Private Neural Representation.

    Paper: Lyu, He, Li, "Differentially Private Representation for NLP: Formal Guarantee and An
    Empirical Study on Privacy and Fairness", Findings of EMNLP 2020.

    Threat model: the user runs the (public, frozen) encoder locally and sends only a noisy
    pooled representation of each document; the service trains and predicts on such noisy
    vectors (the paper's "robust training" — the probe does the same, as its train split is
    released through the mechanism too). An attacker sees the released vectors and may know the
    mechanism and the encoder.

    Mechanism, per document:
    1. word dropout: each whitespace-separated word is removed independently with probability
       μ (``dropout``), drawn from ``rng`` (see :meth:`drop_words`);
    2. the backbone's attention-masked mean-pooled last hidden state of the remaining text
       (truncated to ``max_length`` tokens);
    3. min-max normalisation over that vector's d dimensions, x ← (x − min x)/(max x − min x),
       so x ∈ [0, 1]^d (a constant vector becomes all zeros);
    4. i.i.d. Laplace(0, Δ/ε) noise on every coordinate (:mod:`privaudit.mechanisms.laplace`).

    Privacy knob: ``epsilon`` (the Laplace mechanism's ε; larger = less noise, ``inf`` = none).
    ``sensitivity`` Δ defaults to the paper's Δ = 1.

    Guarantee, precisely: after step 3 each coordinate lies in [0, 1], so Δ = 1 is the
    sensitivity of *one coordinate*: each released coordinate on its own is ε-LDP. The L1
    sensitivity of the whole normalised vector is d (two complementary 0/1 vectors), so with
    Δ = 1 the full d-dimensional release is only d·ε-LDP (basic composition over coordinates;
    ``meta["vector_epsilon"]`` records d·ε/Δ). Pass ``sensitivity=d`` (e.g. 384 for MiniLM) for
    ε-LDP of the whole vector, at d times the noise. The guarantee protects the entire document
    (any two inputs are neighbours, as in local DP), whatever its length.

    Deviations and choices:
    - The paper masks a dropped word's embedding; we remove the word from the text before
      tokenization, the text-level equivalent for a transformer (a zeroed input embedding would
      still carry a position embedding and attention). Words, not WordPieces, are the unit, as
      in the paper.
    - The paper also argues that word dropout amplifies privacy; that is not accounted for in
      ``vector_epsilon`` or the guarantee (whose notes say so; dropout only adds randomness;
      the ε above holds for any μ).
    - The encoder is frozen here (the paper fine-tunes its feature extractor); with ε = inf and
      μ = 0 the release is exactly the normalised clean representation.
    """

    name: ClassVar[str] = "dpnr"
    cost_prior: ClassVar[float] = 0.3  # s per 1,000 words (estimate)
    gpu: ClassVar[float] = 0.25  # encodes with the backbone (privaudit.runtime.devices)
    knob: ClassVar[str | None] = "epsilon"
    calibrates_by_rate: ClassVar[bool] = False  # vector releases replace no words
    levels: ClassVar[tuple[float, ...]] = (3, 10, 100)

    def __init__(
        self,
        epsilon: PositiveFloat = 1.0,
        dropout: Fraction = 0.1,
        backbone: str | None = None,
        max_length: MaxLength = 128,
        sensitivity: FinitePositiveFloat | None = None,
    ) -> None:
        self.epsilon = epsilon
        self.dropout = dropout
        self.backbone = backbone
        self.max_length = max_length
        self.sensitivity = sensitivity

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """epsilon-LDP per coordinate (Δ = ``sensitivity``); d·ε/Δ for the whole vector."""
        return pooled_ldp(
            self.epsilon,
            self.sensitivity,
            self.backbone,
            source="Lyu et al. 2020",
            notes="Word dropout's amplification is not counted",
            wording="epsilon-LDP per coordinate of the [0,1]-normalised pooled representation "
            "(Lyu et al. 2020, Δ=1); d·epsilon for the whole d-dim vector unless sensitivity=d",
            mechanism="laplace_step",
        )

    def laplace_step(self) -> PooledLaplace:
        """For the guarantee audit: the Laplace step (``pooled_release``) the claim rests on
        (the dropout and the encoder before it are public post-processing of the text)."""
        dim = self.guarantee.dimension or backbone(self.backbone).dim
        return laplace_step(lambda *a: pooled_release(*a), self.epsilon, self.sensitivity, dim)

    def _drop(
        self, texts: list[str], mu: float, rng: np.random.Generator
    ) -> tuple[list[str], list[np.ndarray]]:
        """The texts after word dropout and, per document, which words were dropped."""
        words = [t.split() for t in texts]
        if mu == 0.0:  # nothing to drop: keep the texts verbatim and draw nothing
            return list(texts), [np.zeros(len(w), dtype=bool) for w in words]
        counts = [len(w) for w in words]
        dropped = rng.random(sum(counts)) < mu  # one draw for the whole batch
        bounds = np.cumsum([0, *counts])
        out, masks = [], []
        for d, ws in enumerate(words):
            mask = dropped[bounds[d] : bounds[d + 1]]
            out.append(" ".join(w for w, drop in zip(ws, mask, strict=True) if not drop))
            masks.append(mask)
        return out, masks

    def drop_words(self, texts: Sequence[str], rng: np.random.Generator) -> list[str]:
        """Step 1 alone: each whitespace word removed with probability ``dropout``; kept words
        are joined by single spaces. ``dropout == 0`` returns the texts unchanged."""
        texts = check_texts(texts)
        check_rng(rng)
        return self._drop(texts, float(self.dropout), rng)[0]

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        texts = check_texts(texts)
        check_rng(rng)
        eps = float(self.epsilon)
        mu = float(self.dropout)
        delta = resolve_sensitivity(self.sensitivity)
        bb = backbone(self.backbone)
        kept, dropped = self._drop(texts, mu, rng)
        return pooled_release(
            bb.pooled(kept, max_length=self.max_length),
            eps,
            delta,
            rng,
            {"defense": self.name, "dropout": mu, "backbone": bb.name},
            audit={"dropped": dropped, "unit": "word"},
        )
