"""`privaudit tab-score`: refusals before any work (issue 49, items 3-5), a defense's own
spans, and one table for several anonymizers (issue 48)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from privaudit.cli import app
from tests.corpora.test_tab import fixture_docs

PLUGINS = '''
import re
from pathlib import Path

import numpy as np
from privaudit.api import Release

MARK = Path(__file__).with_suffix(".ran")


class Digits:
    """Masks digits; notes each call's size (the probe is one text)."""
    name = "digits"

    def __init__(self, level=1):
        self.level = level

    def privatize(self, texts, rng):
        with MARK.open("a") as f:
            f.write(f"{len(texts)}\\n")
        return [re.sub(r"\\d+", "#", t) for t in texts]


class Nothing:
    name = "nothing"

    def privatize(self, texts, rng):
        return list(texts)


class Spans:
    """Reports its spans: the first word of each text, replaced by X."""
    name = "spans"

    def privatize(self, texts, rng):
        spans = [[(0, len(t.split()[0]))] for t in texts]
        out = ["X" + t[len(t.split()[0]):] for t in texts]
        return Release("text", texts=out, audit={"masked_spans": spans})


class Vectors:
    name = "vectors"

    def privatize(self, texts, rng):
        return Release("pooled_vectors", vectors=[np.zeros(3) for _ in texts])
'''


@pytest.fixture
def plugins(tmp_path: Path) -> Path:
    path = tmp_path / "plugins.py"
    path.write_text(PLUGINS)
    return path


@pytest.fixture
def tab_file(tmp_path: Path) -> Path:
    path = tmp_path / "tab.json"
    path.write_text(json.dumps(fixture_docs()))
    return path


def _run(*args: str) -> Any:
    return CliRunner().invoke(app, ["tab-score", *args])


def test_json_into_a_file_in_the_way_is_refused_before_any_work(
    tab_file: Path, plugins: Path, tmp_path: Path
) -> None:
    """Issue 49 item 3: the path was checked only after scoring; now before the defense
    runs (it never ran: no marker file)."""
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    result = _run(
        "--data",
        str(tab_file),
        "--defense",
        f"{plugins}:Digits",
        "--json",
        str(blocker / "sub" / "x.json"),
    )
    assert result.exit_code == 2
    assert "--json" in result.output and "blocker is a file" in result.output
    assert not plugins.with_suffix(".ran").exists()


@pytest.mark.slow  # scores: tags the fixture with the spaCy pipeline
def test_json_into_a_missing_folder_is_created(
    tab_file: Path, plugins: Path, tmp_path: Path
) -> None:
    out = tmp_path / "missing" / "sub" / "x.json"
    result = _run(
        "--data",
        str(tab_file),
        "--defense",
        f"{plugins}:Digits",
        "--split",
        "all",
        "--json",
        str(out),
    )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["scores"]["n_documents"] == 3


def test_an_empty_tab_file_says_it_has_no_documents(tmp_path: Path, plugins: Path) -> None:
    """Issue 49 item 4: it said meta.countries has 0 distinct values."""
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    result = _run("--data", str(empty), "--defense", f"{plugins}:Digits")
    assert result.exit_code == 2
    assert "has no documents" in result.output and "label" not in result.output


@pytest.mark.slow
def test_one_country_and_no_train_split_need_no_label(tmp_path: Path, plugins: Path) -> None:
    """Issue 49 item 5: a single country was refused ("a utility label needs at least two"),
    and every run warned that no document maps to the train split."""
    docs = [
        {**d, "meta": {**d["meta"], "countries": "NOR"}, "dataset_type": "test"}
        for d in fixture_docs()
    ]
    path = tmp_path / "one.json"
    path.write_text(json.dumps(docs))
    result = _run("--data", str(path), "--defense", f"{plugins}:Digits")
    assert result.exit_code == 0, result.output
    assert "3 test documents" in result.output
    assert "label" not in result.output and "train split" not in result.output


def test_a_bad_defense_is_refused_before_the_corpus_is_read(tmp_path: Path) -> None:
    """Issue 49 item 5: a wrong name was reported after the corpus was read."""
    result = _run("--data", str(tmp_path / "absent.json"), "--defense", "hass")
    assert result.exit_code == 2
    assert "hass" in result.output and "No such TAB file" not in result.output


def test_a_vector_defense_is_refused_before_privatizing(tmp_path: Path, plugins: Path) -> None:
    """Issue 49 item 5: dpnr was refused only after the whole corpus was privatized; a
    one-text probe now refuses a non-text release before the corpus is even read."""
    result = _run("--data", str(tmp_path / "absent.json"), "--defense", f"{plugins}:Vectors")
    assert result.exit_code == 2
    assert "releases pooled_vectors, not text" in result.output
    assert "No such TAB file" not in result.output


@pytest.mark.slow
def test_precision_over_nothing_is_undefined(tab_file: Path, plugins: Path) -> None:
    """Smaller thing of issue 49: a precision over no masked token printed 0.000."""
    result = _run("--data", str(tab_file), "--defense", f"{plugins}:Nothing", "--split", "all")
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "token precision" in x)
    assert line.split()[-2:] == ["undefined", "0"]


@pytest.mark.slow
def test_several_anonymizers_make_one_table(tab_file: Path, plugins: Path, tmp_path: Path) -> None:
    masks = tmp_path / "manual.json"
    masks.write_text(json.dumps({"001-A": [[3, 13], [17, 21]]}))
    table = tmp_path / "out" / "tab.md"
    out = tmp_path / "out" / "tab.json"
    result = _run(
        "--data",
        str(tab_file),
        "--split",
        "all",
        "--defense",
        f"{plugins}:Digits",
        "--defense",
        f"{plugins}:Spans",
        "--masks",
        str(masks),
        "--table",
        str(table),
        "--json",
        str(out),
    )
    assert result.exit_code == 0, result.output
    lines = table.read_text().splitlines()
    assert lines[0].startswith("| anonymizer | ER_di | ER_qi | token recall | R PERSON |")
    assert [r.split(" | ")[0].lstrip("| ") for r in lines[2:]] == [
        f"{plugins}:Digits",
        f"{plugins}:Spans",
        "manual",
    ]
    saved = json.loads(out.read_text())["anonymizers"]
    # the plugin that reports its spans is scored on them; the others as they are
    assert [a["scores"]["masks"] for a in saved] == ["aligned", "reported", "reported"]
    assert saved[2]["scores"]["n_documents"] == 1  # the documents its file names


def test_entries_are_parsed(tmp_path: Path) -> None:
    from privaudit.cli.tab import TAB_PRESET, parse_entry

    entry = parse_entry("has@4,identifiers=true", None, {"mode": "label"})
    assert (entry.defense, entry.level, entry.params) == (
        "has",
        4.0,
        {"mode": "label", "identifiers": True},
    )
    assert entry.label == "has@4,identifiers=True"
    assert "presidio@1" in TAB_PRESET
    with pytest.raises(ValueError, match="level after @ must be a number"):
        parse_entry("has@high", None, {})
    bad = _run("--data", str(tmp_path / "x.json"), "--preset", "paper")
    assert bad.exit_code == 2 and "--preset must be tab" in bad.output
