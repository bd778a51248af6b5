"""Issue 15, bringing real data: header-less files, derived labels and row filters, dropped rows
said on the terminal, in run.json and the report, calibrate and --map on a file corpus, and a
one-class label column caught before any work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from privaudit.corpora.files import load_file, load_hf, parse_mapping
from privaudit.params import ParamError
from tests.conftest import TINY

runner = CliRunner()


def reviews(n: int = 60) -> pd.DataFrame:
    """Star-rated reviews with a location and a gender, as a real review corpus has them."""
    rng = np.random.default_rng(0)
    stars = rng.choice([1, 2, 3, 4, 5], size=n)
    return pd.DataFrame(
        {
            "review": [
                f"{'great lovely' if s >= 4 else 'awful rude'} place number {i}"
                for i, s in enumerate(stars)
            ],
            "stars": stars,
            "location": ["united_kingdom" if i % 3 else "united_states" for i in range(n)],
            "gender": ["F" if i % 2 else "M" for i in range(n)],
        }
    )


def grid(tmp_path: Path, params: dict[str, Any], **extra: Any) -> Path:
    path = tmp_path / "grid.yaml"
    data = {
        "name": "real",
        "backbone": TINY,
        "corpus": {"name": "file", "params": params},
        "defenses": [{"name": "none"}],
        "attacks": ["nn-inversion"],
        **extra,
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_headerless_csv_with_positions_keeps_its_first_row(tmp_path: Path) -> None:
    df = reviews()
    path = tmp_path / "tpuk.csv"
    df.to_csv(path, index=False, header=False)
    with pytest.warns(UserWarning, match=r"read without a header row; set header: true"):
        corpus = load_file(path, text=0, label=1, attributes={"location": 2})
    assert sum(corpus.sizes().values()) == len(df)  # the first review is a document
    assert corpus.label_names == ["1", "2", "3", "4", "5"]
    assert corpus.info["header"] is False and corpus.info["dropped_rows"] == 0
    texts = {t for ds in corpus.splits.values() for t in ds["text"]}
    assert df["review"][0] in texts
    # A real header stays a header, whether columns are named or given as positions.
    named = tmp_path / "named.csv"
    df.to_csv(named, index=False)
    by_position = load_file(named, text=0, label=1)
    assert sum(by_position.sizes().values()) == len(df) and by_position.info["header"] is True
    # pandas' default names 0..n-1 are a header too; header=True/False are taken as given.
    default_names = tmp_path / "default.csv"
    df.T.reset_index(drop=True).T.to_csv(default_names, index=False)
    assert sum(load_file(default_names, text=0, label=1).sizes().values()) == len(df)
    assert sum(load_file(path, text=0, label=1, header=True).sizes().values()) == len(df) - 1


def test_label_map_threshold_and_where_drop_and_count(tmp_path: Path) -> None:
    df = reviews()
    path = tmp_path / "reviews.csv"
    df.to_csv(path, index=False)
    stars = {1: "negative", 2: "negative", 4: "positive", 5: "positive"}
    with pytest.warns(UserWarning, match=r"reviews.csv: dropped \d+ of 60 rows: \d+ not matching"):
        corpus = load_file(
            path,
            text="review",
            label="stars",
            label_map=stars,
            where={"location": "united_kingdom"},
        )
    uk = df[df["location"] == "united_kingdom"]
    kept = uk[uk["stars"] != 3]
    assert corpus.label_names == ["negative", "positive"]
    assert sum(corpus.sizes().values()) == len(kept)
    assert corpus.info["dropped"] == {
        "not matching where location": len(df) - len(uk),
        "with a label not in label_map": len(uk) - len(kept),
    }
    assert corpus.info["rows_read"] == 60 and corpus.info["dropped_rows"] == 60 - len(kept)
    assert corpus.dropped()["dropped_rows"] == 60 - len(kept)
    # A list of values; string keys (from --map) match an integer column.
    both = load_file(
        path,
        text="review",
        label="stars",
        label_map={"5": "top", "1": "bottom"},
        where={"location": ["united_kingdom", "united_states"]},
    )
    assert both.label_names == ["bottom", "top"]
    assert sum(both.sizes().values()) == int(df["stars"].isin([1, 5]).sum())
    binary = load_file(path, text="review", label="stars", label_threshold=4)
    assert binary.label_names == ["<4", ">=4"] and sum(binary.sizes().values()) == 60
    with pytest.raises(ValueError, match="give label_map or label_threshold, not both"):
        load_file(path, text="review", label="stars", label_map=stars, label_threshold=4)
    with pytest.raises(ValueError, match=r"label_threshold=4 needs numbers in label column 'gen"):
        load_file(path, text="review", label="gender", label_threshold=4)
    with pytest.raises(ValueError, match=r"keeps no rows; column 'location' holds \['united_k"):
        load_file(path, text="review", label="stars", where={"location": "mars"})
    with pytest.raises(ValueError, match=r"column\(s\) not found for where\[loc\]"):
        load_file(path, text="review", label="stars", where={"loc": "uk"})
    # Types are declared: a bad value fails at the call, one line naming the field.
    with pytest.raises(ParamError, match=r"^load_file parameter where=\{'location': \{"):
        load_file(path, where={"location": {"nested": 1}})
    with pytest.raises(ParamError, match="parameter label_threshold='high'"):
        load_file(path, label_threshold="high")


def test_parse_mapping_label_map_and_where() -> None:
    got = parse_mapping("label_map=1:neg|2:neg|5:pos,where=location:uk|location:ie|year:2020")
    assert got == {
        "label_map": {"1": "neg", "2": "neg", "5": "pos"},
        "where": {"location": ["uk", "ie"], "year": 2020},
    }
    assert parse_mapping("where=2:uk,label_threshold=4") == {
        "where": {2: "uk"},  # a position, as for the other column keys
        "label_threshold": 4,
    }


def test_load_hf_label_map_by_class_name_and_where(monkeypatch: pytest.MonkeyPatch) -> None:
    features = datasets.Features(
        {
            "text": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["1 star", "2 stars", "3 stars"]),
            "region": datasets.Value("string"),
        }
    )

    def fake_load(name: str, config: str | None = None, **kwargs: Any) -> datasets.DatasetDict:
        def split(n: int) -> datasets.Dataset:
            return datasets.Dataset.from_dict(
                {
                    "text": [f"doc {i}" for i in range(n)],
                    "label": [i % 3 for i in range(n)],
                    "region": ["uk" if i % 2 else "us" for i in range(n)],
                },
                features=features,
            )

        return datasets.DatasetDict({"train": split(60), "test": split(30)})

    monkeypatch.setattr(datasets, "load_dataset", fake_load)
    with pytest.warns(UserWarning, match="dropped"):
        corpus = load_hf(
            "someone/stars", label_map={"1 star": "neg", 2: "pos"}, where={"region": "uk"}
        )
    assert corpus.label_names == ["neg", "pos"]
    assert corpus.info["dropped"]["not matching where region"] == 45
    assert corpus.info["dropped"]["with a label not in label_map"] == 15  # "2 stars"


def test_dropped_rows_said_on_terminal_in_run_json_and_report(tmp_path: Path) -> None:
    from privaudit.cli import app

    df = reviews(80)
    df.loc[[3, 7], "review"] = ""
    path = tmp_path / "reviews.csv"
    df.to_csv(path, index=False)
    config = grid(
        tmp_path,
        {
            "path": str(path),
            "text": "review",
            "label": "stars",
            "label_map": {1: "neg", 2: "neg", 4: "pos", 5: "pos"},
        },
    )
    run_dir = tmp_path / "run"
    result = runner.invoke(
        app, ["run", "--config", str(config), "--run-dir", str(run_dir), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    warning = [line for line in result.output.splitlines() if line.startswith("Warning:")]
    assert len(warning) == 1 and "reviews.csv: dropped" in warning[0], result.output
    assert "2 with an empty text" in warning[0] and "with a label not in label_map" in warning[0]
    meta = json.loads((run_dir / "run.json").read_text())
    dropped = meta["corpus_dropped"]
    assert dropped["rows_read"] == 80 and dropped["dropped"]["with an empty text"] == 2
    report = (run_dir / "report.html").read_text()
    assert f"dropped {dropped['dropped_rows']} of 80 rows: 2 with an empty text" in report


def test_one_class_labels_fail_before_any_work(tmp_path: Path) -> None:
    from privaudit.cli import app

    path = tmp_path / "one.csv"
    reviews().assign(stars=5).to_csv(path, index=False)
    config = grid(tmp_path, {"path": str(path), "text": "review", "label": "stars"})
    run_dir = tmp_path / "run"
    result = runner.invoke(app, ["run", "--config", str(config), "--run-dir", str(run_dir)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "label column 'stars' has a single class ('5')" in lines[0]
    assert "label_map or label_threshold" in lines[0]
    assert not run_dir.exists()
    # Two classes overall, but the test split (a split column) has only one.
    split = tmp_path / "split.csv"
    frame = reviews()
    part = np.array(["train", "test", "aux"] * 20)
    frame = frame.assign(part=part, stars=np.where(part == "test", 5, frame["stars"]))
    frame.to_csv(split, index=False)
    config = grid(
        tmp_path, {"path": str(split), "text": "review", "label": "stars", "split_column": "part"}
    )
    result = runner.invoke(app, ["run", "--config", str(config), "--run-dir", str(run_dir)])
    assert result.exit_code == 2 and not run_dir.exists(), result.output
    assert (
        "the test split has a single class ('5' for all 20 documents) in label column "
        "'stars'" in result.output
    )
    # ... or the train split, after the grid's limits.
    frame.assign(
        part=np.where(part == "train", "test", np.where(part == "test", "train", part))
    ).to_csv(split, index=False)
    result = runner.invoke(app, ["run", "--config", str(config), "--run-dir", str(run_dir)])
    assert result.exit_code == 2 and "the train split has a single class" in result.output


def test_calibrate_takes_a_grid_corpus_spec(tmp_path: Path) -> None:
    from privaudit.cli import app

    path = tmp_path / "reviews.csv"
    reviews().to_csv(path, index=False)
    base = ["calibrate", "--defense", "t2t", "--values", "10,100", "--n-docs", "20"]
    missing = runner.invoke(app, [*base, "--corpus", "file"])
    assert missing.exit_code == 2
    lines = missing.output.strip().splitlines()
    assert len(lines) == 1 and "load_file() needs the parameter 'path'" in lines[0]
    assert "--map" in lines[0] and "--config" in lines[0]
    mapped = runner.invoke(
        app,
        [
            *base,
            "--corpus",
            "file",
            "--backbone",
            TINY,
            "--map",
            f"path={path},text=review,label=stars",
        ],
    )
    assert mapped.exit_code == 0, mapped.output
    assert "(20 docs)" in mapped.output
    config = grid(tmp_path, {"path": str(path), "text": "review", "label": "stars"})
    from_grid = runner.invoke(app, [*base, "--config", str(config)])
    assert from_grid.exit_code == 0 and "(20 docs)" in from_grid.output, from_grid.output
    where = 'where={"location": "united_states"}'
    filtered = runner.invoke(
        app, [*base, "--config", str(config), "--n-docs", "500", "--corpus-param", where]
    )
    assert filtered.exit_code == 0, filtered.output
    assert "Warning:" in filtered.output and "40 not matching where location" in filtered.output
    bad = runner.invoke(app, [*base, "--corpus-param", "n_docs"])
    assert bad.exit_code == 2 and "--corpus-param expects key=value" in bad.output


def test_map_sets_corpus_params_on_run_and_audit(tmp_path: Path) -> None:
    from privaudit.cli import app

    path = tmp_path / "reviews.csv"
    reviews().to_csv(path, index=False)
    config = grid(tmp_path, {"path": str(path)})  # the file has no 'text'/'label' columns
    args = ["run", "--config", str(config), "--run-dir", str(tmp_path / "run"), "--no-progress"]
    unmapped = runner.invoke(app, args)
    assert unmapped.exit_code == 2 and "--map text=<column>,label=<column>" in unmapped.output
    mapped = runner.invoke(app, [*args, "--map", "text=review,label=stars,label_threshold=4"])
    assert mapped.exit_code == 0, mapped.output
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["corpus"]["params"] == {
        "path": str(path),
        "text": "review",
        "label": "stars",
        "label_threshold": 4,
    }
    bad = runner.invoke(app, [*args, "--map", "text"])
    assert bad.exit_code == 2 and bad.output.startswith("Error: --map: Entry 'text'")
    resumed = runner.invoke(app, ["run", "--resume", str(tmp_path / "run"), "--map", "seed=1"])
    assert resumed.exit_code == 2 and "drop --config/--run-dir/--map" in resumed.output
    audit = runner.invoke(
        app,
        [
            "audit",
            "examples/plugins/mask_words.py:MaskWords",
            "--knob",
            "p=0.5",
            "--preset",
            "smoke",
            "--map",
            "n_doc=90",
            "--run-dir",
            str(tmp_path / "audit"),
        ],
    )
    assert audit.exit_code == 2, audit.output
    assert "corpus.params: synthetic_reviews has no parameter 'n_doc'" in audit.output
