"""Behaviour of the default ``synthetic-reviews`` corpus: schema, splits, spans, leakage."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression

from privaudit.corpora.base import Corpus
from privaudit.corpora.synthetic import AGE_BINS, synthetic_reviews
from privaudit.registry import CORPORA

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
# Words that only intentional cues put into a review.
CUE_WORDS = re.compile(
    r"\b(husband|wife|boyfriend|girlfriend|mums?|dads?|woman|bloke|lads|girls|grand\w+|widow\w*"
    r"|retire\w*|pension\w*|uni|student|teenagers?|toddler|baby|kids|flat|housemates"
    r"|forty|forties|fifty|sixty|fifties|seventies|eighties|nineties|thirties|twenties"
    r"|millennial|boomer|Gen Xer|married|mortgage|lowkey|literally|vibes?|splendid|one must say"
    r"|heels|brogues)\b",
    re.IGNORECASE,
)


@pytest.fixture(scope="module")
def timed_default() -> tuple[Corpus, float]:
    start = time.perf_counter()
    corpus = synthetic_reviews()
    return corpus, time.perf_counter() - start


@pytest.fixture(scope="module")
def corpus(timed_default: tuple[Corpus, float]) -> Corpus:
    return timed_default[0]


def attacker_accuracy(corpus: Corpus, attribute: str) -> tuple[float, float]:
    """TF-IDF + logistic regression trained on aux, scored on test; and the majority baseline."""
    vec = TfidfVectorizer(min_df=2, sublinear_tf=True)
    x_aux = vec.fit_transform(corpus.texts("aux"))
    x_test = vec.transform(corpus.texts("test"))
    clf = LogisticRegression(C=10, max_iter=3000).fit(x_aux, corpus.attribute("aux", attribute))
    y_test = np.asarray(corpus.attribute("test", attribute))
    accuracy = float((clf.predict(x_test) == y_test).mean())
    majority = Counter(y_test.tolist()).most_common(1)[0][1] / len(y_test)
    return accuracy, majority


def test_registered(timed_default: tuple[Corpus, float]) -> None:
    # its loading time is a target in benchmarks/test_corpus_loading.py
    assert CORPORA.get("synthetic-reviews") is synthetic_reviews


def test_schema(corpus: Corpus) -> None:
    assert corpus.name == "synthetic-reviews"
    assert corpus.label_names == ["negative", "positive"]
    assert corpus.attribute_names == ["gender", "age_bin"]
    assert corpus.info == {
        "seed": 0,
        "n_docs": 3000,
        "leak_rate": 0.6,
        "generator": "privaudit synthetic-reviews v1",
    }
    assert sorted(corpus.splits) == ["aux", "test", "train"]
    for ds in corpus.splits.values():
        assert ds.column_names == ["text", "label", "attributes", "entities", "author"]
    assert sum(corpus.sizes().values()) == 3000
    genders = corpus.attribute("train", "gender") + corpus.attribute("aux", "gender")
    assert set(genders) == {"F", "M"}
    assert set(corpus.attribute("train", "age_bin")) == set(AGE_BINS)


def test_same_seed_same_bytes_other_seed_differs() -> None:
    a, b = synthetic_reviews(200, seed=5), synthetic_reviews(200, seed=5)
    for split in ("train", "test", "aux"):
        assert a.texts(split) == b.texts(split)
        assert list(a.split(split)["author"]) == list(b.split(split)["author"])
        assert a.entities(split) == b.entities(split)
    assert a.fingerprint() == b.fingerprint()
    c = synthetic_reviews(200, seed=6)
    assert c.texts("train") != a.texts("train")
    assert c.fingerprint() != a.fingerprint()


@pytest.mark.parametrize(
    ("n_docs", "fractions"),
    [(3000, (0.6, 0.2, 0.2)), (1000, (0.5, 0.3, 0.2)), (10, (0.6, 0.2, 0.2))],
)
def test_split_sizes_follow_fractions(n_docs: int, fractions: tuple[float, float, float]) -> None:
    corpus = synthetic_reviews(n_docs, split_fractions=fractions)
    sizes = corpus.sizes()
    assert sum(sizes.values()) == n_docs
    for split, frac in zip(("train", "test", "aux"), fractions, strict=True):
        assert sizes[split] >= 1
        if n_docs >= 1000:  # whole authors (≤ 4 reviews each) move, so allow a few documents
            assert abs(sizes[split] - frac * n_docs) <= 8, sizes


def test_authors_disjoint_and_write_one_to_four(corpus: Corpus) -> None:
    authors = {s: list(corpus.split(s)["author"]) for s in ("train", "test", "aux")}
    assert not set(authors["aux"]) & set(authors["train"])
    assert not set(authors["aux"]) & set(authors["test"])
    assert not set(authors["train"]) & set(authors["test"])
    counts = Counter(a for docs in authors.values() for a in docs)
    assert set(counts.values()) <= {1, 2, 3, 4}
    assert len(set(counts.values())) == 4
    # Attributes are per author: one gender and one age bin each.
    per_author: dict[str, set[tuple[str, str]]] = {}
    for split in authors:
        for author, attrs in zip(authors[split], corpus.split(split)["attributes"], strict=True):
            per_author.setdefault(author, set()).add((attrs["gender"], attrs["age_bin"]))
    assert all(len(v) == 1 for v in per_author.values())


def test_entity_spans_exact(corpus: Corpus) -> None:
    types: Counter[str] = Counter()
    n_entities = []
    for split in ("train", "test", "aux"):
        for text, ents in zip(corpus.texts(split), corpus.entities(split), strict=True):
            n_entities.append(len(ents))
            for e in ents:
                assert text[e["start"] : e["end"]] == e["text"]
                assert e["text"] == e["text"].strip() and e["text"]
                types[e["type"]] += 1
            spans = sorted((e["start"], e["end"]) for e in ents)
            assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert set(types) == {"PERSON", "GPE", "ORG", "DATE"}
    counts = np.asarray(n_entities)
    assert np.mean((counts >= 1) & (counts <= 3)) > 0.7  # most have 1–3
    assert 0.05 < np.mean(counts == 0) < 0.3  # some have none


def test_two_to_five_sentences_and_unique(corpus: Corpus) -> None:
    texts = corpus.texts("train") + corpus.texts("test") + corpus.texts("aux")
    lengths = Counter(len(SENTENCE_END.split(t.strip())) for t in texts)
    assert set(lengths) == {2, 3, 4, 5}
    assert len(set(texts)) == len(texts)
    assert all(t == t.strip() and "  " not in t and t[0].isupper() for t in texts)


def test_labels_balanced_and_learnable_but_not_trivial(corpus: Corpus) -> None:
    for split in ("train", "test", "aux"):
        assert 0.42 < corpus.labels(split).mean() < 0.58
    vec = TfidfVectorizer()
    clf = LogisticRegression(max_iter=2000)
    clf.fit(vec.fit_transform(corpus.texts("train")), corpus.labels("train"))
    accuracy = (clf.predict(vec.transform(corpus.texts("test"))) == corpus.labels("test")).mean()
    assert 0.85 < accuracy < 0.99


def test_attributes_leak_on_default_settings(corpus: Corpus) -> None:
    gender, gender_majority = attacker_accuracy(corpus, "gender")
    assert gender_majority < 0.56
    assert 0.68 <= gender <= 0.90
    assert gender >= gender_majority + 0.15
    age, age_majority = attacker_accuracy(corpus, "age_bin")
    assert age_majority < 0.25
    assert age_majority + 0.15 <= age < 0.85


def test_no_leak_without_cues() -> None:
    corpus = synthetic_reviews(leak_rate=0.0)
    texts = corpus.texts("train") + corpus.texts("test") + corpus.texts("aux")
    assert not [t for t in texts if CUE_WORDS.search(t)]
    gender, _ = attacker_accuracy(corpus, "gender")
    assert gender < 0.62
    age, age_majority = attacker_accuracy(corpus, "age_bin")
    assert age < age_majority + 0.1


def test_leak_rate_scales_cues() -> None:
    def cue_share(rate: float) -> float:
        texts = synthetic_reviews(600, leak_rate=rate).texts("train")
        return float(np.mean([bool(CUE_WORDS.search(t)) for t in texts]))

    low, mid, high = cue_share(0.2), cue_share(0.6), cue_share(1.0)
    assert low < mid < high
    assert high > 0.97  # every leaky review carries at least one cue


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"n_docs": 0}, ValueError, r"n_docs=0 is not allowed: .*\(declared: int >= 10\)"),
        ({"n_docs": 9}, ValueError, r"n_docs=9 is not allowed"),
        ({"n_docs": "100"}, ValueError, r"n_docs='100' is not allowed: .*valid integer"),
        ({"n_docs": 100.0}, ValueError, r"n_docs=100\.0 is not allowed: .*valid integer"),
        ({"n_docs": True}, ValueError, r"n_docs=True is not allowed"),
        ({"nn_docs": 10}, ValueError, r"no parameter 'nn_docs'\. Did you mean 'n_docs'\?"),
        ({"leak_rate": 2}, ValueError, r"leak_rate=2 is not allowed: .*float >= 0 and <= 1"),
        ({"leak_rate": -0.1}, ValueError, r"leak_rate=-0\.1 is not allowed"),
        ({"split_fractions": (0.5, 0.5, 0.5)}, ValueError, r"summing to 1, got \(0\.5, 0\.5"),
        ({"split_fractions": (0.8, 0.2, 0.0)}, ValueError, r"three positive numbers"),
        ({"split_fractions": (0.5, 0.5)}, ValueError, r"three positive numbers"),
        ({"seed": -1}, ValueError, r"seed=-1 is not allowed: .*int >= 0"),
    ],
)
def test_bad_arguments(kwargs: dict, error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        synthetic_reviews(**kwargs)


def test_faker_global_state_untouched() -> None:
    from faker import Faker

    Faker.seed(1234)
    expected = Faker().name()
    Faker.seed(1234)
    synthetic_reviews(20, seed=7)
    assert Faker().name() == expected


def test_imports_stay_light() -> None:
    code = (
        "import sys; from privaudit.corpora.synthetic import synthetic_reviews; "
        "synthetic_reviews(20); "
        "print(sorted(m for m in ('torch', 'transformers', 'spacy') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]"
