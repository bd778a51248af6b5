"""The distinguishing tests of an ε-LDP claim on a [0,1]-normalised pooled vector (Laplace).

CAPE and DPNR release ``pooled_release(pooled, ε, Δ, rng, meta)``: each document's pooled
vector min-max normalised to [0, 1]^D, plus i.i.d. Laplace(Δ/ε) noise per coordinate. The
encoder before that step is deterministic and public, so the claim rests on this step; the
tests call the same function the defense calls (looked up on the defense's module when the
test runs) on vectors constructed already normalised (each holds a 0 and a 1, so the
normalisation leaves them as they are). Every draw is one call of the function on a batch of
two documents: the unit under test and a second, *known* document (the other users of a
batch).

- **Per coordinate** (the claim's unit): x = (0, 1, 0, 1, …) and x' = x with coordinate 0 set
  to 1 — the extreme values, L1 distance 1, claimed loss ε·1/Δ. Event: a threshold on the
  released coordinate 0 (the 1-D Laplace likelihood ratio is monotone in it, and the tail
  beyond an input value reaches exactly e^(ε/Δ): the claim is tight for this test).
- **Whole vector**: x against its complement 1 − x, L1 distance D, claimed loss D·ε/Δ (basic
  composition over coordinates; with Δ = D, ε). Event: a threshold on the Laplace
  log-likelihood-ratio statistic Σ_j |y_j − x'_j| − |y_j − x_j|.
- **Batch of two**: the per-coordinate pair again, the event on the *pair* of outputs: a
  threshold on y₁[0] − y₂[0] + x_known[0]. A correct mechanism's documents are released
  independently, so this is just another event (its ratio is bounded by the same e^(ε/Δ));
  a mechanism that reuses one noise draw for the batch releases x[0] exactly here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from privaudit.audit.guarantee_audit.stats import Evidence, threshold_evidence
from privaudit.guarantees import Guarantee

PooledRelease = Callable[..., Any]  # pooled_release(pooled, epsilon, sensitivity, rng, meta)


def _patterns(dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """x, x' (coordinate 0 flipped), the complement of x, and the known second document."""
    x = (np.arange(dim) % 2).astype(np.float32)  # 0, 1, 0, 1, ...: x[0] = 0
    flipped = x.copy()
    flipped[0] = 1.0
    known = np.roll(x, 1)  # 1, 0, 1, 0, ...: normalised too
    return x, flipped, 1.0 - x, known


def _draws(
    release: PooledRelease, first: np.ndarray, known: np.ndarray, n: int, epsilon: float,
    sensitivity: float, rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """n calls of the release on the batch [first, known]: the released first and second
    vectors, (n, D) each."""
    batch = np.stack([first, known])
    ones, twos = [], []
    for _ in range(n):
        out = release(batch, epsilon, sensitivity, rng, {})
        vectors = out.vectors if hasattr(out, "vectors") else out
        ones.append(np.asarray(vectors[0], dtype=np.float64))
        twos.append(np.asarray(vectors[1], dtype=np.float64))
    return np.stack(ones), np.stack(twos)


def laplace_tests(
    release: PooledRelease,
    guarantee: Guarantee,
    epsilon: float,
    sensitivity: float,
    dim: int,
    *,
    a: float,
    n: int,
    rng: np.random.Generator,
) -> list[Evidence]:
    """The three tests of the module docstring (3 evidences), at ``a`` each side."""
    x, flipped, complement, known = _patterns(dim)
    y_x, k_x = _draws(release, x, known, n, epsilon, sensitivity, rng)
    y_f, k_f = _draws(release, flipped, known, n, epsilon, sensitivity, rng)
    y_c, _ = _draws(release, complement, known, n, epsilon, sensitivity, rng)
    one = guarantee.loss(1.0)
    evidence = [
        threshold_evidence(
            y_x[:, 0], y_f[:, 0], a=a, names=("x[0] = 0", "x[0] = 1"), distance=1.0,
            claimed=one, test="per coordinate", statistic="y[0]",
        ),
        threshold_evidence(
            y_x[:, 0] - k_x[:, 0] + known[0], y_f[:, 0] - k_f[:, 0] + known[0], a=a,
            names=("x[0] = 0", "x[0] = 1"), distance=1.0, claimed=one, test="batch of two",
            statistic="y₁[0] − y₂[0] + x_known[0]",
        ),
    ]  # fmt: skip

    def llr(y: np.ndarray) -> np.ndarray:
        return (np.abs(y - complement) - np.abs(y - x)).sum(axis=1)

    evidence.append(threshold_evidence(
        llr(y_x), llr(y_c), a=a, names=("x = (0,1,0,…)", "x' = (1,0,1,…)"),
        distance=float(dim), claimed=guarantee.loss(float(dim)), test="whole vector",
        statistic="Σ_j |y_j − x'_j| − |y_j − x_j|",
    ))  # fmt: skip
    return evidence
