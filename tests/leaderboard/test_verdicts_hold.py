"""Issue 37, the leaderboard half: verdicts that hold under scrutiny. Power lines that count
the fits' randomness, family-wise confidence for the headline's comparative claims, and a
family the corpus cannot score left out of the overall ranking; boards built from synthetic
per-document outcomes (no model), and one small run on a file corpus without entities."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from privaudit.leaderboard.board import Leaderboard, leaderboard
from privaudit.leaderboard.families import hypervolume
from privaudit.leaderboard.figures import pareto_figure
from privaudit.leaderboard.paired import FamilyPower
from privaudit.leaderboard.verdict_words import (
    POWER_CAPTION,
    headline,
    power_lines,
)
from privaudit.metrics.outcomes import Outcome
from privaudit.metrics.stats import Bootstrap, Outcomes
from tests.conftest import TINY
from tests.leaderboard.sim_rows import simulated_row

BASE = 0.1  # the attacks' no-information baseline
#: level: (attack score, utility) of every defense on a synthetic board.
LEVELS = {1: (0.55, 0.62), 2: (0.7, 0.75), 3: (0.85, 0.85)}


def synthetic_board(
    rep: int,
    *,
    n: int = 1000,
    defenses: int = 10,
    attacks: tuple[str, ...] = ("a", "b"),
    shift: dict[str, float] | None = None,
    resamples: int = 250,
    fit_sd: float = 0.0,
    utility_fit_sd: float = 0.0,
    flat: dict[str, str] | None = None,
) -> Leaderboard:
    """A board of ``defenses`` defenses d0.. at :data:`LEVELS`, each attack cell and utility
    drawn per document (Bernoulli) at its true rate; ``shift`` lowers a defense's attack
    scores (more private); ``flat`` (attack: its family) scores the baseline everywhere, the
    undefended release included. Straight through :func:`leaderboard`, no run."""
    rng = np.random.default_rng([rep, 37])
    rows, entries = [], {}

    def add(label: str, value: float, attack: str, score: float, util: float) -> None:
        key, point = f"{label}|{value}|{attack}", f"{label}|{value}"
        if (point, "utility") not in entries:
            entries[(point, "utility")] = Outcome.ratio((rng.random(n) < util).astype(float))
        if attack in (flat or {}):
            score = BASE  # learns nothing, even from the original
        hits = (rng.random(n) < score).astype(float)
        entries[(key, "attack")] = Outcome.ratio(hits)
        entries[(key, "baseline")] = Outcome.ratio(np.full(n, BASE))
        rows.append(
            simulated_row(
                label,
                value,
                attack,
                family=(flat or {}).get(attack, "text"),
                seed=0,
                hits=hits,
                utility=float(entries[(point, "utility")].value()),
                key=key,
                point=point,
                baseline=BASE,
            )
        )

    for attack in attacks:
        add("none", 0, attack, 0.9, 0.9)
    for d in range(defenses):
        for level, (score, util) in LEVELS.items():
            for attack in attacks:
                add(f"d{d}", level, attack, score - (shift or {}).get(f"d{d}", 0.0), util)
    return leaderboard(
        pd.DataFrame(rows),
        0.5,
        outcomes=Outcomes(entries),
        bootstrap=Bootstrap(resamples, 0.95, rep),
        fit_sd={a: fit_sd for a in attacks},
        utility_fit_sd=utility_fit_sd,
    )


def claims(board: Leaderboard) -> tuple[bool, bool]:
    """(a "beaten" or "best" claim, a "best" claim) in the board's only family."""
    assert board.verdict is not None
    (fv,) = board.verdict.families
    return len(fv.undominated) < fv.n_ranked, len(fv.undominated) == 1


def test_identical_defenses_are_almost_never_said_to_beat_each_other() -> None:
    """10 identical defenses, 3 levels, 2 attacks, 1,000 victims, 100 boards: a "beaten" or
    "best" claim in at most 5 % of them (per-pair intervals made one in 59 %)."""
    found = [claims(synthetic_board(rep, resamples=400)) for rep in range(100)]
    beaten = sum(c for c, _ in found)
    assert beaten <= 5, beaten
    assert not any(b for _, b in found)
    last = synthetic_board(0)
    assert last.verdict is not None
    (line, *_) = dict(headline(last.verdict))["text"]
    assert line.startswith("not beaten with 95 % family-wise confidence by any other defense")


def test_one_truly_better_defense_is_still_found() -> None:
    board = synthetic_board(1, shift={"d0": 0.15})
    assert board.verdict is not None
    (fv,) = board.verdict.families
    assert [s.label for s in fv.undominated] == ["d0"]
    (line, *_) = dict(headline(board.verdict))["text"]
    assert line.startswith("best: d0 ") and "95 % family-wise confidence (45 pairs" in line
    assert fv.separated >= 9 and fv.separated <= fv.separated_raw  # adjusted never adds


