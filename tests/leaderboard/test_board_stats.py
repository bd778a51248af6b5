"""Normalised and worst-case privacy, bootstrap intervals, rank stability and the verdict
notes of the leaderboard, on results tables and outcomes built by hand (no model)."""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np
import pandas as pd
import pytest

from privaudit.leaderboard.board import leaderboard
from privaudit.leaderboard.render import tables as board_tables
from privaudit.leaderboard.stats import family_points, hypervolume_samples, sample_ranks
from privaudit.metrics.outcomes import Outcome
from privaudit.metrics.stats import Bootstrap, Outcomes, annotate, run_stats
from privaudit.metrics.stats import legacy_family as family_of

N = 200  # test documents
BOOT = Bootstrap(resamples=400, level=0.95, seed=3)


def hits(rate: float, seed: int) -> np.ndarray:
    """Per-document 0/1 hits with exactly round(rate · N) ones, shuffled."""
    out = np.zeros(N)
    out[: round(rate * N)] = 1
    return np.random.default_rng(seed).permutation(out)


class Grid:
    """A results table and its outcomes, one row at a time."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.entries: dict[tuple[str, str], Outcome] = {}

    def add(
        self,
        label: str,
        value: float,
        attack: str,
        score: float,
        utility: float,
        *,
        baseline: float | None = 0.1,
        family: str = "text",
        status: str = "ok",
        seed: int = 0,
        metric: str = "token_recovery",
    ) -> None:
        defense = label.split("[")[0]
        key = f"{label}|{value}|{attack}|{seed}"
        point = f"{label}|{value}|{seed}"
        s = hits(score, zlib.crc32(key.encode()))
        u = hits(utility, zlib.crc32(point.encode()))
        ok = status == "ok"
        self.rows.append(
            {
                "defense": defense,
                "label": label,
                "knob": None if defense == "none" else "eta",
                "knob_value": math.nan if defense == "none" else float(value),
                "attack": attack,
                "seed": seed,
                "status": status,
                "reason": "" if ok else "boom",
                "attack_metric": metric,
                "family": family,
                "attack_score": float(s.mean()) if ok else math.nan,
                "empirical_privacy": 1 - float(s.mean()) if ok else math.nan,
                "attack_baseline": baseline if baseline is not None else math.nan,
                "utility": float(u.mean()),
                "utility_metric": "balanced_accuracy",
                "cell_key": key,
                "point": point,
                "n_test": N,
                "guarantee": "g",
                "privatize_seconds": 1.0,
                "n_words": 1000.0,
                "defense_params": "{}",
            }
        )
        if ok:
            self.entries[(key, "attack")] = Outcome.ratio(s)
            if baseline is not None:
                self.entries[(key, "baseline")] = Outcome.ratio(np.full(N, baseline))
        self.entries[(point, "utility")] = Outcome.ratio(u)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows)

    def outcomes(self) -> Outcomes:
        return Outcomes(self.entries)


def test_normalised_privacy_is_one_at_baseline_and_zero_at_the_undefended() -> None:
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    g.add("t2t", 1, "a", 0.5, 0.8)  # (0.9 − 0.5) / (0.9 − 0.1) = 0.5
    g.add("t2t", 2, "a", 0.05, 0.6)  # below the baseline -> clipped to 1
    g.add("t2t", 3, "a", 0.95, 0.85)  # above the undefended -> clipped to 0
    stats = run_stats(g.frame(), g.outcomes(), BOOT)
    assert stats.normalised_point.tolist() == pytest.approx([0.0, 0.5, 1.0, 0.0])
    frame = annotate(stats)
    lo, hi = frame.loc[1, "normalised_privacy_ci_low"], frame.loc[1, "normalised_privacy_ci_high"]
    assert lo < 0.5 < hi and hi - lo < 0.3
    u_lo, u_hi = frame.loc[1, "utility_ci_low"], frame.loc[1, "utility_ci_high"]
    assert u_lo < 0.8 < u_hi
    # Empirical privacy's interval is the attack score's, mirrored.
    assert frame.loc[1, "empirical_privacy_ci_low"] == pytest.approx(
        1 - frame.loc[1, "attack_score_ci_high"]
    )


def test_the_mse_direction_and_the_missing_reference() -> None:
    g = Grid()
    # An error metric: the undefended MSE is small, the baseline's large.
    g.add("none", 0, "mse", 0.1, 0.9, baseline=0.9, metric="embedding_mse")
    g.add("a", 1, "mse", 0.5, 0.8, baseline=0.9, metric="embedding_mse")  # (0.1−.5)/(0.1−.9)
    # No none row for this attack: the reference is the perfect score 1.
    g.add("a", 1, "only", 0.55, 0.8, baseline=0.1)  # (1 − 0.55) / (1 − 0.1) = 0.5
    stats = run_stats(g.frame(), g.outcomes(), BOOT)
    assert stats.normalised_point.tolist() == pytest.approx([0.0, 0.5, 0.5])


def test_worst_case_is_the_strongest_attack_of_the_family_on_every_resample() -> None:
    g = Grid()
    for attack in ("a", "b"):
        g.add("none", 0, attack, 0.9, 0.9)
    g.add("t2t", 1, "a", 0.3, 0.8)  # 0.75
    g.add("t2t", 1, "b", 0.7, 0.8)  # 0.25: the strongest
    g.add("t2t", 1, "attr", 0.6, 0.8, baseline=0.5, family="attribute[x]")
    g.add("none", 0, "attr", 0.9, 0.9, baseline=0.5, family="attribute[x]")
    stats = run_stats(g.frame(), g.outcomes(), BOOT)
    points = family_points(stats)
    t = points.table.set_index(["family", "label"])
    assert t.loc[("text", "t2t"), "privacy"] == pytest.approx(0.25)
    assert t.loc[("text", "t2t"), "strongest"] == "b"
    assert t.loc[("attribute[x]", "t2t"), "privacy"] == pytest.approx(0.75)
    row = list(t.index).index(("text", "t2t"))
    a_rows = stats.normalised[(stats.frame["label"] == "t2t").to_numpy()][:2]
    assert np.allclose(points.privacy[row], np.nanmin(a_rows, axis=0))


def test_rank_stability_separates_clear_gaps_from_ties() -> None:
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    g.add("good", 1, "a", 0.2, 0.85)
    g.add("bad", 1, "a", 0.8, 0.6)
    g.add("twin1", 1, "a", 0.5, 0.7)
    g.add("twin2", 1, "a", 0.51, 0.7)
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    fam = board.families.set_index("label")
    assert fam.loc["good", "rank"] == 1 and fam.loc["good", "stability"] > 0.95
    assert fam.loc["bad", "rank"] == 4 and fam.loc["bad", "rank_ci_low"] == 4
    assert "twin1" in fam.loc["twin2", "tied_with"] and "twin2" in fam.loc["twin1", "tied_with"]
    assert "good" not in fam.loc["twin1", "tied_with"]
    lo, hi = fam.loc["good", "hv_ci_low"], fam.loc["good", "hv_ci_high"]
    assert lo <= fam.loc["good", "hypervolume"] <= hi
    table = board_tables(board)["family text"]
    good = next(r for r in table.rows if r[2] == "good")
    assert good[1] == "1–1" and good[table.headers.index("holds rank")].endswith("%")


def test_a_failed_attack_keeps_the_defense_out_of_its_family_ranking() -> None:
    g = Grid()
    for attack in ("a", "b"):
        g.add("none", 0, attack, 0.9, 0.9)
        g.add("t2t", 1, attack, 0.5, 0.8)
    g.add("cape", 1, "a", 0.2, 0.8)
    g.add("cape", 1, "b", 0.2, 0.8, status="failed")
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    fam = board.families.set_index("label")
    assert pd.isna(fam.loc["cape", "rank"]) and "b failed at eta=1" in fam.loc["cape", "reason"]
    assert fam.loc["t2t", "rank"] == 1
    overall = board.overall.set_index("label")
    assert pd.isna(overall.loc["cape", "rank"]) and overall.loc["t2t", "rank"] == 1


def test_utility_at_matched_privacy_uses_measured_points_only() -> None:
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    g.add("t2t", 1, "a", 0.5, 0.85)  # privacy 0.5
    g.add("t2t", 2, "a", 0.26, 0.7)  # privacy 0.8
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    m = board.matched.set_index(["label", "level"])
    assert m.loc[("t2t", 0.5), "utility"] == pytest.approx(0.85)
    assert m.loc[("t2t", 0.75), "utility"] == pytest.approx(0.7)
    assert math.isnan(m.loc[("t2t", 0.9), "utility"])
    lo, hi = m.loc[("t2t", 0.75), ["utility_ci_low", "utility_ci_high"]]
    assert lo < 0.7 < hi
    row = board_tables(board)["matched text"].rows[0]
    assert row[0] == "t2t" and row[3] == "not reached" and row[2].startswith("0.700 [")


def test_degenerate_utility_and_useless_defenses_are_said_loudly() -> None:
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.45)  # undefended utility below chance 0.5
    g.add("t2t", 1, "a", 0.5, 0.45)
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert any(n.startswith("WARNING: the undefended utility") for n in board.notes)
    assert any("every defense's worst-case hypervolume is 0" in n for n in board.notes)
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)  # a measurable advantage: 0.9 against a baseline of 0.1
    g.add("t2t", 1, "a", 0.95, 0.8)  # less raw privacy and less utility than none
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert any("privatizing bought nothing" in n for n in board.notes)


def test_without_outcomes_the_board_is_point_estimates_with_a_note() -> None:
    g = Grid()
    g.add("none", 0, "a", 0.9, 0.9)
    g.add("t2t", 1, "a", 0.5, 0.8)
    board = leaderboard(g.frame(), 0.5)
    fam = board.families.set_index("label")
    assert fam.loc["t2t", "rank"] == 1 and math.isnan(fam.loc["t2t", "hv_ci_low"])
    assert any("No per-document outcomes" in n for n in board.notes)


def test_seeds_average_and_report_their_spread() -> None:
    g = Grid()
    for seed, score in ((0, 0.5), (1, 0.3)):
        g.add("none", 0, "a", 0.9, 0.9, seed=seed)
        g.add("t2t", 1, "a", score, 0.8, seed=seed)
    t = family_points(run_stats(g.frame(), g.outcomes(), BOOT)).table.set_index("label")
    assert t.loc["t2t", "n_seeds"] == 2
    assert t.loc["t2t", "privacy"] == pytest.approx((0.5 + 0.75) / 2)
    assert t.loc["t2t", "privacy_sd"] == pytest.approx(np.std([0.5, 0.75], ddof=1))


def test_hypervolume_samples_and_ranks_match_the_scalar_definitions() -> None:
    from privaudit.leaderboard.families import hypervolume

    rng = np.random.default_rng(0)
    x, y = rng.random((5, 7)), 0.5 + 0.5 * rng.random((5, 7))
    hv = hypervolume_samples(x, y, 0.5)
    for b in range(7):
        assert hv[b] == pytest.approx(hypervolume(x[:, b], y[:, b], chance=0.5))
    ranks = sample_ranks(np.array([[0.3], [0.3], [0.1]]), np.array([False, True, False]))
    assert ranks[:, 0].tolist() == [1, 2, 3]  # the identity label loses the tie


def test_family_of_older_rows() -> None:
    assert family_of("attribute-inference[gender]", "attribute_accuracy") == "attribute[gender]"
    assert family_of("ner", "entity_f1") == "entity"
    assert family_of("geia[entities]", "generation_f1") == "entity"
    assert family_of("nn-inversion", "token_recovery") == "text"


def test_bootstrap_of_a_whole_quick_sized_run_has_one_sample_row_per_result_row() -> None:
    """400 rows × 1,000 resamples (its cost is measured in benchmarks/test_statistics.py)."""
    g = Grid()
    for v in range(40):
        for a in range(10):
            g.add("t2t", v, f"a{a}", 0.5, 0.8)
    stats = run_stats(g.frame(), g.outcomes(), Bootstrap(resamples=1000))
    assert stats.score.shape == stats.utility.shape == (400, 1000)
    assert np.isfinite(stats.score).all() and np.isfinite(stats.utility).all()


def test_an_attack_with_no_measurable_advantage_sets_no_worst_case() -> None:
    """GEIA recovering 1 % of entity strings from the undefended text (0 % by its baseline)
    would make any defense with one more lucky document score normalised privacy 0."""
    g = Grid()
    g.add("none", 0, "strong", 0.9, 0.9, family="entity")
    g.add("none", 0, "tiny", 0.01, 0.9, baseline=0.0, family="entity")
    g.add("t2t", 1, "strong", 0.5, 0.8, family="entity")  # 0.5
    g.add("t2t", 1, "tiny", 0.015, 0.8, baseline=0.0, family="entity")  # would be 0
    board = leaderboard(g.frame(), 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    point = board.points.set_index("label").loc["t2t"]
    assert point["privacy"] == pytest.approx(0.5) and point["strongest"] == "strong"
    assert any(n.startswith("tiny: against the undefended release") for n in board.notes)
    stats = run_stats(g.frame(), g.outcomes(), BOOT)
    assert np.isnan(stats.normalised_point[3]) and np.isnan(stats.normalised[3]).all()


def test_a_cells_fit_effect_is_one_draw_shared_by_every_use_and_cells_are_independent() -> None:
    """Attacker randomness (``fit_sd``): each cell's resampled score moves by its own
    N(0, sd²) draws, the same in its privacy and as the reference of the defended rows'
    normalised privacy; two cells' draws are independent; point estimates do not move."""
    g = Grid()
    g.add("none", 0, "a", 0.7, 0.9)
    g.add("t2t", 1, "a", 0.5, 0.8)
    g.add("t2t", 2, "a", 0.4, 0.7)
    frame = g.frame()
    plain = run_stats(frame, g.outcomes(), BOOT)
    noisy = run_stats(frame, g.outcomes(), BOOT, fit_sd={"a": 0.05})
    effects = noisy.score - plain.score
    for r, key in enumerate(frame["cell_key"]):
        np.testing.assert_allclose(effects[r], BOOT.fit_effects(key, 0.05))
    assert abs(np.corrcoef(effects[1], effects[2])[0, 1]) < 0.15  # separate fits
    np.testing.assert_allclose(noisy.privacy, 1 - noisy.score)
    ref, base = noisy.score[0], noisy.baseline[1]
    expected = np.clip((ref - noisy.score[1]) / (ref - base), 0, 1)
    np.testing.assert_allclose(noisy.normalised[1], expected)
    np.testing.assert_allclose(noisy.normalised_point, plain.normalised_point)
    # The paired difference of two defended cells gains 2·sd² from the fits.
    assert np.var(effects[1] - effects[2]) == pytest.approx(2 * 0.05**2, rel=0.2)
    board = leaderboard(frame, 0.5, outcomes=g.outcomes(), bootstrap=BOOT, fit_sd={"a": 0.05})
    assert any("attacker randomness" in n and "a 0.05" in n for n in board.notes)
    plain_board = leaderboard(frame, 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert not any("attacker randomness" in n for n in plain_board.notes)


def test_the_declared_fit_sds_are_read_from_the_attack_classes() -> None:
    from privaudit.registry import ATTACKS, attack_fit_sds

    labels = ["attribute-inference[gender]", "nn-inversion", "my-label", "geia[entities]"]
    sds = attack_fit_sds(labels)
    assert sds["attribute-inference[gender]"] == ATTACKS.get("attribute-inference").fit_sd > 0
    assert "nn-inversion" not in sds and "my-label" not in sds  # deterministic, unknown
    assert all(ATTACKS.get(n).fit_sd >= 0 for n in ATTACKS.builtins())


def test_a_plugin_attack_with_a_bad_fit_sd_is_refused_when_resolved() -> None:
    from privaudit.attacks.nn_inversion import NNInversion
    from privaudit.registry import _check_attack

    bad = type("Bad", (NNInversion,), {"fit_sd": -0.1})
    with pytest.raises(ValueError, match=r"fit_sd is -0\.1"):
        _check_attack("bad", bad)


def test_a_points_utility_fit_effect_widens_its_interval_and_is_shared_by_its_rows() -> None:
    """Utility-evaluator randomness (``utility_fit_sd``): each point's utility resamples move
    by one N(0, sd²) draw per resample from its own stream, the same on every row of that
    point; sd 0 changes nothing; the intervals widen by about the declared sd."""
    g = Grid()
    g.add("none", 0, "a", 0.7, 0.8)
    g.add("t2t", 1, "a", 0.5, 0.75)
    g.add("t2t", 1, "b", 0.4, 0.75)  # same point as the row above: the same utility draws
    frame = g.frame().assign(utility_evaluator="peft[lora]")
    plain = run_stats(frame, g.outcomes(), BOOT)
    zero = run_stats(frame, g.outcomes(), BOOT, utility_fit_sd=0.0)
    np.testing.assert_array_equal(zero.utility, plain.utility)
    for sd in (0.03, {"peft": 0.03}, {"peft[lora]": 0.03}):  # one number, name, label
        noisy = run_stats(frame, g.outcomes(), BOOT, utility_fit_sd=sd)
        effects = noisy.utility - plain.utility
        for r, point in enumerate(frame["point"]):
            np.testing.assert_allclose(effects[r], BOOT.fit_effects(f"utility|{point}", 0.03))
        np.testing.assert_array_equal(noisy.score, plain.score)  # attack samples untouched
    np.testing.assert_array_equal(effects[1], effects[2])
    var_plain, var_noisy = np.var(plain.utility[0]), np.var(noisy.utility[0])
    assert var_noisy - var_plain == pytest.approx(0.03**2, rel=0.25)
    lo, hi = plain.ci(plain.utility)
    nlo, nhi = noisy.ci(noisy.utility)
    assert np.all(nhi - nlo > hi - lo)
    widened = 2 * 1.96 * np.sqrt(var_plain + 0.03**2)  # normal approximation of the width
    assert nhi[0] - nlo[0] == pytest.approx(widened, rel=0.15)
    columns = annotate(noisy)
    np.testing.assert_allclose(columns["utility_ci_low"], nlo)
    other = run_stats(frame, g.outcomes(), BOOT, utility_fit_sd={"service": 0.03})
    np.testing.assert_array_equal(other.utility, plain.utility)  # another evaluator's sd


def test_a_paired_utility_difference_stays_paired_and_gains_two_fit_variances() -> None:
    """Two points scored on the same test documents: their utility difference keeps its
    document pairing (its document variance is far below the sum of the two) and adds
    2·sd² from the two independent fits."""
    n = 300
    rng = np.random.default_rng(0)
    u = rng.random(n)  # each document's difficulty, shared by the two points
    frame = pd.DataFrame(
        [
            {
                "defense": "t2t",
                "label": "t2t",
                "knob_value": float(k),
                "attack": "a",
                "seed": 0,
                "status": "ok",
                "attack_metric": "token_recovery",
                "attack_score": np.nan,
                "attack_baseline": 0.0,
                "cell_key": f"c{k}",
                "point": f"p{k}",
                "n_test": n,
                "family": "text",
                "utility_evaluator": "service",
            }
            for k in (1, 2)
        ]
    )
    outcomes = Outcomes(
        {(f"p{k}", "utility"): Outcome.ratio(u < rate) for k, rate in ((1, 0.8), (2, 0.75))}
    )
    boot = Bootstrap(resamples=2000, seed=1)
    plain = run_stats(frame, outcomes, boot)
    noisy = run_stats(frame, outcomes, boot, utility_fit_sd={"service": 0.02})
    d_plain = plain.utility[0] - plain.utility[1]
    d_noisy = noisy.utility[0] - noisy.utility[1]
    assert np.var(d_plain) < 0.3 * (np.var(plain.utility[0]) + np.var(plain.utility[1]))
    assert np.var(d_noisy) - np.var(d_plain) == pytest.approx(2 * 0.02**2, rel=0.2)
    assert np.mean(d_noisy) == pytest.approx(0.05, abs=0.003)


def test_the_board_adds_the_evaluators_declared_sd_and_says_so() -> None:
    from privaudit.registry import UTILITY

    g = Grid()
    g.add("none", 0, "a", 0.7, 0.9)
    g.add("t2t", 1, "a", 0.5, 0.8)
    frame = g.frame().assign(utility_evaluator="service")
    sd = UTILITY.get("service").fit_sd
    board = leaderboard(frame, 0.5, outcomes=g.outcomes(), bootstrap=BOOT)
    assert any(
        "evaluator's training randomness" in n and f"service {sd:.3g}" in n for n in board.notes
    )
    point = board.points.set_index("label").loc["t2t"]
    plain = leaderboard(frame, 0.5, outcomes=g.outcomes(), bootstrap=BOOT, utility_fit_sd=0.0)
    plain_point = plain.points.set_index("label").loc["t2t"]
    width = point["utility_ci_high"] - point["utility_ci_low"]
    assert width > plain_point["utility_ci_high"] - plain_point["utility_ci_low"]
    assert not any("randomness" in n for n in plain.notes)


def test_the_declared_utility_fit_sds_are_read_from_the_evaluator_classes() -> None:
    from privaudit.registry import UTILITY, _check_utility, utility_fit_sds
    from privaudit.utility.probe import Probe

    sds = utility_fit_sds(["service", "probe", "peft[lora]", "my-evaluator", "x:Y"])
    assert sds["service"] == UTILITY.get("service").fit_sd > 0
    assert "probe" not in sds and "my-evaluator" not in sds  # deterministic, unknown
    assert all(UTILITY.get(n).fit_sd >= 0 for n in UTILITY.builtins())
    with pytest.raises(ValueError, match=r"fit_sd is -0\.1"):
        _check_utility("bad", type("Bad", (Probe,), {"fit_sd": -0.1}))
