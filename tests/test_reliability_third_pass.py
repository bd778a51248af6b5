"""Issue 39 (third reliability pass), items 1, 2 and 4-11: failure reasons that cannot hold
corpus text by construction, an unusable cache directory, strength shares too small to exist,
mixed-type labels, duplicate knob values, leaderboards over different corpora, output paths
checked before work, early one-line messages, said waits and repairs, and start-up time.

New symbols are imported inside the tests, so that each test fails on the old code by what it
checks, not by an import error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pandas as pd
import pytest
from typer.testing import CliRunner

from privaudit.api import Defense
from privaudit.audit.config import PRESETS
from privaudit.cli import app
from tests.conftest import refused, write_grid

runner = CliRunner()
SMOKE = PRESETS["smoke"]
#: The messages the failing plugins raised (the in-process executor runs them here).
RAISED: list[str] = []


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Never a real ~/.cache/privaudit entry.
    monkeypatch.setenv("PRIVAUDIT_CACHE", str(tmp_path / "cache"))


# -- item 1: a stored failure reason holds privaudit's own words only -------------------------


class _Raising(Defense):
    knob: ClassVar[str | None] = None

    def message(self, texts: list[str]) -> str:
        raise NotImplementedError

    def privatize(self, texts, *, rng):
        RAISED.append(self.message(list(texts)))
        raise ValueError(RAISED[-1])


class Joined(_Raising):
    """The corpus's first document with its words joined by '_' (no quote, no long span)."""

    name: ClassVar[str] = "joined"

    def message(self, texts: list[str]) -> str:
        return "cannot handle " + "_".join(texts[0].split())


class OneWord(_Raising):
    """One short corpus word, unquoted."""

    name: ClassVar[str] = "one-word"

    def message(self, texts: list[str]) -> str:
        return f"bad token {texts[0].split()[1]}-zqxwv-marker-2 in input"


class Verbatim(_Raising):
    """A message that is entirely corpus text."""

    name: ClassVar[str] = "verbatim"

    def message(self, texts: list[str]) -> str:
        return texts[0]


def test_a_plugins_message_never_reaches_the_run_directory(tmp_path: Path) -> None:
    RAISED.clear()
    plugins = [{"name": f"{__name__}:{c}"} for c in ("Joined", "OneWord", "Verbatim")]
    config = write_grid(tmp_path, SMOKE | {"defenses": [{"name": "none"}, *plugins]})
    run_dir = tmp_path / "r"
    result = runner.invoke(
        app, ["run", "--config", str(config), "--run-dir", str(run_dir), "--no-progress"]
    )
    assert result.exit_code == 3, result.output
    assert len(RAISED) == 3
    stored = [run_dir / "results.csv", run_dir / "report.html", *run_dir.glob("cells/*.json")]
    with_parquet = pd.read_parquet(run_dir / "results.parquet").to_string()
    for message in RAISED:
        assert f"ValueError: {message}" in result.output  # the terminal has it
        assert message[:30] not in with_parquet
        for path in stored:
            assert message[:30] not in path.read_text(encoding="utf-8"), path.name
    failed = pd.read_csv(run_dir / "results.csv").query("status == 'failed'")
    assert len(failed) == 3
    assert (
        failed["reason"]
        .str.match(
            r"ValueError: \(message not stored: .*\) at test_reliability_third_pass\.py:\d+$"
        )
        .all()
    ), failed["reason"].tolist()
    # Asked for, the full message is kept in the cells' records.
    kept = runner.invoke(app, ["run", "--resume", str(run_dir), "--no-progress", "--show-examples"])
    assert kept.exit_code == 3, kept.output
    records = "".join(p.read_text(encoding="utf-8") for p in run_dir.glob("cells/*.json"))
    assert all(json.dumps(m)[1:-1] in records for m in RAISED)


def _raised(func) -> BaseException:
    try:
        func()
    except Exception as exc:
        return exc
    raise AssertionError("did not raise")