def test_a_family_with_one_ranked_defense_makes_no_comparative_claim() -> None:
    board = synthetic_board(2, defenses=1, resamples=200)
    assert board.verdict is not None
    lines = dict(headline(board.verdict))["text"]
    assert lines[0].startswith("only d0 ") and "no other defense to compare it with" in lines[0]
    assert not any("beats every other" in line for line in lines)


def _true_diff(shift: float) -> float:
    """The hypervolume difference of d0 (shifted) and d1 at the true rates (one attack)."""

    def hv(s: float) -> float:
        privacy = [(0.9 - (score - s)) / (0.9 - BASE) for score, _ in LEVELS.values()]
        return hypervolume(privacy, [u for _, u in LEVELS.values()], chance=0.5)

    return hv(shift) - hv(0.0)


def test_the_units_needed_count_the_fits_and_match_a_run_of_that_size() -> None:
    """Attack fit sd .01, service .015: the victims and seeds the board says a true
    difference needs (from the resampling spread, not the observed difference); at that size
    the run's own minimum detectable difference is about that difference (within 1.3×)."""
    from tests.leaderboard.claims_boards import claims_board, true_hv

    kw = {"defenses": 2, "attacks": 1, "true_fit_sd": 0.01, "true_utility_fit_sd": 0.015,
          "resamples": 400, "shift": {"d0": 0.04}}  # fmt: skip
    diff = true_hv(3, 0.04) - true_hv(3)
    small = claims_board(3, **kw)
    assert small.verdict is not None
    power = small.verdict.families[0].power
    assert power is not None and power.se_fit > 0.01  # two cells and two points per difference
    need = power.needed_for(diff)
    # 80 % power: the fits' share alone is past (diff / 2.8)², so seeds too.
    assert need.feasible and need.seeds > 1 and 1000 < need.units < 100_000
    big = claims_board(3, n=round(need.units), seeds=need.seeds, **kw)
    assert big.verdict is not None
    again = big.verdict.families[0].power
    assert again is not None and again.seeds == need.seeds
    assert diff / 1.3 < again.mdd < diff * 1.3, (diff, again.mdd)


def test_seeds_when_the_fits_alone_span_the_difference() -> None:
    z = 1.959963984540054
    p = FamilyPower(
        n=1000, seeds=1, crit=z, se=0.0252, se_fit=0.018, se_low=0.0252, se_high=0.0252, n_pairs=1
    )
    # (z + z80) · .018 ≈ .050 > .04: no number of victims at one seed, so more seeds.
    need = p.needed_for(0.04)
    assert need.feasible and need.seeds >= 2 and need.units > 1000
    assert not p.needed_for(0.004).feasible  # beyond 100 seeds or 100 × the victims
    assert "refits" in POWER_CAPTION and "never from an observed difference" in POWER_CAPTION


def test_the_power_lines_of_a_board_with_fit_noise() -> None:
    board = synthetic_board(
        4, defenses=3, attacks=("a",), fit_sd=0.01, utility_fit_sd=0.015, resamples=300
    )
    assert board.verdict is not None
    lines = power_lines(board.verdict)
    fv = board.verdict.families[0]
    assert fv.power is not None and fv.power.se_fit > 0
    assert len(lines) == 2 and not any(f"d{i}" in ln for ln in lines for i in range(3))
    assert f"{fv.power.mdd:.3f}" in lines[0]


def test_pareto_plots_are_labelled_by_target_rate_with_error_bars() -> None:
    board = synthetic_board(5, defenses=1, attacks=("a",), resamples=200)
    rows = []
    for value, rate in ((1, 0.8), (2, 0.5), (3, 0.2)):
        rows.append(
            {
                "defense": "t2t",
                "label": "t2t",
                "knob": "eta",
                "knob_value": 100 + value,
                "target_rate": rate,
                "attack": "a",
                "attack_metric": "token_recovery",
                "utility_metric": "balanced_accuracy",
                "status": "ok",
                "empirical_privacy": 0.2 * value,
                "utility": 0.9 - 0.1 * value,
                "empirical_privacy_ci_low": 0.2 * value - 0.05,
                "empirical_privacy_ci_high": 0.2 * value + 0.05,
                "utility_ci_low": 0.85 - 0.1 * value,
                "utility_ci_high": 0.95 - 0.1 * value,
            }
        )
    fig = pareto_figure(pd.DataFrame(rows), attack="a", chance=0.5)
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"rate=0.8", "rate=0.5", "rate=0.2"} <= texts, texts
    assert not any(t.startswith("eta=") for t in texts)
    from matplotlib.collections import LineCollection

    bars = [c for c in fig.axes[0].collections if isinstance(c, LineCollection)]
    assert len(bars) >= 2  # horizontal and vertical error bars
    assert board.points["target_rate"].isna().all()  # a knob grid: labelled by its knob


