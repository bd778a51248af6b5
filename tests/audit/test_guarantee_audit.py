"""The guarantee audit: exact bounds, planted bugs flagged, correct mechanisms not flagged."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy.stats import binomtest

import privaudit.defenses._tokens as tokens_module
import privaudit.defenses.cape as cape_module
import privaudit.defenses.dpnr as dpnr_module
from privaudit.audit.guarantee_audit import (
    HOLDS,
    NO_CLAIM,
    UNTESTABLE,
    VIOLATED,
    Sizes,
    audit_guarantee,
    audit_levels,
    to_frame,
)
from privaudit.audit.guarantee_audit.stats import (
    Question,
    cp_high,
    cp_low,
    draws_needed,
    loss_ceiling,
    threshold_evidence,
)
from privaudit.defenses.cape import CAPE
from privaudit.defenses.dpnr import DPNR
from privaudit.defenses.t2t import T2T
from privaudit.mechanisms.laplace import minmax_normalise, sample_laplace
from privaudit.mechanisms.noise import sample_dx_noise
from tests.conftest import TINY

SMALL = Sizes(release=300, noise=20_000, laplace=2000)


def test_clopper_pearson_matches_scipy() -> None:
    for k, n in [(0, 50), (3, 50), (50, 50), (17, 400)]:
        ci = binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
        assert cp_low(k, n, 0.05) == pytest.approx(ci.low, abs=1e-9)
        assert cp_high(k, n, 0.05) == pytest.approx(ci.high, abs=1e-9)


def test_threshold_event_is_chosen_on_held_out_draws() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.laplace(0, 1, 4000), rng.laplace(1, 1, 4000)  # 1-D Laplace, loss at most 1
    e = threshold_evidence(a, b, Question("t", ("0", "1"), 1, 1.0, 0.025), statistic="y")
    assert e.n == e.n2 == 2800  # the other 30 % chose the event
    assert 0.5 < e.lower <= 1.0 and not e.violated


# ---- planted bugs: each must be flagged at 95 % ------------------------------------------------
def test_t2t_noise_at_half_scale_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The noise t2t draws at half the stated scale (an effective 2η): the noise-scale test
    against the declared density sees it (its η lower bound is about 2η)."""

    def half_scale(n: int, dim: int, eta: Any, rng: np.random.Generator, **kw: Any) -> Any:
        return sample_dx_noise(
            n, dim, 2 * np.asarray(eta, dtype=float) if np.ndim(eta) else 2 * float(eta), rng, **kw
        )

    monkeypatch.setattr(tokens_module, "sample_dx_noise", half_scale)
    result = audit_guarantee(
        T2T(eta=100, backbone=TINY),
        seed=1,
        sizes=Sizes(release=200, noise=20_000, release_cap=2000),
    )
    assert result.verdict == VIOLATED, result.line()
    bad = result.best
    assert bad is not None and bad.test == "noise scale" and bad.lower > 1.5 * bad.claimed
    assert "VIOLATED" in result.line() and bad.event in result.line()


def test_laplace_with_understated_sensitivity_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    real = dpnr_module.pooled_release

    def understated(pooled: Any, epsilon: float, sensitivity: float, *args: Any) -> Any:
        return real(pooled, epsilon, sensitivity / 2, *args)  # noise at Δ/2: 2ε

    monkeypatch.setattr(dpnr_module, "pooled_release", understated)
    result = audit_guarantee(DPNR(epsilon=3, backbone=TINY), sizes=SMALL)
    assert result.verdict == VIOLATED, result.line()
    assert result.best is not None
    assert result.best.test.startswith(("per coordinate", "batch of two"))
    assert result.best.lower > result.best.claimed


class SometimesOriginal(T2T):
    """A word replacement that returns the original word 5 % of the time whatever η."""

    def privatize(self, texts: Any, *, rng: np.random.Generator) -> Any:
        release = super().privatize(texts, rng=rng)
        keep = rng.random(len(texts)) < 0.05
        release.texts = [t if k else r for t, r, k in zip(texts, release.texts, keep, strict=True)]
        return release


def test_word_replacement_returning_the_original_is_flagged() -> None:
    result = audit_guarantee(
        SometimesOriginal(eta=5, backbone=TINY), sizes=Sizes(release=1000, noise=2000)
    )
    assert result.verdict == VIOLATED, result.line()
    bad = max(result.violations, key=lambda e: e.lower)
    assert bad.test == "release"
    first = bad.pair.split(" vs ")[0].strip("'")
    assert first in bad.event  # the event: the first word of the pair comes back


