"""The distinguishing tests of a d_X-privacy claim (η·d_X per token, word or vector).

**Release test** (:func:`release_tests`): inputs x and x' that differ in one protected unit —
a one-token (one-word) text, w against w' — at the known distance d = d(φ(w), φ(w')) of the
claim's metric. The public mechanism runs n times on each (the defense's own ``privatize``,
or the word kernel the defense itself calls, on one-unit inputs); the event S is a set of
released words/tokens (or, for a vector release, a threshold on the log-likelihood statistic
below), chosen on the selection draws (:mod:`.stats`). The claim bounds ln P[M(w) ∈ S] /
P[M(w') ∈ S] by ``guarantee.loss(d)`` = η·d.

**Pair search** (:func:`word_pairs`): a violation is likeliest where the claim is smallest and
the mechanism's output most input-specific, so from a seeded sample of up to 1,500 candidate
units (the class the unit is protected within: T2T's word-initial pieces, PCT2T's POS
category, ...), each unit's exact nearest other candidate is found and the test takes the
``close`` pairs with the smallest distances (the smallest η·d: two near-synonyms must be
near-indistinguishable) and the ``isolated`` units with the largest nearest-neighbour distance
("rare" words, far from every other: they survive replacement most often) with their nearest
neighbour.

**Noise-step test** (:func:`noise_step_test`): the d_X noise the defense adds before its
projection, drawn through the same function the defense calls. Its guarantee is proved for
this step (the projection is post-processing), so the step must itself be η·d_X-private for
any two points of the space; the test takes x = 0 and x' = d·e₁ at constructed distances d
with η·d/√D = 1 — where the privacy-loss statistic spreads most for a feasible n — and
the event {‖y − x'‖ − ‖y − x‖ >= t} (the level sets of the d_X likelihood ratio, for any η:
the most powerful events, Neyman–Pearson). A violation here means the mechanism does not
draw the noise its guarantee is computed from, even where the projection would hide it.

Power, honestly: in D dimensions the d_X loss ‖y − x'‖ − ‖y − x‖ concentrates near 0 (its
spread is about η·d/√D), so an event with a probability n can resolve shows a loss of a few
η·d/√D, far below η·d when D = 384: a noise-scale error of 2× is invisible there, and the
tightness ratio of a correct mechanism is small. In low dimension (the tiny test backbone,
D = 32) the same test resolves it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from privaudit.audit.guarantee_audit.stats import Evidence, discrete_evidence, threshold_evidence
from privaudit.guarantees import Guarantee

#: Candidate units sampled for the pair search.
PAIR_SAMPLE = 1500
#: η·d/√D of the noise-step test's constructed pairs.
NOISE_MUS = (1.0,)


def nearest_others(vectors: np.ndarray, rows: np.ndarray, pool: np.ndarray) -> tuple[
        np.ndarray, np.ndarray]:  # fmt: skip
    """For each of ``rows``, its nearest other member of ``pool`` (exact Euclidean) and the
    distance (rows index ``vectors``)."""
    cand = np.ascontiguousarray(vectors[pool], dtype=np.float32)
    norms = np.einsum("ij,ij->i", cand, cand)
    best = np.full(len(rows), np.inf, dtype=np.float64)
    arg = np.zeros(len(rows), dtype=np.int64)
    for r0 in range(0, len(rows), 512):
        q = np.asarray(vectors[rows[r0 : r0 + 512]], dtype=np.float32)
        dist = norms[None, :] - 2.0 * (q @ cand.T)
        dist[pool[None, :] == rows[r0 : r0 + 512, None]] = np.inf  # not itself
        j = dist.argmin(1)
        own = np.einsum("ij,ij->i", q, q)
        best[r0 : r0 + 512] = np.sqrt(np.maximum(dist[np.arange(len(q)), j] + own, 0.0))
        arg[r0 : r0 + 512] = pool[j]
    return arg, best


def word_pairs(
    vectors: np.ndarray,
    pool: np.ndarray,
    rng: np.random.Generator,
    *,
    close: int = 2,
    isolated: int = 1,
) -> list[tuple[int, int, float]]:
    """Pairs (i, j, d(i, j)) of rows of ``vectors`` from ``pool``: ``close`` pairs with the
    smallest nearest-neighbour distances and ``isolated`` units with the largest, each with
    its nearest neighbour (see the module docstring). Exact zero distances (duplicate vectors:
    the claim allows no difference at all) are kept."""
    pool = np.asarray(pool, dtype=np.int64)
    sample = pool if len(pool) <= PAIR_SAMPLE else rng.choice(pool, PAIR_SAMPLE, replace=False)
    rows = np.sort(sample)
    nn, dist = nearest_others(vectors, rows, pool)
    order = np.argsort(dist, kind="stable")
    pairs: list[tuple[int, int, float]] = []
    used: set[int] = set()
    for ranked, want in ((order, close), (order[::-1], isolated)):
        taken = 0
        for k in ranked:
            if taken >= want:
                break
            i, j = int(rows[k]), int(nn[k])
            if i in used or j in used:
                continue
            pairs.append((i, j, float(dist[k])))
            used.update((i, j))
            taken += 1
    return pairs


def release_tests(
    draw: Callable[[list[int], int, np.random.Generator], list[list[Hashable]]],
    pairs: Sequence[tuple[int, int, float]],
    name: Callable[[int], str],
    guarantee: Guarantee,
    *,
    a: float,
    n: int,
    rng: np.random.Generator,
    test: str = "release",
    show_many: Callable[[list[Hashable]], list[str]] | None = None,
) -> list[Evidence]:
    """One discrete-release test per pair. ``draw(units, n, rng)`` runs the mechanism n times
    on each one-unit input and returns, per unit, its n outputs (hashable); every unit is
    drawn once and shared by the pairs it is in. ``show_many`` names outputs for the report
    (all at once: a vector output is looked up in one search)."""
    units = sorted({u for i, j, _ in pairs for u in (i, j)})
    outs = dict(zip(units, draw(units, n, rng), strict=True))
    shown: dict[Hashable, str] = {}
    if show_many is not None:
        values = sorted({v for o in outs.values() for v in o}, key=repr)
        shown = dict(zip(values, show_many(values), strict=True))
    return [
        discrete_evidence(
            outs[i],
            outs[j],
            a=a,
            names=(f"'{name(i)}'", f"'{name(j)}'"),
            distance=d,
            claimed=guarantee.loss(d),
            test=test,
            show=shown or None,
        )
        for i, j, d in pairs
    ]


def vector_release_tests(
    draw: Callable[[list[int], int, np.random.Generator], list[np.ndarray]],
    pairs: Sequence[tuple[int, int, float]],
    name: Callable[[int], str],
    points: np.ndarray,
    guarantee: Guarantee,
    *,
    a: float,
    n: int,
    rng: np.random.Generator,
    test: str = "release",
) -> list[Evidence]:
    """One test per pair of a mechanism that releases the noisy vector itself (``draw``
    returns, per unit, an (n, D) array); the event is a threshold on ‖y − φ(w')‖ − ‖y −
    φ(w)‖, the d_X likelihood ratio's level sets."""
    units = sorted({u for i, j, _ in pairs for u in (i, j)})
    outs = dict(zip(units, draw(units, n, rng), strict=True))
    evidence = []
    for i, j, d in pairs:
        xi, xj = points[i].astype(np.float64), points[j].astype(np.float64)

        def stat(y: np.ndarray, xi: np.ndarray = xi, xj: np.ndarray = xj) -> np.ndarray:
            y = y.astype(np.float64)
            return np.linalg.norm(y - xj, axis=1) - np.linalg.norm(y - xi, axis=1)

        evidence.append(threshold_evidence(
            stat(outs[i]), stat(outs[j]), a=a, names=(f"'{name(i)}'", f"'{name(j)}'"),
            distance=d, claimed=guarantee.loss(d), test=test,
            statistic=f"‖y − φ('{name(j)}')‖ − ‖y − φ('{name(i)}')‖",
        ))  # fmt: skip
    return evidence


def noise_step_distances(guarantee: Guarantee, dim: int) -> list[float]:
    """The constructed distances of the noise-step test: η·d/√D = each of
    :data:`NOISE_MUS`, η the claim's largest per-unit parameter."""
    eta = guarantee.largest
    if not 0 < eta < math.inf:
        return []
    return [mu * math.sqrt(dim) / eta for mu in NOISE_MUS]


def noise_step_test(
    noise: Callable[[int, np.random.Generator], np.ndarray],
    dim: int,
    guarantee: Guarantee,
    *,
    a: float,
    n: int,
    rng: np.random.Generator,
    chunk: int = 20_000,
) -> list[Evidence]:
    """The d_X noise step at constructed pairs x = 0, x' = d·e₁ (see the module docstring).
    ``noise(k, rng)`` draws k noise vectors (k, D) through the defense's own function; they
    are drawn and reduced to the statistic ``chunk`` rows at a time."""
    evidence = []
    for d in noise_step_distances(guarantee, dim):
        shift = np.zeros(dim)
        shift[0] = d

        def stat(k: int, r: np.random.Generator, moved: bool, shift: np.ndarray = shift) -> (
                np.ndarray):  # fmt: skip
            y = np.asarray(noise(k, r), dtype=np.float64) + (shift if moved else 0.0)
            return np.linalg.norm(y - shift, axis=1) - np.linalg.norm(y, axis=1)

        sx = np.concatenate(chunked(lambda k, r: stat(k, r, False), n, rng, chunk))
        sy = np.concatenate(chunked(lambda k, r: stat(k, r, True), n, rng, chunk))
        evidence.append(threshold_evidence(
            sx, sy, a=a, names=("x = 0", f"x' = {d:.3g}·e₁"), distance=d,
            claimed=guarantee.loss(d), test="noise step", statistic="‖y − x'‖ − ‖y − x‖",
        ))  # fmt: skip
    return evidence


def chunked(func: Callable[[int, np.random.Generator], Any], n: int, rng: np.random.Generator,
            size: int = 10_000) -> list[Any]:  # fmt: skip
    """``func(k, rng)`` over chunks of at most ``size`` that add up to ``n``."""
    return [func(min(size, n - s), rng) for s in range(0, n, size)]
