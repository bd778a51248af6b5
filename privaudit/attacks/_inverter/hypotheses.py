"""From a victim's mapped features to its text (``geia`` and ``vec2text``): the decoder's
greedy guess (memoised by the decoder's weights), sampled hypotheses re-ranked by
re-embedding them, then correction steps, each keeping a victim's guess unless a new one is
closer (:func:`invert`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.attacks._inverter.decoding import Bounds, Sampling, generate, hypothesis
from privaudit.attacks._inverter.model import Inverter, specials
from privaudit.attacks._pooled_features import Scaler, standardise_rows
from privaudit.mechanisms.laplace import minmax_normalise
from privaudit.runtime.memo import ObjectMemo, digest

if TYPE_CHECKING:
    from privaudit.models.backbone import Backbone


@dataclass
class State:
    """The pre-trained inverter, the decoder in use (fine-tuned per point, or the pre-trained
    one) and the scaling of its conditioning (the public embeddings')."""

    inverter: Inverter
    model: Any  # the decoder that writes the first hypotheses
    scaler: Scaler
    info: dict[str, Any] = field(default_factory=dict)
    prior: str = ""  # what the pre-trained decoder writes with no conditioning
    key: str = ""  # names the decoder's weights (its greedy decodings are memoised by it)
    vocab_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    corrector: Any = None  # the corrector, writing the same vocabulary as ``model``


@dataclass(frozen=True)
class Decoding:
    """How an attack decodes: at most ``max_tokens`` pieces, sampling at ``temperature`` from
    ``seed``; ``laplace_release`` (the release's min-max normalised pooled vectors, when its
    defense adds Laplace noise to them) ranks hypotheses under that noise model."""

    max_tokens: int
    temperature: float
    seed: int
    laplace_release: np.ndarray | None = None


#: The greedy decodings (geia's whole guess; vec2text's first hypothesis).
GREEDY = ObjectMemo(size=4)


def invert(
    bb: Backbone, state: State, x: np.ndarray, decoding: Decoding, *, steps: int, k: int
) -> tuple[list[str], dict[str, list[str]]]:
    """Decode mapped features ``x``: ``k`` hypotheses, re-ranked by re-embedding, then
    ``steps`` correction steps (each keeps a victim's guess unless a new one is closer).
    Returns the texts and, with steps, the texts after 0 steps."""
    import torch

    e = state.scaler(x)
    gen = torch.Generator().manual_seed(decoding.seed)
    cls, sep = specials(bb)
    bounds = Bounds(cls, sep, decoding.max_tokens)
    # One generator for the samples and every correction step: their draws follow on.
    sampling = Sampling(k - 1, decoding.temperature, gen)
    guess = greedy(state, e, cls, sep, decoding.max_tokens)
    if k == 1 and not steps:
        return bb.detokenize(guess), {}
    ids = [[g] for g in guess]
    if k > 1:
        only_drawn = replace(sampling, with_greedy=False)
        drawn = generate(state.model, e, state.vocab_ids, bounds, sampling=only_drawn)
        ids = [g + d for g, d in zip(ids, drawn, strict=True)]
    seen: dict[str, np.ndarray] = {}  # re-embedded hypotheses, by text
    noise = decoding.laplace_release
    best, emb, dist = closest(bb, state, e, ids, seen, noise)
    variants: dict[str, list[str]] = {}
    for step in range(int(steps)):
        if step == 0:
            variants["steps_0"] = bb.detokenize(best)
        hyp = hypothesis(best, emb, decoding.max_tokens)
        new = generate(state.corrector, e, state.vocab_ids, bounds, hyp=hyp, sampling=sampling)
        cand, cemb, cdist = closest(bb, state, e, new, seen, noise)
        better = cdist < dist
        for i in np.flatnonzero(better):
            best[i] = cand[i]
        emb[better], dist[better] = cemb[better], cdist[better]
    return bb.detokenize(best), variants


def greedy(state: State, e: np.ndarray, cls: int, sep: int, max_tokens: int) -> list[np.ndarray]:
    """The decoder's greedy decoding of each row of ``e``: a pure function of the
    decoder's weights (``state.key``) and ``e``, so ``geia`` and ``vec2text`` at one point
    decode it once."""

    def decode() -> list[np.ndarray]:
        out = generate(state.model, e, state.vocab_ids, Bounds(cls, sep, max_tokens))
        return [h[0] for h in out]

    if not state.key:
        return decode()
    return GREEDY.get(digest([state.key, e, max_tokens]), decode)


def closest(
    bb: Backbone,
    state: State,
    e: np.ndarray,
    ids: list[list[np.ndarray]],
    seen: dict[str, np.ndarray],
    laplace_release: np.ndarray | None = None,
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Each victim's most likely hypothesis given its release: re-embedded by the public
    encoder (one pass for all of them); under the defense's public noise model where it
    has one (``laplace_release``: Laplace noise on min-max normalised pooled vectors, CAPE and
    DPNR: the L1 distance between the release and the hypothesis's normalised embedding is
    its negative log-likelihood), else the squared distance to the mapped target ``e`` in
    the scaled clean space. Each distinct text is encoded once: ``seen`` keeps the pooled
    embeddings of the texts already encoded (a correction often rewrites a guess as it
    was). Returns the choice, its scaled embedding and its distance."""
    k = len(ids[0]) if ids else 1
    flat = [h for hs in ids for h in hs]
    texts = bb.detokenize(flat)
    new = sorted({t for t in texts if t.strip() and t not in seen})
    if new:
        seen.update(zip(new, bb.own_pooled(new), strict=True))
    zero = np.zeros(bb.dim, np.float32)
    pooled = np.stack([seen.get(t, zero) if t.strip() else zero for t in texts])
    emb = state.scaler(standardise_rows(pooled)).reshape(len(ids), k, -1)
    raw = laplace_release
    if raw is not None and raw.shape == (len(ids), bb.dim):
        normed = minmax_normalise(pooled).reshape(len(ids), k, -1)
        dist = np.abs(normed - raw[:, None, :]).sum(-1)
    else:
        dist = ((emb - e[:, None, :]) ** 2).sum(-1)
    pick = dist.argmin(1)
    rows = np.arange(len(ids))
    return [ids[i][pick[i]] for i in rows], emb[rows, pick].copy(), dist[rows, pick].copy()
