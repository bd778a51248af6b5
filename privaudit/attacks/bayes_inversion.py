"""Bayes-optimal inversion of d_X word replacement: forward-backward on a bigram HMM whose
emissions are the public mechanism's likelihood."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import numpy as np

from privaudit.api import Attack, Knowledge, Predictions, Release, Space, WordLikelihood
from privaudit.attacks._bayes_words import WordModel, decode_words, fit_words
from privaudit.attacks._bigram_hmm import best_states, kneser_ney
from privaudit.attacks._pairs import aux_pairs, checked_release, released_tokens
from privaudit.guarantees import Kind, Unit
from privaudit.mechanisms.batching import unflatten
from privaudit.models.backbone import backbone
from privaudit.params import NonNegativeFloat, PositiveInt

_ROWS = 256  # candidate originals per block of the (originals x vocabulary) distance matrix


@dataclass
class Kernel:
    """The replacement likelihood of a d_X + nearest-neighbour mechanism, as fitted.

    ``P(y | w) = keep[w]`` for ``y = w``; otherwise ``(1 - keep[w])`` times a conditional
    logit over the other emittable tokens ``v`` of ``w``'s word class, with score
    ``a * (-||e_v - e_w||^2 / 2) + b * ||e_v - mu||^2`` (``mu``: the candidates' mean).
    """

    a: float
    b: float
    mu: np.ndarray  # (dim,)

    def hub(self, vectors: np.ndarray) -> np.ndarray:
        return np.einsum("ij,ij->i", vectors - self.mu, vectors - self.mu)


def _neg_half_sq(ew: np.ndarray, ev: np.ndarray, ev_sq: np.ndarray) -> np.ndarray:
    """``-||e_v - e_w||^2 / 2`` for every pair of rows (float32: the vocabulary-wide blocks
    are the attack's cost)."""
    ew_sq = np.einsum("ij,ij->i", ew, ew)
    out = ew @ ev.T
    out -= 0.5 * ew_sq[:, None]
    out -= 0.5 * ev_sq[None, :].astype(np.float32)
    return out


def _row_logsumexp(score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, ``log sum exp`` and the softmax (computed in place of ``score``)."""
    top = score.max(1, keepdims=True)
    score -= top
    np.exp(score, out=score)
    total = score.sum(1, keepdims=True, dtype=np.float64)
    score /= total.astype(score.dtype)
    return (top + np.log(total))[:, 0], score


def replacement_logits(
    kernel: Kernel, bb: Any, originals: np.ndarray, targets: np.ndarray
) -> np.ndarray:
    """``log P(y | w, replaced)`` for every original ``w`` (rows) and token ``y`` (columns):
    the conditional logit of :class:`Kernel`, normalised over ``w``'s word class without
    ``w``; ``-inf`` where ``y`` is of another class or equals ``w``."""
    emb, classes = bb.embeddings, bb.subwords.classes
    out = np.full((len(originals), len(targets)), -np.inf)
    cand = bb.candidate_ids
    hub_t = kernel.b * kernel.hub(emb[targets])
    t_sq = np.einsum("ij,ij->i", emb[targets], emb[targets])
    for c in np.unique(classes[originals]):
        rows = np.flatnonzero(classes[originals] == c)
        vocab = cand[classes[cand] == c]
        ev = emb[vocab]
        ev_sq = np.einsum("ij,ij->i", ev, ev)
        hub_v = kernel.b * kernel.hub(ev)
        pos_in = np.searchsorted(vocab, originals[rows])
        cols = np.flatnonzero(classes[targets] == c)
        for start in range(0, len(rows), _ROWS):
            block = rows[start : start + _ROWS]
            score = kernel.a * _neg_half_sq(emb[originals[block]], ev, ev_sq) + hub_v
            pos = np.minimum(pos_in[start : start + _ROWS], len(vocab) - 1)
            own = vocab[pos] == originals[block]
            score[np.flatnonzero(own), pos[own]] = -np.inf  # normalised without w itself
            log_z, _ = _row_logsumexp(score)
            sub = kernel.a * _neg_half_sq(emb[originals[block]], emb[targets[cols]], t_sq[cols])
            sub += hub_t[cols][None, :] - log_z[:, None]
            sub[originals[block][:, None] == targets[cols][None, :]] = -np.inf
            out[np.ix_(block, cols)] = sub
    return out


def fit_kernel(bb: Any, originals: np.ndarray, released: np.ndarray, *, max_words: int) -> Kernel:
    """Maximum-likelihood ``(a, b)`` of :class:`Kernel` from draws of the mechanism: pairs
    ``(w, y)`` with ``y != w`` of one word class. Only the ``max_words`` most frequent
    originals enter (their normalisers span the whole class, the cost of the fit)."""
    from scipy import optimize  # lazy: 0.4 s that `privaudit list` does not pay

    cand = bb.candidate_ids
    mu = bb.embeddings[cand].mean(0).astype(np.float32)
    classes = bb.subwords.classes
    ok = (released != originals) & (classes[released] == classes[originals])
    ok &= np.isin(released, cand) & np.isin(originals, cand)
    w_ids, counts = np.unique(originals[ok], return_counts=True)
    if not len(w_ids):  # nothing was replaced: the kernel is never used for a guess
        return Kernel(a=1.0, b=0.0, mu=mu)
    top = np.sort(w_ids[np.argsort(-counts, kind="stable")[:max_words]])
    ok &= np.isin(originals, top)
    w, y = originals[ok], released[ok]
    emb = bb.embeddings
    # Per fitted original: its class's candidate features, w itself excluded (-inf later).
    blocks = []
    for c in np.unique(classes[top]):
        vocab = cand[classes[cand] == c]
        ev = emb[vocab]
        ev_sq = np.einsum("ij,ij->i", ev, ev)
        hub = np.einsum("ij,ij->i", ev - mu, ev - mu).astype(np.float32)
        words = top[classes[top] == c]
        dist = _neg_half_sq(emb[words], ev, ev_sq)
        own = vocab[np.minimum(np.searchsorted(vocab, words), len(vocab) - 1)] == words
        mask = np.zeros_like(dist, dtype=bool)
        mask[np.flatnonzero(own), np.searchsorted(vocab, words[own])] = True
        mine = np.isin(w, words)
        row = np.searchsorted(words, w[mine])
        col = np.searchsorted(vocab, y[mine])
        n_w = np.bincount(row, minlength=len(words)).astype(np.float64)
        blocks.append((dist, hub, mask, dist[row, col], hub[col], n_w))

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        a, b = theta
        total, grad = 0.0, np.zeros(2)
        for dist, hub, mask, d_obs, h_obs, n_w in blocks:
            score = np.float32(a) * dist
            score += np.float32(b) * hub[None, :]
            score[mask] = -np.inf
            log_z, p = _row_logsumexp(score)
            total -= (a * d_obs + b * h_obs).sum() - (n_w * log_z).sum()
            grad[0] -= d_obs.sum() - (n_w * np.einsum("ij,ij->i", p, dist)).sum()
            grad[1] -= h_obs.sum() - (n_w * (p @ hub)).sum()
        return total / len(w), grad / len(w)

    # float32 blocks: a relative tolerance near their precision ends the search in ~15 steps
    res = optimize.minimize(
        loss,
        np.array([1.0, 0.0]),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 50, "ftol": 1e-6, "gtol": 1e-4},
    )
    a, b = (float(v) for v in res.x)
    return Kernel(a=a, b=b, mu=mu)


class BayesInversion(Attack):
    """The Bayes-optimal adversary against d_X word replacement, with a bigram language prior.

    Papers: the mechanism is Feyisetan et al., "Privacy- and Utility-Preserving Textual
    Analysis via Calibrated Multivariate Perturbations" (WSDM 2020), and its POS-constrained
    form in RAPT (Li et al., §III-A2). The attack is the posterior inference their threat
    model allows: the mechanism is public, so is its likelihood P(y | w; eta), and language is
    predictable, so P(w | context) is learnable from public or own text. Decoding by posterior
    marginals is forward-backward on an HMM (Rabiner 1989) with the mechanism as emission.

    Threat model: black box with the mechanism public. The attacker knows the declared
    guarantee (``Knowledge.guarantee``: d_X-privacy per token or per word, its eta), queries
    the public privatizer on its own aux texts (never the victims'), holds the backbone's
    public input-embedding matrix, and trains a language model on its aux texts only. It reads
    ``text`` releases of a mechanism that declares d_X-privacy per token or word in the
    input-embedding space (t2t, pct2t, rapt, a plugin declaring such a guarantee); every other
    release is ``n/a`` before any work.

    Model, per document (WordPieces of the released content text, RAPT's public prefix
    skipped; the same positions and metric as nn-/mlp-inversion):

    - Hidden states: the WordPieces of the attacker's aux texts (the prior's support), plus
      one "unseen word" state, for an original the aux never showed.
    - Prior: an interpolated Kneser-Ney bigram over aux WordPieces (absolute discount D =
      n1 / (n1 + 2 n2); the continuation unigram gives the unseen state the Good-Turing mass
      n1 / N of words seen once). Forward-backward conditions every position on both its left
      and its right released context, jointly over the whole sequence.
    - Likelihood P(y | w): ``keep[w]`` for ``y = w``, else ``(1 - keep[w])`` times a
      conditional logit over the other tokens of w's word class (a released token keeps its
      original's class in t2t; pct2t's categories are finer and read as this class), score
      ``a * (-||e_y - e_w||^2 / 2) + b * ||e_y - mu||^2``. The form is the mechanism's: the
      nearest neighbour of e_w + z, z ~ exp(-eta ||z||), is a race of scores
      ``e_y . (e_w + z) - ||e_y||^2 / 2``; their mean gives the distance term, and the noise
      part ``z . e_y`` has a spread growing with ``||e_y - mu||`` (``mu`` cancels in the race),
      which makes far-out tokens hubs. ``keep[w]`` is the share of w's aux occurrences the
      mechanism kept, shrunk to the overall rate with ``shrink`` pseudo-draws (pct2t keeps
      words outside its categories: per-word retention carries that); (a, b) are fitted by
      maximum likelihood to the replaced aux pairs of the ``max_fit_words`` most frequent
      originals. The draws are the public mechanism's own at the victims' eta (the query
      oracle): Monte Carlo on the attacker's side, three numbers fitted, no classifier
      learned. The unseen state emits ``keep * 1/N_unseen`` (the shown token, unseen in aux)
      plus ``(1 - keep) / N_class`` (a replacement from an unseen word).
    - Decision: per position the argmax of the posterior marginal (the unseen state guesses
      the released token). Under the model this maximises the expected number of recovered
      tokens, which is the metric: Bayes-optimal for token recovery.

    Candidate set: every aux WordPiece at every position (exact forward-backward; no
    neighbour list: at the quick grid's eta a replacement lands a median of thousands of
    neighbours away from its original, so K-nearest candidate lists would miss it), plus the
    released token through the unseen state.

    Metric: token recovery X (as nn-/mlp-inversion); empirical privacy 1 - X.

    Word-level mechanisms with a declared exact likelihood (``Knowledge.likelihood``:
    SanText, SanText+, CusText, CusText+, TEM, 1-Diffractor) are decoded with it instead, over
    words (:mod:`privaudit.attacks._bayes_words`): the states are the ``max_word_states``
    most frequent aux units (vocabulary words, and the digits and punctuation the mechanism
    keeps), the prior the same Kneser-Ney bigram over units, the emission the mechanism's own
    ln P(y | w); no kernel is fitted and no query is needed. This also reaches mechanisms
    whose guarantee is not d_X in the input-embedding space (CusText's ε-LDP within output
    sets). A Monte Carlo likelihood (Mahalanobis, Vickrey: 2,000 draws per word) is not
    decoded over the whole vocabulary; the fitted kernel is used for them. Measured on the
    tiny test backbone (victims' token recovery, declared vs fitted kernel): SanText ε 12
    .309 vs .307, 1-Diffractor ε 1 .888 vs .763, CusText ε 3 .847 (n/a before).

    Deviations: the likelihood is the fitted conditional logit above, not the exact Voronoi
    probability of the noisy point (no closed form; a test checks it against Monte Carlo of
    the mechanism); pct2t's word-level replacement is read WordPiece by WordPiece, aligned with
    the aux originals as mlp-inversion pairs them.
    """

    name: ClassVar[str] = "bayes-inversion"
    cost_prior: ClassVar[float] = 0.3  # s per 1,000 words (estimate)
    accepts: ClassVar[frozenset[Space]] = frozenset({Space.TEXT})
    metric: ClassVar[str] = "token_recovery"
    # Deterministic given its data (forward-backward on a fitted prior): 5 fits at t2t
    # eta 100, sd 0 (quick corpus, 2026-11-26).
    fit_sd: ClassVar[float] = 0.0
    needs_query: ClassVar[bool] = True
    needs_aux: ClassVar[bool] = True
    needs_guarantee: ClassVar[frozenset[tuple[Kind, Unit]]] = frozenset(
        {(Kind.DX, Unit.TOKEN), (Kind.DX, Unit.WORD)}
    )
    test_params: ClassVar[Mapping[str, Any]] = {"max_fit_words": 50}

    def __init__(
        self,
        max_aux: PositiveInt | None = 1000,
        max_fit_words: PositiveInt = 300,
        shrink: NonNegativeFloat = 5.0,
        max_word_states: PositiveInt = 4000,
        backbone: str | None = None,
    ) -> None:
        self.max_aux = max_aux
        self.max_fit_words = max_fit_words
        self.shrink = shrink
        self.max_word_states = max_word_states
        self.backbone = backbone
        self._states: np.ndarray | None = None
        self._words: WordModel | None = None
        self._settings: dict[str, Any] = {}

    def guarantee_reason(self, knowledge: Knowledge) -> str | None:
        if _declared(knowledge) is not None:  # the mechanism's own exact likelihood: decoded
            return None
        reason = super().guarantee_reason(knowledge)
        if reason is not None:
            return reason
        g = knowledge.guarantee
        assert g is not None  # needs_guarantee checked it
        if g.per_unit is not None:
            return f"{self.name} models one eta for every unit; this mechanism varies it per unit"
        if "input-embedding" not in g.metric and "input embedding" not in g.metric:
            return (
                f"{self.name} models replacement in the input-embedding space; this "
                f"guarantee's distance is {g.metric or 'unstated'}"
            )
        return None

    # ---------------------------------------------------------------------------------------
    # Fitting: the mechanism's likelihood and the aux bigram prior
    # ---------------------------------------------------------------------------------------

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        # Deterministic: nothing is sampled here (the mechanism's draws are the oracle's).
        if not isinstance(knowledge, Knowledge):
            raise TypeError(f"fit() takes a Knowledge, got {type(knowledge).__name__}.")
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}.")
        self._backbone = self.backbone if self.backbone is not None else knowledge.backbone
        declared = _declared(knowledge)
        if declared is not None:
            return self._fit_words(knowledge, declared)
        self._words = None
        bb = backbone(self._backbone)
        pairs = aux_pairs(bb, knowledge, max_aux=self.max_aux, name=self.name)
        if pairs.kind != "text":
            raise ValueError(
                f"{self.name} reads text releases; the queried mechanism released {pairs.kind!r}."
            )
        aux = knowledge.aux
        n = len(aux) if self.max_aux is None else min(len(aux), int(self.max_aux))
        sequences = bb.token_ids([str(t) for t in aux.select(range(n))["text"]])
        states = np.unique(np.concatenate(sequences)).astype(np.int64)
        self._states = states
        self._hmm = kneser_ney([np.searchsorted(states, q) for q in sequences], len(states))

        # Retention per state, shrunk to the overall rate; the kernel from replaced pairs.
        kept = pairs.original_ids == pairs.released_ids
        overall = (float(kept.sum()) + 0.5) / (len(kept) + 1.0)  # Jeffreys: never 0 or 1
        pos = np.searchsorted(states, pairs.original_ids)
        found = states[np.minimum(pos, len(states) - 1)] == pairs.original_ids
        n_w = np.bincount(pos[found], minlength=len(states)).astype(np.float64)
        k_w = np.bincount(pos[found], weights=kept[found], minlength=len(states))
        m = float(self.shrink)
        keep = (k_w + m * overall) / np.maximum(n_w + m, 1e-12)
        keep = np.where(n_w + m > 0, keep, overall)
        self._keep = np.clip(keep, 1e-9, 1 - 1e-9)
        self._keep_unseen = overall
        self._kernel = fit_kernel(
            bb, pairs.original_ids, pairs.released_ids, max_words=int(self.max_fit_words)
        )
        g = knowledge.guarantee
        self._settings = {
            "max_aux": self.max_aux,
            "n_aux_docs": pairs.n_docs,
            "n_states": len(states) + 1,
            "eta": None if g is None else g.value,
            "kept_rate": round(overall, 4),
            "kernel_a": round(self._kernel.a, 4),
            "kernel_b": round(self._kernel.b, 4),
            "discount": round(self._hmm.discount, 4),
        }
        return self

    def _fit_words(self, knowledge: Knowledge, likelihood: WordLikelihood) -> Self:
        """The word path: states and prior from the aux words; the emissions are declared."""
        aux = knowledge.aux
        assert aux is not None  # needs_aux checked it
        n = len(aux) if self.max_aux is None else min(len(aux), int(self.max_aux))
        texts = [str(t) for t in aux.select(range(n))["text"]]
        model = fit_words(likelihood, texts, int(self.max_word_states))
        self._words, self._states = model, model.states
        g = knowledge.guarantee
        level = {g.parameter or "level": g.value} if g is not None else {}
        self._settings = level | {
            "likelihood": "declared (exact, word level)",
            "max_aux": self.max_aux,
            "n_aux_docs": n,
            "n_states": len(model.states) + 1,
            "state_coverage": round(model.coverage, 4),
            "discount": round(model.prior.discount, 4),
        }
        return self

    # ---------------------------------------------------------------------------------------
    # Attack: emissions, forward-backward, posterior marginals
    # ---------------------------------------------------------------------------------------

    def emission_log(self, bb: Any, targets: np.ndarray) -> np.ndarray:
        """``log P(y | state)`` for every state (rows; the last: unseen) and token ``y``."""
        states = self._states
        assert states is not None
        out = np.empty((len(states) + 1, len(targets)))
        out[:-1] = replacement_logits(self._kernel, bb, states, targets)
        out[:-1] += np.log1p(-self._keep)[:, None]
        same = states[:, None] == targets[None, :]
        out[:-1][same] = np.broadcast_to(np.log(self._keep)[:, None], same.shape)[same]
        # The unseen state: the shown token kept (if aux never showed it), or a replacement.
        classes = bb.subwords.classes
        cand = bb.candidate_ids
        n_class = np.bincount(classes[cand], minlength=2).astype(np.float64)
        n_seen = np.bincount(classes[states], minlength=2).astype(np.float64)
        c = classes[targets]
        in_aux = np.isin(targets, states)
        kept = np.where(in_aux, 0.0, self._keep_unseen / np.maximum(n_class[c] - n_seen[c], 1))
        out[-1] = np.log(kept + (1 - self._keep_unseen) / n_class[c])
        return out

    def attack(self, release: Release) -> Predictions:
        if self._states is None:
            raise ValueError(f"{self.name} is not fitted: call fit(knowledge) before attack().")
        checked_release(release, name=self.name, nonempty=True)
        if release.kind != "text":
            raise ValueError(f"{self.name} reads text releases, not {release.kind!r}.")
        bb = backbone(self._backbone)
        if self._words is not None:
            return self._attack_words(bb, release)
        rel = released_tokens(bb, release, name=self.name)
        flat = np.concatenate(rel.ids) if rel.ids else np.zeros(0, np.int64)
        bounds = np.cumsum([0, *(len(i) for i in rel.ids)]).astype(np.int64)
        guess = flat.copy()
        if len(flat):
            targets, col = np.unique(flat, return_inverse=True)
            log_b = self.emission_log(bb, targets)
            emit = np.exp(log_b - log_b.max(0, keepdims=True)).T  # (targets, states), max 1
            best = best_states(self._hmm, emit, col.ravel(), bounds)
            s = len(self._states)
            guess = np.where(best == s, flat, self._states[np.minimum(best, s - 1)])
        return Predictions(
            "tokens",
            tokens=[row.tolist() for row in unflatten(guess, bounds)],
            meta={
                "tokenizer": bb.name,
                "released_tokens": [r.tolist() for r in rel.ids],
                "settings": dict(self._settings),
            },
        )

    def _attack_words(self, bb: Any, release: Release) -> Predictions:
        model = self._words
        assert model is not None
        texts = release.content_texts()
        guessed = decode_words(model, texts)
        return Predictions(
            "tokens",
            tokens=[row.tolist() for row in bb.token_ids(guessed)],
            meta={
                "tokenizer": bb.name,
                "released_tokens": [r.tolist() for r in bb.token_ids(texts)],
                "settings": dict(self._settings),
            },
        )


def _declared(knowledge: Knowledge) -> WordLikelihood | None:
    """The mechanism's declared likelihood when it is exact (a Monte Carlo one is not decoded
    over the whole vocabulary: 2,000 draws per aux word; the fitted kernel is used)."""
    found = knowledge.likelihood
    return found if found is not None and found.exact else None
