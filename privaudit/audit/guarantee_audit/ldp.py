"""The distinguishing tests of an ε-LDP claim on a [0,1]-normalised pooled vector (Laplace).

CAPE and DPNR declare (:class:`~privaudit.mechanisms.audited.PooledLaplace`) the release
``pooled_release``: each document's pooled vector min-max normalised to [0, 1]^D, plus i.i.d.
Laplace(Δ/ε) noise per coordinate. The encoder before it is deterministic and public, so the
claim rests on this step; the tests call it on vectors constructed already normalised (each
holds a 0 and a 1). Every call releases a batch [unit, known, unit, known, …]: the unit under
test beside a *known* document (the other users of a batch).

- **Per coordinate** at a testable distance: x = (0, 1, 0, 1, …) and x' = x with coordinate 0
  set to δ, the claim ε·δ/Δ at a share of what the sample can show (δ = 1 where ε is small);
  the event a threshold on the released coordinate 0 (the 1-D Laplace likelihood ratio is
  monotone in it: the claim is tight for this test); and at the full distance δ = 1 where
  the draw cap can test ε/Δ.
- **Batch of two**: the same pair, the event on y₁[0] − y₂[0] + x_known[0] (a noise draw
  shared by the batch releases x[0] exactly).
- **Exact original**: one event S for both inputs, "y = x exactly" (or "y = x' exactly",
  whichever the selection draws favour): probability 0 under a density, so a leak of the
  clean vector puts mass on it for one input and none for the other.
- **Exact repeat** (independence): any two draws' noise vectors equal, within one call or
  across calls (probability 0 under a density: reused noise).
- **Noise scale**: |noise| per coordinate is Exponential(Δ/ε): the share at or below its
  declared median bounds the ε the mechanism really draws at (ε̂ = Δ·ln(1/(1 − p)) / r₀,
  in the claim's own units: Δ is the declared one).
- **Whole vector**: x against its complement 1 − x, claim D·ε/Δ, where the cap can test it.

``only`` (:data:`NAMES`) runs a subset of them, e.g. to see what one test alone catches.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import expon

from privaudit.audit.guarantee_audit.dx import STEP_SHARE, estimation_draws, pair_draws, undrawn
from privaudit.audit.guarantee_audit.stats import (
    Evidence,
    Question,
    independence_evidence,
    loss_ceiling,
    scale_evidence,
    threshold_evidence,
)
from privaudit.guarantees import Guarantee
from privaudit.mechanisms.audited import PooledLaplace

#: Documents per call (the unit and the known document alternate).
BATCH = 500

#: The tests, in the order they are reported (``only`` picks among them).
NAMES = (
    "per coordinate",
    "batch of two",
    "exact original",
    "independence (exact repeat)",
    "noise scale",
    "per coordinate (δ = 1)",
    "whole vector",
)
#: The tests that read the pair at distance δ (drawn once for all of them).
NEAR = frozenset(NAMES[:5])


def tests_count(only: Collection[str] | None = None) -> int:
    """Tests per audit (the Bonferroni count): all of :data:`NAMES`, or those of ``only``."""
    return len(NAMES) if only is None else len(set(only))


def check_only(only: Collection[str] | None) -> frozenset[str] | None:
    """``only`` as a set of :data:`NAMES`; a name not among them is one line, before work."""
    if only is None:
        return None
    unknown = sorted(set(only) - set(NAMES))
    if unknown or not only:
        raise ValueError(
            f"Unknown Laplace test(s) {unknown or '(none named)'}: choose among "
            f"{', '.join(repr(n) for n in NAMES)}."
        )
    return frozenset(only)


@dataclass(frozen=True)
class _Setup:
    """What every test of one audit shares: the step, the claim, the error a side, the draw
    sizes, and the constructed inputs."""

    step: PooledLaplace
    guarantee: Guarantee
    a: float
    base: int
    cap: int
    patterns: dict[str, np.ndarray]
    delta: float  # coordinate 0 of the near input x'


def _patterns(dim: int, delta: float) -> dict[str, np.ndarray]:
    """x, x' at coordinate 0 = δ and = 1, the complement of x, and the known document."""
    x = (np.arange(dim) % 2).astype(np.float64)  # 0, 1, 0, 1, ...: x[0] = 0
    near, flipped = x.copy(), x.copy()
    near[0], flipped[0] = delta, 1.0
    return {
        "x": x,
        "near": near,
        "flipped": flipped,
        "complement": 1.0 - x,
        "known": np.roll(x, 1),
    }


