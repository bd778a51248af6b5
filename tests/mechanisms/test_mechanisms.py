"""Properties of the d_X noise and the exact nearest-neighbour projection."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privaudit.mechanisms import NearestNeighbourIndex, check_eta, sample_dx_noise
from privaudit.params import ParamError


def brute_force(matrix: np.ndarray, candidates: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """The naive reference: per query, argmin of distances to every candidate."""
    out = []
    for q in queries:
        d = np.linalg.norm(matrix[candidates].astype(np.float64) - q, axis=1)
        out.append(candidates[int(np.argmin(d))])
    return np.asarray(out)


@st.composite
def vocab_and_ids(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    vocab = draw(st.integers(3, 60))
    dim = draw(st.integers(1, 12))
    seed = draw(st.integers(0, 2**32 - 1))
    matrix = np.random.default_rng(seed).standard_normal((vocab, dim)).astype(np.float32)
    ids = np.asarray(draw(st.lists(st.integers(0, vocab - 1), min_size=0, max_size=40)))
    return matrix, ids.astype(np.int64)


@settings(max_examples=60, deadline=None)
@given(vocab_and_ids(), st.floats(0.5, 1e4), st.integers(0, 2**32 - 1))
def test_projection_is_exact_and_one_per_input(data, eta, seed) -> None:
    matrix, ids = data
    index = NearestNeighbourIndex(matrix, chunk_size=7, row_block=5)  # exercise chunking
    noise = sample_dx_noise(len(ids), matrix.shape[1], eta, np.random.default_rng(seed))
    queries = matrix[ids] + noise
    pruned = index.project(queries, source_ids=ids, offsets=noise)
    full = index.query(queries)
    assert pruned.shape == ids.shape == full.shape
    if len(ids):
        reference = brute_force(matrix, np.arange(len(matrix)), queries)
        # Equal up to float32 ties: compare the squared distances achieved, not only the ids.
        # The full search ranks by ||c||² − 2 q·c in float32, whose rounding is a few ulps of
        # ||q||² + ||c||² (hypothesis found two candidates 4.2e-7 and 5.0e-7 away in squared
        # distance at norms ~2: a tie at that precision).
        d2 = lambda chosen: ((queries - matrix[chosen]).astype(np.float64) ** 2).sum(1)  # noqa: E731
        slack = 8 * np.finfo(np.float32).eps * ((queries**2).sum(1) + (matrix**2).sum(1).max())
        assert np.all(d2(pruned) <= d2(reference) + slack)
        assert np.all(d2(full) <= d2(reference) + slack)


@settings(max_examples=40, deadline=None)
@given(vocab_and_ids(), st.integers(0, 2**32 - 1))
def test_same_seed_same_output(data, seed) -> None:
    matrix, ids = data
    index = NearestNeighbourIndex(matrix)
    runs = []
    for _ in range(2):
        noise = sample_dx_noise(len(ids), matrix.shape[1], 3.0, np.random.default_rng(seed))
        runs.append((noise, index.project(matrix[ids] + noise, source_ids=ids, offsets=noise)))
    assert runs[0][0].tobytes() == runs[1][0].tobytes()
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


@settings(max_examples=40, deadline=None)
@given(vocab_and_ids())
def test_eta_to_infinity_returns_input(data) -> None:
    matrix, ids = data
    # Distinct rows guaranteed (random normal), so the input word is the unique answer.
    index = NearestNeighbourIndex(matrix)
    for eta in (1e9, math.inf):
        noise = sample_dx_noise(len(ids), matrix.shape[1], eta, np.random.default_rng(1))
        np.testing.assert_array_equal(
            index.project(matrix[ids] + noise, source_ids=ids, offsets=noise), ids
        )


@pytest.mark.parametrize(("dim", "eta"), [(1, 1.0), (8, 2.0), (384, 100.0), (768, 25.0)])
def test_noise_norm_mean_is_d_over_eta(dim: int, eta: float) -> None:
    n = 20_000
    z = sample_dx_noise(n, dim, eta, np.random.default_rng(0), dtype=np.float64)
    norms = np.linalg.norm(z, axis=1)
    # Gamma(d, 1/eta): mean d/eta, sd sqrt(d)/eta; allow 4 standard errors.
    assert abs(norms.mean() - dim / eta) < 4 * math.sqrt(dim) / eta / math.sqrt(n)
    assert abs(norms.std() - math.sqrt(dim) / eta) < 0.05 * math.sqrt(dim) / eta
    # Directions are uniform: their mean is near the origin.
    directions = z / norms[:, None]
    assert np.abs(directions.mean(axis=0)).max() < 5 / math.sqrt(n)


def test_radius_matches_brute_force() -> None:
    matrix = np.random.default_rng(3).standard_normal((50, 6)).astype(np.float32)
    candidates = np.arange(2, 50)
    index = NearestNeighbourIndex(matrix, candidates, chunk_size=9)
    radii = index.radius(np.arange(50))
    assert np.isinf(radii[:2]).all()  # not candidates: never pruned
    for w in candidates:
        others = [c for c in candidates if c != w]
        expected = np.linalg.norm(matrix[others] - matrix[w], axis=1).min()
        assert radii[w] == pytest.approx(expected, rel=1e-4)


def test_duplicate_vectors_are_never_pruned() -> None:
    matrix = np.array([[0.0, 0.0], [0.0, 0.0], [5.0, 5.0]], dtype=np.float32)
    index = NearestNeighbourIndex(matrix)
    assert index.radius(np.array([0]))[0] == pytest.approx(0.0, abs=1e-6)
    assert index.project(matrix[[2]], source_ids=np.array([2]))[0] == 2


def test_projection_excludes_non_candidates() -> None:
    matrix = np.eye(4, dtype=np.float32)
    index = NearestNeighbourIndex(matrix, np.array([1, 2, 3]))
    assert index.query(matrix[[0]])[0] in (1, 2, 3)


def test_radius_cache_persists(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PRIVAUDIT_CACHE", str(tmp_path))
    matrix = np.random.default_rng(0).standard_normal((20, 4)).astype(np.float32)
    first = NearestNeighbourIndex(matrix, cache_key="unit").radius(np.arange(20))
    assert (tmp_path / "nn_radius_unit.npy").is_file()
    second = NearestNeighbourIndex(matrix, cache_key="unit")
    assert not np.isnan(second._radius).any()
    np.testing.assert_array_equal(second.radius(np.arange(20)), first)


@pytest.mark.parametrize("bad", [-1.0, 0.0, float("nan"), -math.inf])
def test_eta_must_be_positive(bad: float) -> None:
    with pytest.raises(ValueError, match=r"check_eta parameter eta=.* greater than 0"):
        check_eta(bad)


@pytest.mark.parametrize("bad", ["100", None, True, [1.0]])
def test_eta_must_be_a_number(bad: object) -> None:
    with pytest.raises(ValueError, match=r"parameter eta=.* is not allowed: .*valid number"):
        check_eta(bad)


def test_index_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        NearestNeighbourIndex(np.zeros((0, 3), dtype=np.float32))
    index = NearestNeighbourIndex(np.eye(3, dtype=np.float32))
    with pytest.raises(ValueError, match="dimension"):
        index.query(np.zeros((2, 5)))
    assert index.query(np.zeros((0, 3))).shape == (0,)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((-1, 4, 1.0), "n=-1 is not allowed"),
        ((3, 0, 1.0), "dim=0 is not allowed"),
        ((3, 4, 0.0), "eta=0.0 is not allowed"),
        ((3, 4, True), "eta=True is not allowed"),
    ],
)
def test_dx_noise_arguments_are_declared(args: tuple, message: str) -> None:
    with pytest.raises(ParamError, match=message):
        sample_dx_noise(*args, np.random.default_rng(0))


def test_per_row_eta() -> None:
    etas = np.array([1.0, 10.0, math.inf] * 2000)
    z = sample_dx_noise(len(etas), 16, etas, np.random.default_rng(0), dtype=np.float64)
    norms = np.linalg.norm(z, axis=1)
    assert norms[0::3].mean() == pytest.approx(16.0, rel=0.03)
    assert norms[1::3].mean() == pytest.approx(1.6, rel=0.03)
    assert (norms[2::3] == 0).all()
    with pytest.raises(ValueError, match="per-row eta"):
        sample_dx_noise(3, 4, np.array([1.0, -1.0, 2.0]), np.random.default_rng(0))
    with pytest.raises(ValueError, match="2 per-row eta values for 3 rows"):
        sample_dx_noise(3, 4, np.array([1.0, 2.0]), np.random.default_rng(0))