def test_laplace_reusing_one_noise_draw_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    def shared_noise(
        pooled: Any,
        epsilon: float,
        sensitivity: float,
        rng: np.random.Generator,
        meta: dict,
        audit: Any = None,
    ) -> Any:
        clean = minmax_normalise(pooled)
        noise = sample_laplace((1, clean.shape[1]), sensitivity / epsilon, rng)
        return [row for row in clean + noise]  # one draw for every document of the batch

    monkeypatch.setattr(cape_module, "pooled_release", shared_noise)
    result = audit_guarantee(CAPE(epsilon=3, backbone=TINY), sizes=SMALL)
    assert result.verdict == VIOLATED, result.line()
    tests = {e.test for e in result.violations}
    assert {"batch of two", "independence (exact repeat)"} <= tests, tests


# ---- correct mechanisms ------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["t2t", "embedding-dx", "dpnr", "cape"])
def test_correct_builtins_are_not_flagged(name: str) -> None:
    """A few seeds here; benchmarks/test_guarantee_false_alarms.py runs 20 per built-in."""
    for seed in range(3):
        for result in audit_levels(name, backbone=TINY, seed=seed, sizes=SMALL):
            assert result.verdict in (HOLDS, UNTESTABLE), result.line()
            assert all(e.lower <= e.claimed for e in result.evidence)


def test_table_rows_and_no_claim() -> None:
    frame = to_frame(audit_levels("none") + audit_levels("dpnr", [3.0], backbone=TINY, sizes=SMALL))
    none, dpnr = frame.iloc[0], frame.iloc[1]
    assert none["verdict"] == NO_CLAIM and math.isnan(none["ratio"])
    assert dpnr["verdict"] == HOLDS and dpnr["knob_value"] == 3.0
    assert 0.5 < dpnr["ratio"] <= 1.0  # the per-coordinate Laplace test is nearly tight
    assert dpnr["confidence"] == pytest.approx(0.95)
    assert dpnr["estimate"] == pytest.approx(dpnr["ratio"] * 3.0)


def test_pct2t_words_are_tested_in_their_category() -> None:
    (result,) = audit_levels("pct2t", [50.0], backbone=TINY, sizes=SMALL)
    assert result.verdict == HOLDS, result.line()
    assert any(e.test == "release (noun)" for e in result.evidence)


# ---- where the audit shows: the CLI, a user's privatizer, the run's report ---------------------
def test_cli_audit_guarantee_table_and_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from privaudit.cli import EXIT_GUARANTEE_VIOLATED, app

    args = ["audit-guarantee", "--defense", "dpnr", "--knob", "3", "--backbone", TINY, "--strict"]
    ok = CliRunner().invoke(app, args)
    assert ok.exit_code == 0, ok.output
    assert "dpnr" in ok.output and "holds" in ok.output and "95%" in ok.output
    real = dpnr_module.pooled_release
    monkeypatch.setattr(
        dpnr_module, "pooled_release", lambda p, e, s, *rest: real(p, e, s / 2, *rest)
    )
    bad = CliRunner().invoke(app, args)
    assert bad.exit_code == EXIT_GUARANTEE_VIOLATED, bad.output
    assert "GUARANTEE VIOLATED: dpnr epsilon=3" in bad.output
    unknown = CliRunner().invoke(app, ["audit-guarantee", "--defense", "nope"])
    assert unknown.exit_code == 2 and "nope" in unknown.output


