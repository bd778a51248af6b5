"""Scoring attack predictions against the truth the runner holds.

Every attack declares a ``metric``; :data:`METRICS` maps each metric name to its scorer.
Empirical privacy is 1 - success for success-type metrics (recovery, accuracy, F1,
similarity) and the error itself for ``embedding_mse`` (as in the autoencoder attack's paper).

**Per-document outcomes.** Every scored row carries, beside its ``attack_score``, an
``outcome`` (:class:`privaudit.audit.outcomes.Outcome`): the per-victim statistics the score is
a function of, indexed by the victims' positions in the test split, so that the bootstrap
(and any later statistic) needs no re-run. ``outcome.value()`` *is* the score: every scorer
computes its headline from the outcome it returns. The per-document statistics are

- ``token_recovery``: (tokens recovered, tokens) → ratio;
- ``token_f1``, ``word_set_f1``, ``generation_f1``, ``entity_f1``: (multiset overlap,
  predicted, true) → micro F1 = 2·overlap / (predicted + true), which is the harmonic mean of
  the micro precision and recall whenever both are defined, 0 when nothing was predicted, and
  undefined (NaN; the scorer raises :class:`NotScorable`) when there is nothing to find;
- ``embedding_mse``: (squared error, coordinates) of the aligned positions → ratio;
- ``text_similarity``: (difflib ratio, 1) → ratio (the mean over victims);
- ``attribute_accuracy``: per class (correct, count) → balanced accuracy, over the victims
  whose value is known.

The no-information baseline, where a metric has one, is an outcome too
(``baseline_outcome``, its value ``attack_baseline``), over the same victims.

**Families.** Each row names the attack family it belongs to (``family``): ``"text"`` (token
and text recovery: nn-, mlp-, ae- and optimization-inversion, bow-inversion, geia),
``"entity"`` (ner, has-deanonymization, and the ``entities`` rows of bow-inversion and geia)
and ``"attribute[<name>]"`` (attribute inference, one family per attribute).

**No score without truth.** When the truth lacks what a metric needs (no victim has an entity
annotation, no victim's attribute value is known, the victims have no tokens or words to
recover), the scorer raises :class:`NotScorable` with a one-line reason and the runner records
the cell as ``n/a`` with it, rather than scoring "nothing found" as perfect privacy.

**Score only what the release contains.** A token-vector release may hold fewer positions
than the victim has tokens: SAP and SAP-CTI truncate each document to ``max_length`` word
pieces ([CLS] and [SEP] included), i.e. 126 content tokens. The tokens past the cut never left
the user's device, so they are neither recovered nor protected by the mechanism; counting them
as protected would credit the defense with the truncation (token recovery 0.938 on long
reviews with 0.02 % of tokens changed). So, for every ``token_vectors`` release that lines up
with the victims, each victim's truth is cut to the part the release holds
(:func:`released_token_counts`, :meth:`Truth.cut`) before any metric is computed:

- layer 0 (input word-embedding space): one vector per content token, no special tokens
  (SAP at k = 0, T2T-style releases), so a victim keeps its first ``len(vectors)`` truth
  tokens;
- layer k >= 1 (hidden states): ``[CLS] pieces [SEP]``, so the release holds the first
  ``len(vectors) - 2`` word pieces, [UNK] pieces included (which the truth leaves out): a
  victim keeps the truth tokens among those pieces (by :attr:`Truth.piece_positions` when
  the runner recorded them, else its first ``len(vectors) - 2`` tokens).

The positions of nn-, mlp- and ae-inversion (one prediction per released vector at layer 0)
and of optimization-inversion (one per content position, specials excluded) then line up with
the cut truth one to one. Where the truth knows where each token ends in the text
(:attr:`Truth.token_ends`), the victim's text is cut there as well and entities that end past
the cut are dropped, so word- and entity-level scores (bow-inversion, geia) judge the same
released part; without it the texts are scored whole. ``attack_details`` report
``truncated_tokens`` and ``truncated_documents`` when anything was cut. Text releases and
pooled vectors are scored against the whole victim.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from privaudit.api import Predictions, Release
from privaudit.audit.outcomes import Outcome


class NotScorable(Exception):
    """The truth lacks what the metric needs (``str(exc)`` is the one-line reason): the cell
    is recorded as ``n/a`` with that reason, never as a score."""


# -------------------------------------------------------------------------------------------
# The truth
# -------------------------------------------------------------------------------------------


@dataclass
class Truth:
    """What the runner knows about the victims (never shown to an attack).

    ``tokens``: per victim, its WordPiece ids (``Backbone.token_ids``: no specials, no [UNK]);
    ``piece_positions`` (optional): per victim, the index of each of those tokens among the
    tokenizer's pieces of the text with [UNK] kept (where a split model's release counts
    positions); ``token_ends`` (optional): per victim, the character offset in its text where
    each token ends (to cut the text where a truncated release ends); ``docs`` (optional): the
    test-split index of each victim (0..n-1 when None; :meth:`subset` sets it).
    """

    tokens: list[np.ndarray]
    attributes: dict[str, list[Any]] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    entities: list[list[dict[str, Any]]] = field(default_factory=list)
    embeddings: np.ndarray | None = None  # the backbone's input-embedding matrix (for MSE)
    # The aux split's most frequent token: the guess of an attacker who ignores the release.
    frequent_token: int | None = None
    # The mean input embedding of the aux tokens: the least-squares constant guess of an
    # attacker who ignores the release (the reconstruction-MSE baseline).
    mean_embedding: np.ndarray | None = None
    piece_positions: list[np.ndarray] = field(default_factory=list)
    token_ends: list[np.ndarray] = field(default_factory=list)
    docs: list[int] | None = None

    def n_victims(self) -> int:
        """The number of victims (the longest per-victim field)."""
        fields = (self.tokens, self.texts, self.entities, *self.attributes.values())
        return max((len(xs) for xs in fields), default=0) or len(self.docs or [])

    def doc_indices(self) -> np.ndarray:
        """The test-split index of each victim."""
        if self.docs is not None:
            return np.asarray(self.docs, dtype=np.int64)
        return np.arange(self.n_victims(), dtype=np.int64)

    def subset(self, indices: Sequence[int]) -> Truth:
        """The truth of the victims an attack ran on, in its order."""
        idx = [int(i) for i in indices]
        n = self.n_victims()
        if any(not 0 <= i < n for i in idx):
            raise ValueError(f"doc_indices outside 0..{n - 1}: the attack's subset is invalid.")

        def pick(xs: Sequence[Any]) -> list[Any]:
            return [xs[i] for i in idx] if len(xs) == n else list(xs)

        docs = self.doc_indices()
        return Truth(
            tokens=pick(self.tokens),
            attributes={k: pick(v) for k, v in self.attributes.items()},
            texts=pick(self.texts),
            entities=pick(self.entities),
            embeddings=self.embeddings,
            frequent_token=self.frequent_token,
            mean_embedding=self.mean_embedding,
            piece_positions=pick(self.piece_positions),
            token_ends=pick(self.token_ends),
            docs=[int(docs[i]) for i in idx],
        )

    def cut(self, keep: Sequence[int]) -> tuple[Truth, int, int]:
        """The truth of what a truncated release holds: victim ``d`` keeps its first
        ``keep[d]`` tokens; its text is cut where the last kept token ends and entities that
        end past that are dropped (when :attr:`token_ends` is known; else text and entities
        stay whole). Returns the cut truth, the number of tokens cut and of victims cut."""
        n = len(self.tokens)
        if len(keep) != n:
            raise ValueError(f"{len(keep)} kept lengths for {n} victims.")
        tokens, texts, entities = list(self.tokens), list(self.texts), list(self.entities)
        pieces, ends = list(self.piece_positions), list(self.token_ends)
        cut_tokens = cut_docs = 0
        for d, k in enumerate(keep):
            k = max(0, int(k))
            if k >= len(tokens[d]):
                continue
            cut_tokens += len(tokens[d]) - k
            cut_docs += 1
            tokens[d] = np.asarray(tokens[d])[:k]
            if len(pieces) == n:
                pieces[d] = np.asarray(pieces[d])[:k]
            if len(ends) == n and len(texts) == n:
                end = int(np.asarray(ends[d])[k - 1]) if k > 0 else 0
                texts[d] = texts[d][:end]
                ends[d] = np.asarray(ends[d])[:k]
                if len(entities) == n:
                    entities[d] = [e for e in entities[d] if _entity_within(e, texts[d], end)]
        truth = replace(
            self, tokens=tokens, texts=texts, entities=entities, piece_positions=pieces,
            token_ends=ends,
        )  # fmt: skip
        return truth, cut_tokens, cut_docs


def _entity_within(entity: Mapping[str, Any], text: str, end: int) -> bool:
    """Whether an entity lies in a text cut at character ``end``: by its span when it has one,
    else by its string."""
    if "end" in entity and entity["end"] is not None:
        return int(entity["end"]) <= end
    return str(entity.get("text", "")) in text


def released_token_counts(truth: Truth, release: Release) -> list[int]:
    """Per victim, how many of its truth tokens a ``token_vectors`` release holds (see the
    module docstring: layer 0 holds one vector per content token, layer k >= 1 holds
    ``[CLS]`` + pieces + ``[SEP]``). ``release`` must have one document per victim."""
    if release.kind != "token_vectors":
        raise ValueError(f"Only a token_vectors release is cut; this one is {release.kind!r}.")
    vectors = release.vectors or []
    if len(vectors) != len(truth.tokens):
        raise ValueError(
            f"The release has {len(vectors)} documents for {len(truth.tokens)} victims."
        )
    specials = 2 if int(release.layer or 0) >= 1 else 0
    pieces_known = len(truth.piece_positions) == len(truth.tokens)
    counts = []
    for d, v in enumerate(vectors):
        arr = np.asarray(v)
        positions = (arr.shape[0] if arr.ndim >= 2 else int(arr.size > 0)) - specials
        positions = max(0, positions)
        n_true = len(truth.tokens[d])
        if specials and pieces_known:
            counts.append(int(np.sum(np.asarray(truth.piece_positions[d]) < positions)))
        else:
            counts.append(min(n_true, positions))
    return counts


# -------------------------------------------------------------------------------------------
# Token recovery
# -------------------------------------------------------------------------------------------


def matched_tokens(truth: Sequence[int], guess: Sequence[int]) -> int:
    """Original tokens recovered: position by position when the lengths agree, else the matched
    blocks of a sequence alignment (released text may re-tokenize to a different length)."""
    if len(truth) == len(guess):
        return int(np.sum(np.asarray(truth) == np.asarray(guess)))
    matcher = difflib.SequenceMatcher(a=list(truth), b=list(guess), autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks())


def token_hits(
    truth: Sequence[Sequence[int]], predictions: Predictions
) -> tuple[np.ndarray, np.ndarray]:
    """Per victim, the tokens recovered (:func:`matched_tokens`) and the number of its
    tokens: the per-document statistics of :func:`token_recovery`."""
    if predictions.tokens is None:
        raise ValueError("Token predictions expected.")
    if len(predictions.tokens) != len(truth):
        raise ValueError(
            f"The attack returned {len(predictions.tokens)} documents for {len(truth)} victims."
        )
    hits = [matched_tokens(t, g) for t, g in zip(truth, predictions.tokens, strict=True)]
    return np.asarray(hits, dtype=np.float64), _lengths(truth)


def _lengths(truth: Sequence[Sequence[int]]) -> np.ndarray:
    return np.asarray([len(t) for t in truth], dtype=np.float64)


def token_recovery(truth: Sequence[Sequence[int]], predictions: Predictions) -> float:
    """Fraction of the victims' tokens recovered (micro: all tokens pooled); NaN when there
    are none."""
    hits, lengths = token_hits(truth, predictions)
    total = lengths.sum()
    return float(hits.sum() / total) if total else float("nan")


def frequency_hits(truth: Sequence[Sequence[int]], token: int) -> np.ndarray:
    """Per victim, how many of its tokens equal ``token``."""
    return np.asarray([np.sum(np.asarray(t) == token) for t in truth], dtype=np.float64)


def frequency_guess(truth: Sequence[Sequence[int]], token: int | None) -> float:
    """Token recovery (and token F1) of guessing ``token`` at every position: the level an
    inversion falls to when the release carries nothing about the originals."""
    total = sum(len(t) for t in truth)
    if token is None or total == 0:
        return float("nan")
    return float(frequency_hits(truth, token).sum() / total)


def replacement_rate(audits: Sequence[dict]) -> float:
    """Fraction of units (tokens or words) the mechanism changed, from the releases' audits."""
    changed = total = 0
    for audit in audits:
        masks = audit.get("replaced")
        if masks is None:
            return float("nan")
        for mask in masks:
            changed += int(np.sum(mask))
            total += len(mask)
    return changed / total if total else float("nan")


