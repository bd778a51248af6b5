"""What a defense declares for the guarantee audit: the mechanism its guarantee is proved for.

A :class:`~privaudit.guarantees.Guarantee` names (``mechanism``) a method of its defense that
returns one of these; the audit (:mod:`privaudit.audit.guarantee_audit`) reads only them, so a
built-in defense and a user's plugin are audited through the same path:

- :class:`UnitMechanism` — the release on one-unit inputs (a word, a token): ``draw`` runs
  **one call** of the mechanism on a batch of one-unit inputs (each unit its own document),
  the way ``privatize`` or the defense's word kernel runs; cheap per draw, so the audit draws
  as many as a claim needs. Optionally the d_X noise step it adds (:class:`DXNoise`).
- :class:`DXNoise` — a d_X noise step with a declared density ∝ exp(−η‖z‖) in R^dim (per
  unit η where the budget varies by unit), released as it is (``released``) or projected.
- :class:`PooledLaplace` — a Laplace release of [0,1]-normalised vectors (one call on a
  batch), with its declared scale Δ/ε.

:func:`one_token_words` and :func:`text_units` build a :class:`UnitMechanism` over a text
privatizer's ``privatize`` (one-word texts of words that tokenize as themselves).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: One call on a batch of units: one output per unit, in order.
Draw = Callable[[Sequence[int], np.random.Generator], list[Hashable]]


@dataclass(frozen=True)
class DXNoise:
    """A d_X noise step: ``sample(n, eta, rng)`` draws n vectors (n, dim) with density ∝
    exp(−η‖z‖), ``eta`` one value or one per row. ``unit_eta(units)``: each unit's own η when
    the budget varies by unit (SAP-CTI), else None. ``released``: the noisy vector itself is the
    release (no projection follows). ``units``: the units ``unit_eta`` ranges over, for a noise
    step declared alone."""

    sample: Callable[[int, Any, np.random.Generator], np.ndarray]
    dim: int
    eta: float
    unit_eta: Callable[[np.ndarray], np.ndarray] | None = None
    released: bool = False
    units: np.ndarray | None = None  # the units ``unit_eta`` ranges over (a noise step alone)


@dataclass(frozen=True)
class UnitMechanism:
    """The mechanism on one-unit inputs. ``points[u]`` is unit u's point in the claim's metric,
    ``pool`` the units protected within one class (where pairs are searched), ``name(u)`` how a
    unit is shown. ``continuous``: outputs are vectors in the points' space (an exact repeat of
    one, or the exact point, has probability 0). ``document(units, rng)``: one call on one
    document made of the units (tokens of one text), one output per unit, where defined."""

    draw: Draw
    points: np.ndarray
    pool: np.ndarray
    name: Callable[[int], str]
    noise: DXNoise | None = None
    continuous: bool = False
    show: Callable[[list[Hashable]], list[str]] | None = None
    document: Draw | None = None
    category: str = ""  # the class the pool is (a POS category), for the test's name


@dataclass(frozen=True)
class PooledLaplace:
    """``release(batch, rng)``: one call of the release on a (b, dim) batch of vectors already
    normalised to [0, 1]; the released (b, dim) array. Declared noise: i.i.d.
    Laplace(Δ/ε) per coordinate."""

    release: Callable[[np.ndarray, np.random.Generator], np.ndarray]
    dim: int
    epsilon: float
    sensitivity: float


Declared = UnitMechanism | DXNoise | PooledLaplace


def one_token_words(bb: Any, ids: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The ids among ``ids`` that are alphabetic ASCII words tokenized as exactly themselves
    (so a one-word text is that one token), and their strings."""
    tokens = [str(t) for t in bb.subwords.id_to_token(np.asarray(ids).tolist())]
    keep = [k for k, t in enumerate(tokens) if t.isascii() and t.isalpha()]
    words = [tokens[k] for k in keep]
    back = bb.token_ids(words)
    ok = [
        m
        for m, (k, p) in enumerate(zip(keep, back, strict=True))
        if len(p) == 1 and int(p[0]) == int(ids[k])
    ]
    return np.asarray([ids[keep[m]] for m in ok], dtype=np.int64), [words[m] for m in ok]


def text_units(
    privatize: Callable[..., Any],
    bb: Any,
    pool: np.ndarray,
    *,
    noise: DXNoise | None = None,
    vectors: bool = False,
) -> UnitMechanism:
    """A :class:`UnitMechanism` over ``privatize(texts, rng=...)`` on one-word texts of the
    words of ``pool`` (backbone ids) that tokenize as themselves. A text release's output is
    the released word; a token-vector release's, the vector's bytes (``vectors``: the noisy
    vector itself, continuous)."""
    ids, words = one_token_words(bb, pool)
    word_of = dict(zip(ids.tolist(), words, strict=True))

    def outputs(release: Any) -> list[Hashable]:
        if release.texts is not None:
            return [t.strip().lower() for t in release.content_texts()]
        # Token vectors: one (1, dim) array per one-token document (or the tokens of one
        # document); the bytes name the output exactly.
        rows = [np.atleast_2d(np.asarray(v, dtype=np.float32)) for v in release.vectors or []]
        return [r.tobytes() for v in rows for r in v]

    def draw(units: Sequence[int], rng: np.random.Generator) -> list[Hashable]:
        return outputs(privatize([word_of[int(u)] for u in units], rng=rng))

    def document(units: Sequence[int], rng: np.random.Generator) -> list[Hashable]:
        out = privatize([" ".join(word_of[int(u)] for u in units)], rng=rng)
        if out.texts is not None:
            return list(out.content_texts()[0].lower().split())
        return outputs(out)

    def show(values: list[Hashable]) -> list[str]:
        if not values or isinstance(values[0], str):
            return [str(v) for v in values]
        vecs = np.stack([np.frombuffer(v, dtype=np.float32) for v in values])  # type: ignore[arg-type]
        return [str(t) for t in bb.subwords.id_to_token(bb.index.query(vecs).tolist())]

    return UnitMechanism(
        draw,
        bb.embeddings,
        ids,
        lambda u: word_of[int(u)],
        noise=noise,
        continuous=vectors,
        show=None if vectors else show,
        document=document,
    )
