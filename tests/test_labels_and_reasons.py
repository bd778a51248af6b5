"""Issue 24 (second reliability pass), items 1, 2, 5, 6, 10 and 11: labels are identities,
failure reasons hold no corpus text, `audit` exits as `run` does, a plain class in a run config
is wrapped, `calibrate` says when a knob has no replacement rate, and the minor messages.

New symbols are imported inside the tests, so that each test fails on the old code by what it
checks, not by an import error."""

from __future__ import annotations

import html
import json
from typing import ClassVar

import pandas as pd
import pytest
from typer.testing import CliRunner

from privaudit.api import Defense
from privaudit.audit.config import PRESETS, load_config
from privaudit.cli import app
from tests.conftest import refused, write_grid

runner = CliRunner()
SMOKE = PRESETS["smoke"]
#: What the quoting plugins were given first (the in-process executor runs them here).
QUOTED: list[str] = []


# -- item 1: labels are identities ------------------------------------------------------------


def test_a_label_shared_by_two_entries_or_none_on_a_defense_isrefused(tmp_path) -> None:
    none = SMOKE | {
        "defenses": [{"name": "none"}, {"name": "t2t", "label": "none", "knob_values": [10]}]
    }
    assert refused(none) == (
        "Invalid grid config: defenses.1 (t2t) is labelled 'none', the undefended baseline's "
        "label: give it another label"
    )
    both_x = SMOKE | {
        "defenses": [
            {"name": "none"},
            {"name": "t2t", "label": "x", "knob_values": [10]},
            {"name": "embedding-dx", "label": "x", "knob_values": [10]},
        ]
    }
    assert refused(both_x) == (
        "Invalid grid config: defenses.1 and defenses.2 are both labelled 'x': give each a "
        "distinct label"
    )
    # Unlabelled entries are shown as name[params]: equal ones collide, different ones do not.
    twice = SMOKE | {
        "defenses": [{"name": "t2t", "knob_values": [1]}, {"name": "t2t", "knob_values": [100]}]
    }
    assert "defenses.0 and defenses.1 are both labelled 't2t' (the default label" in (
        refused(twice)
    )
    apart = SMOKE | {"defenses": [{"name": "t2t", "params": {"eta": 5.0}}, {"name": "t2t"}]}
    assert [d.display for d in load_config(apart).defenses] == ["t2t[eta=5.0]", "t2t"]
    quick = load_config("quick")  # HaS's two variants are shown apart by their mode
    assert {"has[mode=label]", "has[mode=generative]"} <= {d.display for d in quick.defenses}
    load_config("paper")
    # Refused before any work, in one line, from the command line too.
    run_dir = tmp_path / "r"
    result = runner.invoke(
        app, ["run", "--config", str(write_grid(tmp_path, both_x)), "--run-dir", str(run_dir)]
    )
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "defenses.1 and defenses.2 are both labelled 'x'" in result.output
    assert not run_dir.exists()


def test_two_labels_stay_two_defenses_in_the_leaderboard(tmp_path) -> None:
    from privaudit.audit.runner import run_grid  # the results alone: no plots needed here
    from privaudit.leaderboard.board import leaderboard

    data = SMOKE | {
        "defenses": [
            {"name": "none"},
            {"name": "t2t", "label": "a", "knob_values": [10]},
            {"name": "t2t", "label": "b", "knob_values": [100]},
        ]
    }
    result = run_grid(load_config(data), run_dir=tmp_path / "r", progress=False)
    board = leaderboard(result.frame, result.chance)
    assert sorted(result.frame["label"]) == ["a", "b", "none"]
    assert sorted(board.overall["label"]) == ["a", "b", "none"]
    utility = result.frame.set_index("label")["utility"]
    best = board.overall.set_index("label")["best_utility"]
    for label in ("a", "b"):  # each row holds its own point, not a mean of both
        assert best[label] == pytest.approx(utility[label])


# -- item 2: failure reasons never carry corpus text -------------------------------------------


class Quoting(Defense):
    """A plugin defense whose error quotes its input, as careless code does."""

    name: ClassVar[str] = "quoting"

    def privatize(self, texts, *, rng):
        QUOTED.append(texts[0])
        raise ValueError(f"cannot handle input: {texts[0]!r}")