def test_user_privatizer_violation_is_the_first_line_and_stops_under_strict() -> None:
    from typer.testing import CliRunner

    from privaudit.cli import EXIT_GUARANTEE_VIOLATED, app

    target = "examples/plugins/dx_wrong_scale.py:NoisyWords"
    args = ["audit", target, "--knob", "eta=5", "--param", f"backbone={TINY}", "--strict"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == EXIT_GUARANTEE_VIOLATED, result.output
    first = result.output.splitlines()[0]
    assert first.startswith("GUARANTEE VIOLATED: noisy-words eta=5")
    assert " vs " in first and "event output ∈ {" in first
    assert "Conformance checks:" in result.output  # they ran, and passed, before it


def test_run_outputs_carry_the_guarantee_table(tmp_path: Any) -> None:
    import json

    import pandas as pd

    from privaudit.audit.store import RunDir
    from privaudit.outputs import write_guarantees
    from privaudit.outputs.report import write_report
    from tests.leaderboard.test_leaderboard import make_run, ranked_rows

    run = make_run(tmp_path / "run", ranked_rows(), config={"name": "g", "seeds": [0]})
    points = pd.DataFrame(
        {
            "defense": ["dpnr", "none", "gone"],
            "label": ["dpnr", "none", "gone"],
            "defense_params": [
                json.dumps({"epsilon": 3.0, "backbone": TINY}),
                json.dumps({}),
                json.dumps({}),
            ],
            "guarantee": ["epsilon-LDP ...", "none", "eta·d_X-privacy per token"],
        }
    )
    write_guarantees(points, RunDir(run))
    table = RunDir(run).read_guarantees()
    assert table is not None
    assert list(table["verdict"]) == ["holds", "no formal claim", "not tested"]
    assert "not rebuilt" in table["note"].iloc[2]  # one defense it cannot build costs no other
    page = write_report(run).read_text(encoding="utf-8")
    assert 'id="guarantees"' in page and "Guarantee audit" in page and "per coordinate" in page

    # The leaderboard files carry the same table, a violated claim named first.
    from privaudit.leaderboard.board import leaderboard
    from privaudit.outputs.leaderboard import write_leaderboard
    from privaudit.outputs.runs import load_runs

    runs = load_runs([run])
    assert runs.guarantees is not None and len(runs.guarantees) == 3
    bad = runs.guarantees.assign(
        verdict=["violated", "no formal claim", "not tested"], lower_bound=[9.0, None, None]
    )
    board = leaderboard(runs.frame, runs.chance, outcomes=runs.outcomes, bootstrap=runs.bootstrap)
    md, _, page_html, _ = write_leaderboard(board, tmp_path / "lb", bad)
    text = md.read_text(encoding="utf-8")
    audit = text[text.index("## Guarantee audit") :]
    assert audit.splitlines()[2].startswith("**Guarantee violated: dpnr epsilon=3")
    assert "| dpnr | epsilon | 3 |" in audit and "| none |" in audit
    assert "Guarantee violated: dpnr" in page_html.read_text(encoding="utf-8")
    md_plain, *_ = write_leaderboard(board, tmp_path / "plain")
    assert "Guarantee audit" not in md_plain.read_text(encoding="utf-8")


# ---- issue 37: what a sample can show, planted plugins, the open declaration -----------------
def test_ceiling_is_what_a_perfect_event_shows_and_draws_needed_reach_it() -> None:
    a = 0.05 / 14
    n = 840
    assert loss_ceiling(n, n, a, p=1.0) == pytest.approx(
        math.log(cp_low(n, n, a) / cp_high(0, n, a))
    )
    assert loss_ceiling(n, n, a, p=1.0) == pytest.approx(math.log(n / math.log(1 / a)), abs=0.3)
    need = draws_needed(5.0, a)
    est = round(need * 0.7)
    assert loss_ceiling(est + 2, est + 2, a) > 5.0 > loss_ceiling(est // 2, est // 2, a)
    assert math.isinf(draws_needed(1e4, a))


def test_a_claim_above_the_ceiling_is_untestable_never_holds() -> None:
    result = audit_guarantee(
        T2T(eta=100, backbone=TINY), sizes=Sizes(release=300, noise=20_000, release_cap=1000)
    )
    assert result.verdict == UNTESTABLE, result.line()
    assert (
        "untestable at n = " in result.line() and "draws per input would test it" in result.line()
    )
    row = result.row()
    assert row["ceiling"] < row["claimed_loss"] or row["testable"] == 0
    assert row["draws_needed"] > 1000


PLANT_SIZES = Sizes(release=300, noise=20_000, laplace=2000, release_cap=5000, laplace_cap=10_000)


@pytest.mark.parametrize("index", range(8))
def test_planted_bugs_are_flagged_or_untestable(index: int) -> None:
    """Every plant of tests/guarantee_plants.py: flagged at its small knob value, and never
    "holds" at the quick grid's first one."""
    from tests.guarantee_plants import PLANTS

    cls, bug, quick, small = PLANTS[index]
    base = cls(backbone=TINY)
    low = audit_guarantee(base.with_knob(small), sizes=PLANT_SIZES)
    assert low.verdict == VIOLATED, (bug, low.line())
    high = audit_guarantee(base.with_knob(quick[0]), sizes=PLANT_SIZES)
    assert high.verdict in (VIOLATED, UNTESTABLE), (bug, high.line())


def test_audit_reads_the_declaration_and_imports_no_defense() -> None:
    import ast
    from pathlib import Path

    import privaudit.audit.guarantee_audit as package

    for path in Path(package.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("privaudit.defenses"), (path.name, node.module)
    assert T2T().guarantee.mechanism == "token_kernel"
    assert DPNR().guarantee.mechanism == "laplace_step"


def test_audit_guarantee_cli_on_the_example_plugins() -> None:
    from typer.testing import CliRunner

    from privaudit.cli import EXIT_GUARANTEE_VIOLATED, app

    mask = CliRunner().invoke(
        app, ["audit-guarantee", "--defense", "examples/plugins/mask_words.py:MaskWords"]
    )
    assert mask.exit_code == 0, mask.output
    assert "no formal claim" in mask.output
    noisy = CliRunner().invoke(
        app,
        [
            "audit-guarantee",
            "--defense",
            "examples/plugins/dx_wrong_scale.py:NoisyWords",
            "--knob",
            "5",
            "--backbone",
            TINY,
            "--strict",
        ],
    )
    assert noisy.exit_code == EXIT_GUARANTEE_VIOLATED, noisy.output
    assert "GUARANTEE VIOLATED: noisy-words eta=5" in noisy.output


# ---- issue 47: the Laplace audit's units, its exact-original event, its wording --------------
@pytest.mark.parametrize("sensitivity", [1.0, 32.0, 7.3])  # Δ = 1, Δ = d (TINY: 32), any Δ
def test_correct_laplace_holds_at_any_sensitivity(sensitivity: float) -> None:
    """D1: the noise-scale estimate and its claim are both ε (it compared ε̂ with ε/Δ: a
    certain false alarm at Δ ≠ 1, e.g. the documented ``sensitivity=d``)."""
    for epsilon in (1.0, 3.0):
        result = audit_guarantee(
            DPNR(epsilon=epsilon, sensitivity=sensitivity, backbone=TINY), sizes=SMALL
        )
        assert result.verdict in (HOLDS, UNTESTABLE), result.line()
        (scale,) = [e for e in result.evidence if e.test == "noise scale"]
        assert scale.claimed == epsilon
        assert 0.9 * epsilon < scale.lower <= epsilon  # ε̂ of a correct step: just below ε


def test_laplace_scale_test_sees_half_the_noise_at_sensitivity_d() -> None:
    """The same units the other way: noise at Δ/2 with Δ = d reads ε̂ ≈ 2ε, flagged."""
    from tests.guarantee_plants import UnderstatedLaplace

    result = audit_guarantee(
        UnderstatedLaplace(epsilon=3.0, sensitivity=32.0, backbone=TINY),
        sizes=SMALL,
        tests=["noise scale"],
    )
    assert result.verdict == VIOLATED, result.line()
    assert [e.test for e in result.evidence] == ["noise scale"]
    assert 5.0 < result.evidence[0].lower < 6.0 and result.evidence[0].claimed == 3.0


def test_a_two_percent_input_leak_is_caught_by_the_exact_original_test_alone() -> None:
    """D2: one event for both inputs ({y = x}, or {y = x'}): the leak hits it for one input
    only. Comparing M(x) = x with M(x') = x' (two events) gave ~2 % against ~2 %: never."""
    from tests.guarantee_plants import InputLeakLaplace

    for seed in range(3):
        result = audit_guarantee(
            InputLeakLaplace(epsilon=3.0, backbone=TINY),
            seed=seed,
            sizes=Sizes(laplace=6000),
            tests=["exact original"],
        )
        assert [e.test for e in result.evidence] == ["exact original"]
        assert result.verdict == VIOLATED, result.line()
        e = result.evidence[0]
        assert e.k2 == 0 and e.k > 0.01 * e.n and e.lower > e.claimed
        assert "only the test(s) exact original" in result.note
    full = audit_guarantee(InputLeakLaplace(epsilon=3.0, backbone=TINY), sizes=SMALL)
    (repeat,) = [e for e in full.evidence if e.test == "independence (exact repeat)"]
    assert not repeat.violated, repeat.event  # its noise vectors never repeat
    correct = audit_guarantee(
        DPNR(epsilon=3.0, backbone=TINY), sizes=Sizes(laplace=6000), tests=["exact original"]
    )
    assert correct.verdict == HOLDS and correct.evidence[0].k == 0, correct.line()


def test_an_exact_repeat_is_reported_without_a_p_value() -> None:
    """D3: one repeated noise vector is the evidence (probability 0 under a density); the
    line printed "one-sided Fisher p = 1" for it."""
    from tests.guarantee_plants import FixedLaplace

    result = audit_guarantee(
        FixedLaplace(epsilon=3.0, backbone=TINY), sizes=SMALL, tests=["independence (exact repeat)"]
    )
    assert result.verdict == VIOLATED
    line = result.line()
    assert "p = " not in line and "Fisher" not in line, line
    assert "across calls" in line and "probability 0" in line and "not drawn afresh" in line


def test_choosing_tests_is_checked_before_any_work() -> None:
    from typer.testing import CliRunner

    from privaudit.cli import app

    with pytest.raises(ValueError, match=r"Unknown Laplace test.*'exact original'"):
        audit_levels("dpnr", [3.0], backbone=TINY, tests=["exact orignal"])
    with pytest.raises(ValueError, match="declares no Laplace step"):
        audit_guarantee(T2T(eta=5, backbone=TINY), tests=["exact original"])
    alone = audit_guarantee(DPNR(epsilon=3.0, backbone=TINY), sizes=SMALL, tests=["noise scale"])
    assert alone.verdict == UNTESTABLE and "no release test ran" in alone.line()  # not "holds"
    out = CliRunner().invoke(app, ["audit-guarantee", "--test", "whole vector"])
    assert out.exit_code == 2 and "--test need one --defense" in out.output
