"""Scoring attack predictions against the truth the runner holds.

Every attack declares a ``metric``; :data:`METRICS` maps each metric name to its scorer.
Empirical privacy is 1 - success for success-type metrics (recovery, accuracy, F1,
similarity) and the error itself for ``embedding_mse`` (as in the autoencoder attack's paper).
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privaudit.api import Predictions, Release


def matched_tokens(truth: Sequence[int], guess: Sequence[int]) -> int:
    """Original tokens recovered: position by position when the lengths agree, else the matched
    blocks of a sequence alignment (released text may re-tokenize to a different length)."""
    if len(truth) == len(guess):
        return int(np.sum(np.asarray(truth) == np.asarray(guess)))
    matcher = difflib.SequenceMatcher(a=list(truth), b=list(guess), autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks())


def token_recovery(truth: Sequence[Sequence[int]], predictions: Predictions) -> float:
    if predictions.tokens is None:
        raise ValueError("Token predictions expected.")
    if len(predictions.tokens) != len(truth):
        raise ValueError(
            f"The attack returned {len(predictions.tokens)} documents for {len(truth)} victims."
        )
    total = sum(len(t) for t in truth)
    if total == 0:
        return float("nan")
    hits = sum(matched_tokens(t, g) for t, g in zip(truth, predictions.tokens, strict=True))
    return hits / total


def frequency_guess(truth: Sequence[Sequence[int]], token: int | None) -> float:
    """Token recovery (and token F1) of guessing ``token`` at every position: the level an
    inversion falls to when the release carries nothing about the originals."""
    total = sum(len(t) for t in truth)
    if token is None or total == 0:
        return float("nan")
    return sum(int(np.sum(np.asarray(t) == token)) for t in truth) / total


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


@dataclass
class Truth:
    """What the runner knows about the victims (never shown to an attack)."""

    tokens: list[np.ndarray]
    attributes: dict[str, list[Any]] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)
    entities: list[list[dict[str, Any]]] = field(default_factory=list)
    embeddings: np.ndarray | None = None  # the backbone's input-embedding matrix (for MSE)
    # The aux split's most frequent token: the guess of an attacker who ignores the release.
    frequent_token: int | None = None

    def subset(self, indices: Sequence[int]) -> Truth:
        """The truth of the victims an attack ran on, in its order."""
        idx = [int(i) for i in indices]
        n = len(self.tokens)
        if any(not 0 <= i < n for i in idx):
            raise ValueError(f"doc_indices outside 0..{n - 1}: the attack's subset is invalid.")

        def pick(xs: Sequence[Any]) -> list[Any]:
            return [xs[i] for i in idx] if len(xs) == n else list(xs)

        return Truth(
            tokens=pick(self.tokens),
            attributes={k: pick(v) for k, v in self.attributes.items()},
            texts=pick(self.texts),
            entities=pick(self.entities),
            embeddings=self.embeddings,
            frequent_token=self.frequent_token,
        )


def token_f1(truth: Sequence[Sequence[int]], guess: Sequence[Sequence[int]]) -> dict[str, float]:
    """Bag-of-tokens precision, recall and F1 (Song & Raghunathan's inversion score):
    per document the multiset overlap of predicted and original ids, micro-averaged."""
    if len(guess) != len(truth):
        raise ValueError(f"The attack returned {len(guess)} documents for {len(truth)} victims.")
    return _multiset_prf(
        (Counter(np.asarray(t).tolist()), Counter(np.asarray(g).tolist()))
        for t, g in zip(truth, guess, strict=True)
    )


def embedding_mse(truth: Truth, predictions: Predictions) -> float:
    """Mean squared error per coordinate between reconstructed vectors and the embeddings of
    the original tokens they stand for (positions paired by :func:`align_positions`)."""
    from privaudit.mechanisms.align import align_positions

    if predictions.vectors is None or truth.embeddings is None:
        raise ValueError("embedding_mse needs predicted vectors and the backbone embeddings.")
    released = predictions.meta.get("released_tokens")
    if len(predictions.vectors) != len(truth.tokens):
        raise ValueError(
            f"The attack returned {len(predictions.vectors)} documents for "
            f"{len(truth.tokens)} victims."
        )
    sq = 0.0
    count = 0
    for d, (orig, vecs) in enumerate(zip(truth.tokens, predictions.vectors, strict=True)):
        vecs = np.asarray(vecs, dtype=np.float32).reshape(len(vecs), -1)
        rel = released[d] if released is not None else np.arange(len(vecs))
        i, j = align_positions(orig, rel) if released is not None else _positional(orig, vecs)
        if len(i) == 0:
            continue
        diff = vecs[j] - truth.embeddings[np.asarray(orig)[i]]
        sq += float(np.sum(diff.astype(np.float64) ** 2))
        count += diff.size
    return sq / count if count else float("nan")


def _positional(orig: Sequence[int], vecs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    idx = np.arange(min(len(orig), len(vecs)))
    return idx, idx


def _norm_entity(text: str) -> str:
    return " ".join(str(text).casefold().split()).strip(" .,;:!?'\"")


def entity_f1(
    truth: Sequence[Sequence[dict[str, Any]]], guess: Sequence[Sequence[dict[str, Any]]]
) -> dict[str, float]:
    """Micro precision/recall/F1 of (normalised text, type) multisets per document. Predicted
    types that the truth annotation never uses are ignored (a corpus annotated with PERSON,
    GPE, ORG and DATE cannot judge a predicted CARDINAL)."""
    if len(guess) != len(truth):
        raise ValueError(f"The attack returned {len(guess)} documents for {len(truth)} victims.")
    types = {e["type"] for doc in truth for e in doc}
    return _multiset_prf(
        (
            Counter((_norm_entity(e["text"]), e["type"]) for e in t),
            Counter((_norm_entity(e["text"]), e["type"]) for e in g if e["type"] in types),
        )
        for t, g in zip(truth, guess, strict=True)
    )


def _multiset_prf(docs: Iterable[tuple[Counter, Counter]]) -> dict[str, float]:
    """Micro precision, recall and F1 of (truth, guess) multisets summed over documents;
    recall is NaN when there is nothing to find, precision 0 when nothing was guessed."""
    hit = n_pred = n_true = 0
    for ct, cg in docs:
        hit += sum((ct & cg).values())
        n_pred += sum(cg.values())
        n_true += sum(ct.values())
    precision = hit / n_pred if n_pred else 0.0
    recall = hit / n_true if n_true else float("nan")
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def text_similarity(
    originals: Sequence[str],
    recovered: Sequence[str],
    entities: Sequence[Sequence[dict[str, Any]]] = (),
) -> dict[str, float]:
    """Mean difflib ratio between each original and its reconstruction (HaS §3.3's measure:
    privacy is 1 - ratio), and the fraction of original entity strings found verbatim."""
    if len(recovered) != len(originals):
        raise ValueError(
            f"The attack returned {len(recovered)} documents for {len(originals)} victims."
        )
    ratios = [
        difflib.SequenceMatcher(None, o, r, autojunk=False).ratio()
        for o, r in zip(originals, recovered, strict=True)
    ]
    found = total = 0
    for ents, text in zip(entities, recovered, strict=False):
        for e in ents:
            total += 1
            found += int(e["text"] in text)
    return {
        "similarity": float(np.mean(ratios)) if ratios else float("nan"),
        "entity_recovery": found / total if total else float("nan"),
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
    from privaudit.mechanisms.words import entity_words, stop_words, words

    if len(guesses) != len(originals):
        raise ValueError(
            f"The attack returned {len(guesses)} documents for {len(originals)} victims."
        )
    stop = stop_words()
    truth_sets = [set(words(t)) for t in originals]
    guess_sets = [{str(w) for w in g} for g in guesses]
    pairs = list(zip(truth_sets, guess_sets, strict=True))
    content = _multiset_prf((Counter(t - stop), Counter(g - stop)) for t, g in pairs)
    every = _multiset_prf((Counter(t), Counter(g)) for t, g in pairs)
    found = total = 0
    for ents, guess in zip(entities, guess_sets, strict=False):
        wanted = entity_words(list(ents))
        total += len(wanted)
        found += len(wanted & guess)
    return content | {
        "precision_all": every["precision"],
        "recall_all": every["recall"],
        "f1_all": every["f1"],
        "entity_word_recovery": found / total if total else float("nan"),
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
    from rouge_score import rouge_scorer

    from privaudit.mechanisms.words import normalise, stop_words, words

    if len(decoded) != len(originals):
        raise ValueError(
            f"The attack returned {len(decoded)} documents for {len(originals)} victims."
        )
    truth_words = [words(t) for t in originals]
    guess_words = [words(str(t)) for t in decoded]
    pairs = list(zip(truth_words, guess_words, strict=True))
    prf = _multiset_prf((Counter(t), Counter(g)) for t, g in pairs)
    stop = stop_words()
    content = _multiset_prf(
        (Counter(w for w in t if w not in stop), Counter(w for w in g if w not in stop))
        for t, g in pairs
    )
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    rouge = [
        scorer.score(normalise(o), normalise(str(d)))["rougeL"].fmeasure
        for o, d in zip(originals, decoded, strict=True)
    ]
    exact = [t == g for t, g in pairs]
    found = total = 0
    for ents, guess in zip(entities, guess_words, strict=False):
        padded = f" {' '.join(guess)} "
        for e in ents:
            wanted = " ".join(words(str(e.get("text", ""))))
            if wanted:
                total += 1
                found += int(f" {wanted} " in padded)
    return content | {
        "precision_all": prf["precision"],
        "recall_all": prf["recall"],
        "f1_all": prf["f1"],
        "rouge_l": float(np.mean(rouge)) if rouge else float("nan"),
        "exact": float(np.mean(exact)) if exact else float("nan"),
        "entity_recovery": found / total if total else float("nan"),
    }


def score_attributes(
    truth: Mapping[str, Sequence[Any]], predictions: Predictions
) -> dict[str, dict[str, float]]:
    """Per attribute in ``truth``: ``accuracy``, ``macro_f1``, ``majority_accuracy`` (always
    guessing the aux majority recorded in ``predictions.meta``) and ``advantage`` (accuracy -
    majority_accuracy). Victims whose true value is unknown (``None``) are left out."""
    from sklearn.metrics import accuracy_score, f1_score

    if predictions.kind != "attributes" or predictions.attributes is None:
        raise ValueError(f"Attribute predictions expected, got {predictions.kind!r} predictions.")
    majority = dict(predictions.meta.get("majority", {}))
    scores: dict[str, dict[str, float]] = {}
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
        pairs = [(t, g) for t, g in zip(true_values, guess, strict=True) if t is not None]
        if not pairs:
            nan = float("nan")
            scores[name] = dict(accuracy=nan, macro_f1=nan, majority_accuracy=nan, advantage=nan)
            continue
        y_true = [str(t) for t, _ in pairs]
        y_pred = [str(g) for _, g in pairs]
        accuracy = float(accuracy_score(y_true, y_pred))
        if name in majority:
            base = float(accuracy_score(y_true, [str(majority[name])] * len(y_true)))
        else:
            base = float("nan")
        scores[name] = {
            "accuracy": accuracy,
            "macro_f1": float(f1_score(y_true, y_pred, average="macro", zero_division=0)),
            "majority_accuracy": base,
            "advantage": accuracy - base,
        }
    return scores


# -------------------------------------------------------------------------------------------
# The metric registry: one scorer per attack metric
# -------------------------------------------------------------------------------------------

#: A scorer: (predictions, truth of the attacked victims, details so far, the public release
#: when it lines up with that truth, else None) → one scored row per target.
Scorer = Callable[[Predictions, Truth, dict[str, Any], Release | None], list[dict[str, Any]]]


def _expect(predictions: Predictions, kind: str, metric: str) -> None:
    if predictions.kind != kind:
        raise ValueError(
            f"Metric {metric!r} scores {kind!r} predictions, got {predictions.kind!r} ones."
        )


def _frequency_baseline(truth: Truth, details: dict[str, Any]) -> float:
    """Token metrics' baseline: guessing the aux's most frequent token everywhere."""
    guess = frequency_guess(truth.tokens, truth.frequent_token)
    if np.isfinite(guess):
        details["frequency_guess"] = guess
    return guess


def _score_token_recovery(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "tokens", "token_recovery")
    guess = _frequency_baseline(truth, details)
    recovery = token_recovery(truth.tokens, predictions)
    return [_row(recovery, 1.0 - recovery, details, guess)]


def _score_token_f1(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "tokens", "token_f1")
    guess = _frequency_baseline(truth, details)
    s = token_f1(truth.tokens, predictions.tokens or [])
    details |= {"precision": s["precision"], "recall": s["recall"]}
    details["token_recovery"] = token_recovery(truth.tokens, predictions)
    return [_row(s["f1"], 1.0 - s["f1"], details, guess)]


def _score_embedding_mse(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "tokens", "embedding_mse")
    _frequency_baseline(truth, details)  # a detail only: MSE has no token baseline
    mse = embedding_mse(truth, predictions)
    details["token_recovery"] = token_recovery(truth.tokens, predictions)
    return [_row(mse, mse, details)]


def _score_entity_f1(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "entities", "entity_f1")
    s = entity_f1(truth.entities, predictions.entities or [])
    details |= {"precision": s["precision"], "recall": s["recall"]}
    return [_row(s["f1"], 1.0 - s["f1"], details)]


def _score_text_similarity(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "texts", "text_similarity")
    s = text_similarity(truth.texts, predictions.texts or [], truth.entities)
    details["entity_recovery"] = s["entity_recovery"]
    row = _row(s["similarity"], 1.0 - s["similarity"], details)
    if release is not None and release.texts is not None:
        # What the attacker gets by doing nothing: the anonymized text as it is.
        row["attack_baseline"] = text_similarity(truth.texts, release.texts)["similarity"]
    return [row]


def _score_attribute_accuracy(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "attributes", "attribute_accuracy")
    wanted = {k: v for k, v in truth.attributes.items() if k in (predictions.attributes or {})}
    rows = []
    for name, s in score_attributes(wanted, predictions).items():
        rows.append(
            {
                "target": name,
                "attack_score": s["accuracy"],
                "empirical_privacy": 1.0 - s["accuracy"],
                "attack_baseline": s["majority_accuracy"],
                "attack_macro_f1": s["macro_f1"],
                "attack_details": details,
            }
        )
    return rows


def _score_word_set_f1(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "tokens", "word_set_f1")
    vocabulary = list(predictions.meta.get("vocabulary", []))

    def bag(ids: Iterable[int]) -> set[str]:
        return {vocabulary[int(i)] for i in ids}

    n = len(truth.texts)
    s = word_set_scores(truth.texts, [bag(t) for t in predictions.tokens or []], truth.entities)
    details |= {k: s[k] for k in ("precision", "recall", "f1_all", "entity_word_recovery")}
    baseline = float("nan")
    if "baseline_tokens" in predictions.meta:  # the aux's most frequent words, for everyone
        guess = bag(predictions.meta["baseline_tokens"])
        b = word_set_scores(truth.texts, [guess] * n, truth.entities)
        baseline = b["f1"]
        details |= {
            "baseline_f1_all": b["f1_all"],
            "baseline_entity_word_recovery": b["entity_word_recovery"],
            "baseline_size": len(guess),
        }
    return [_row(s["f1"], 1.0 - s["f1"], details, baseline)]


def _score_generation(
    predictions: Predictions, truth: Truth, details: dict[str, Any], release: Release | None
) -> list[dict[str, Any]]:
    _expect(predictions, "texts", "generation_f1")
    s = generation_scores(truth.texts, predictions.texts or [], truth.entities)
    keys = ("precision", "recall", "f1_all", "rouge_l", "exact", "entity_recovery")
    details |= {k: s[k] for k in keys}
    baseline = float("nan")
    if "baseline_text" in predictions.meta:  # the decoder's output with no conditioning
        prior = [str(predictions.meta["baseline_text"])] * len(truth.texts)
        b = generation_scores(truth.texts, prior, truth.entities)
        baseline = b["f1"]
        details |= {f"baseline_{k}": b[k] for k in keys[2:]}
    return [_row(s["f1"], 1.0 - s["f1"], details, baseline)]


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
    """One scored row per target: ``target`` ("" or the attribute), ``attack_score``,
    ``empirical_privacy``, ``attack_details`` (a dict of secondary measures) and, where
    defined, ``attack_baseline`` and ``attack_macro_f1``.

    ``metric`` is the attack's declared metric (a key of :data:`METRICS`); ``release`` the
    public release it read (for baselines such as the similarity of the anonymized text
    itself).
    """
    scorer = METRICS.get(metric)
    if scorer is None:
        raise ValueError(
            f"No scorer for metric {metric!r}; the known metrics are {', '.join(METRICS)}."
        )
    indices = predictions.meta.get("doc_indices")
    if indices is not None:
        truth = truth.subset(indices)
    details: dict[str, Any] = {}
    if indices is not None:
        details["n_attacked"] = len(indices)
    if "settings" in predictions.meta:
        details["settings"] = predictions.meta["settings"]
    # The release lines up with the truth only when every victim was attacked.
    return scorer(predictions, truth, details, release if indices is None else None)


def _row(
    score: float, privacy: float, details: dict[str, Any], baseline: float = float("nan")
) -> dict[str, Any]:
    row = {
        "target": "",
        "attack_score": score,
        "empirical_privacy": privacy,
        "attack_details": details,
    }
    if np.isfinite(baseline):
        row["attack_baseline"] = baseline
    return row