# -------------------------------------------------------------------------------------------
# Multiset F1 (tokens, words, entities)
# -------------------------------------------------------------------------------------------


def multiset_counts(docs: Iterable[tuple[Counter, Counter]]) -> np.ndarray:
    """Per document (truth, guess) multisets → (overlap, predicted, true) counts, (n, 3)."""
    rows = [(sum((ct & cg).values()), sum(cg.values()), sum(ct.values())) for ct, cg in docs]
    return np.asarray(rows, dtype=np.float64).reshape(-1, 3)


def prf(counts: np.ndarray) -> dict[str, float]:
    """Micro precision, recall and F1 of per-document (overlap, predicted, true) ``counts``
    summed over documents: precision 0 when nothing was predicted; recall and F1 NaN when
    there was nothing to find; F1 = 2·overlap / (predicted + true), which equals
    2PR / (P + R) whenever both are defined and is 0 when nothing was found."""
    hit, n_pred, n_true = (float(x) for x in np.asarray(counts, np.float64).reshape(-1, 3).sum(0))
    return {
        "precision": hit / n_pred if n_pred else 0.0,
        "recall": hit / n_true if n_true else float("nan"),
        "f1": 2 * hit / (n_pred + n_true) if n_true else float("nan"),
    }


def _multiset_prf(docs: Iterable[tuple[Counter, Counter]]) -> dict[str, float]:
    """Micro precision, recall and F1 of (truth, guess) multisets summed over documents
    (:func:`prf` of :func:`multiset_counts`)."""
    return prf(multiset_counts(docs))


