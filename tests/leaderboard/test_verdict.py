"""The leaderboard's headline verdict: paired separation, power lines, the three headline parts,
and the renderers printing it first; on results tables and outcomes built by hand (no model)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from privaudit.cli.render import print_board, print_summary
from privaudit.leaderboard.board import Leaderboard, leaderboard
from privaudit.leaderboard.paired import FamilyPower, pairs
from privaudit.leaderboard.verdict_words import (
    decisiveness_table,
    headline,
    power_lines,
    terminal_lines,
)
from privaudit.outputs.leaderboard import write_leaderboard
from tests.leaderboard.test_board_stats import BOOT, Grid, N

CHANCE = 0.5


def board() -> Leaderboard:
    """good: private and useful (beats everyone); alpha and beta: nearly equal, tied; bad:
    as exposed as the undefended release."""
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    g.add("good", 1, "a", 0.15, 0.85)  # privacy (0.9 − 0.15) / 0.8 ≈ 0.94
    g.add("good", 2, "a", 0.5, 0.88)
    g.add("alpha", 1, "a", 0.5, 0.8)  # privacy 0.5
    g.add("beta", 1, "a", 0.52, 0.8)  # privacy 0.475: within noise of alpha
    g.add("bad", 1, "a", 0.9, 0.85)  # privacy 0
    return leaderboard(g.frame(), CHANCE, outcomes=g.outcomes(), bootstrap=BOOT)


@pytest.fixture(scope="module")
def lb() -> Leaderboard:
    return board()


def test_the_units_needed_scale_as_the_squared_ratio_of_se_to_the_difference() -> None:
    z, z80 = 1.959963984540054, 0.8416212335729143
    p = FamilyPower(n=300, seeds=1, crit=z, se=0.1, se_fit=0.0, se_low=0.1, se_high=0.1, n_pairs=1)
    assert p.mdd == pytest.approx((z + z80) * 0.1)
    assert p.needed_for(0.1).units == pytest.approx(300 * (z + z80) ** 2)
    assert p.needed_for(0.2).units == pytest.approx(300 * (z + z80) ** 2 / 4)
    assert p.needed_for(p.mdd).units == pytest.approx(300)  # the MDD: the run's own size
    assert not p.needed_for(0.001).feasible  # beyond 100 × n: not realistic
    # The fits' share does not shrink with units: past it, seeds.
    fit = FamilyPower(
        n=300, seeds=1, crit=z, se=0.03, se_fit=0.02, se_low=0.03, se_high=0.03, n_pairs=1
    )
    need = fit.needed_for(0.05)
    assert need.feasible and need.seeds > 1


def test_pairs_are_paired_on_the_same_resamples() -> None:
    rng = np.random.default_rng(0)
    shared = rng.normal(0, 0.2, 500)  # a large common component cancels in the difference
    samples = {"a": 0.5 + shared, "b": 0.45 + shared + rng.normal(0, 0.005, 500)}
    (p,) = pairs({"a": 0.5, "b": 0.45}, samples, 300, 0.95)
    assert (p.a, p.b) == ("a", "b") and p.separated and p.ci_low > 0
    # Unpaired, the same margins would overlap: each interval is ±0.4 wide.
    assert np.percentile(samples["a"], 2.5) < np.percentile(samples["b"], 97.5)


def test_a_clear_separation(lb: Leaderboard) -> None:
    v = lb.verdict
    assert v is not None and v.available
    (fv,) = v.families
    assert fv.family == "text" and fv.n == N
    by = {(p.a, p.b): p for p in fv.pairs}
    assert len(by) == 6  # 4 ranked defenses, none is the reference
    for other in ("alpha", "beta", "bad"):
        assert by[("good", other)].separated and by[("good", other)].ci_low > 0
    assert [s.label for s in fv.undominated] == ["good"]
    (line, *_) = headline(v)[0][1]
    assert line.startswith("best: good ") and "beats every other defense" in line


def test_a_tie_gets_no_power_line_of_its_own(lb: Leaderboard) -> None:
    """The power lines say what the family's data can decide (the minimum detectable
    difference, the units for 0.05), never that more victims would separate a tied pair."""
    v = lb.verdict
    assert v is not None
    (fv,) = v.families
    tie = next(p for p in fv.pairs if {p.a, p.b} == {"alpha", "beta"})
    assert not tie.separated and tie.ci_low < 0 < tie.ci_high
    assert tie.a == "alpha" and tie.diff > 0  # the larger point hypervolume comes first
    assert tie.crit > 2.5  # the family-wise (Bonferroni, 6 pairs) critical value
    lines = power_lines(v)
    assert len(lines) == 2 and not any("alpha" in ln or "cannot separate" in ln for ln in lines)
    assert lines[0].startswith(
        "text: the smallest hypervolume difference this run separates "
        "with 80 % power, family-wise over its 6 pairs: "
    )
    assert f"at {N} victims and 1 seed per point" in lines[0]
    assert fv.power is not None and f"{fv.power.mdd:.3f}" in lines[0]
    assert lines[1].startswith("text: a difference of 0.050 (one that matters on this board")


def test_no_power_line_without_a_spread() -> None:
    found = pairs({"a": 0.0, "b": 0.0}, {"a": np.zeros(50), "b": np.zeros(50)}, 300, 0.95)
    (p,) = found
    assert not p.separated
    from privaudit.leaderboard.paired import family_power

    assert family_power(found) is None


def test_the_headline_three_parts(lb: Leaderboard) -> None:
    v = lb.verdict
    assert v is not None
    (fv,) = v.families
    # Best utility at worst-case privacy ≥ 0.75: good at eta=1, with both intervals.
    assert fv.best is not None and (fv.best.label, fv.best.point) == ("good", "eta=1")
    assert fv.best.ci_low < fv.best.utility < fv.best.ci_high
    assert fv.best.privacy >= 0.75 and fv.best.privacy_ci_low <= fv.best.privacy
    # Beats none: every defense with privacy, but not bad (as exposed as none).
    assert set(fv.beats_none) == {"good", "alpha", "beta"}
    assert [s.label for s in fv.not_beats_none] == ["bad"]
    assert fv.not_beats_none[0].ci_low <= 0
    family, lines = headline(v)[0]
    text = "\n".join(lines)
    assert family == "text"
    assert "best utility at worst-case privacy ≥ 0.75: " in text and "good at eta=1" in text
    # On the attack's own scale none keeps its privacy (.11): bad, as exposed, with less
    # utility, is below it (BEATS_NONE).
    assert "beat the undefended release" in text and "): bad (eta=1: -0.011 [" in text
    share = f"{fv.separated} of 6 pairs separated family-wise ({100 * fv.separated / 6:.0f} %"
    if fv.separated_raw != fv.separated:
        share += f"; {fv.separated_raw} by unadjusted per-pair intervals"
    family, (first, error) = headline(v)[-1]
    assert family == "overall" and first == f"{share}) over 1 families."
    assert error.startswith("Error rates: each family holds the chance of any false separation")


def test_decisiveness_per_family_and_overall(lb: Leaderboard) -> None:
    v = lb.verdict
    assert v is not None
    table = decisiveness_table(v)
    assert table.headers == [
        "family",
        "defenses",
        "pairs",
        "separated",
        "unadjusted",
        "share",
        "victims",
    ]
    text, overall = table.rows
    assert text[:4] == ["text", "4", "6", str(v.n_separated)]
    assert overall[0] == "overall" and overall[2:4] == ["6", str(v.n_separated)]
    assert 3 <= v.n_separated < 6  # good beats all three; alpha–beta tie


def test_without_outcomes_nothing_is_concluded() -> None:
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    g.add("good", 1, "a", 0.15, 0.85)
    v = leaderboard(g.frame(), CHANCE).verdict
    assert v is not None and not v.available
    assert "nothing is concluded with confidence" in headline(v)[0][1][0]
    assert power_lines(v) == []


def test_renderers_show_the_headline_first(
    lb: Leaderboard, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_leaderboard(lb, tmp_path)
    md = (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
    assert md.index("## Verdict") < md.index("## Overall") < md.index("## Family: text")
    assert "the smallest hypervolume difference this run separates" in md
    assert "### Decisiveness" in md
    page = (tmp_path / "leaderboard.html").read_text(encoding="utf-8")
    assert page.index("<h2>Verdict</h2>") < page.index("<h3>Overall</h3>")
    print_board(lb, "board")
    out = capsys.readouterr().out
    assert out.index("Verdict (95 % paired") < out.index("best: good") < out.index("board")
    assert out.count("Verdict (95 %") == 1
    assert terminal_lines(lb.verdict)[0] in out  # type: ignore[arg-type]


def test_report_puts_the_verdict_first(tmp_path: Path) -> None:
    from privaudit.outputs.report import write_report
    from tests.leaderboard.test_leaderboard import make_run, ranked_rows

    run = make_run(tmp_path / "run", ranked_rows())
    page = write_report(run, board=board()).read_text(encoding="utf-8")
    assert page.index("<h2>Verdict") < page.index("<h2>Summary") < page.index("<h2>Leaderboard")
    assert "What this run's data can decide" in page


def test_run_summary_prints_the_verdict_before_the_cells(
    lb: Leaderboard, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    g.add("good", 1, "a", 0.15, 0.85)
    frame = g.frame().assign(replacement_rate=0.5, seconds=1.0)
    result = SimpleNamespace(
        run_dir=tmp_path / "run-1", frame=frame, plots=[], chance=CHANCE, board=lb
    )
    print_summary(result)
    out = capsys.readouterr().out
    assert out.index("Verdict (95 %") < out.index("privaudit run: run-1")
    assert out.index("privaudit run: run-1") < out.index("leaderboard (this run)")
    assert out.count("Verdict (95 %") == 1  # not printed again above the board's tables
