"""Word-level metrics of sentence-embedding inversions: ``word_set_f1`` (bow-inversion) and
``generation_f1`` (geia), with their primitives.

Per-document statistics: (overlap, predicted, true) of the content-word sets or multisets
(stop words excluded) → micro F1, the headline (family ``text``); when some victim has entity
annotations, a second row (target ``entities``, family ``entity``): (entity words or strings
found, entity words or strings) → ratio. Baselines: the aux's most frequent words for
everyone; the decoder's output with no conditioning.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from privaudit.api import Predictions, Release
from privaudit.mechanisms.words import entity_words, normalise, stop_words, words
from privaudit.metrics.multiset import multiset_counts, prf
from privaudit.metrics.outcomes import Outcome, bootstrap_weights, interval
from privaudit.metrics.spec import Baseline, MetricSpec
from privaudit.metrics.truth import NotScorable, Truth


def word_set_counts(
    originals: Sequence[str],
    guesses: Sequence[Iterable[str]],
    entities: Sequence[Sequence[dict[str, Any]]] = (),
) -> dict[str, np.ndarray]:
    """Per document, the statistics of :func:`word_set_scores`: ``content`` and ``all``
    (overlap, predicted, true) of the word sets without and with stop words, (n, 3), and
    ``entity`` (entity words guessed, entity words), (n, 2)."""
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


def _score_word_set_f1(
    spec: MetricSpec,
    predictions: Predictions,
    truth: Truth,
    details: dict[str, Any],
    release: Release | None,
) -> list[dict[str, Any]]:
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
    return _text_rows(spec, truth, details, c, b, "entity_words")


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
    spec: MetricSpec,
    predictions: Predictions,
    truth: Truth,
    details: dict[str, Any],
    release: Release | None,
) -> list[dict[str, Any]]:
    c = generation_counts(truth.texts, predictions.texts or [], truth.entities)
    s = _generation_summary(c)
    details |= reach_details(predictions.meta, truth.tokens)
    keys = ("precision", "recall", "f1_all", "rouge_l", "exact", "entity_recovery")
    details |= {k: s[k] for k in keys}
    b = None
    if "baseline_text" in predictions.meta:  # the decoder's output with no conditioning
        prior = [str(predictions.meta["baseline_text"])] * len(truth.texts)
        b = generation_counts(truth.texts, prior, truth.entities)
        bs = _generation_summary(b)
        details |= {f"baseline_{k}": bs[k] for k in keys[2:]}
    for name, texts in dict(predictions.meta.get("variants") or {}).items():
        details |= _variant_details(name, c, generation_counts(truth.texts, list(texts)), truth)
    return _text_rows(spec, truth, details, c, b, "entity_strings")


def reach(writable: Any, tokens: Sequence[np.ndarray]) -> tuple[float, float]:
    """The share of the victims' tokens, and of their distinct pieces, that an inverter whose
    output vocabulary is ``writable`` (backbone ids) can write at all."""
    ids = np.concatenate([np.asarray(t, np.int64) for t in tokens] or [np.zeros(0, np.int64)])
    if not len(ids):
        return float("nan"), float("nan")
    can = np.isin(ids, np.asarray(writable, np.int64))
    distinct = np.unique(ids)
    return float(can.mean()), float(np.isin(distinct, np.asarray(writable, np.int64)).mean())


def reach_details(meta: dict[str, Any], tokens: Sequence[np.ndarray]) -> dict[str, float]:
    """``reach_tokens``/``reach_pieces`` of what the attack can write (``writable_ids``) and
    ``public_reach_*`` of its public text alone (``public_ids``: how far the public text
    fits the victims' domain); empty when the attack declares neither."""
    out: dict[str, float] = {}
    for key, name in (("writable_ids", "reach"), ("public_ids", "public_reach")):
        if meta.get(key) is not None:
            out[f"{name}_tokens"], out[f"{name}_pieces"] = reach(meta[key], tokens)
    return out


def _variant_details(
    name: str, counts: dict[str, np.ndarray], other: dict[str, np.ndarray], truth: Truth
) -> dict[str, Any]:
    """Another decoding of the same victims (``steps_0``: before correction; ``non_adaptive``):
    its F1 and exact rate, and the headline's paired gain over it with its interval (the
    run's bootstrap resamples of the victims, :func:`bootstrap_weights`)."""
    s = _generation_summary(other)

    def f1(c: dict[str, np.ndarray]) -> Outcome:
        return Outcome.f1(c["content"][:, 0], c["content"][:, 1], c["content"][:, 2])

    main, alt = f1(counts), f1(other)
    w = bootstrap_weights(len(main.stats)).astype(np.float64)
    lo, hi = interval(main.resample(w) - alt.resample(w))
    return {
        f"{name}_f1": s["f1"],
        f"{name}_exact": s["exact"],
        f"gain_over_{name}": main.value() - alt.value(),
        f"gain_over_{name}_ci": [float(lo), float(hi)],
    }


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
    spec: MetricSpec,
    truth: Truth,
    details: dict[str, Any],
    counts: dict[str, np.ndarray],
    baseline: dict[str, np.ndarray] | None,
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
    rows = [spec.row(f1(counts), details, None if baseline is None else f1(baseline))]
    n_entities = int(counts["entity"][:, 1].sum())
    if n_entities:
        kept = {k: details[k] for k in ("n_attacked", "settings") if k in details}
        kept |= {"unit": unit, "n_entities": n_entities}
        base = None if baseline is None else found(baseline)
        rows.append(spec.row(found(counts), kept, base, target="entities"))
    return rows


WORD_SET_F1 = MetricSpec(
    name="word_set_f1",
    family="text",
    higher_is_stronger=True,
    prediction_kind="tokens",
    needs=("texts", "entities"),
    reducer="f1",
    scorer=_score_word_set_f1,
    baseline=Baseline("frequent-words guess"),
    target_families={"entities": "entity"},
    description="F1 of the recovered word set, stop words excluded (Song & Raghunathan 2020)",
)
GENERATION_F1 = MetricSpec(
    name="generation_f1",
    family="text",
    higher_is_stronger=True,
    prediction_kind="texts",
    needs=("texts", "entities"),
    reducer="f1",
    scorer=_score_generation,
    baseline=Baseline("unconditioned decoder"),
    target_families={"entities": "entity"},
    description="word F1 of the decoded text, stop words excluded (GEIA, Li et al. 2023)",
)