def test_only_privaudits_own_exception_raised_by_privaudit_keeps_its_message() -> None:
    from privaudit.audit.reasons import failure_reason, own_message
    from privaudit.params import ParamError, validate_params

    class Target:
        def __init__(self, eta: float = 1.0) -> None:
            self.eta = eta

    own = _raised(lambda: validate_params(Target, {"nope": 1}))
    assert isinstance(own, ParamError) and own_message(own)
    assert failure_reason(own)[0].startswith(f"ParamError: {own}")
    # A built-in error raised inside privaudit code quotes its argument: not privaudit's own.
    from privaudit.numbers import shown

    builtin = _raised(lambda: shown("Emma loved it"))  # type: ignore[arg-type]
    assert not own_message(builtin) and "Emma" not in failure_reason(builtin)[0]
    assert "Emma" in failure_reason(builtin)[1]  # the terminal's copy

    def plugin() -> None:
        raise ParamError("Emma loved it")  # privaudit's class, a plugin's frame and words

    mimic = _raised(plugin)
    assert not own_message(mimic) and "Emma" not in failure_reason(mimic)[0]


# -- item 4: strength shares checked against the documents they draw ---------------------------


def _geia_grid(**strength: object) -> dict:
    from privaudit.attacks.geia import GEIA

    params = dict(GEIA.test_params) | {"public_docs": 200}
    return SMOKE | {
        "defenses": [{"name": "none"}],
        "attacks": [{"name": "geia", "params": params}],
        "strength": strength,
    }


@pytest.mark.parametrize(
    ("strength", "says"),
    [
        ({"public_fractions": [0.001]}, "0.001 of geia's public documents (200) is 0 document"),
        ({"public_fractions": [0.004, 0.006]}, "0.004 and 0.006"),  # 1 each: fewer than 2 too
        ({"public_fractions": [0.02, 0.022]}, "both draw 4 documents"),
        ({"public_fractions": [0.5, 0.5]}, "given twice"),
    ],
)
def test_a_public_share_too_small_or_repeated_is_refused_before_work(
    tmp_path: Path, strength: dict, says: str
) -> None:
    config = write_grid(tmp_path, _geia_grid(**strength))
    for extra in (["--estimate"], ["--run-dir", str(tmp_path / "r"), "--no-progress"]):
        result = runner.invoke(app, ["run", "--config", str(config), *extra])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "public_fractions" in lines[0], result.output
        if "twice" not in says:
            assert says in lines[0] or says.split(" and ")[0] in lines[0], lines[0]
    assert not (tmp_path / "r").exists()  # nothing was started


def test_aux_shares_that_draw_one_document_or_the_same_count_arerefused(tmp_path: Path) -> None:
    data = SMOKE | {
        "attacks": [{"name": "attribute-inference", "params": {"epochs": 1, "hidden": 8}}],
        "defenses": [{"name": "none"}],
        "strength": {"fractions": [0.001, 0.04]},
    }
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
    assert result.exit_code == 2, result.output
    assert "strength.fractions: 0.001 of the aux documents" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_a_failed_strength_row_fails_the_run(tmp_path: Path, monkeypatch) -> None:
    import privaudit.audit.runner as run_module

    real = run_module.strength_curve

    def failing(*args, **kwargs):
        curve = real(*args, **kwargs)
        return curve.assign(status="failed", reason="ValueError: (message not stored) at x.py:1")

    monkeypatch.setattr(run_module, "strength_curve", failing)
    data = SMOKE | {
        "attacks": [{"name": "attribute-inference", "params": {"epochs": 1, "hidden": 8}}],
        "defenses": [{"name": "none"}],
        "strength": {"fractions": [0.5]},
    }
    args = ["run", "--config", str(write_grid(tmp_path, data)), "--no-progress"]
    failed = runner.invoke(app, [*args, "--run-dir", str(tmp_path / "r")])
    assert failed.exit_code == 3, failed.output
    assert "row(s) of strength.csv failed" in failed.output
    allowed = runner.invoke(app, [*args, "--run-dir", str(tmp_path / "r"), "--allow-failures"])
    assert allowed.exit_code == 0, allowed.output


# -- item 6: duplicate knob values ---------------------------------------------------------------