def _draws(
    step: PooledLaplace,
    first: np.ndarray,
    known: np.ndarray,
    n: int,
    rng: np.random.Generator,
    targets: Sequence[np.ndarray] = (),
) -> dict[str, np.ndarray]:
    """n draws of ``first`` beside ``known`` (BATCH per call), reduced to what the tests read:
    coordinate 0 of both, the whole-vector statistic's inputs, exact hits of each of
    ``targets`` (n, len(targets)) and noise hashes."""
    y0, k0, llr, hits, seen = [], [], [], [], []
    repeats, within = 0, 0
    hashes: set[int] = set()
    x = (np.arange(len(first)) % 2).astype(np.float64)
    exact = [np.asarray(t, dtype=np.float32) for t in targets]
    done = 0
    while done < n:
        b = min(BATCH, n - done)
        out = step.release(np.tile(np.stack([first, known]), (b, 1)), rng)
        mine, theirs = out[0::2], out[1::2]
        y0.append(mine[:, 0])
        k0.append(theirs[:, 0])
        llr.append((np.abs(mine - (1.0 - x)) - np.abs(mine - x)).sum(axis=1))
        low = mine.astype(np.float32)
        hits.append(np.array([(low == t).all(axis=1) for t in exact]).reshape(-1, b).T)
        # The noise of each draw, hashed: an exact repeat within a call or across calls.
        rows = {hash(r.tobytes()) for r in np.round(mine - first, 12)}
        within += b - len(rows)
        repeats += len(rows & hashes)
        hashes |= rows
        if done < 10_000:  # the scale test's coordinates: enough, and bounded memory
            seen.append(np.abs(mine - first).ravel())
        done += b
    return {
        "y0": np.concatenate(y0),
        "k0": np.concatenate(k0),
        "llr": np.concatenate(llr),
        "hits": np.concatenate(hits),
        "noise": np.concatenate(seen),
        "within": np.asarray(within),
        "across": np.asarray(repeats),
    }


def laplace_tests(
    step: PooledLaplace,
    guarantee: Guarantee,
    *,
    a: float,
    base: int,
    cap: int,
    rng: np.random.Generator,
    only: Collection[str] | None = None,
) -> list[Evidence]:
    """The tests of the module docstring (``only``: those of :data:`NAMES` it names), each
    bound at ``a`` a side."""
    chosen = check_only(only) or frozenset(NAMES)
    ceiling = loss_ceiling(estimation_draws(base), estimation_draws(base), a)
    # δ: the per-coordinate claim ε·δ/Δ at a share of the base sample's ceiling, at most 1
    delta = min(1.0, STEP_SHARE * ceiling / guarantee.loss(1.0))
    setup = _Setup(step, guarantee, a, base, cap, _patterns(step.dim, delta), delta)
    evidence: list[Evidence] = []
    drawn: dict[str, np.ndarray] | None = None
    if chosen & NEAR:
        near_evidence, drawn = _near_tests(setup, chosen, rng)
        evidence.extend(near_evidence)
    if "per coordinate (δ = 1)" in chosen and delta < 1.0:
        evidence.append(_unit_distance_test(setup, rng))
    if "whole vector" in chosen:
        evidence.append(_whole_vector_test(setup, drawn, rng))
    return evidence


def _near_tests(
    setup: _Setup, chosen: frozenset[str], rng: np.random.Generator
) -> tuple[list[Evidence], dict[str, np.ndarray]]:
    """The tests on x against x' (coordinate 0 at δ), on one set of draws of each; and the
    draws of x (the whole-vector test reuses them)."""
    pat, delta, a = setup.patterns, setup.delta, setup.a
    known = pat["known"]
    near = setup.guarantee.loss(delta)
    n = pair_draws(near, a, setup.base, setup.cap) or setup.base
    targets = (pat["x"], pat["near"])
    dx = _draws(setup.step, pat["x"], known, n, rng, targets)
    dn = _draws(setup.step, pat["near"], known, n, rng, targets)
    names = ("x[0] = 0", f"x[0] = {delta:.3g}")
    out: dict[str, Evidence] = {}
    if "per coordinate" in chosen:
        out["per coordinate"] = threshold_evidence(
            dx["y0"],
            dn["y0"],
            Question("per coordinate", names, delta, near, a),
            statistic="y[0]",
        )
    if "batch of two" in chosen:
        out["batch of two"] = threshold_evidence(
            dx["y0"] - dx["k0"] + known[0],
            dn["y0"] - dn["k0"] + known[0],
            Question("batch of two", names, delta, near, a),
            statistic="y₁[0] − y₂[0] + x_known[0]",
        )
    if "exact original" in chosen:
        question = Question("exact original", names, delta, near, a)
        out["exact original"] = _exact(dx["hits"], dn["hits"], question)
    if "independence (exact repeat)" in chosen:
        within, across = int(dx["within"] + dn["within"]), int(dx["across"] + dn["across"])
        out["independence (exact repeat)"] = independence_evidence(
            [within > 0],
            [across > 0],
            a=a,
            test="independence (exact repeat)",
            pair=f"{2 * n:,} noise vectors",
            continuous=True,
            event=f"repeated noise vectors: {within} within a call, {across} across calls",
        )
    if "noise scale" in chosen:
        out["noise scale"] = _scale_test(setup.step, dx["noise"], a)
    return [out[name] for name in NAMES if name in out], dx