def _token_counts(
    truth: Sequence[Sequence[int]], guess: Sequence[Sequence[int]]
) -> np.ndarray:  # fmt: skip
    if len(guess) != len(truth):
        raise ValueError(f"The attack returned {len(guess)} documents for {len(truth)} victims.")
    return multiset_counts(
        (Counter(np.asarray(t).tolist()), Counter(np.asarray(g).tolist()))
        for t, g in zip(truth, guess, strict=True)
    )


def token_f1(truth: Sequence[Sequence[int]], guess: Sequence[Sequence[int]]) -> dict[str, float]:
    """Bag-of-tokens precision, recall and F1 (Song & Raghunathan's inversion score):
    per document the multiset overlap of predicted and original ids, micro-averaged."""
    return prf(_token_counts(truth, guess))


# -------------------------------------------------------------------------------------------
# Embedding reconstruction error
# -------------------------------------------------------------------------------------------


def embedding_errors(
    truth: Truth, predictions: Predictions, guess: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Per victim: the summed squared error between reconstructed vectors and the embeddings
    of the original tokens they stand for (positions paired by :func:`align_positions` on
    ``meta["released_tokens"]``, else position by position), the number of coordinates
    compared, and, when a ``guess`` vector is given, the squared error of putting it at the
    same positions (the no-information baseline)."""
    from privaudit.mechanisms.align import align_positions

    if predictions.vectors is None or truth.embeddings is None:
        raise ValueError("embedding_mse needs predicted vectors and the backbone embeddings.")
    released = predictions.meta.get("released_tokens")
    if len(predictions.vectors) != len(truth.tokens):
        raise ValueError(
            f"The attack returned {len(predictions.vectors)} documents for "
            f"{len(truth.tokens)} victims."
        )
    n = len(truth.tokens)
    sq, count = np.zeros(n), np.zeros(n)
    base = None if guess is None else np.zeros(n)
    guess_vec = None if guess is None else np.asarray(guess, np.float32)
    for d, (orig, vecs) in enumerate(zip(truth.tokens, predictions.vectors, strict=True)):
        vecs = np.asarray(vecs, dtype=np.float32).reshape(len(vecs), -1)
        rel = released[d] if released is not None else np.arange(len(vecs))
        i, j = align_positions(orig, rel) if released is not None else _positional(orig, vecs)
        if len(i) == 0:
            continue
        target = truth.embeddings[np.asarray(orig)[i]]
        diff = vecs[j] - target
        sq[d] = float(np.sum(diff.astype(np.float64) ** 2))
        count[d] = diff.size
        if base is not None:
            base[d] = float(np.sum((guess_vec - target).astype(np.float64) ** 2))
    return sq, count, base


def embedding_mse(truth: Truth, predictions: Predictions) -> float:
    """Mean squared error per coordinate between reconstructed vectors and the embeddings of
    the original tokens they stand for (:func:`embedding_errors`, pooled over victims)."""
    sq, count, _ = embedding_errors(truth, predictions)
    return float(sq.sum() / count.sum()) if count.sum() else float("nan")


def _positional(orig: Sequence[int], vecs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    idx = np.arange(min(len(orig), len(vecs)))
    return idx, idx


# -------------------------------------------------------------------------------------------
# Entities and texts
# -------------------------------------------------------------------------------------------


def _norm_entity(text: str) -> str:
    return " ".join(str(text).casefold().split()).strip(" .,;:!?'\"")


def entity_counts(
    truth: Sequence[Sequence[dict[str, Any]]], guess: Sequence[Sequence[dict[str, Any]]]
) -> np.ndarray:
    """Per document, (overlap, predicted, true) of (normalised text, type) multisets; predicted
    types that the truth annotation never uses are ignored (see :func:`entity_f1`)."""
    if len(guess) != len(truth):
        raise ValueError(f"The attack returned {len(guess)} documents for {len(truth)} victims.")
    types = {e["type"] for doc in truth for e in doc}
    return multiset_counts(
        (
            Counter((_norm_entity(e["text"]), e["type"]) for e in t),
            Counter((_norm_entity(e["text"]), e["type"]) for e in g if e["type"] in types),
        )
        for t, g in zip(truth, guess, strict=True)
    )


def entity_f1(
    truth: Sequence[Sequence[dict[str, Any]]], guess: Sequence[Sequence[dict[str, Any]]]
) -> dict[str, float]:
    """Micro precision/recall/F1 of (normalised text, type) multisets per document. Predicted
    types that the truth annotation never uses are ignored (a corpus annotated with PERSON,
    GPE, ORG and DATE cannot judge a predicted CARDINAL). Recall and F1 are NaN when no
    document has an annotation."""
    return prf(entity_counts(truth, guess))


def similarity_ratios(originals: Sequence[str], recovered: Sequence[str]) -> np.ndarray:
    """Per document, the difflib ratio between the original and its reconstruction."""
    if len(recovered) != len(originals):
        raise ValueError(
            f"The attack returned {len(recovered)} documents for {len(originals)} victims."
        )
    return np.asarray(
        [
            difflib.SequenceMatcher(None, o, r, autojunk=False).ratio()
            for o, r in zip(originals, recovered, strict=True)
        ],
        dtype=np.float64,
    )


def _entity_strings_found(
    entities: Sequence[Sequence[dict[str, Any]]], texts: Sequence[str]
) -> np.ndarray:
    """Per document (of ``texts``), (entity strings found verbatim, entity strings)."""
    rows = np.zeros((len(texts), 2))
    for d, (ents, text) in enumerate(zip(entities, texts, strict=False)):
        rows[d] = (sum(int(e["text"] in text) for e in ents), len(ents))
    return rows


def text_similarity(
    originals: Sequence[str],
    recovered: Sequence[str],
    entities: Sequence[Sequence[dict[str, Any]]] = (),
) -> dict[str, float]:
    """Mean difflib ratio between each original and its reconstruction (HaS §3.3's measure:
    privacy is 1 - ratio), and the fraction of original entity strings found verbatim."""
    ratios = similarity_ratios(originals, recovered)
    found = _entity_strings_found(entities, recovered).sum(0)
    return {
        "similarity": float(ratios.mean()) if len(ratios) else float("nan"),
        "entity_recovery": float(found[0] / found[1]) if found[1] else float("nan"),
    }


# -------------------------------------------------------------------------------------------
# Words (bow-inversion, geia)
# -------------------------------------------------------------------------------------------


def word_set_counts(
    originals: Sequence[str],
    guesses: Sequence[Iterable[str]],
    entities: Sequence[Sequence[dict[str, Any]]] = (),
) -> dict[str, np.ndarray]:
    """Per document, the statistics of :func:`word_set_scores`: ``content`` and ``all``
    (overlap, predicted, true) of the word sets without and with stop words, (n, 3), and
    ``entity`` (entity words guessed, entity words), (n, 2)."""
    from privaudit.mechanisms.words import entity_words, stop_words, words

    if len(guesses) != len(originals):
        raise ValueError(
            f"The attack returned {len(guesses)} documents for {len(originals)} victims."
        )
    stop = stop_words()
    truth_sets = [set(words(t)) for t in originals]
    guess_sets = [{str(w) for w in g} for g in guesses]
    pairs = list(zip(truth_sets, guess_sets, strict=True))
    entity = np.zeros((len(originals), 2))
    for d, (ents, guess) in enumerate(zip(entities, guess_sets, strict=False)):
        wanted = entity_words(list(ents))
        entity[d] = (len(wanted & guess), len(wanted))
    return {
        "content": multiset_counts((Counter(t - stop), Counter(g - stop)) for t, g in pairs),
        "all": multiset_counts((Counter(t), Counter(g)) for t, g in pairs),
        "entity": entity,
    }


def word_set_scores(
    originals: Sequence[str],
    guesses: Sequence[Iterable[str]],
    entities: Sequence[Sequence[dict[str, Any]]] = (),
) -> dict[str, float]:
    """Song & Raghunathan's bag-of-words inversion score: per document the set of its words
    (:func:`privaudit.mechanisms.words.words`) against the predicted set, micro-averaged.
    ``precision``/``recall``/``f1`` leave stop words out of both sets (the headline);
    ``*_all`` count them; ``entity_word_recovery`` is the fraction of the documents'
    named-entity content words (a set per document) that the guesses contain."""
    return _word_set_summary(word_set_counts(originals, guesses, entities))


def generation_counts(
    originals: Sequence[str],
    decoded: Sequence[str],
    entities: Sequence[Sequence[dict[str, Any]]] = (),
) -> dict[str, np.ndarray]:
    """Per document, the statistics of :func:`generation_scores`: ``content`` and ``all``
    (overlap, predicted, true) of the word multisets without and with stop words, (n, 3);
    ``rouge_l`` (ROUGE-L F-measure) and ``exact`` (1 when decoded word for word), (n,);
    ``entity`` (entity strings found, entity strings), (n, 2)."""
    from rouge_score import rouge_scorer

    from privaudit.mechanisms.words import normalise, stop_words, words

    if len(decoded) != len(originals):
        raise ValueError(
            f"The attack returned {len(decoded)} documents for {len(originals)} victims."
        )
    truth_words = [words(t) for t in originals]
    guess_words = [words(str(t)) for t in decoded]
    pairs = list(zip(truth_words, guess_words, strict=True))
    stop = stop_words()
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    rouge = [
        scorer.score(normalise(o), normalise(str(d)))["rougeL"].fmeasure
        for o, d in zip(originals, decoded, strict=True)
    ]
    entity = np.zeros((len(originals), 2))
    for d, (ents, guess) in enumerate(zip(entities, guess_words, strict=False)):
        padded = f" {' '.join(guess)} "
        for e in ents:
            wanted = " ".join(words(str(e.get("text", ""))))
            if wanted:
                entity[d] += (int(f" {wanted} " in padded), 1)
    return {
        "content": multiset_counts(
            (Counter(w for w in t if w not in stop), Counter(w for w in g if w not in stop))
            for t, g in pairs
        ),
        "all": multiset_counts((Counter(t), Counter(g)) for t, g in pairs),
        "rouge_l": np.asarray(rouge, dtype=np.float64),
        "exact": np.asarray([t == g for t, g in pairs], dtype=np.float64),
        "entity": entity,
    }


def generation_scores(
    originals: Sequence[str],
    decoded: Sequence[str],
    entities: Sequence[Sequence[dict[str, Any]]] = (),
) -> dict[str, float]:
    """GEIA's measures of a decoded text against its original, on
    :func:`privaudit.mechanisms.words.words` (case, accents and punctuation set aside):
    ``precision``/``recall``/``f1`` of the word multisets without stop words (micro-averaged;
    the headline, as :func:`word_set_scores`': the templates a decoder learns weigh less),
    ``*_all`` with them, ``rouge_l``
    (mean ROUGE-L F-measure, Google's ``rouge-score``), ``exact`` (fraction decoded word for
    word) and ``entity_recovery`` (fraction of the victims' entity strings whose words appear
    contiguously in the decoded text)."""
    return _generation_summary(generation_counts(originals, decoded, entities))


# -------------------------------------------------------------------------------------------
# Attributes
# -------------------------------------------------------------------------------------------


def score_attributes(
    truth: Mapping[str, Sequence[Any]], predictions: Predictions
) -> dict[str, dict[str, float]]:
    """Per attribute in ``truth``: ``balanced_accuracy`` (the mean recall over the classes
    present among the victims: the headline, meaningful under class imbalance),
    ``accuracy``, ``macro_f1``, ``majority_balanced_accuracy`` and ``majority_accuracy``
    (always guessing the aux majority recorded in ``predictions.meta``) and ``advantage``
    (accuracy - majority_accuracy). Victims whose true value is unknown (``None``) are left
    out; an attribute with no known value scores NaN throughout."""
    scores: dict[str, dict[str, float]] = {}
    for name, s in _attribute_outcomes(truth, predictions, np.arange(_n_victims(truth))).items():
        if s is None:
            nan = float("nan")
            scores[name] = dict(
                balanced_accuracy=nan, accuracy=nan, macro_f1=nan,
                majority_balanced_accuracy=nan, majority_accuracy=nan, advantage=nan,
            )  # fmt: skip
            continue
        scores[name] = {
            "balanced_accuracy": s["outcome"].value(),
            "accuracy": s["accuracy"],
            "macro_f1": s["macro_f1"],
            "majority_balanced_accuracy": s["baseline"].value()
            if s["baseline"] is not None
            else float("nan"),
            "majority_accuracy": s["majority_accuracy"],
            "advantage": s["accuracy"] - s["majority_accuracy"],
        }
    return scores


def _n_victims(truth: Mapping[str, Sequence[Any]]) -> int:
    return max((len(v) for v in truth.values()), default=0)


def _attribute_outcomes(
    truth: Mapping[str, Sequence[Any]], predictions: Predictions, docs: np.ndarray
) -> dict[str, dict[str, Any] | None]:
    """Per attribute: the balanced-accuracy outcome of the predictions and of the majority
    guess over the victims with a known value (``docs`` their test indices), plain and
    majority accuracy and macro-F1; None when no victim's value is known."""
    from sklearn.metrics import f1_score

    if predictions.kind != "attributes" or predictions.attributes is None:
        raise ValueError(f"Attribute predictions expected, got {predictions.kind!r} predictions.")
    majority = dict(predictions.meta.get("majority", {}))
    out: dict[str, dict[str, Any] | None] = {}
    for name, true_values in truth.items():
        if name not in predictions.attributes:
            raise ValueError(
                f"The attack predicted {sorted(predictions.attributes)} but not {name!r}."
            )
        guess = list(predictions.attributes[name])
        true_values = list(true_values)
        if len(guess) != len(true_values):
            raise ValueError(
                f"The attack returned {len(guess)} {name!r} predictions for "
                f"{len(true_values)} victims."
            )
        known = [d for d, t in enumerate(true_values) if t is not None]
        if not known:
            out[name] = None
            continue
        y_true = [str(true_values[d]) for d in known]
        y_pred = [str(guess[d]) for d in known]
        where = [int(docs[d]) for d in known]
        baseline = None
        majority_accuracy = float("nan")
        if name in majority:
            always = [str(majority[name])] * len(y_true)
            baseline = Outcome.classes(y_true, always, "balanced_accuracy", docs=where)
            majority_accuracy = float(
                np.mean([t == g for t, g in zip(y_true, always, strict=True)])
            )
        out[name] = {
            "outcome": Outcome.classes(y_true, y_pred, "balanced_accuracy", docs=where),
            "baseline": baseline,
            "accuracy": float(np.mean([t == g for t, g in zip(y_true, y_pred, strict=True)])),
            "macro_f1": float(f1_score(y_true, y_pred, average="macro", zero_division=0)),
            "majority_accuracy": majority_accuracy,
            "n_known": len(known),
        }
    return out


# -------------------------------------------------------------------------------------------
# The metric registry: one scorer per attack metric
# -------------------------------------------------------------------------------------------

#: A scorer: (predictions, truth of the attacked victims, details so far, the public release
#: when it lines up with that truth, else None) → one scored row per target (see
#: :func:`score_predictions`); raises :class:`NotScorable` when the truth cannot judge it.
Scorer = Callable[[Predictions, Truth, dict[str, Any], Release | None], list[dict[str, Any]]]

#: The family of each metric's headline row (see :func:`family_of`).
FAMILIES: dict[str, str] = {
    "token_recovery": "text",
    "token_f1": "text",
    "embedding_mse": "text",
    "word_set_f1": "text",
    "generation_f1": "text",
    "entity_f1": "entity",
    "text_similarity": "entity",
    "attribute_accuracy": "attribute",
}


def family_of(metric: str, target: str = "") -> str:
    """The attack family of a row of ``metric`` for ``target``: ``attribute[<target>]`` for an
    attribute row (``attribute`` when the attribute is not known, e.g. an inapplicable cell),
    ``entity`` for the ``entities`` rows of bow-inversion and geia, else the metric's family
    (:data:`FAMILIES`)."""
    family = FAMILIES.get(metric, "")
    if family == "attribute":
        return f"attribute[{target}]" if target else family
    if target == "entities":
        return "entity"
    if not family:
        raise ValueError(
            f"No family for metric {metric!r}; the known metrics are {', '.join(FAMILIES)}."
        )
    return family


def _expect(predictions: Predictions, kind: str, metric: str) -> None:
    if predictions.kind != kind:
        raise ValueError(
            f"Metric {metric!r} scores {kind!r} predictions, got {predictions.kind!r} ones."
        )


def _need_tokens(truth: Truth) -> np.ndarray:
    lengths = _lengths(truth.tokens)
    if not lengths.sum():
        raise NotScorable("the victims have no tokens to recover (empty after tokenization)")
    return lengths


def _frequency_baseline(truth: Truth, details: dict[str, Any], f1: bool = False) -> Outcome | None:
    """Token metrics' baseline: guessing the aux's most frequent token everywhere (as a
    recovery ratio, or as the F1 of that guess, which has the same value)."""
    if truth.frequent_token is None:
        return None
    hits, lengths = frequency_hits(truth.tokens, truth.frequent_token), _lengths(truth.tokens)
    docs = truth.doc_indices()
    outcome = Outcome.f1(hits, lengths, lengths, docs) if f1 else Outcome.ratio(hits, lengths, docs)
    value = outcome.value()
    if np.isfinite(value):
        details["frequency_guess"] = value
    return outcome


def _score_token_recovery(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "tokens", "token_recovery")
    hits, lengths = token_hits(truth.tokens, predictions)
    _need_tokens(truth)
    baseline = _frequency_baseline(truth, details)
    outcome = Outcome.ratio(hits, lengths, truth.doc_indices())
    return [_row(outcome, family_of("token_recovery"), details, baseline)]


def _score_token_f1(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "tokens", "token_f1")
    counts = _token_counts(truth.tokens, predictions.tokens or [])
    _need_tokens(truth)
    baseline = _frequency_baseline(truth, details, f1=True)
    s = prf(counts)
    details |= {"precision": s["precision"], "recall": s["recall"]}
    details["token_recovery"] = token_recovery(truth.tokens, predictions)
    outcome = Outcome.f1(counts[:, 0], counts[:, 1], counts[:, 2], truth.doc_indices())
    return [_row(outcome, family_of("token_f1"), details, baseline)]


def _score_embedding_mse(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "tokens", "embedding_mse")
    _need_tokens(truth)
    _frequency_baseline(truth, details)  # its token recovery, a detail
    guess = truth.mean_embedding
    if guess is None and truth.frequent_token is not None and truth.embeddings is not None:
        guess = truth.embeddings[int(truth.frequent_token)]
    sq, count, base = embedding_errors(truth, predictions, guess)
    if not count.sum():
        raise NotScorable("no reconstructed position lines up with a victim token")
    details["token_recovery"] = token_recovery(truth.tokens, predictions)
    docs = truth.doc_indices()
    baseline = None if base is None else Outcome.ratio(base, count, docs)
    family = family_of("embedding_mse")
    return [_row(Outcome.ratio(sq, count, docs), family, details, baseline, error=True)]


def _score_entity_f1(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "entities", "entity_f1")
    counts = entity_counts(truth.entities, predictions.entities or [])
    if not counts[:, 2].sum():
        raise NotScorable(
            "no victim has an entity annotation: the corpus gives entity recovery no truth "
            "(an F1 of 0 would read as perfect privacy)"
        )
    s = prf(counts)
    details |= {"precision": s["precision"], "recall": s["recall"]}
    outcome = Outcome.f1(counts[:, 0], counts[:, 1], counts[:, 2], truth.doc_indices())
    return [_row(outcome, family_of("entity_f1"), details)]


def _score_text_similarity(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "texts", "text_similarity")
    recovered = predictions.texts or []
    ratios = similarity_ratios(truth.texts, recovered)
    if not len(ratios):
        raise NotScorable("the truth holds no victim texts to compare with")
    found = _entity_strings_found(truth.entities, recovered).sum(0)
    details["entity_recovery"] = float(found[0] / found[1]) if found[1] else float("nan")
    docs = truth.doc_indices()
    baseline = None
    if release is not None and release.texts is not None:
        # What the attacker gets by doing nothing: the anonymized text as it is.
        baseline = Outcome.ratio(similarity_ratios(truth.texts, release.texts), 1.0, docs)
    family = family_of("text_similarity")
    return [_row(Outcome.ratio(ratios, 1.0, docs), family, details, baseline)]


def _score_attribute_accuracy(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "attributes", "attribute_accuracy")
    wanted = {k: v for k, v in truth.attributes.items() if k in (predictions.attributes or {})}
    rows: list[dict[str, Any]] = []
    unknown: list[str] = []
    for name, s in _attribute_outcomes(wanted, predictions, truth.doc_indices()).items():
        family = family_of("attribute_accuracy", name)
        if s is None:
            reason = f"no victim's {name!r} is known: attribute inference has no truth to score"
            unknown.append(name)
            rows.append({"target": name, "family": family, "status": "n/a", "reason": reason})
            continue
        plain = {"accuracy": s["accuracy"], "majority_accuracy": s["majority_accuracy"]}
        row = _row(s["outcome"], family, details | plain, s["baseline"])
        row["target"] = name
        row["attack_macro_f1"] = s["macro_f1"]
        rows.append(row)
    if rows and len(unknown) == len(rows):
        names = ", ".join(repr(n) for n in unknown)
        raise NotScorable(f"no victim's {names} is known: attribute inference has no truth")
    return rows


def _score_word_set_f1(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "tokens", "word_set_f1")
    vocabulary = list(predictions.meta.get("vocabulary", []))

    def bag(ids: Iterable[int]) -> set[str]:
        return {vocabulary[int(i)] for i in ids}

    n = len(truth.texts)
    c = word_set_counts(truth.texts, [bag(t) for t in predictions.tokens or []], truth.entities)
    s = _word_set_summary(c)
    details |= {k: s[k] for k in ("precision", "recall", "f1_all", "entity_word_recovery")}
    b = None
    if "baseline_tokens" in predictions.meta:  # the aux's most frequent words, for everyone
        guess = bag(predictions.meta["baseline_tokens"])
        b = word_set_counts(truth.texts, [guess] * n, truth.entities)
        bs = _word_set_summary(b)
        details |= {
            "baseline_f1_all": bs["f1_all"],
            "baseline_entity_word_recovery": bs["entity_word_recovery"],
            "baseline_size": len(guess),
        }
    return _text_rows(truth, details, c, b, "word_set_f1", "entity_words")


def _word_set_summary(c: dict[str, np.ndarray]) -> dict[str, float]:
    """:func:`word_set_scores` from :func:`word_set_counts`."""
    every = prf(c["all"])
    found, total = c["entity"].sum(0)
    return prf(c["content"]) | {
        "precision_all": every["precision"],
        "recall_all": every["recall"],
        "f1_all": every["f1"],
        "entity_word_recovery": float(found / total) if total else float("nan"),
    }


def _score_generation(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "texts", "generation_f1")
    c = generation_counts(truth.texts, predictions.texts or [], truth.entities)
    s = _generation_summary(c)
    keys = ("precision", "recall", "f1_all", "rouge_l", "exact", "entity_recovery")
    details |= {k: s[k] for k in keys}
    b = None
    if "baseline_text" in predictions.meta:  # the decoder's output with no conditioning
        prior = [str(predictions.meta["baseline_text"])] * len(truth.texts)
        b = generation_counts(truth.texts, prior, truth.entities)
        bs = _generation_summary(b)
        details |= {f"baseline_{k}": bs[k] for k in keys[2:]}
    return _text_rows(truth, details, c, b, "generation_f1", "entity_strings")


def _generation_summary(c: dict[str, np.ndarray]) -> dict[str, float]:
    """:func:`generation_scores` from :func:`generation_counts`."""
    every = prf(c["all"])
    found, total = c["entity"].sum(0)
    n = len(c["exact"])
    return prf(c["content"]) | {
        "precision_all": every["precision"],
        "recall_all": every["recall"],
        "f1_all": every["f1"],
        "rouge_l": float(c["rouge_l"].mean()) if n else float("nan"),
        "exact": float(c["exact"].mean()) if n else float("nan"),
        "entity_recovery": float(found / total) if total else float("nan"),
    }


def _text_rows(
    truth: Truth,
    details: dict[str, Any],
    counts: dict[str, np.ndarray],
    baseline: dict[str, np.ndarray] | None,
    metric: str,
    unit: str,
) -> list[dict[str, Any]]:
    """bow-inversion's and geia's rows: the headline (content-word F1, family ``text``) and,
    when some victim has entity annotations, ``entities`` (entity recovery, family
    ``entity``), each with the baseline guess's score over the same victims."""
    docs = truth.doc_indices()

    def f1(c: dict[str, np.ndarray]) -> Outcome:
        return Outcome.f1(c["content"][:, 0], c["content"][:, 1], c["content"][:, 2], docs)

    def found(c: dict[str, np.ndarray]) -> Outcome:
        return Outcome.ratio(c["entity"][:, 0], c["entity"][:, 1], docs)

    if not counts["content"][:, 2].sum():
        raise NotScorable("the victims have no content words to recover")
    rows = [
        _row(f1(counts), family_of(metric), details, None if baseline is None else f1(baseline))
    ]
    n_entities = int(counts["entity"][:, 1].sum())
    if n_entities:
        kept = {k: details[k] for k in ("n_attacked", "settings") if k in details}
        kept |= {"unit": unit, "n_entities": n_entities}
        base = None if baseline is None else found(baseline)
        row = _row(found(counts), family_of(metric, "entities"), kept, base)
        row["target"] = "entities"
        rows.append(row)
    return rows


METRICS: dict[str, Scorer] = {
    "token_recovery": _score_token_recovery,
    "token_f1": _score_token_f1,
    "embedding_mse": _score_embedding_mse,
    "entity_f1": _score_entity_f1,
    "text_similarity": _score_text_similarity,
    "attribute_accuracy": _score_attribute_accuracy,
    "word_set_f1": _score_word_set_f1,
    "generation_f1": _score_generation,
}


def score_predictions(
    predictions: Predictions,
    truth: Truth,
    metric: str,
    release: Release | None = None,
) -> list[dict[str, Any]]:
    """One scored row per target: ``target`` ("", an attribute, or ``"entities"`` for
    bow-inversion's and geia's entity recovery), ``family`` (see the module docstring),
    ``attack_score``, ``empirical_privacy``, ``outcome`` (an :class:`Outcome` whose value is
    ``attack_score``), ``baseline_outcome`` (an :class:`Outcome` whose value is
    ``attack_baseline``, or None), ``attack_details`` (a dict of secondary measures) and,
    where defined, ``attack_baseline`` and ``attack_macro_f1``. An attribute whose victims'
    values are all unknown gets a row with ``status: "n/a"`` and a ``reason`` instead (when
    every attribute is so, :class:`NotScorable` is raised).

    ``metric`` is the attack's declared metric (a key of :data:`METRICS`); ``release`` the
    public release it read, one document per victim: a ``token_vectors`` release cuts each
    victim's truth to the part it holds (module docstring), and a text release gives
    baselines such as the similarity of the anonymized text itself. Predictions for a subset
    (``meta["doc_indices"]``) are scored against those victims, whose test indices become the
    outcomes' documents. Raises :class:`NotScorable` when the truth cannot judge the metric.
    """
    scorer = METRICS.get(metric)
    if scorer is None:
        raise ValueError(
            f"No scorer for metric {metric!r}; the known metrics are {', '.join(METRICS)}."
        )
    details: dict[str, Any] = {}
    keep = None  # per victim, the truth tokens a truncating release holds
    if (
        release is not None
        and release.kind == "token_vectors"
        and len(release) == len(truth.tokens)
    ):
        keep = released_token_counts(truth, release)
    indices = predictions.meta.get("doc_indices")
    if indices is not None:
        truth = truth.subset(indices)
        keep = None if keep is None else [keep[int(i)] for i in indices]
        details["n_attacked"] = len(indices)
    if keep is not None:
        truth, cut_tokens, cut_docs = truth.cut(keep)
        if cut_tokens:
            details |= {"truncated_tokens": cut_tokens, "truncated_documents": cut_docs}
    if "settings" in predictions.meta:
        details["settings"] = predictions.meta["settings"]
    # The release lines up with the truth only when every victim was attacked.
    return scorer(predictions, truth, details, release if indices is None else None)


def _row(
    outcome: Outcome,
    family: str,
    details: dict[str, Any],
    baseline: Outcome | None = None,
    *,
    error: bool = False,
) -> dict[str, Any]:
    """A scored row from its outcome: the score is the outcome's value, privacy 1 - score (or
    the score itself for an ``error`` metric); the baseline is kept when it is defined."""
    score = outcome.value()
    row: dict[str, Any] = {
        "target": "",
        "family": family,
        "attack_score": score,
        "empirical_privacy": score if error else 1.0 - score,
        "attack_details": details,
        "outcome": outcome,
        "baseline_outcome": None,
    }
    if baseline is not None:
        value = baseline.value()
        if np.isfinite(value):
            row["attack_baseline"] = value
            row["baseline_outcome"] = baseline
    return row
