"""Bring-your-own corpora: file formats, column mapping, splits, errors, and the hub loader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pandas as pd
import pytest

from privaudit.corpora.base import Corpus
from privaudit.corpora.files import load_file, load_hf, parse_mapping
from privaudit.registry import CORPORA


def reviews_frame(n: int = 60) -> pd.DataFrame:
    """A small user corpus with its own column names; authors write three reviews each."""
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "review": [f"Review number {i} about thing {i % 7}." for i in range(n)],
            "stars": rng.choice([1, 2, 5], size=n),
            "gender": ["F" if (i // 3) % 2 else "M" for i in range(n)],
            "birth_year": [1950 + (i // 3) % 40 for i in range(n)],
            "user": [f"u{i // 3}" for i in range(n)],
        }
    )


def all_rows(corpus: Corpus) -> list[dict[str, Any]]:
    return [row for ds in corpus.splits.values() for row in ds]


def check_round_trip(corpus: Corpus, df: pd.DataFrame) -> None:
    assert sum(corpus.sizes().values()) == len(df)
    assert corpus.label_names == ["1", "2", "5"]
    assert corpus.attribute_names == ["gender", "birth_year"]
    assert corpus.info["dropped_rows"] == 0
    by_text = {row["review"]: row for row in df.to_dict("records")}
    for row in all_rows(corpus):
        src = by_text[row["text"]]
        assert corpus.label_names[row["label"]] == str(src["stars"])
        assert row["attributes"] == {"gender": src["gender"], "birth_year": str(src["birth_year"])}
        assert row["author"] == src["user"]
    authors = {s: set(ds["author"]) for s, ds in corpus.splits.items()}
    assert not authors["aux"] & (authors["train"] | authors["test"])
    assert not authors["train"] & authors["test"]


MAPPING = {"text": "review", "label": "stars", "attributes": ["gender", "birth_year"]}


@pytest.mark.parametrize("suffix", ["csv", "tsv", "jsonl", "json", "parquet", "csv.gz"])
def test_round_trip_formats(tmp_path: Path, suffix: str) -> None:
    df = reviews_frame()
    path = tmp_path / f"reviews.{suffix}"
    if suffix.startswith("csv"):
        df.to_csv(path, index=False)
    elif suffix == "tsv":
        df.to_csv(path, index=False, sep="\t")
    elif suffix == "jsonl":
        df.to_json(path, orient="records", lines=True)
    elif suffix == "json":
        df.to_json(path, orient="records")
    else:
        df.to_parquet(path)
    corpus = load_file(path, **MAPPING, author="user")
    check_round_trip(corpus, df)
    assert corpus.name == "reviews"
    assert corpus.info["split"] == "random by author"


def test_headerless_csv_by_position(tmp_path: Path) -> None:
    df = reviews_frame()
    path = tmp_path / "tpuk.csv"
    df.to_csv(path, index=False, header=False)
    corpus = load_file(
        path, text=0, label=1, attributes={"gender": 2, "birth_year": 3}, author=4, header=False
    )
    check_round_trip(corpus, df)
    # Positions without names become colN attributes; digit strings count as positions too.
    plain = load_file(path, text="0", label=1, attributes=[2], header=False)
    assert plain.attribute_names == ["col2"]
    assert set(plain.attribute("train", "col2")) == {"F", "M"}


def test_fmt_overrides_extension(tmp_path: Path) -> None:
    path = tmp_path / "reviews.txt"
    reviews_frame().to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"Cannot tell the format.*'\.txt'.*fmt="):
        load_file(path, **MAPPING)
    assert sum(load_file(path, **MAPPING, fmt="csv").sizes().values()) == 60
    with pytest.raises(ValueError, match="Unknown format 'xlsx'"):
        load_file(path, **MAPPING, fmt="xlsx")


def test_entities_column_json_and_lists(tmp_path: Path) -> None:
    df = pd.DataFrame(
        {
            "text": ["Met Anna in Leeds.", "Nothing here.", "Bought it from Acme."],
            "label": ["pos", "neg", "pos"],
            "ents": [
                [
                    {"start": 4, "end": 8, "type": "PERSON"},
                    {"start": 12, "end": 17, "label": "GPE"},
                ],
                [],
                [[15, 19, "ORG"]],
            ],
        }
    )
    jsonl = tmp_path / "ents.jsonl"
    df.to_json(jsonl, orient="records", lines=True)
    csv = tmp_path / "ents.csv"
    df.assign(ents=df["ents"].map(json.dumps)).to_csv(csv, index=False)
    for path in (jsonl, csv):
        corpus = load_file(path, entities="ents", splits=(0.34, 0.33, 0.33))
        assert corpus.label_names == ["neg", "pos"]
        ents = {row["text"]: row["entities"] for row in all_rows(corpus)}
        assert ents["Met Anna in Leeds."] == [
            {"start": 4, "end": 8, "type": "PERSON", "text": "Anna"},
            {"start": 12, "end": 17, "type": "GPE", "text": "Leeds"},
        ]
        assert ents["Nothing here."] == []
        assert ents["Bought it from Acme."][0]["text"] == "Acme"


def test_entity_outside_text_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    pd.DataFrame(
        {"text": ["short"], "label": [1], "ents": [[{"start": 2, "end": 40, "type": "ORG"}]]}
    ).to_json(path, orient="records", lines=True)
    with pytest.raises(ValueError, match=r"Row 0: entity span \[2, 40\) lies outside"):
        load_file(path, entities="ents")


def test_entity_text_must_match_span(tmp_path: Path) -> None:
    path = tmp_path / "off_by_one.jsonl"
    ents = [[{"start": 0, "end": 3, "type": "PERSON", "text": "Anna"}]]
    pd.DataFrame({"text": ["Anna came."], "label": [1], "ents": ents}).to_json(
        path, orient="records", lines=True
    )
    with pytest.raises(ValueError, match=r"entity text 'Anna' does not match .* reads 'Ann'"):
        load_file(path, entities="ents")


def test_missing_columns_listed_with_mapping_hint(tmp_path: Path) -> None:
    path = tmp_path / "reviews.csv"
    reviews_frame().to_csv(path, index=False)
    with pytest.raises(ValueError) as info:
        load_file(path, attributes=["gender", "age"])
    message = str(info.value)
    assert "text='text'" in message and "label='label'" in message
    assert "attributes[age]='age'" in message and "attributes[gender]" not in message
    for column in ("review", "stars", "gender", "birth_year", "user"):
        assert column in message
    assert (
        "Available columns" in message and "--map" in message and "load_file(path, text=" in message
    )


def test_missing_position_in_headerless_file(tmp_path: Path) -> None:
    path = tmp_path / "tpuk.csv"
    reviews_frame().to_csv(path, index=False, header=False)
    with pytest.raises(ValueError, match=r"label=9.*0-based positions 0\.\.4"):
        load_file(path, text=0, label=9, header=False)


def test_empty_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match=r"empty \(0 bytes\)"):
        load_file(empty)
    header_only = tmp_path / "header.csv"
    header_only.write_text("text,label\n")
    with pytest.raises(ValueError, match="has a header but no rows"):
        load_file(header_only)
    blank = tmp_path / "blank.csv"
    blank.write_text("\n\n")
    with pytest.raises(ValueError, match="is empty"):
        load_file(blank)
    with pytest.raises(FileNotFoundError, match="No such corpus file"):
        load_file(tmp_path / "absent.csv")


def test_empty_and_nan_texts_dropped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "gaps.csv"
    path.write_text(
        "text,label\n"
        "good one,1\n"
        ",0\n"  # empty text
        '"   ",1\n'  # whitespace only
        "NA,0\n"  # the word NA is text, not missing
        "no label here,\n"  # missing label
        "bad one,0\n"
    )
    corpus = load_file(path, splits=(0.5, 0.25, 0.25))
    assert sorted(t for ds in corpus.splits.values() for t in ds["text"]) == [
        "NA",
        "bad one",
        "good one",
    ]
    assert corpus.info["dropped_rows"] == 3
    assert corpus.info["dropped_empty_text"] == 2
    assert corpus.info["dropped_missing_label"] == 1
    all_empty = tmp_path / "all_empty.csv"
    all_empty.write_text("text,label\n,1\n,0\n")
    with pytest.raises(ValueError, match="no usable rows"):
        load_file(all_empty)


def test_split_column(tmp_path: Path) -> None:
    df = reviews_frame(12).assign(part=["train", "dev", "validation", "TEST", "aux", "train"] * 2)
    path = tmp_path / "split.parquet"
    df.to_parquet(path)
    corpus = load_file(path, **MAPPING, split_column="part")
    assert corpus.sizes() == {"train": 4, "test": 6, "aux": 2}
    assert corpus.info["split"] == "column 'part'"
    no_aux = df[df["part"] != "aux"]
    no_aux.to_parquet(path)
    assert sorted(load_file(path, **MAPPING, split_column="part").splits) == ["test", "train"]
    df.assign(part=["train", "holdout"] * 6).to_parquet(path)
    with pytest.raises(ValueError, match=r"unknown split name\(s\) \['holdout'\]"):
        load_file(path, **MAPPING, split_column="part")


def test_split_column_warns_on_shared_authors(tmp_path: Path) -> None:
    path = tmp_path / "shared.csv"
    df = reviews_frame(6).assign(part=["train", "test", "aux"] * 2)  # u0 and u1 straddle splits
    df.to_csv(path, index=False)
    with pytest.warns(UserWarning, match="2 author"):
        corpus = load_file(path, **MAPPING, author="user", split_column="part")
    assert corpus.info["authors_across_splits"] == 2


def test_random_split_seeded_and_sized(tmp_path: Path) -> None:
    path = tmp_path / "docs.csv"
    pd.DataFrame(
        {"text": [f"doc {i}" for i in range(500)], "label": [i % 2 for i in range(500)]}
    ).to_csv(path, index=False)
    a, b = load_file(path, seed=3), load_file(path, seed=3)
    assert a.texts("aux") == b.texts("aux")
    assert load_file(path, seed=4).texts("aux") != a.texts("aux")
    assert a.sizes() == {"train": 300, "test": 100, "aux": 100}
    assert a.info["split"] == "random by document"
    assert len(set(a.split("train")["author"])) == 300  # each document its own author
    custom = load_file(path, splits=[0.5, 0.3, 0.2])
    assert custom.sizes() == {"train": 250, "test": 150, "aux": 100}
    with pytest.raises(ValueError, match="summing to 1"):
        load_file(path, splits=(0.5, 0.5, 0.5))


def test_registered() -> None:
    assert CORPORA.get("file") is load_file
    assert CORPORA.get("hf") is load_hf


# ---- parse_mapping


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            "text=review,label=stars,attributes=gender|age",
            {"text": "review", "label": "stars", "attributes": ["gender", "age"]},
        ),
        ("text=0, label=1 ,header=false", {"text": 0, "label": 1, "header": False}),
        ("attributes=gender", {"attributes": ["gender"]}),
        ("attributes=2|3", {"attributes": [2, 3]}),
        ("attributes=gender:2|age_bin:3", {"attributes": {"gender": 2, "age_bin": 3}}),
        ("splits=0.7|0.2|0.1,seed=5", {"splits": (0.7, 0.2, 0.1), "seed": 5}),
        (
            "split_map=validation:test|train:train",
            {"split_map": {"validation": "test", "train": "train"}},
        ),
        ("text=My Review Column", {"text": "My Review Column"}),
    ],
)
def test_parse_mapping(spec: str, expected: dict[str, Any]) -> None:
    assert parse_mapping(spec) == expected


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        ("", "Empty column mapping"),
        ("   ", "Empty column mapping"),
        ("text", r"Entry 'text' .* has no '='"),
        ("text=", "Key 'text' has no value"),
        ("=review", "Bad key ''"),
        ("my key=review", "Bad key 'my key'"),
        ("text=a,text=b", "Key 'text' appears twice"),
        ("text=review label=stars", "contains '='; separate entries with commas"),
        ("text=review,", "Empty entry"),
        ("text=review,,label=stars", "Empty entry"),
        ("attributes=a||b", "Empty list item"),
        ("attributes=gender:", "Bad item 'gender:'"),
    ],
)
def test_parse_mapping_errors(spec: str, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        parse_mapping(spec)


def test_parse_mapping_feeds_load_file(tmp_path: Path) -> None:
    path = tmp_path / "tpuk.csv"
    df = reviews_frame()
    df.to_csv(path, index=False, header=False)
    kwargs = parse_mapping("text=0,label=1,attributes=gender:2|birth_year:3,author=4,header=false")
    check_round_trip(load_file(path, **kwargs), df)
    with pytest.raises(TypeError, match="must be a string"):
        parse_mapping(None)  # type: ignore[arg-type]


# ---- load_hf (never touches the network: datasets.load_dataset is replaced)


@pytest.mark.parametrize(
    "exc",
    [
        ConnectionError("Couldn't reach 'imdb' on the Hub (ConnectionError)"),
        TimeoutError("read timed out"),
        OSError("We have no connection or you passed an invalid path"),
    ],
)
def test_load_hf_wraps_unreachable_hub(monkeypatch: pytest.MonkeyPatch, exc: Exception) -> None:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise exc

    monkeypatch.setattr(datasets, "load_dataset", fail)
    with pytest.raises(ValueError, match="Hugging Face Hub is unreachable") as info:
        load_hf("imdb")
    assert "load_file" in str(info.value) and "'imdb'" in str(info.value)
    assert info.value.__cause__ is exc


def test_load_hf_wraps_other_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> None:
        raise ValueError("BuilderConfig 'nope' not found")

    monkeypatch.setattr(datasets, "load_dataset", fail)
    with pytest.raises(ValueError, match=r"Cannot load 'imdb' \(config 'nope'\).*Check the name"):
        load_hf("imdb", config="nope")


def test_load_hf_builds_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    features = datasets.Features(
        {
            "sentence": datasets.Value("string"),
            "sentiment": datasets.ClassLabel(names=["neg", "pos"]),
            "dialect": datasets.Value("string"),
        }
    )

    def split(n: int, offset: int) -> datasets.Dataset:
        return datasets.Dataset.from_dict(
            {
                "sentence": [f"sentence {offset + i}" for i in range(n)],
                "sentiment": [i % 2 for i in range(n)],
                "dialect": ["UK" if i % 3 else "US" for i in range(n)],
            },
            features=features,
        )

    calls = []

    def fake_load(name: str, config: str | None = None, **kwargs: Any) -> datasets.DatasetDict:
        calls.append((name, config))
        return datasets.DatasetDict({"train": split(80, 0), "validation": split(20, 1000)})

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    corpus = load_hf("someone/reviews", text="sentence", label="sentiment", attributes=["dialect"])
    assert calls == [("someone/reviews", None)]
    assert corpus.sizes() == {"train": 60, "test": 20, "aux": 20}
    assert corpus.label_names == ["neg", "pos"]
    assert set(corpus.attribute("aux", "dialect")) == {"UK", "US"}
    assert corpus.texts("test")[0] == "sentence 1000"
    assert not set(corpus.texts("aux")) & set(corpus.texts("train"))
    explicit = load_hf(
        "someone/reviews",
        text="sentence",
        label="sentiment",
        split_map={"train": "test", "validation": "train"},
    )
    assert explicit.sizes() == {"train": 15, "test": 80, "aux": 5}  # aux carved from train
    with pytest.raises(ValueError, match="the test split would be empty"):
        load_hf("someone/reviews", text="sentence", label="sentiment", split_map={"train": "train"})
    with pytest.raises(ValueError, match=r"hub splits \['test'\] do not exist"):
        load_hf("someone/reviews", text="sentence", label="sentiment", split_map={"test": "test"})