def test_a_file_corpus_without_entities_is_ranked_overall(tmp_path: Path) -> None:
    """A review corpus with author gender and no entity annotation, none and t2t at three
    target rates: ner is n/a for want of truth, so the entity family is left out of the
    overall ranking with one line, t2t is ranked overall, and the headline and the notes
    say the same about beating the undefended release."""
    from privaudit.audit.config import load_config
    from privaudit.outputs import run_grid

    rng = np.random.default_rng(0)
    n = 240
    gender = np.where(np.arange(n) % 2, "F", "M")
    stars = rng.choice([1, 5], size=n)
    says = {"F": "my husband and i", "M": "my wife and i"}
    texts = [
        f"{says[g]} found it {'great lovely' if s == 5 else 'awful rude'} place {i} again"
        for i, (g, s) in enumerate(zip(gender, stars, strict=True))
    ]
    path = tmp_path / "reviews.csv"
    pd.DataFrame({"review": texts, "stars": stars, "gender": gender}).to_csv(path, index=False)
    config = load_config(
        {
            "name": "own",
            "backbone": TINY,
            "corpus": {
                "name": "file",
                "params": {
                    "path": str(path),
                    "text": "review",
                    "label": "stars",
                    "attributes": {"gender": "gender"},
                },
            },
            "defenses": [{"name": "none"}, {"name": "t2t", "target_rates": [0.2, 0.5, 0.8]}],
            "attacks": [
                "ner",
                {"name": "attribute-inference", "params": {"epochs": 40, "hidden": 32}},
            ],
            "utility": "probe",
            "seeds": [0],
        }
    )
    result = run_grid(config, run_dir=tmp_path / "run", progress=False)
    frame, board = result.frame, result.board
    ner = frame[frame["attack"] == "ner"]
    assert (ner["status"] == "n/a").all() and (ner["na_cause"] == "truth").all()
    assert board is not None and board.verdict is not None
    overall = board.overall.set_index("label")
    assert overall.loc["t2t", "rank"] == 1 and overall.loc["t2t", "families"] == "1 of 1"
    dropped = [n for n in board.notes if n.startswith("entity: left out of the overall ranking")]
    assert len(dropped) == 1 and "no victim has an entity annotation" in dropped[0]
    assert not any("could read its releases" in n for n in board.notes)
    fam = board.families.set_index(["family", "label"])
    assert "the corpus has no truth" in fam.loc[("entity", "t2t"), "reason"]
    lines = dict(headline(board.verdict))
    assert lines["entity"][0].startswith("not scored: this corpus has no truth")
    gender_lines = lines["attribute[gender]"]
    beats = any(ln.startswith("beat the undefended release") for ln in gender_lines)
    bought_nothing = any(
        n.startswith("attribute[gender]: no defense beats the undefended") for n in board.notes
    )
    assert beats != bought_nothing  # one definition: headline and notes agree
    assert not any("no defense's frontier beats" in n for n in board.notes)
    assert (tmp_path / "run" / "pareto_attribute-inference-gender.png").exists()


def test_a_family_whose_attacks_learn_nothing_is_left_out_of_the_overall_ranking() -> None:
    """SynthPAI's gender/income/education/region: attribute inference does no better than the
    majority guess even on the undefended release, so no defense is ranked in those
    families; the overall ranking is over the families that rank, not empty."""
    board = synthetic_board(
        0, defenses=3, shift={"d0": 0.2}, resamples=100, flat={"b": "attribute[x]"}
    )
    fam = board.families.set_index(["family", "label"])
    assert pd.isna(fam.loc[("attribute[x]", "d0"), "rank"])
    assert "no measurable advantage" in fam.loc[("attribute[x]", "d0"), "reason"]
    overall = board.overall.set_index("label")
    assert overall.loc["d0", "rank"] == 1 and overall.loc["d0", "families"] == "1 of 1"
    said = [n for n in board.notes if n.startswith("attribute[x]: no defense is ranked")]
    assert len(said) == 1 and "left out of the overall ranking" in said[0]
    assert not any(n.startswith("Not ranked overall") for n in board.notes)
    assert board.verdict is not None
    lines = dict(headline(board.verdict))
    assert "left out of the overall ranking" in lines["attribute[x]"][0]
