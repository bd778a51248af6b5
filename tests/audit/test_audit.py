"""`privaudit audit`: a user's privatizer, checked, wrapped and benchmarked."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from privaudit.api import Release
from privaudit.audit.plugin import UserDefense, conformance, parse_knob
from privaudit.cli import app
from privaudit.outputs import audit

EXAMPLE = "examples/plugins/mask_words.py:MaskWords"


class Vectors:
    """Returns a Release itself (pooled vectors)."""

    release_kind = "pooled_vectors"

    def privatize(self, texts, rng):
        return Release("pooled_vectors", vectors=[rng.standard_normal(3) for _ in texts])


class Unseeded:
    def privatize(self, texts, rng):
        return [f"{t} {np.random.random()}" for t in texts]  # ignores the rng


class DropsOne:
    def privatize(self, texts, rng):
        return list(texts)[1:]


class HatesEmpty:
    def privatize(self, texts, rng):
        if any(not t for t in texts):
            raise ValueError("empty document")
        return list(texts)


class Numbers:
    def privatize(self, texts, rng):
        return [len(t) for t in texts]


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("audit") / "run"
    return audit(EXAMPLE, knob="p=0.2,0.8", preset="smoke", run_dir=run_dir, progress=False)


def test_the_example_plugin_is_audited_beside_t2t_and_pct2t(audited) -> None:
    assert all(c.passed for c in audited.checks) and not audited.failed
    frame = audited.run.frame
    assert set(frame["label"]) == {"none", "t2t", "pct2t", "mask-words"}
    mine = frame[frame["label"] == "mask-words"].sort_values("knob_value")
    assert list(mine["knob"]) == ["p", "p"] and list(mine["knob_value"]) == [0.2, 0.8]
    assert (mine["status"] == "ok").all()
    assert mine["empirical_privacy"].is_monotonic_increasing  # more hidden, more private
    assert mine["guarantee"].iloc[0].startswith("none (each word")
    run_dir = audited.run.run_dir
    html = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "mask-words" in html and "pct2t" in html
    assert (run_dir / "frontiers.png").stat().st_size > 10_000


def test_wrapper_accepts_strings_and_releases() -> None:
    rng = np.random.default_rng(0)
    text = UserDefense(EXAMPLE, "p", p=0.0).fit([]).privatize(["a b", ""], rng=rng)
    assert text.kind == "text" and text.texts == ["a b", ""]
    vectors = UserDefense("tests.audit.test_audit:Vectors").fit([]).privatize(["a", "b"], rng=rng)
    assert vectors.kind == "pooled_vectors" and len(vectors) == 2


@pytest.mark.parametrize(
    ("target", "check", "says"),
    [
        ("tests.audit.test_audit:Unseeded", "deterministic for a seed", "different outputs"),
        ("tests.audit.test_audit:DropsOne", "one output per input", "exactly one per input"),
        ("tests.audit.test_audit:HatesEmpty", "empty text", "empty document"),
        ("tests.audit.test_audit:Numbers", "one output per input", "list of strings"),
    ],
)
def test_conformance_failures_name_the_problem(target, check, says) -> None:
    checks = conformance(UserDefense(target).fit([]))
    failed = {c.name: c.detail for c in checks if not c.passed}
    assert check in failed and says in failed[check]


def test_a_slow_privatizer_fails_the_speed_check() -> None:
    checks = conformance(UserDefense(EXAMPLE, p=0.5).fit([]), min_speed=1e12)
    assert [c.name for c in checks if not c.passed] == ["speed"]


def test_cli_audit_stops_on_failed_checks(tmp_path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "audit",
            "tests.audit.test_audit:Unseeded",
            "--preset",
            "smoke",
            "--run-dir",
            str(tmp_path / "r"),
        ],
    )
    assert result.exit_code == 2
    assert "[FAIL] deterministic for a seed" in result.output
    assert "nothing was benchmarked" in result.output
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["nowhere/absent.py:X"], "No such file"),
        (["tests.audit.test_audit:Missing"], "has no attribute 'Missing'"),
        ([EXAMPLE, "--knob", "p"], "NAME=v1,v2"),
        ([EXAMPLE, "--knob", "p=low,high"], "must be numbers"),
        ([EXAMPLE, "--knob", "p=0.5", "--compare", "t2tt"], "Did you mean 't2t'"),
        ([EXAMPLE, "--knob", "p=1.5"], "p is a probability"),
        ([EXAMPLE, "--param", "colour=red"], "Cannot construct"),
    ],
)
def test_cli_audit_bad_input(args, says, tmp_path) -> None:
    result = CliRunner().invoke(
        app, ["audit", *args, "--preset", "smoke", "--run-dir", str(tmp_path / "r")]
    )
    assert result.exit_code == 2, result.output
    assert says in result.output


def test_parse_knob() -> None:
    assert parse_knob("eta=10, 50,100") == ("eta", [10.0, 50.0, 100.0])
    assert parse_knob(None) == (None, [])