def test_duplicate_knob_values_and_rates_arerefused() -> None:
    with_knobs = SMOKE | {"defenses": [{"name": "t2t", "knob_values": [10, 10, 10.0]}]}
    assert "knob_values: 10.0 is given twice" in refused(with_knobs)
    with_rates = SMOKE | {"defenses": [{"name": "t2t", "target_rates": [0.2, 0.2]}]}
    assert "target_rates: 0.2 is given twice" in refused(with_rates)
    shares = SMOKE | {"strength": {"fractions": [0.5, 0.5]}}
    assert "strength.fractions: 0.5 is given twice" in refused(shares)


# -- item 8: every output path is checked before work --------------------------------------------


def test_output_paths_are_checked_before_any_work(tmp_path: Path, monkeypatch) -> None:
    import privaudit.audit.guarantee_audit as guarantee_audit

    def never(*args, **kwargs):
        raise AssertionError("the audit ran before its --csv was checked")

    monkeypatch.setattr(guarantee_audit, "audit_levels", never)
    (tmp_path / "a-file").write_text("x")
    for bad in ("/proc/x.csv", str(tmp_path / "a-file" / "x.csv"), str(tmp_path)):
        result = runner.invoke(
            app, ["audit-guarantee", "--defense", "t2t", "--knob", "10", "--csv", bad]
        )
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "--csv" in lines[0], result.output
    report = runner.invoke(app, ["report", str(tmp_path), "--out", "/proc/r.html"])
    assert report.exit_code == 2 and "choose another --out" in report.output, report.output


# -- item 9: one line, before work ---------------------------------------------------------------


def test_a_two_row_corpus_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "two.jsonl"
    rows = [{"text": "I loved the hotel in Boston.", "label": 1},
            {"text": "The room was dirty.", "label": 0}]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = SMOKE | {"corpus": {"name": "file", "params": {"path": str(path)}}}
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
    assert result.exit_code == 2, result.output
    assert "Keys mismatch" not in result.output and "split" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("defense", "says"),
    [
        (
            {"name": "clean", "params": {"release": "hidden_states", "layer": 99}},
            "defenses.0.params.layer: 99 is outside 1..2",
        ),
        (
            {"name": "sap", "params": {"split_layer": 99}, "knob_values": [10]},
            "defenses.0.params.split_layer: 99 is outside 0..2",
        ),
    ],
)
def test_a_layer_beyond_the_backbone_is_refused_before_work(
    tmp_path: Path, defense: dict, says: str
) -> None:
    config = write_grid(tmp_path, SMOKE | {"defenses": [defense]})
    result = runner.invoke(
        app, ["run", "--config", str(config), "--run-dir", str(tmp_path / "r"), "--no-progress"]
    )
    assert result.exit_code == 2 and says in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


def test_jobs_device_and_out_are_one_line_before_work(tmp_path: Path) -> None:
    def one_line(*args: str) -> str:
        result = runner.invoke(app, ["run", "--preset", "smoke", *args])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1, result.output
        return lines[0]

    for extra in ([], ["--estimate"]):
        assert "--jobs is a number of worker processes, at least 1; got 0" in one_line(
            "--jobs", "0", *extra
        )
    import torch

    if not torch.cuda.is_available():
        assert "Device 'cuda' is not available" in one_line("--estimate", "--device", "cuda")
    assert "choose another --out" in one_line("--out", "/proc")


# -- item 5: labels equal as numbers or as strings are one class ---------------------------------


def test_mixed_type_labels_and_attributes_are_one_class_each(tmp_path: Path) -> None:
    from privaudit.corpora.files import load_file

    labels = [0, "0", 0.0, 1, "1", 1.0, "0.0", "1.0"] * 6
    ages = [30, "30", 30.0, 40, "40", 40.0, "30.0", "40"] * 6
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        "".join(
            json.dumps({"text": f"Review number {i} of the hotel was fine.", "label": y, "age": a})
            + "\n"
            for i, (y, a) in enumerate(zip(labels, ages, strict=True))
        )
    )
    corpus = load_file(str(path), attributes=["age"])
    assert corpus.label_names == ["0", "1"]
    values = {v for split in corpus.splits for v in corpus.attribute(split, "age")}
    assert values == {"30", "40"}


# -- item 2: the cache directory is checked before any work --------------------------------------

GEIA_TINY = {"n_layer": 1, "n_memory": 2, "public_docs": 40, "pretrain_epochs": 1, "max_tokens": 16}


