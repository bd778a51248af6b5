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
- **Exact original**: the event "y = x exactly" (probability 0 under a density; a leak of the
  clean vector puts mass on it).
- **Exact repeat** (independence): any two draws' noise vectors equal, within one call or
  across calls (probability 0 under a density: reused noise).
- **Noise scale**: |noise| per coordinate is Exponential(Δ/ε): the share at or below its
  declared median bounds the ε the mechanism really draws at.
- **Whole vector**: x against its complement 1 − x, claim D·ε/Δ, where the cap can test it.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import expon

from privaudit.audit.guarantee_audit.dx import STEP_SHARE, _est, pair_draws, undrawn
from privaudit.audit.guarantee_audit.stats import (
    Evidence,
    independence_evidence,
    loss_ceiling,
    scale_evidence,
    threshold_evidence,
)
from privaudit.guarantees import Guarantee
from privaudit.mechanisms.audited import PooledLaplace

#: Documents per call (the unit and the known document alternate).
BATCH = 500


def _patterns(dim: int, delta: float) -> dict[str, np.ndarray]:
    """x, x' at coordinate 0 = δ and = 1, the complement of x, and the known document."""
    x = (np.arange(dim) % 2).astype(np.float64)  # 0, 1, 0, 1, ...: x[0] = 0
    near, flipped = x.copy(), x.copy()
    near[0], flipped[0] = delta, 1.0
    return {"x": x, "near": near, "flipped": flipped, "complement": 1.0 - x,
            "known": np.roll(x, 1)}  # fmt: skip


def _draws(step: PooledLaplace, first: np.ndarray, known: np.ndarray, n: int,
           rng: np.random.Generator) -> dict[str, np.ndarray]:  # fmt: skip
    """n draws of ``first`` beside ``known`` (BATCH per call), reduced to what the tests read:
    coordinate 0 of both, the whole-vector statistic's inputs, exact hits and noise hashes."""
    y0, k0, llr, exact, seen = [], [], [], [], []
    repeats, within = 0, 0
    hashes: set[int] = set()
    comp = 1.0 - (np.arange(len(first)) % 2)
    x = (np.arange(len(first)) % 2).astype(np.float64)
    done = 0
    while done < n:
        b = min(BATCH, n - done)
        out = step.release(np.tile(np.stack([first, known]), (b, 1)), rng)
        mine, theirs = out[0::2], out[1::2]
        y0.append(mine[:, 0])
        k0.append(theirs[:, 0])
        llr.append((np.abs(mine - comp) - np.abs(mine - x)).sum(axis=1))
        exact.append((mine.astype(np.float32) == first.astype(np.float32)).all(axis=1))
        # The noise of each draw, hashed: an exact repeat within a call or across calls.
        rows = {hash(r.tobytes()) for r in np.round(mine - first, 12)}
        within += b - len(rows)
        repeats += len(rows & hashes)
        hashes |= rows
        if done < 10_000:  # the scale test's coordinates: enough, and bounded memory
            seen.append(np.abs(mine - first).ravel())
        done += b
    return {"y0": np.concatenate(y0), "k0": np.concatenate(k0), "llr": np.concatenate(llr),
            "exact": np.concatenate(exact), "noise": np.concatenate(seen),
            "within": np.asarray(within), "across": np.asarray(repeats)}  # fmt: skip


