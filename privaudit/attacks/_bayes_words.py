"""The word-level path of the Bayes-optimal inversion: the hidden states are the attacker's
aux units (words of the mechanism's vocabulary, and the numbers and punctuation it passes
through), the emissions the mechanism's *declared* likelihood ln P(y | w) over its word
vocabulary (:class:`privaudit.api.WordLikelihood`), the prior a Kneser-Ney bigram over the aux
units (:mod:`privaudit.attacks._bigram_hmm`). Used by
:class:`~privaudit.attacks.bayes_inversion.BayesInversion` against a mechanism that declares
an exact likelihood (SanText, CusText, TEM, 1-Diffractor).

The units are a text's words (runs of letters, what the word mechanisms replace), digit runs
and single punctuation marks (which they keep verbatim): a kept unit is context the prior
conditions on, as the WordPiece path's kept tokens are (the tiny test backbone's SanText at
ε 12: words alone recovered 22.5 % of the victims' tokens, with the kept units 30.9 %; the
fitted WordPiece kernel 30.7 %, the released text itself 16.1 %)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from privaudit.api import WordLikelihood
from privaudit.attacks._bigram_hmm import BigramPrior, best_states, kneser_ney
from privaudit.mechanisms.word_sampling import WORD, match_case

#: A unit: a word (what the mechanism may replace), a digit run or a punctuation mark.
UNIT = re.compile(rf"{WORD.pattern}|\d+|[^\w\s]")
#: Hidden-state rows whose likelihood is computed together (rows x vocabulary, float64).
_ROWS = 512


@dataclass
class Units:
    """Unit ids over a mechanism's vocabulary: a vocabulary word is its row; a word outside
    it is -1; a kept unit (digits, punctuation) is ``len(words) + k`` for its ``k`` in
    ``kept`` (grown as new ones are read)."""

    likelihood: WordLikelihood
    kept: dict[str, int] = field(default_factory=dict)

    def ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        row, n = self.likelihood.row, len(self.likelihood.words)
        out = []
        for text in texts:
            ids = []
            for m in UNIT.finditer(text):
                unit = m.group()
                if WORD.fullmatch(unit):
                    ids.append(row.get(unit.lower(), -1))
                else:
                    ids.append(n + self.kept.setdefault(unit, len(self.kept)))
            out.append(np.asarray(ids, dtype=np.int64))
        return out


@dataclass(frozen=True)
class WordModel:
    """The fitted HMM: the hidden states (unit ids of the most frequent aux units,
    ascending; index ``len(states)`` is the unseen state), their prior, and the units."""

    states: np.ndarray
    prior: BigramPrior
    units: Units
    coverage: float  # share of the aux's vocabulary words that are states


def fit_words(likelihood: WordLikelihood, aux_texts: Sequence[str], max_states: int) -> WordModel:
    """States: the ``max_states`` most frequent aux units (vocabulary words and kept units);
    the prior: a Kneser-Ney bigram over the aux's units (any other: the unseen state)."""
    units = Units(likelihood)
    seqs = units.ids(aux_texts)
    flat = np.concatenate(seqs) if seqs else np.zeros(0, np.int64)
    known = flat[flat >= 0]
    uniq, counts = np.unique(known, return_counts=True)
    states = np.sort(uniq[np.argsort(-counts, kind="stable")[:max_states]])
    s = len(states)
    words = known[known < len(likelihood.words)]
    covered = float(np.isin(words, states).mean()) if len(words) else 0.0
    return WordModel(states, kneser_ney(_state_index(states, seqs), s), units, covered)


def _state_index(states: np.ndarray, seqs: list[np.ndarray]) -> list[np.ndarray]:
    """Each unit id's state (``len(states)``: unseen, and every -1)."""
    s = len(states)
    out = []
    for q in seqs:
        pos = np.minimum(np.searchsorted(states, q), max(s - 1, 0))
        found = (q >= 0) & (states[pos] == q) if s else np.zeros(len(q), bool)
        out.append(np.where(found, pos, s))
    return out


def emissions(model: WordModel, targets: np.ndarray) -> np.ndarray:
    """P(y | state) up to a positive scale per symbol: rows the observed unit ids ``targets``
    then one symbol for any word outside the vocabulary, columns the states then the unseen
    one. A vocabulary word is emitted by a word state with the declared likelihood, by the
    unseen state with 1 / |V| (an original the attacker has no row for: the likelihood's mean
    over originals, read as uniform). A kept unit is emitted only by itself, or by the unseen
    state when it is no state; a word outside the vocabulary only by the unseen state (the
    mechanism keeps a word it cannot embed, and never writes one)."""
    likelihood = model.units.likelihood
    n_words, s = len(likelihood.words), len(model.states)
    emit = np.zeros((len(targets) + 1, s + 1))
    is_word = targets < n_words
    word_states = np.flatnonzero(model.states < n_words)
    for lo in range(0, len(word_states), _ROWS):
        block = word_states[lo : lo + _ROWS]
        logp = likelihood.log_probs([likelihood.words[int(r)] for r in model.states[block]])
        emit[np.flatnonzero(is_word)[:, None], block[None, :]] = np.exp(logp[:, targets[is_word]]).T
    emit[np.flatnonzero(is_word), s] = 1.0 / n_words
    kept = np.flatnonzero(~is_word)
    pos = np.minimum(np.searchsorted(model.states, targets[kept]), max(s - 1, 0))
    own = (model.states[pos] == targets[kept]) if s else np.zeros(len(kept), bool)
    emit[kept[own], pos[own]] = 1.0
    emit[kept[~own], s] = 1.0
    emit[len(targets), s] = 1.0
    scale = emit.max(1, keepdims=True)
    return emit / np.where(scale > 0, scale, 1.0)


def decode_words(model: WordModel, texts: Sequence[str]) -> list[str]:
    """Each released text with every word replaced by its posterior-marginal argmax original
    (the unseen state: the released word itself), in the released word's casing; everything
    else as released."""
    units = Units(model.units.likelihood, dict(model.units.kept))  # the aux's ids, not grown
    rows = units.ids(texts)
    flat = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    bounds = np.cumsum([0, *(len(r) for r in rows)]).astype(np.int64)
    targets, col = np.unique(flat, return_inverse=True)
    col = col.ravel()
    inside = targets >= 0
    # symbols: the known targets in order, then the one outside-vocabulary symbol
    symbol = np.where(inside[col], np.cumsum(inside)[col] - 1, int(inside.sum()))
    emit = emissions(model, targets[inside])
    best = best_states(model.prior, emit, symbol, bounds) if len(flat) else flat
    n_words, s = len(model.units.likelihood.words), len(model.states)
    out, k = [], 0
    for text in texts:
        parts, last = [], 0
        for m in UNIT.finditer(text):
            a, b = m.span()
            shown, state = text[a:b], int(best[k])
            if state < s and model.states[state] < n_words and WORD.fullmatch(shown):
                shown = match_case(shown, model.units.likelihood.words[int(model.states[state])])
            parts += [text[last:a], shown]
            last, k = b, k + 1
        parts.append(text[last:])
        out.append("".join(parts))
    return out
