"""The bigram HMM the Bayes-optimal inversions decode with: an interpolated Kneser-Ney prior
over hidden states learned from the attacker's aux sequences, and forward-backward posterior
marginals under any emission matrix (:class:`~privaudit.attacks.bayes_inversion.BayesInversion`
over WordPieces with a fitted kernel, over words with a mechanism's declared likelihood)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class BigramPrior:
    """P(next state | state) as a sparse discounted part plus a backoff weight per history
    times the continuation unigram (rows and columns: ``S`` states, then ``S``: unseen), and
    the start distribution."""

    trans: Any  # scipy CSR (S + 1, S + 1)
    backoff: np.ndarray
    cont: np.ndarray
    start: np.ndarray
    discount: float


def kneser_ney(sequences: list[np.ndarray], n_states: int) -> BigramPrior:
    """Interpolated Kneser-Ney bigram over state indices ``0..n_states`` (``n_states``: the
    unseen state) from ``sequences`` of them: absolute discount D = n1 / (n1 + 2 n2); the
    continuation unigram gives the unseen state the Good-Turing mass n1 / N of the states
    seen once (0.5 / (N + 1) without any)."""
    from scipy import sparse  # lazy: `privaudit list` imports the attacks, never scipy

    s = n_states
    live = [np.asarray(q, dtype=np.int64) for q in sequences if len(q)]
    prev = np.concatenate([np.r_[s + 1, q[:-1]] for q in live]) if live else np.zeros(0, int)
    nxt = np.concatenate(live) if live else np.zeros(0, int)
    counts = sparse.coo_matrix((np.ones(len(nxt)), (prev, nxt)), shape=(s + 2, s + 1)).tocsr()
    counts.sum_duplicates()
    values = counts.data
    n1, n2 = float((values == 1).sum()), float((values == 2).sum())
    discount = n1 / (n1 + 2 * n2) if n1 + 2 * n2 > 0 else 0.5
    history = np.asarray(counts.sum(1)).ravel()
    types_after = np.diff(counts.indptr).astype(np.float64)
    unigram = np.bincount(nxt, minlength=s + 1).astype(np.float64)
    singletons = float((unigram[:s] == 1).sum())
    # Good-Turing; with no singleton at all, half a count, so the unseen stays possible
    unseen = singletons / max(len(nxt), 1) if singletons else 0.5 / (len(nxt) + 1)
    cont = np.asarray((counts > 0).sum(0)).ravel().astype(np.float64)
    cont[s] = 0.0
    cont = cont / max(cont.sum(), 1.0) * (1.0 - unseen)
    cont[s] = unseen
    disc = counts.copy()
    disc.data = np.maximum(disc.data - discount, 0.0)
    safe = np.where(history > 0, history, 1.0)
    disc = sparse.diags(1.0 / safe) @ disc
    backoff = np.where(history > 0, discount * types_after / safe, 1.0)
    start = np.asarray(disc[s + 1].todense()).ravel() + backoff[s + 1] * cont
    return BigramPrior(disc[: s + 1].tocsr(), backoff[: s + 1], cont, start, discount)


def posterior(
    prior: BigramPrior, emit: np.ndarray, col: np.ndarray, bounds: np.ndarray
) -> np.ndarray:
    """Posterior marginals per position (rows) over the states (columns), all documents
    stepped together: ``emit[j]`` is the emission of observed symbol ``j`` from each state
    (any positive scale per symbol), ``col[k]`` position k's symbol, ``bounds`` the
    documents' offsets into the positions."""
    lengths = np.diff(bounds)
    n_pos, n_states = len(col), emit.shape[1]
    trans_t = prior.trans.T.tocsr()

    def forward_step(alpha: np.ndarray) -> np.ndarray:  # alpha @ A
        return (trans_t @ alpha.T).T + np.outer(alpha @ prior.backoff, prior.cont)

    def backward_step(x: np.ndarray) -> np.ndarray:  # A @ x per row
        return (prior.trans @ x.T).T + np.outer(x @ prior.cont, prior.backoff)

    alpha = np.zeros((n_pos, n_states))
    docs = np.flatnonzero(lengths > 0)
    for t in range(int(lengths.max(initial=0))):
        live = docs[lengths[docs] > t]
        at = bounds[live] + t
        if t == 0:
            a = prior.start[None, :] * emit[col[at]]
        else:
            a = forward_step(alpha[at - 1]) * emit[col[at]]
        alpha[at] = a / np.maximum(a.sum(1, keepdims=True), 1e-300)
    beta = np.ones((n_pos, n_states))
    for t in range(int(lengths.max(initial=0)) - 2, -1, -1):
        live = docs[lengths[docs] > t + 1]
        at = bounds[live] + t
        b = backward_step(emit[col[at + 1]] * beta[at + 1])
        beta[at] = b / np.maximum(b.sum(1, keepdims=True), 1e-300)
    return alpha * beta


#: Positions decoded together: forward-backward holds two (positions x states) float64
#: matrices; over a whole test split at once the Bayes attack's peak was 1.5 GB above the
#: process's resident memory at the quick grid's t2t 75 point, 1.0 GB in these chunks
#: (PRIVAUDIT_MEMORY_LOG, 2026-11-29). Documents are independent, so chunking changes nothing.
CHUNK_POSITIONS = 8192


def best_states(
    prior: BigramPrior, emit: np.ndarray, col: np.ndarray, bounds: np.ndarray
) -> np.ndarray:
    """Per position, the state of largest posterior marginal (:func:`posterior`), the
    documents decoded in chunks of about :data:`CHUNK_POSITIONS` positions."""
    out = np.zeros(len(col), dtype=np.int64)
    n_docs, first = len(bounds) - 1, 0
    while first < n_docs:
        last = first + 1
        while last < n_docs and bounds[last + 1] - bounds[first] <= CHUNK_POSITIONS:
            last += 1
        lo, hi = int(bounds[first]), int(bounds[last])
        if hi > lo:
            post = posterior(prior, emit, col[lo:hi], bounds[first : last + 1] - lo)
            out[lo:hi] = post.argmax(1)
        first = last
    return out