def test_a_failure_reason_holds_no_corpus_text(tmp_path) -> None:
    QUOTED.clear()
    data = SMOKE | {"defenses": [{"name": "none"}, {"name": f"{__name__}:Quoting"}]}
    config = write_grid(tmp_path, data)
    run_dir = tmp_path / "r"
    result = runner.invoke(
        app, ["run", "--config", str(config), "--run-dir", str(run_dir), "--no-progress"]
    )
    assert result.exit_code == 3, result.output
    text = QUOTED[0]
    assert len(text) > 40
    frame = pd.read_parquet(run_dir / "results.parquet")
    assert text[:20] not in frame.to_string()
    stored = [run_dir / "results.csv", run_dir / "report.html", *run_dir.glob("cells/*.json")]
    for path in stored:
        assert text[:20] not in path.read_text(encoding="utf-8"), path.name
    # Issue 39: a plugin's message is never stored, quoted or not (reasons.own_message).
    reason = "ValueError: (message not stored: it may quote the corpus; see the terminal or "
    reason += "--show-examples) at test_labels_and_reasons.py:"
    failed = frame[frame["status"] == "failed"]
    assert len(failed) == 1 and failed["reason"].iloc[0].startswith(reason)
    assert html.escape(reason) in (run_dir / "report.html").read_text(encoding="utf-8")
    assert f"cell failed: ValueError: cannot handle input: {text!r}" in result.output  # terminal
    # Asked for, the full message is kept in the cell's record (and only there).
    kept = runner.invoke(app, ["run", "--resume", str(run_dir), "--no-progress", "--show-examples"])
    assert kept.exit_code == 3, kept.output
    records = [json.loads(p.read_text()) for p in run_dir.glob("cells/*.json")]
    rows = [r for record in records for r in record.get("rows", []) if r["status"] == "failed"]
    assert rows[0]["reason"].startswith(reason) and repr(text) in rows[0]["reason_full"]
    assert text not in pd.read_csv(run_dir / "results.csv").to_string()


# -- item 5: audit exits as run does -----------------------------------------------------------


class Picky:
    """Passes the conformance checks (short texts), fails on the corpus's long reviews."""

    def privatize(self, texts, rng):
        if any(len(t.split()) > 25 for t in texts):
            QUOTED.append(texts[0])
            raise ValueError(f"cannot handle input: {texts[0]!r}")
        return [t.upper() for t in texts]


def test_audit_exits_3_when_cells_failed_unless_allowed(tmp_path) -> None:
    QUOTED.clear()
    args = [
        "audit",
        f"{__name__}:Picky",
        "--preset",
        "smoke",
        "--compare",
        "none",
        "--run-dir",
        str(tmp_path / "r"),
        "--no-progress",
    ]
    failed = runner.invoke(app, args)
    assert failed.exit_code == 3, failed.output
    assert "1 of 2 cells failed" in failed.output and "Exit status 3" in failed.output
    assert QUOTED and QUOTED[0][:20] not in (tmp_path / "r" / "results.csv").read_text()
    allowed = runner.invoke(app, [*args, "--allow-failures"])
    assert allowed.exit_code == 0, allowed.output


# -- item 6: a plain class in a run config is wrapped as audit wraps it --------------------------


class Late:
    """A plain privatizer (no privaudit base class) with a knob."""

    knob = "p"

    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def privatize(self, texts, rng):
        return [" ".join("***" if rng.random() < self.p else w for w in t.split()) for t in texts]


class NoPrivatize:
    knob = "p"

    def __init__(self, p: float = 0.5) -> None:
        self.p = p


