"""Exact Euclidean nearest-neighbour projection onto an embedding matrix.

The search is a chunked matrix product: ||x - e||^2 = ||x||^2 - 2 x.e + ||e||^2, and the
||x||^2 term is constant per query so it is never computed. Queries are processed in row blocks
and the vocabulary in column chunks, so memory stays bounded (``rows x chunk`` floats) however
many queries arrive, while the work is BLAS matrix multiplication.

Pruning is exact, never approximate: if a query is x = e_w + z for a candidate w whose nearest
other candidate is at distance r_w, and ||z|| < r_w / 2, then for any other candidate w',
||x - e_w'|| >= r_w - ||z|| > ||z|| = ||x - e_w||, so w is the answer without a search. The
radii r_w are computed lazily for the ids that occur and cached (in memory and on disk, keyed by
the embedding matrix's fingerprint).

Repeats: :meth:`NearestNeighbourIndex.query` searches each distinct row once (a text release's
tokens repeat: 1.6k distinct of 38k) and memoises its answer by content
(:mod:`privaudit.runtime.memo`).

Device: on the CPU the search is numpy (no torch); on a GPU (:func:`privaudit.runtime.devices.
offload_device`) the same chunked search runs in torch there, the candidates kept on the device.

Numerics: distances are computed in float32. Two candidates whose distances to a query differ
by less than float32 rounding (~1e-6 relative) may be swapped; this never affects pruning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from privaudit.runtime.cache import cache_dir, keep_entry
from privaudit.runtime.devices import offload_device
from privaudit.runtime.memo import ContentMemo, digest


class NearestNeighbourIndex:
    """Exact nearest-neighbour search over ``matrix[candidate_ids]``.

    Results are vocabulary ids (indices into ``matrix``), never candidate positions.
    """

    def __init__(
        self,
        matrix: np.ndarray,
        candidate_ids: np.ndarray | None = None,
        *,
        chunk_size: int = 8192,
        row_block: int = 2048,
        cache_key: str | None = None,
    ) -> None:
        if matrix.ndim != 2 or matrix.shape[0] == 0:
            raise ValueError(f"Expected a non-empty (vocab, dim) matrix, got shape {matrix.shape}.")
        if candidate_ids is None:
            candidate_ids = np.arange(matrix.shape[0])
        self.candidate_ids = np.asarray(candidate_ids, dtype=np.int64)
        if self.candidate_ids.size < 2:
            raise ValueError("Nearest-neighbour projection needs at least two candidates.")
        self.vocab_size, self.dim = matrix.shape
        self.candidates = np.ascontiguousarray(matrix[self.candidate_ids], dtype=np.float32)
        self.sq_norms = np.einsum("ij,ij->i", self.candidates, self.candidates)
        self.chunk_size = int(chunk_size)
        self.row_block = int(row_block)
        self._is_candidate = np.zeros(self.vocab_size, dtype=bool)
        self._is_candidate[self.candidate_ids] = True
        self._cache_path: Path | None = None
        self._radius = np.full(self.vocab_size, np.nan, dtype=np.float32)
        if cache_key is not None:
            self._cache_path = cache_dir() / f"nn_radius_{cache_key}.npy"
            cached = None
            if self._cache_path.is_file():
                try:
                    cached = np.load(self._cache_path)
                except (OSError, ValueError, EOFError):  # torn or foreign: computed anew
                    cached = None
                if cached is not None and cached.shape == self._radius.shape:
                    self._radius = cached.astype(np.float32)
        self._matrix = matrix
        # Several attacks at one defense point look up the same released vectors.
        self._memo = ContentMemo(size=8)
        self._device_candidates: tuple[str, Any, Any] | None = None  # (device, cands, norms)

    # -- full search --------------------------------------------------------------------------
    def _search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The k smallest squared distances (minus ||x||^2) and candidate positions, per row."""
        device = offload_device()  # None on the CPU: this numpy path, unchanged
        if device is not None:
            return self._search_torch(queries, k, device)
        n = queries.shape[0]
        best_d = np.full((n, k), np.inf, dtype=np.float32)
        best_i = np.zeros((n, k), dtype=np.int64)
        q = np.ascontiguousarray(queries, dtype=np.float32)
        n_cand = self.candidates.shape[0]
        for r0 in range(0, n, self.row_block):
            rows = q[r0 : r0 + self.row_block]
            bd, bi = best_d[r0 : r0 + self.row_block], best_i[r0 : r0 + self.row_block]
            for c0 in range(0, n_cand, self.chunk_size):
                chunk = self.candidates[c0 : c0 + self.chunk_size]
                dist = rows @ chunk.T
                dist *= -2.0
                dist += self.sq_norms[c0 : c0 + self.chunk_size]
                if k == 1:
                    j = dist.argmin(axis=1)
                    d = dist[np.arange(len(rows)), j]
                    better = d < bd[:, 0]
                    bd[better, 0] = d[better]
                    bi[better, 0] = j[better] + c0
                else:
                    width = dist.shape[1]
                    j = (
                        np.argpartition(dist, k - 1, axis=1)[:, :k]
                        if width > k
                        else np.broadcast_to(np.arange(width), (len(rows), width))
                    )
                    d = np.take_along_axis(dist, j, axis=1)
                    all_d = np.concatenate([bd, d], axis=1)
                    all_i = np.concatenate([bi, j + c0], axis=1)
                    keep = np.argsort(all_d, axis=1, kind="stable")[:, :k]
                    bd[:] = np.take_along_axis(all_d, keep, axis=1)
                    bi[:] = np.take_along_axis(all_i, keep, axis=1)
        return best_d, best_i

    def _search_torch(
        self, queries: np.ndarray, k: int, device: str
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_search` on a GPU (``device``): the same chunked product and selection in
        torch, the candidates kept on the device; results come back as numpy."""
        import torch

        cached = self._device_candidates
        if cached is None or cached[0] != device:
            cached = (
                device,
                torch.from_numpy(self.candidates).to(device),
                torch.from_numpy(self.sq_norms.astype(np.float32)).to(device),
            )
            self._device_candidates = cached
        _, cand, norms = cached
        q = torch.from_numpy(np.ascontiguousarray(queries, dtype=np.float32)).to(device)
        n, n_cand = q.shape[0], cand.shape[0]
        best_d = torch.full((n, k), float("inf"), device=device)
        best_i = torch.zeros((n, k), dtype=torch.long, device=device)
        with torch.inference_mode():
            for r0 in range(0, n, self.row_block):
                rows = q[r0 : r0 + self.row_block]
                for c0 in range(0, n_cand, self.chunk_size):
                    dist = rows @ cand[c0 : c0 + self.chunk_size].T
                    dist = dist * -2.0 + norms[c0 : c0 + self.chunk_size]
                    kk = min(k, dist.shape[1])
                    d, j = torch.topk(dist, kk, dim=1, largest=False, sorted=True)
                    all_d = torch.cat([best_d[r0 : r0 + self.row_block], d], dim=1)
                    all_i = torch.cat([best_i[r0 : r0 + self.row_block], j + c0], dim=1)
                    keep = torch.argsort(all_d, dim=1, stable=True)[:, :k]
                    best_d[r0 : r0 + self.row_block] = torch.gather(all_d, 1, keep)
                    best_i[r0 : r0 + self.row_block] = torch.gather(all_i, 1, keep)
        return best_d.cpu().numpy(), best_i.cpu().numpy()

    def query(self, queries: np.ndarray) -> np.ndarray:
        """The vocabulary id of the nearest candidate to each row of ``queries`` (full search;
        memoised by content, see :mod:`privaudit.runtime.memo`)."""
        queries = np.atleast_2d(np.asarray(queries))
        if queries.shape[1] != self.dim:
            raise ValueError(f"Queries have dimension {queries.shape[1]}, index has {self.dim}.")
        if queries.shape[0] == 0:
            return np.zeros(0, dtype=np.int64)
        q = np.ascontiguousarray(queries, dtype=np.float32)
        return self._memo.get(digest([q]), lambda: self._nearest_unique(q))

    def k_nearest(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest candidates of each query row, nearest first: their vocabulary ids
        and Euclidean distances (exact; ties keep candidate order)."""
        queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        k = min(int(k), len(self.candidate_ids))
        d, i = self._search(queries, k)
        own = np.einsum("ij,ij->i", queries, queries)[:, None]
        return self.candidate_ids[i], np.sqrt(np.maximum(d + own, 0.0))

    def _nearest_unique(self, q: np.ndarray) -> np.ndarray:
        """:meth:`query` searching each distinct row once: a release's vectors repeat (the same
        word's embedding, a vector that is a function of the token it came from), and the
        search is a (rows × vocabulary) product."""
        rows = q.view(np.dtype((np.void, q.dtype.itemsize * q.shape[1]))).ravel()
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
        if len(first) == len(q):
            return self.candidate_ids[self._search(q, 1)[1][:, 0]]
        found = self.candidate_ids[self._search(q[first], 1)[1][:, 0]]
        return found[inverse.ravel()]

    # -- pruning ------------------------------------------------------------------------------
    def radius(self, ids: np.ndarray) -> np.ndarray:
        """Distance from each candidate id to its nearest *other* candidate (inf: not a candidate
        and so never pruned). Computed once per id, then cached."""
        ids = np.asarray(ids, dtype=np.int64)
        todo = np.unique(ids[self._is_candidate[ids] & np.isnan(self._radius[ids])])
        if todo.size:
            vecs = self._matrix[todo].astype(np.float32)
            d, _ = self._search(vecs, 2)
            own = np.einsum("ij,ij->i", vecs, vecs)
            # d[:, 0] is the word itself (distance ~0) unless a duplicate vector exists, in which
            # case d[:, 1] is ~0 too and the radius is 0: such words are simply never pruned.
            r = np.sqrt(np.maximum(d[:, 1] + own, 0.0))
            self._radius[todo] = r
            self._save()
        out = np.full(ids.shape, np.inf, dtype=np.float32)
        mask = self._is_candidate[ids]
        out[mask] = self._radius[ids[mask]]
        return out

    def _save(self) -> None:
        if self._cache_path is None:
            return
        # Atomic, and never a failure: a read-only cache keeps the radii in memory only.
        keep_entry(self._cache_path, lambda fh: np.save(fh, self._radius))

    def project(
        self,
        queries: np.ndarray,
        *,
        source_ids: np.ndarray | None = None,
        offsets: np.ndarray | None = None,
        prune: bool = True,
    ) -> np.ndarray:
        """Nearest candidate id for each query, exactly.

        With ``source_ids`` (the word each query was perturbed from) and ``offsets`` (query minus
        that word's embedding; computed if omitted), queries provably answered by their source
        word skip the search.
        """
        queries = np.atleast_2d(np.asarray(queries))
        if source_ids is None or not prune:
            return self.query(queries)
        source_ids = np.asarray(source_ids, dtype=np.int64)
        if source_ids.shape != (queries.shape[0],):
            raise ValueError("source_ids must give one id per query.")
        if offsets is None:
            offsets = queries - self._matrix[source_ids]
        offset_norms = np.linalg.norm(offsets, axis=1)
        safe = offset_norms < 0.5 * self.radius(source_ids)
        out = source_ids.copy()
        if not safe.all():
            out[~safe] = self.query(queries[~safe])
        return out
