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
from dataclasses import replace
from typing import Any

import numpy as np
from scipy.stats import gamma

from privaudit.audit.guarantee_audit.stats import (
    NOISE,
    RELEASE,
    SELECT_SHARE,
    Evidence,
    Question,
    discrete_evidence,
    draws_needed,
    independence_evidence,
    loss_ceiling,
    scale_evidence,
    threshold_evidence,
)
from privaudit.guarantees import Guarantee
from privaudit.mechanisms.audited import DXNoise, UnitMechanism

#: Candidate units sampled for the pair search.
PAIR_SAMPLE = 1500
#: Draws a test takes, as a multiple of the fewest that could contradict its claim with an
#: event of probability stats.RESOLUTION: 2 leaves a margin for the event's selection.
POWER = 2
#: The noise-step test's constructed claim, as a share of its sample's ceiling: testable, and
#: where a correct mechanism's bound is near its largest.
STEP_SHARE = 0.6
#: Disjoint pairs per independence test (within one call, and across two calls).
PAIRS = 300


def nearest_others(
    vectors: np.ndarray, rows: np.ndarray, pool: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
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


def pair_draws(claimed: float, a: float, base: int, cap: int) -> int | None:
    """Draws per input for a test of ``claimed``: ``POWER`` times the fewest that could
    contradict it, at least ``base``, at most ``cap``; None when even ``cap`` could not (the
    claim is above the cap's ceiling: the test is untestable there and is not drawn)."""
    if loss_ceiling(estimation_draws(cap), estimation_draws(cap), a) <= claimed:
        return None
    need = draws_needed(claimed, a)
    return int(min(cap, max(base, POWER * need)))


def estimation_draws(n: int) -> int:
    """Estimation draws of n (the rest choose the event)."""
    return n - max(1, min(n - 1, round(n * SELECT_SHARE)))


def undrawn(
    test: str, pair: str, distance: float, claimed: float, cap: int, a: float, role: str = RELEASE
) -> Evidence:
    """A test not drawn: its claim is above what ``cap`` draws could show."""
    n = estimation_draws(cap)
    return Evidence(
        test,
        pair,
        f"not drawn (the claim is above what {cap:,} draws can show)",
        distance,
        claimed,
        0,
        n,
        0,
        n,
        a,
        role=role,
        drawn=False,
    )


def draw_units(
    mech: UnitMechanism, counts: dict[int, int], rng: np.random.Generator, batch: int = 1000
) -> dict[int, list[Hashable]]:
    """``counts[u]`` outputs of each unit, through calls of ``mech.draw`` on ``batch`` copies."""
    out: dict[int, list[Hashable]] = {}
    for u, n in counts.items():
        got: list[Hashable] = []
        while len(got) < n:
            got.extend(mech.draw([u] * min(batch, n - len(got)), rng))
        out[u] = got[:n]
    return out


def release_tests(
    mech: UnitMechanism,
    pairs: Sequence[tuple[int, int, float]],
    guarantee: Guarantee,
    *,
    a: float,
    base: int,
    cap: int,
    rng: np.random.Generator,
    test: str = "release",
) -> list[Evidence]:
    """One test per pair through the declared mechanism on one-unit inputs, each drawn as
    often as its claim needs (:func:`pair_draws`; not at all when the cap could not test it).
    Discrete outputs: the best set of outputs; vectors: a threshold on the d_X likelihood
    ratio ‖y − φ(w')‖ − ‖y − φ(w)‖, and the point mass "y = φ(w) exactly" (the original
    released)."""
    plan = [(i, j, d, pair_draws(guarantee.loss(d), a, base, cap)) for i, j, d in pairs]
    counts: dict[int, int] = {}
    for i, j, _, n in plan:
        if n is not None:
            counts[i], counts[j] = max(counts.get(i, 0), n), max(counts.get(j, 0), n)
    outs = draw_units(mech, counts, rng)
    names = {u: f"'{mech.name(u)}'" for u in {u for i, j, _ in pairs for u in (i, j)}}
    shown: dict[Hashable, str] = {}
    if mech.show is not None and not mech.continuous and outs:
        values = sorted({v for o in outs.values() for v in o}, key=repr)
        shown = dict(zip(values, mech.show(values), strict=True))
    evidence = []
    for i, j, d, n in plan:
        claim, pair = guarantee.loss(d), f"{names[i]} vs {names[j]}"
        if n is None:
            evidence.append(undrawn(test, pair, d, claim, cap, a))
            if mech.continuous:
                evidence.append(undrawn(f"{test}: exact original", pair, d, claim, cap, a))
            continue
        if not mech.continuous:
            evidence.append(
                discrete_evidence(
                    outs[i],
                    outs[j],
                    Question(test, (names[i], names[j]), d, claim, a),
                    show=shown or None,
                )
            )
            continue
        question = Question(test, (names[i], names[j]), d, claim, a)
        evidence += _vector_tests(mech, (outs[i], outs[j]), (i, j), question)
    return evidence


def _vector_tests(
    mech: UnitMechanism,
    outs: tuple[Sequence[Hashable], Sequence[Hashable]],
    units: tuple[int, int],
    question: Question,
) -> list[Evidence]:
    """A pair's two tests of ``question`` on vector outputs: a threshold on the d_X
    likelihood ratio, and the point mass "y = φ(w) exactly" (the original released)."""
    (i, j), names = units, question.names
    yi, yj = _vectors(outs[0]), _vectors(outs[1])
    xi, xj = mech.points[i].astype(np.float64), mech.points[j].astype(np.float64)

    def stat(y: np.ndarray) -> np.ndarray:
        return np.linalg.norm(y - xj, axis=1) - np.linalg.norm(y - xi, axis=1)

    return [
        threshold_evidence(
            stat(yi),
            stat(yj),
            question,
            statistic=f"‖y − φ({names[1]})‖ − ‖y − φ({names[0]})‖",
        ),
        point_mass(
            yi,
            yj,
            mech.points[i],
            replace(question, test=f"{question.test}: exact original"),
            what=f"y = φ({names[0]}) exactly",
        ),
    ]


def _vectors(values: Sequence[Hashable]) -> np.ndarray:
    return np.stack([np.frombuffer(v, dtype=np.float32) for v in values]).astype(np.float64)  # type: ignore[arg-type]


def point_mass(
    y: np.ndarray,
    y2: np.ndarray,
    point: np.ndarray,
    question: Question,
    *,
    what: str,
) -> Evidence:
    """The event "the release is exactly ``point``" (a continuous density gives it
    probability 0), counted on the estimation draws of both inputs (x's first)."""
    point = np.asarray(point, dtype=np.float32)
    s, s2 = _n_sel(len(y)), _n_sel(len(y2))
    hit = (y[s:].astype(np.float32) == point).all(axis=1)
    hit2 = (y2[s2:].astype(np.float32) == point).all(axis=1)
    return question.evidence(what, True, int(hit.sum()), len(hit), int(hit2.sum()), len(hit2))


def _n_sel(n: int) -> int:
    return max(1, min(n - 1, round(n * SELECT_SHARE)))


def independence_tests(
    mech: UnitMechanism, unit: int, *, a: float, rng: np.random.Generator, pairs: int = PAIRS
) -> list[Evidence]:
    """Fresh noise per unit, per document and per call (see :mod:`.stats`): ``pairs`` disjoint
    pairs of outputs of one unit drawn in the same call (as separate documents, and as tokens
    of one document where the mechanism has one) against pairs drawn in two calls."""
    first, second = mech.draw([unit] * pairs, rng), mech.draw([unit] * pairs, rng)
    across = [x == y for x, y in zip(first, second, strict=True)]
    word = f"'{mech.name(unit)}'"
    runs = [("documents", mech.draw)]
    if mech.document is not None and mech.document is not mech.draw:
        runs.append(("tokens", mech.document))
    evidence = []
    for what, call in runs:
        out = call([unit] * (2 * pairs), rng)
        if len(out) != 2 * pairs:  # a document that changed its number of words: no pairs
            continue
        within = [out[2 * k] == out[2 * k + 1] for k in range(pairs)]
        kind = "exact repeats of a noise vector" if mech.continuous else "equal outputs"
        counts = f" ({sum(within)}/{pairs} vs {sum(across)}/{pairs} pairs)"
        event = f"{kind}: within one call vs across calls{counts if mech.continuous else ''}"
        evidence.append(
            independence_evidence(
                within,
                across,
                a=a,
                test=f"independence ({what})",
                pair=f"{word} × {2 * pairs}",
                event=event,
                continuous=mech.continuous,
            )
        )
    return evidence


def noise_tests(
    noise: DXNoise,
    guarantee: Guarantee,
    *,
    a: float,
    n: int,
    rng: np.random.Generator,
    points: np.ndarray | None = None,
    pool: np.ndarray | None = None,
    chunk: int = 20_000,
) -> list[Evidence]:
    """The d_X noise step through the declared sampler: its **scale** against the declared
    density (the norm ‖z‖ is Gamma(D, 1/η): a lower bound on the η it really draws at), the
    **step** at constructed inputs x = 0, x' = d·e₁ with the claim η·d at a share of what n
    draws can show (the d_X likelihood ratio's level sets), and, where η varies by unit, a
    **pair of units at their own η** (their densities' normalising constants differ, so the
    ratio is not bounded by η·d: SAP-CTI)."""
    role = RELEASE if noise.released else NOISE
    dim, eta = noise.dim, float(noise.eta)
    units = pool if pool is not None else None
    if noise.unit_eta is not None and units is not None and len(units):
        etas = np.asarray(noise.unit_eta(units), dtype=float)
        eta = float(etas.max())  # the scale test at the largest budget, the least noise
    evidence = [_scale_test(noise, eta, guarantee, a=a, n=n, rng=rng)]
    target = STEP_SHARE * loss_ceiling(estimation_draws(n), estimation_draws(n), a)
    d = target / guarantee.largest
    shift = np.zeros(dim)
    shift[0] = d
    sx = np.concatenate(
        _chunked(lambda k, r: _step_stat(noise.sample(k, eta, r), 0.0, shift), n, rng, chunk)
    )
    sy = np.concatenate(
        _chunked(lambda k, r: _step_stat(noise.sample(k, eta, r), 1.0, shift), n, rng, chunk)
    )
    evidence.append(
        threshold_evidence(
            sx,
            sy,
            Question("noise step", ("x = 0", f"x' = {d:.3g}·e₁"), d, guarantee.loss(d), a),
            statistic="‖y − x'‖ − ‖y − x‖",
        )
    )
    evidence[-1] = _with_role(evidence[-1], role)
    if noise.unit_eta is not None and units is not None and len(units) > 1:
        evidence.append(
            _own_eta_test(noise, guarantee, units, points, a=a, n=n, rng=rng, chunk=chunk)
        )
    return evidence


def _with_role(e: Evidence, role: str) -> Evidence:
    return replace(e, role=role)


def _step_stat(z: np.ndarray, moved: float, shift: np.ndarray) -> np.ndarray:
    y = np.asarray(z, dtype=np.float64) + moved * shift
    return np.linalg.norm(y - shift, axis=1) - np.linalg.norm(y, axis=1)


def _scale_test(
    noise: DXNoise, eta: float, guarantee: Guarantee, *, a: float, n: int, rng: np.random.Generator
) -> Evidence:
    """‖z‖ at or below the declared median D-shape Gamma(1/η) norm: P = 1/2 for the declared
    density, more for less noise; its lower bound p_low gives η̂ = Gamma_D⁻¹(p_low) / r₀."""
    dim = noise.dim
    r0 = float(gamma.ppf(0.5, dim)) / eta
    norms = np.concatenate(
        _chunked(
            lambda k, r: np.linalg.norm(
                np.asarray(noise.sample(k, eta, r), dtype=np.float64), axis=1
            ),
            n,
            rng,
        )
    )
    return scale_evidence(
        norms <= r0,
        0.5,
        lambda p: float(gamma.ppf(p, dim)) / r0,
        a=a,
        test="noise scale",
        pair=f"‖z‖ of {n:,} draws at η = {eta:.4g}",
        event=f"‖z‖ <= {r0:.4g} (declared: P = 1/2)",
        claimed=eta,
    )


def _own_eta_test(
    noise: DXNoise,
    guarantee: Guarantee,
    units: np.ndarray,
    points: np.ndarray | None,
    *,
    a: float,
    n: int,
    rng: np.random.Generator,
    chunk: int,
) -> Evidence:
    """Two units at their own η: real points (the nearest pair with the most different
    budgets) where inputs are fixed points, constructed x = 0, x' = d·e₁ with the largest and
    smallest budgets where the released vectors vary continuously (hidden states). The
    statistic is the declared log-likelihood ratio, each density with its own normalisation
    D·ln η; the evidence's role is the noise step's (:func:`noise_tests`)."""
    assert noise.unit_eta is not None
    etas = np.asarray(noise.unit_eta(units), dtype=float)
    dim = noise.dim
    if points is None or noise.released:
        hi, lo = int(np.argmax(etas)), int(np.argmin(etas))
        e1, e2 = float(etas[hi]), float(etas[lo])
        m = estimation_draws(n)
        d = STEP_SHARE * loss_ceiling(m, m, a) / guarantee.largest
        x1, x2 = np.zeros(dim), np.zeros(dim)
        x2[0] = d
        names = (f"x = 0 (η = {e1:.3g})", f"x' = {d:.3g}·e₁ (η = {e2:.3g})")
    else:
        sample = (
            units if len(units) <= PAIR_SAMPLE else rng.choice(units, PAIR_SAMPLE, replace=False)
        )
        sample = np.sort(sample)
        nn, dist = nearest_others(points, sample, np.asarray(units))
        e_s = np.asarray(noise.unit_eta(sample), dtype=float)
        e_n = np.asarray(noise.unit_eta(nn), dtype=float)
        # the log-ratio of normalisations the pair shows, less its claim
        score = dim * np.abs(np.log(e_s / e_n)) - guarantee.largest * dist
        k = int(np.argmax(score))
        # the unit with the larger budget first: its density is the more concentrated
        first, other = int(sample[k]), int(nn[k])
        e1, e2 = float(e_s[k]), float(e_n[k])
        if e1 < e2:
            first, other, e1, e2 = other, first, e2, e1
        d = float(dist[k])
        x1, x2 = points[first].astype(np.float64), points[other].astype(np.float64)
        names = (f"unit {first} (η = {e1:.3g})", f"unit {other} (η = {e2:.3g})")

    def llr(y: np.ndarray) -> np.ndarray:
        return (dim * math.log(e1) - e1 * np.linalg.norm(y - x1, axis=1)) - (
            dim * math.log(e2) - e2 * np.linalg.norm(y - x2, axis=1)
        )

    sx = np.concatenate(_chunked(lambda k, r: llr(x1 + noise.sample(k, e1, r)), n, rng, chunk))
    sy = np.concatenate(_chunked(lambda k, r: llr(x2 + noise.sample(k, e2, r)), n, rng, chunk))
    e = threshold_evidence(
        sx,
        sy,
        Question("own budgets", names, d, guarantee.loss(d), a),
        statistic="ln p₁(y) − ln p₂(y), own D·ln η",
    )
    return _with_role(e, RELEASE if noise.released else NOISE)


def _chunked(
    func: Callable[[int, np.random.Generator], Any],
    n: int,
    rng: np.random.Generator,
    size: int = 20_000,
) -> list[Any]:
    """``func(k, rng)`` over chunks of at most ``size`` that add up to ``n``."""
    return [func(min(size, n - s), rng) for s in range(0, n, size)]
