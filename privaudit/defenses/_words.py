"""What the word-level metric-DP defenses share: the text in, the words out, the audit hooks.

SanText, CusText, TEM, Mahalanobis and Vickrey each implement :meth:`WordDefense.replace`, the
one step that maps a batch of words to their replacements. ``privatize`` runs it on every
word of the texts (:class:`~privaudit.mechanisms.word_sampling.WordBatch`), and
``word_kernel`` on one-word inputs for the guarantee audit, so the audit tests what privatize
runs. ``replacement_log_probs`` is the likelihood P(y | w) the Bayes-optimal attacker needs:
exact where the mechanism has a closed form, a Monte Carlo estimate of ``replace`` otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import ClassVar

import numpy as np

from privaudit.api import Defense, Release, WordLikelihood
from privaudit.mechanisms.audited import DXNoise, UnitMechanism
from privaudit.mechanisms.inputs import check_rng, check_texts
from privaudit.mechanisms.nearest import NearestNeighbourIndex
from privaudit.mechanisms.word_sampling import WordBatch, WordVocabulary, backbone_words
from privaudit.models.backbone import backbone

#: Monte Carlo draws per original for a likelihood without a closed form.
LIKELIHOOD_DRAWS = 2000


class WordDefense(Defense):
    """A word-level replacement defense over a backbone's whole-word vocabulary (see the
    module docstring). Subclasses set ``name``, ``levels``, the guarantee and :meth:`replace`;
    the knob is ``epsilon``."""

    knob: ClassVar[str | None] = "epsilon"
    cost_prior: ClassVar[float] = 0.3  # s per 1,000 words (estimate)
    epsilon: float
    backbone: str | None

    # -- the one step ---------------------------------------------------------------------
    def replace(
        self, words: Sequence[str], vectors: np.ndarray, rng: np.random.Generator
    ) -> list[str]:
        """Each word's replacement (lower case; the word itself when kept). ``words`` are lower
        case, ``vectors`` their rows (a vocabulary word's own vector, else the mean of its
        WordPiece embeddings); one call draws its randomness in a fixed order."""
        raise NotImplementedError

    # -- shared state ---------------------------------------------------------------------
    def vocabulary(self) -> WordVocabulary:
        return backbone_words(backbone(self.backbone))

    def index(self) -> NearestNeighbourIndex:
        """Exact Euclidean nearest-neighbour search over the vocabulary's vectors (ids: rows)."""
        vocab = self.vocabulary()
        cache: dict[int, NearestNeighbourIndex] = vocab.__dict__.setdefault("_index", {})
        if 0 not in cache:
            key = f"{backbone(self.backbone).fingerprint}-words{len(vocab)}"
            cache[0] = NearestNeighbourIndex(vocab.vectors, cache_key=key)
        return cache[0]

    def rows_of(self, words: Sequence[str]) -> np.ndarray:
        """Vocabulary rows of ``words`` (-1 outside the vocabulary)."""
        row = self.vocabulary().row
        return np.asarray([row.get(w, -1) for w in words], dtype=np.int64)

    # -- privatize ------------------------------------------------------------------------
    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        texts = check_texts(texts)
        check_rng(rng)
        eps = float(self.epsilon)
        bb = backbone(self.backbone)
        batch = WordBatch.of(texts, self.vocabulary(), bb)
        new = list(batch.lower)
        todo = np.flatnonzero(batch.embeddable)
        if len(todo) and not math.isinf(eps):
            got = self.replace([batch.lower[k] for k in todo], batch.vectors[todo], rng)
            for k, word in zip(todo.tolist(), got, strict=True):
                new[k] = word
        out, masks = batch.render(new)
        return Release(
            "text",
            texts=out,
            meta={"defense": self.name, "epsilon": eps, "backbone": bb.name},
            audit={"replaced": masks, "unit": "word"},
        )

    # -- for the guarantee audit and the attacks ------------------------------------------
    def audit_pool(self) -> tuple[np.ndarray, str]:
        """The vocabulary rows the guarantee protects within one class (where the audit
        searches its pairs), and the class's name ("" for the whole vocabulary)."""
        return np.arange(len(self.vocabulary())), ""

    def audit_points(self) -> np.ndarray:
        """Each vocabulary word's point in the guarantee's metric (its vector by default)."""
        return self.vocabulary().vectors

    def audit_noise(self) -> DXNoise | None:
        """The d_X noise step the mechanism adds before projecting, in the metric's
        coordinates (None: a sampling mechanism, no noise step)."""
        return None

    def word_kernel(self) -> UnitMechanism:
        """For the guarantee audit: :meth:`replace` (what ``privatize`` calls on every word)
        on one-word inputs of the protected pool, one call per batch."""
        vocab = self.vocabulary()
        pool, category = self.audit_pool()

        def draw(units: Sequence[int], rng: np.random.Generator) -> list[Hashable]:
            rows = np.asarray(units, dtype=np.int64)
            words = [vocab.words[int(u)] for u in rows]
            return list(self.replace(words, vocab.vectors[rows], rng))

        return UnitMechanism(
            draw,
            self.audit_points(),
            pool,
            lambda u: vocab.words[int(u)],
            noise=self.audit_noise(),
            document=draw,
            category=category,
        )

    def replacement_log_probs(
        self, originals: Sequence[str], *, rng: np.random.Generator | None = None
    ) -> np.ndarray:
        """ln P(y | w): rows the ``originals`` (vocabulary words), columns the vocabulary's
        words. Without a closed form (a noise step then a projection: the Voronoi cell's
        probability), a Monte Carlo estimate from :data:`LIKELIHOOD_DRAWS` draws of
        :meth:`replace` per original, add-half smoothed."""
        vocab = self.vocabulary()
        rows = self._known(originals)
        rng = rng if rng is not None else np.random.default_rng(0)
        out = np.empty((len(rows), len(vocab)))
        for i, r in enumerate(rows.tolist()):
            words = [vocab.words[r]] * LIKELIHOOD_DRAWS
            got = self.rows_of(self.replace(words, vocab.vectors[[r] * LIKELIHOOD_DRAWS], rng))
            counts = np.bincount(got[got >= 0], minlength=len(vocab)) + 0.5
            out[i] = np.log(counts / counts.sum())
        return out

    def likelihood(self) -> WordLikelihood:
        """:meth:`replacement_log_probs` over the vocabulary, declared to the attacks; exact
        where a subclass gives the closed form (the Monte Carlo default is not)."""
        exact = type(self).replacement_log_probs is not WordDefense.replacement_log_probs
        return WordLikelihood(self.vocabulary().words, self.replacement_log_probs, exact)

    def _known(self, originals: Sequence[str]) -> np.ndarray:
        rows = self.rows_of([str(w).lower() for w in originals])
        if (rows < 0).any():
            bad = [w for w, r in zip(originals, rows, strict=True) if r < 0][:3]
            raise ValueError(f"{self.name}: {bad} are not words of the candidate vocabulary.")
        return rows


def unique_rows(words: Sequence[str], vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first occurrence of each distinct word and, per occurrence, its distinct word's
    position: a word's vector is a function of the word, so each is computed once."""
    _, first, inverse = np.unique(
        np.asarray(words, dtype=object), return_index=True, return_inverse=True
    )
    return np.asarray(vectors)[first], inverse.ravel()