def _scale_test(step: PooledLaplace, noise: np.ndarray, a: float) -> Evidence:
    """|noise| at or below the declared median of |Laplace(Δ/ε)|: P = 1/2 at the claimed ε,
    more for less noise. Its lower bound p gives ε̂ = Δ·F⁻¹(p) / r₀ (F the Exponential(1)
    law): the ε the mechanism really draws at, in the claim's units (ε, not ε/Δ)."""
    eps, sens = step.epsilon, step.sensitivity
    r0 = float(expon.ppf(0.5)) * sens / eps  # the declared median of |Laplace(Δ/ε)|
    return scale_evidence(
        noise <= r0,
        0.5,
        lambda p: float(expon.ppf(p)) * sens / r0,
        a=a,
        test="noise scale",
        pair=f"|noise| of {noise.size:,} coordinates",
        claimed=eps,
        event=f"|y − x| <= {r0:.4g} (declared: P = 1/2)",
    )


def _unit_distance_test(setup: _Setup, rng: np.random.Generator) -> Evidence:
    """Coordinate 0 at 0 against 1 (the claim ε/Δ), where the draw cap can test it."""
    one, a, pat = setup.guarantee.loss(1.0), setup.a, setup.patterns
    m = pair_draws(one, a, setup.base, setup.cap)
    if m is None:
        return undrawn("per coordinate (δ = 1)", "x[0] = 0 vs x[0] = 1", 1.0, one, setup.cap, a)
    d0 = _draws(setup.step, pat["x"], pat["known"], m, rng)
    d1 = _draws(setup.step, pat["flipped"], pat["known"], m, rng)
    return threshold_evidence(
        d0["y0"],
        d1["y0"],
        Question("per coordinate (δ = 1)", ("x[0] = 0", "x[0] = 1"), 1.0, one, a),
        statistic="y[0]",
    )


def _whole_vector_test(
    setup: _Setup, drawn: dict[str, np.ndarray] | None, rng: np.random.Generator
) -> Evidence:
    """x against its complement (the whole-vector claim D·ε/Δ), where the cap can test it;
    ``drawn``: draws of x already made, reused when there are enough."""
    dim, a, pat = setup.step.dim, setup.a, setup.patterns
    whole = setup.guarantee.loss(float(dim))
    m = pair_draws(whole, a, setup.base, setup.cap)
    if m is None:
        return undrawn("whole vector", "x vs 1 − x", float(dim), whole, setup.cap, a)
    dc = _draws(setup.step, pat["complement"], pat["known"], m, rng)
    if drawn is None or len(drawn["llr"]) < m:
        drawn = _draws(setup.step, pat["x"], pat["known"], m, rng)
    return threshold_evidence(
        drawn["llr"],
        dc["llr"],
        Question("whole vector", ("x = (0,1,0,…)", "x' = (1,0,1,…)"), float(dim), whole, a),
        statistic="Σ_j |y_j − x'_j| − |y_j − x_j|",
    )


def _exact(hit: np.ndarray, hit2: np.ndarray, question: Question) -> Evidence:
    """One point-mass event S for both inputs: "y = x exactly" (column 0 of the hits) or
    "y = x' exactly" (column 1), whichever favours its own input more on the selection draws;
    counted for both inputs on the estimation draws. (A leak of the clean vector hits S for
    one input and never for the other; M(x) = x against M(x') = x' would compare two events.)"""
    names = question.names
    s, s2 = len(hit) - estimation_draws(len(hit)), len(hit2) - estimation_draws(len(hit2))
    toward_x = hit[:s, 0].sum() - hit2[:s2, 0].sum()
    toward_near = hit2[:s2, 1].sum() - hit[:s, 1].sum()
    est, est2 = hit[s:], hit2[s2:]
    col, forward = (1, False) if toward_near > toward_x else (0, True)  # x' favoured, or x
    event = f"y = x' ({names[1]}) exactly" if col else f"y = x ({names[0]}) exactly"
    kx, ky = int(est[:, col].sum()), int(est2[:, col].sum())
    return question.evidence(event, forward, kx, len(est), ky, len(est2))


#: Tests per audit (the Bonferroni count).
TESTS = len(NAMES)