def test_a_plain_class_in_a_run_config_is_wrapped_or_refused_in_one_line(tmp_path) -> None:
    from privaudit.outputs import run_grid

    plain = f"{__name__}:Late"
    data = SMOKE | {"defenses": [{"name": "none"}, {"name": plain, "knob_values": [0.2, 0.8]}]}
    frame = run_grid(load_config(data), run_dir=tmp_path / "r", progress=False).frame
    mine = frame[frame["label"] == plain].sort_values("knob_value")
    assert list(mine["defense"]) == ["Late", "Late"] and list(mine["knob"]) == ["p", "p"]
    assert list(mine["knob_value"]) == [0.2, 0.8] and (mine["status"] == "ok").all()
    assert list(mine["replacement_rate"]) == sorted(mine["replacement_rate"])  # p took effect
    for spec, says in [
        ({"name": f"{__name__}:NoPrivatize", "knob_values": [0.5]}, "has no privatize(texts, "),
        ({"name": f"{__name__}:QUOTED"}, "does not name a class or factory"),  # a list
    ]:
        name = spec["name"]
        bad = SMOKE | {"defenses": [{"name": "none"}, spec]}
        run_dir = tmp_path / name.rsplit(":", 1)[1]
        result = runner.invoke(
            app, ["run", "--config", str(write_grid(tmp_path, bad)), "--run-dir", str(run_dir)]
        )
        assert result.exit_code == 2, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        assert result.output.startswith("Error: defenses.1.name: ") and says in result.output
        assert not run_dir.exists()


# -- item 10: calibrate on a defense without a replacement-rate knob ---------------------------


def test_calibrate_says_when_a_defense_has_no_replacement_rate_knob() -> None:
    from privaudit.defenses.has import HideAndSeek

    for name, knob in [("has", "level"), ("cape", "epsilon")]:
        result = runner.invoke(app, ["calibrate", "--defense", name, "--n-docs", "5"])
        assert result.exit_code == 2, result.output
        assert "is not allowed" not in result.output
        assert f"Defense {name!r} has no replacement-rate knob (its {knob} is" in result.output
    assert HideAndSeek.calibrates_by_rate is False  # said by a declaration, not a name list
    rates = SMOKE | {"defenses": [{"name": "has", "target_rates": [0.2]}]}
    with pytest.raises(ValueError, match=r"defenses.0.target_rates: defense 'has' has no repl"):
        load_config(rates).check_names()


# -- item 11: the minor messages ---------------------------------------------------------------


def test_knob_errors_say_things_once_and_name_the_field() -> None:
    from privaudit.audit.forecast import estimate_config

    # What a knob value may be is the defense's declaration's (issue 52: one source), said
    # when the grid is planned, before any work.
    negative = SMOKE | {"defenses": [{"name": "t2t", "knob_values": [-5]}]}
    with pytest.raises(ValueError) as info:
        estimate_config(load_config(negative))
    assert str(info.value) == (
        "defenses.0.knob_values: t2t (T2T) parameter eta=-5.0 is not allowed: Input should be "
        "greater than 0 (declared: float > 0)."
    )
    rates = SMOKE | {"defenses": [{"name": "t2t", "target_rates": [2]}]}
    assert refused(rates).count("got") == 1
    on_none = SMOKE | {"defenses": [{"name": "none", "knob_values": [5]}]}
    with pytest.raises(ValueError, match=r"^defenses.0.knob_values: defense 'none' has no priv"):
        load_config(on_none).check_names()


def test_file_corpora_take_an_encoding(tmp_path) -> None:
    from privaudit.corpora.files import load_file

    rows = ["text,label"] + [
        f'"Café Zoë {i} was {"good" if i % 2 else "bad"}",{i % 2}' for i in range(20)
    ]
    latin = tmp_path / "latin.csv"
    latin.write_bytes("\n".join(rows).encode("latin-1"))
    with pytest.raises(ValueError) as info:
        load_file(latin)
    message = str(info.value)
    assert "as utf-8 text" in message and "encoding" in message and "fmt=" not in message
    corpus = load_file(latin, encoding="latin-1")
    assert any("Café Zoë" in t for t in corpus.texts("train"))
    binary = tmp_path / "binary.csv"
    binary.write_bytes(bytes(range(256)) * 8)
    with pytest.raises(ValueError, match="holds NUL bytes: it is binary, not utf-8 csv"):
        load_file(binary)
    with pytest.raises(ValueError, match="Unknown encoding 'klingon'"):
        load_file(latin, encoding="klingon")


def test_no_progress_still_prints_the_estimate(tmp_path) -> None:
    data = SMOKE | {"defenses": [{"name": "none"}]}
    result = runner.invoke(
        app,
        [
            "run",
            "--config",
            str(write_grid(tmp_path, data)),
            "--run-dir",
            str(tmp_path / "r"),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Grid: 1 points, 1 cells (0 done, 1 to compute); estimated wall time" in result.output
    assert "cells:" not in result.output  # the progress bar alone is hidden
