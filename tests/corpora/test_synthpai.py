"""The built-in ``synthpai`` corpus: shipped data, attributes, splits by person, background."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privaudit.cli import app
from privaudit.corpora.base import Corpus
from privaudit.corpora.synthpai import (
    AGE_BINS,
    ATTRIBUTE_NAMES,
    EDUCATION_LEVELS,
    _raw,
    attributes_of,
    synthpai,
)
from privaudit.registry import CORPORA

SPLITS = ("train", "test", "aux", "public", "background")


@pytest.fixture(scope="module")
def timed() -> tuple[Corpus, float]:
    start = time.perf_counter()
    corpus = synthpai()
    return corpus, time.perf_counter() - start


@pytest.fixture(scope="module")
def corpus(timed: tuple[Corpus, float]) -> Corpus:
    return timed[0]


def frame(corpus: Corpus, split: str) -> pd.DataFrame:
    return corpus.split(split).to_pandas()[["text", "author", "label"]]


def test_registered_and_shipped(timed: tuple[Corpus, float]) -> None:
    # its loading time is a target in benchmarks/test_corpus_loading.py
    assert CORPORA.get("synthpai") is synthpai
    corpus, _ = timed
    assert tuple(corpus.splits) == SPLITS
    assert sum(corpus.sizes().values()) == 7785  # every comment, each in one split
    assert corpus.info["citation"].startswith("Yukhymenko") and "MIT" in corpus.info["licence"]
    data = Path(__import__("privaudit").__file__).parent / "data" / "synthpai"
    assert {"LICENSE", "README.md"} <= {p.name for p in data.iterdir()}


def test_splits_are_disjoint_by_person(corpus: Corpus) -> None:
    people = {s: set(corpus.split(s)["author"]) for s in ("train", "test", "aux", "public")}
    for a in people:
        for b in people:
            assert a == b or not people[a] & people[b], (a, b)
    # background: test people's other comments and distractors no other split has
    distractors = set(corpus.split("background")["author"]) - people["test"]
    assert distractors and not distractors & set().union(*people.values())


def test_background_never_holds_a_victim_document(corpus: Corpus) -> None:
    test, background = frame(corpus, "test"), frame(corpus, "background")
    victims = set(zip(test["text"], test["author"], strict=True))
    assert not victims & set(zip(background["text"], background["author"], strict=True))
    texts = pd.concat([frame(corpus, s) for s in SPLITS])["text"]
    assert not texts.duplicated().any()  # a comment is in exactly one split
    # every test person with >= 2 comments has some in background and some left as victims
    comments, _ = _raw()
    n = comments["author"].value_counts()
    tested = set(test["author"])
    assert {p for p in tested if n[p] >= 2} <= set(background["author"])
    held = background[background["author"].isin(tested)]["author"].value_counts()
    assert (held < n[held.index]).all()
    share = held.sum() / n[list(tested)].sum()
    assert 0.25 < share < 0.35, share


def test_attributes_present_and_normalised(corpus: Corpus) -> None:
    assert corpus.attribute_names == ATTRIBUTE_NAMES
    for split in SPLITS:
        for name in ATTRIBUTE_NAMES:
            assert all(isinstance(v, str) and v for v in corpus.attribute(split, name))
    everyone = pd.concat(
        [pd.DataFrame(list(corpus.split(s)["attributes"])) for s in SPLITS], ignore_index=True
    )
    assert set(everyone["gender"]) == {"female", "male"}
    assert set(everyone["age_bin"]) == set(AGE_BINS)
    assert set(everyone["education"]) == set(EDUCATION_LEVELS)
    assert "in relationship" not in set(everyone["relationship_status"])
    assert "in a relationship" in set(everyone["relationship_status"])
    assert everyone["region"].nunique() == 6


def test_education_rule_covers_every_profile() -> None:
    _, profiles = _raw()
    levels = attributes_of(profiles)["education"]
    # Only the three documented ambiguous degrees fall outside the levels.
    other = sorted(profiles.loc[levels == "other", "education"])
    assert other == ["Diploma in Gastronomy", "Diploma in Nursing", "Law Degree"]
    raw = profiles["education"].str.lower()
    assert (levels[raw.str.contains("studying towards a bachelor")] == "high school").all()
    assert (levels[raw.str.contains("mba")] == "master").all()


def test_labels_make_a_utility_task(corpus: Corpus) -> None:
    corpus.check_labels()
    for split in ("train", "test"):
        counts = np.bincount(corpus.labels(split), minlength=len(corpus.label_names))
        assert (counts > 0).sum() >= 2 and counts.max() / counts.sum() < 0.5


def test_seeds(corpus: Corpus) -> None:
    same = synthpai(seed=0)
    assert same.fingerprint() == corpus.fingerprint()
    assert same.split("background")["author"] == corpus.split("background")["author"]
    other = synthpai(seed=1)
    assert set(other.split("test")["author"]) != set(corpus.split("test")["author"])
    dropped = synthpai(unmatched="drop")
    assert "other" not in dropped.label_names and dropped.info["dropped_rows"] > 0


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"splits": (0.5, 0.5)}, "five positive numbers (train, test, aux, public, distractors)"),
        ({"splits": (0.4, 0.3, 0.1, 0.1, 0.2)}, "summing to 1"),
        ({"background_share": 1.0}, "background_share=1.0"),
        ({"seed": -1}, "seed=-1"),
        ({"unmatched": "keep"}, "unmatched='keep'"),
        ({"n_docs": 10}, "has no parameter 'n_docs'"),
    ],
)
def test_bad_params_fail_in_one_line(params: dict, says: str) -> None:
    with pytest.raises(ValueError) as err:
        synthpai(**params)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_limits_subset_every_split(corpus: Corpus) -> None:
    limits = {"train": 50, "test": 20, "aux": 10, "public": 5, "background": 30}
    small = corpus.subset(limits, np.random.default_rng(0))
    assert small.sizes() == limits
    assert small.fingerprint() != corpus.fingerprint()


def test_end_to_end_smoke_run_from_the_cli(tmp_path: Path) -> None:
    config = tmp_path / "grid.yaml"
    config.write_text(
        "backbone: tiny-random-bert\n"
        "corpus: {name: synthpai, limits: {train: 200, test: 100, aux: 100}}\n"
        "defenses: [{name: none}, {name: t2t, knob_values: [10]}]\n"
        "attacks: [nn-inversion, attribute-inference]\n"
        "utility: probe\nseeds: [0]\n"
    )
    result = CliRunner().invoke(
        app, ["run", "--config", str(config), "--out", str(tmp_path / "out"), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    (run_dir,) = list((tmp_path / "out").iterdir())
    rows = pd.read_csv(run_dir / "results.csv")
    attacks = set(rows["attack"].astype(str))
    for name in ATTRIBUTE_NAMES:
        assert any(name in a for a in attacks if a.startswith("attribute-inference")), attacks