def laplace_tests(
    step: PooledLaplace,
    guarantee: Guarantee,
    *,
    a: float,
    base: int,
    cap: int,
    rng: np.random.Generator,
) -> list[Evidence]:
    """The tests of the module docstring, each bound at ``a`` a side (7 evidences)."""
    eps, delta_s, dim = step.epsilon, step.sensitivity, step.dim
    ceiling = loss_ceiling(_est(base), _est(base), a)
    # δ: the per-coordinate claim ε·δ/Δ at a share of the base sample's ceiling, at most 1
    delta = min(1.0, STEP_SHARE * ceiling / guarantee.loss(1.0))
    pat = _patterns(dim, delta)
    known = pat["known"]
    near = guarantee.loss(delta)
    n = pair_draws(near, a, base, cap) or base
    dx = _draws(step, pat["x"], known, n, rng)
    dn = _draws(step, pat["near"], known, n, rng)
    names = ("x[0] = 0", f"x[0] = {delta:.3g}")
    evidence = [
        threshold_evidence(dx["y0"], dn["y0"], a=a, names=names, distance=delta, claimed=near,
                           test="per coordinate", statistic="y[0]"),
        threshold_evidence(dx["y0"] - dx["k0"] + known[0], dn["y0"] - dn["k0"] + known[0],
                           a=a, names=names, distance=delta, claimed=near, test="batch of two",
                           statistic="y₁[0] − y₂[0] + x_known[0]"),
        _exact(dx["exact"], dn["exact"], a=a, names=names, distance=delta, claimed=near),
        independence_evidence(
            [bool(dx["within"] + dn["within"])], [bool(dx["across"] + dn["across"])], a=a,
            test="independence (exact repeat)", pair=f"{2 * n:,} noise vectors",
            event=f"repeated noise vectors: {int(dx['within'] + dn['within'])} within a call, "
            f"{int(dx['across'] + dn['across'])} across calls", continuous=True,
        ),
    ]  # fmt: skip
    r0 = float(expon.ppf(0.5)) * delta_s / eps  # the declared median of |Laplace(Δ/ε)|
    evidence.append(scale_evidence(
        dx["noise"] <= r0, 0.5, lambda p: float(expon.ppf(p)) * delta_s / r0, a=a,
        test="noise scale", pair=f"|noise| of {dx['noise'].size:,} coordinates",
        event=f"|y − x| <= {r0:.4g} (declared: P = 1/2)", claimed=eps / delta_s,
    ))  # fmt: skip
    one = guarantee.loss(1.0)
    if delta < 1.0:
        m = pair_draws(one, a, base, cap)
        if m is None:
            evidence.append(undrawn("per coordinate (δ = 1)", "x[0] = 0 vs x[0] = 1", 1.0, one,
                                    cap, a))  # fmt: skip
        else:
            d0 = _draws(step, pat["x"], known, m, rng)
            d1 = _draws(step, pat["flipped"], known, m, rng)
            evidence.append(threshold_evidence(
                d0["y0"], d1["y0"], a=a, names=("x[0] = 0", "x[0] = 1"), distance=1.0,
                claimed=one, test="per coordinate (δ = 1)", statistic="y[0]"))  # fmt: skip
    whole = guarantee.loss(float(dim))
    m = pair_draws(whole, a, base, cap)
    if m is None:
        evidence.append(undrawn("whole vector", "x vs 1 − x", float(dim), whole, cap, a))
    else:
        dc = _draws(step, pat["complement"], known, m, rng)
        dx2 = dx if m <= n else _draws(step, pat["x"], known, m, rng)
        evidence.append(threshold_evidence(
            dx2["llr"], dc["llr"], a=a, names=("x = (0,1,0,…)", "x' = (1,0,1,…)"),
            distance=float(dim), claimed=whole, test="whole vector",
            statistic="Σ_j |y_j − x'_j| − |y_j − x_j|",
        ))  # fmt: skip
    return evidence


def _exact(hit: np.ndarray, hit2: np.ndarray, *, a: float, names: tuple[str, str],
           distance: float, claimed: float) -> Evidence:  # fmt: skip
    """The point mass "y = x exactly", counted on the draws' estimation part."""
    s = len(hit) - _est(len(hit))
    s2 = len(hit2) - _est(len(hit2))
    return Evidence("exact original", f"{names[0]} vs {names[1]}", "y = x exactly", distance,
                    claimed, int(hit[s:].sum()), len(hit) - s, int(hit2[s2:].sum()),
                    len(hit2) - s2, a)  # fmt: skip


#: Tests per audit (the Bonferroni count).
TESTS = 7