def _geia_smoke() -> dict:
    return SMOKE | {
        "defenses": [{"name": "none"}],
        "attacks": [{"name": "geia", "params": GEIA_TINY}],
    }


def test_a_cache_that_is_a_file_is_one_line_before_work(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "afile").write_text("x")
    monkeypatch.setenv("PRIVAUDIT_CACHE", str(tmp_path / "afile"))
    config = write_grid(tmp_path, _geia_smoke())
    for args in (
        ["run", "--preset", "smoke", "--run-dir", str(tmp_path / "r")],
        ["pretrain", "--config", str(config)],
    ):
        result = runner.invoke(app, [*args, "--no-progress"])
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "PRIVAUDIT_CACHE=" in lines[0] and "is a file" in lines[0]
    assert not (tmp_path / "r").exists()


def test_a_read_only_cache_that_holds_the_model_is_used_without_a_lock(
    tmp_path: Path, monkeypatch
) -> None:
    import privaudit.attacks._inverter.disk_cache as inverter_cache
    import privaudit.attacks.geia as geia
    import privaudit.audit.estimate as estimate
    import privaudit.runtime.cache as cache

    config = write_grid(tmp_path, _geia_smoke())
    built = runner.invoke(app, ["pretrain", "--config", str(config), "--no-progress"])
    assert built.exit_code == 0, built.output
    geia._INVERTERS.__init__()  # read from disk again, not from this process's memory

    def no_lock(path):
        raise AssertionError(f"took a lock on {path} in a read-only cache")

    for module in (cache, estimate, inverter_cache):  # each module that reads them by name
        monkeypatch.setattr(module, "cache_writable", lambda: False)
        monkeypatch.setattr(module, "locked", no_lock)
    again = runner.invoke(app, ["pretrain", "--config", str(config), "--no-progress"])
    assert again.exit_code == 0 and "found in the cache" in again.output, again.output
    assert again.output.count("is read-only") == 1
    result = runner.invoke(
        app, ["run", "--config", str(config), "--run-dir", str(tmp_path / "r"), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("is read-only") == 1  # said once
    frame = pd.read_csv(tmp_path / "r" / "results.csv")
    assert (frame["status"] == "ok").all(), frame["reason"].tolist()
    # A model the read-only cache lacks: pretrain refuses rather than train and drop it.
    other = write_grid(
        tmp_path,
        _geia_smoke() | {"attacks": [{"name": "geia", "params": GEIA_TINY | {"public_docs": 30}}]},
        "other.yaml",
    )
    refused = runner.invoke(app, ["pretrain", "--config", str(other), "--no-progress"])
    assert refused.exit_code == 2 and "not in the read-only cache" in refused.output


# -- item 10: a wait and a repair are said ------------------------------------------------------


def test_a_process_waiting_for_a_lock_says_whom_it_waits_for(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from privaudit.runtime.cache import locked

    lock = tmp_path / "abc.lock"
    code = (
        "import sys; from pathlib import Path; from privaudit.runtime.cache import locked\n"
        f"with locked(Path({str(lock)!r})): print('got it')"
    )
    with locked(lock):
        assert f"process {os.getpid()}" in lock.read_text()
        proc = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        import time

        time.sleep(3)
    out, err = proc.communicate(timeout=60)
    assert out.strip() == "got it"
    assert f"waiting for process {os.getpid()}" in err and str(lock) in err


def test_a_torn_cached_inverter_is_said_to_be_rebuilt(tmp_path: Path, capsys) -> None:
    from privaudit.attacks import _inverter as inv
    from privaudit.attacks.geia import GEIA
    from privaudit.models.backbone import backbone

    bb = backbone("tiny-random-bert")
    spec = GEIA(**GEIA_TINY).spec()
    path = spec.path(bb)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PK\x03\x04 torn")
    _, note = inv.load_or_pretrain(bb, spec, progress=False)
    assert note["cache"] == "miss"
    err = capsys.readouterr().err
    assert f"the cached inverter {path} cannot be read" in err and "it is rebuilt" in err


# -- item 7: runs of different corpora are refused, or kept apart -----------------------------


def _corpus_run(root: Path, name: str, digest: str, none_utility: float, none_privacy: float):
    """A made-up run on one corpus: none and one defense A, two attacks."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from tests.leaderboard.test_leaderboard import cell, make_run

    rows = []
    for attack in ("a1", "a2"):
        for row in (
            cell("none", 0, attack, none_privacy, none_utility),
            cell("A", 1, attack, 0.5, none_utility - 0.05),
            cell("A", 2, attack, 0.8, none_utility - 0.15),
        ):
            row |= {
                "corpus": name,
                "corpus_fingerprint": digest,
                "cell_key": f"{row['cell_key']}|{digest}",
            }
            rows.append(row)
    return make_run(root / name, rows)


def test_runs_of_different_corpora_are_refused_in_one_line(tmp_path: Path) -> None:
    from privaudit.outputs.runs import load_runs, merge_runs

    # The same name, different digests: the digest decides, not the name.
    one = _corpus_run(tmp_path / "x", "file", "digest-one", 0.816, 0.0)
    two = _corpus_run(tmp_path / "y", "file", "digest-two", 0.708, 0.2)
    for load in (merge_runs, load_runs):
        with pytest.raises(ValueError, match="different corpora") as info:
            load([one, two])
        message = str(info.value)
        assert "\n" not in message and str(one) in message and str(two) in message
        assert "--mixed-corpora" in message and "mixed_corpora=True" in message
    result = runner.invoke(app, ["leaderboard", str(one), str(two), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "--mixed-corpora" in lines[0], result.output
    assert not (tmp_path / "o").exists()
    same = _corpus_run(tmp_path / "z", "file", "digest-one", 0.8, 0.0)  # one corpus: merged
    assert len(merge_runs([one, same])[0]) == 6


def test_mixed_corpora_keep_each_corpus_undefended_row_apart(tmp_path: Path) -> None:
    from privaudit.leaderboard.board import leaderboard
    from privaudit.outputs.runs import load_runs

    one = _corpus_run(tmp_path, "synthetic", "digest-one", 0.816, 0.0)
    two = _corpus_run(tmp_path, "synthpai", "digest-two", 0.708, 0.2)
    runs = load_runs([one, two], mixed_corpora=True)
    board = leaderboard(runs.frame, runs.chance, outcomes=runs.outcomes)
    best = board.overall.set_index("label")["best_utility"]
    # Each corpus's own undefended utility, not their mean (.762).
    assert best["none @ synthetic"] == pytest.approx(0.816)
    assert best["none @ synthpai"] == pytest.approx(0.708)
    assert not any(abs(v - 0.762) < 1e-9 for v in best)
    # Normalised privacy refers to the corpus's own undefended attack score: A at score 0.5
    # is 0.5 against synthetic's 1.0, (0.8 - 0.5) / 0.8 against synthpai's 0.8.
    points = board.points.set_index("label")["privacy"]
    assert points.loc["A @ synthetic"].min() == pytest.approx(0.5)
    assert points.loc["A @ synthpai"].min() == pytest.approx(0.375)
    assert any("2 different corpora (--mixed-corpora)" in n for n in board.notes)
    assert not any(n.startswith("none @") for n in board.notes)  # not "changed no word"
    result = runner.invoke(
        app, ["leaderboard", str(one), str(two), "--mixed-corpora", "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 0, result.output
    assert "none @ synthetic" in result.output and "0.762" not in result.output


# -- item 11: start-up ------------------------------------------------------------------------


def test_privaudit_list_imports_no_heavy_library(tmp_path: Path) -> None:
    """`privaudit list` imports every component's module for its metadata: none of them may
    bring pandas, scipy, torch or the like at import time (pandas and scipy.optimize alone
    were 1 s of a 2.5 s listing)."""
    import subprocess
    import sys

    heavy = ("pandas", "scipy", "torch", "transformers", "datasets", "sklearn", "matplotlib",
             "spacy", "pyarrow")  # fmt: skip
    code = (
        "import sys\n"
        "from privaudit.cli import app\n"
        "try:\n"
        "    app(['list'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        f"loaded = [m for m in {heavy!r} if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    env = {**__import__("os").environ, "PRIVAUDIT_CACHE": str(tmp_path / "cache")}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "synthpai" in result.stdout and "bayes-inversion" in result.stdout
