"""Simulated boards for the issue-47 checks of the board's comparative claims.

``claims_board(rep, ...)`` builds a board straight through
:func:`privaudit.leaderboard.board.leaderboard` (no run). Every attack cell and utility is
drawn per document (Bernoulli) at its true rate, plus, where ``true_fit_sd`` /
``true_utility_fit_sd`` are set, a per-cell (per-point) shift of that rate drawn once per board:
the attackers' and the service's refit spread, declared to the board as ``fit_sd`` /
``utility_fit_sd`` (by default as it truly is). Defenses ``d0..`` are identical in truth
(``shift`` lowers one's attack scores), at ``points`` knob points each; defenses ``z0..``
(``nothing``) buy nothing: every point is the undefended release's (same attack score, same
utility). ``families`` families of ``attacks`` equally strong attacks each.

Only the public ``leaderboard`` call is used, so the measurement script
(``benchmarks/null_boards_47.py``) runs it against an older tree too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from privaudit.leaderboard.board import Leaderboard, leaderboard
from privaudit.leaderboard.families import hypervolume
from privaudit.metrics.outcomes import Outcome
from privaudit.metrics.stats import Bootstrap, Outcomes, sd_upper_bound
from tests.leaderboard.sim_rows import simulated_row

BASE = 0.1  # the attacks' no-information baseline
NONE_SCORE, NONE_UTILITY = 0.9, 0.9
#: level: (attack score, utility) of every identical defense.
LEVELS = {1: (0.55, 0.62), 2: (0.7, 0.75), 3: (0.85, 0.85)}
CHANCE = 0.5


def levels(points: int) -> dict[int, tuple[float, float]]:
    """The knob points of a defense: all three levels, or the middle one."""
    return LEVELS if points == 3 else {2: LEVELS[2]}


def true_hv(points: int = 3, shift: float = 0.0) -> float:
    """A defense's true worst-case hypervolume (normalised privacy: 0 at the undefended
    release's score, 1 at the baseline)."""
    lv = levels(points).values()
    privacy = [(NONE_SCORE - (s - shift)) / (NONE_SCORE - BASE) for s, _ in lv]
    return hypervolume(privacy, [u for _, u in lv], chance=CHANCE)


def claims_board(
    rep: int,
    *,
    n: int = 1000,
    defenses: int = 3,
    points: int = 3,
    nothing: int = 0,
    families: int = 1,
    attacks: int = 2,
    shift: dict[str, float] | None = None,
    resamples: int = 250,
    true_fit_sd: float = 0.0,
    true_utility_fit_sd: float = 0.0,
    fit_sd: float | None = None,
    utility_fit_sd: float | None = None,
    seeds: int = 1,
    measured_refits: int = 0,
    **board: Any,
) -> Leaderboard:
    """One simulated board (module docstring); ``board`` goes to ``leaderboard``.
    ``measured_refits``: the run also measures the fits' spread as a grid's ``fit_noise``
    does, from ``measured_refits`` refits beside the fit (the sample sd of those scores,
    drawn from the true spread on a stream of its own), and hands the board its upper bound,
    as a run does (:func:`privaudit.metrics.stats.sd_upper_bound`)."""
    rng = np.random.default_rng([rep, 47])
    rows, entries = [], {}
    fams = ["text"] + [f"text{f}" for f in range(2, families + 1)]

    def add(
        label: str, value: float, attack: str, family: str, score: float, util: float, seed: int
    ) -> None:
        key, point = f"{label}|{value}|{attack}|{seed}", f"{label}|{value}|{seed}"
        if (point, "utility") not in entries:
            u = util + rng.normal(0.0, true_utility_fit_sd) if true_utility_fit_sd else util
            entries[(point, "utility")] = Outcome.ratio((rng.random(n) < u).astype(float))
        s = score + rng.normal(0.0, true_fit_sd) if true_fit_sd else score
        hits = (rng.random(n) < s).astype(float)
        entries[(key, "attack")] = Outcome.ratio(hits)
        entries[(key, "baseline")] = Outcome.ratio(np.full(n, BASE))
        rows.append(
            simulated_row(
                label,
                value,
                attack,
                family=family,
                seed=seed,
                hits=hits,
                utility=float(entries[(point, "utility")].value()),
                key=key,
                point=point,
                baseline=BASE,
            )
        )

    names = [(fam, f"{fam}_a{j}") for fam in fams for j in range(attacks)]
    for seed in range(seeds):
        for fam, attack in names:
            add("none", 0, attack, fam, NONE_SCORE, NONE_UTILITY, seed)
        for d in range(defenses):
            for level, (score, util) in levels(points).items():
                for fam, attack in names:
                    s = score - (shift or {}).get(f"d{d}", 0.0)
                    add(f"d{d}", level, attack, fam, s, util, seed)
        for z in range(nothing):
            for level in levels(points):
                for fam, attack in names:
                    add(f"z{z}", level, attack, fam, NONE_SCORE, NONE_UTILITY, seed)
    if measured_refits:
        draw = np.random.default_rng([rep, 47, 1])
        k = measured_refits + 1
        board["measured_fit_sd"] = {
            a: sd_upper_bound(float(np.std(draw.normal(0.0, true_fit_sd, k), ddof=1)), k)
            for _, a in names
        }
        u_sd = float(np.std(draw.normal(0.0, true_utility_fit_sd, k), ddof=1))
        board["measured_utility_fit_sd"] = sd_upper_bound(u_sd, k)
    declared = true_fit_sd if fit_sd is None else fit_sd
    u_declared = true_utility_fit_sd if utility_fit_sd is None else utility_fit_sd
    return leaderboard(
        pd.DataFrame(rows),
        CHANCE,
        outcomes=Outcomes(entries),
        bootstrap=Bootstrap(resamples, 0.95, rep),
        fit_sd={a: declared for _, a in names},
        utility_fit_sd=u_declared,
        **board,
    )


def false_separation(board: Leaderboard) -> list[bool]:
    """Per family: whether it separates two defenses (all identical in truth)."""
    assert board.verdict is not None
    return [any(p.separated for p in fv.pairs) for fv in board.verdict.families]


def false_beats(board: Leaderboard) -> list[bool]:
    """Per family: whether it says a defense that buys nothing beats the undefended release."""
    assert board.verdict is not None
    return [any(lb.startswith("z") for lb in fv.beats_none) for fv in board.verdict.families]


def rank_intervals_apart(board: Leaderboard) -> bool:
    """Whether two identical defenses' rank intervals fail to overlap in some family."""
    f = board.families[board.families["rank"].notna()]
    for _, g in f.groupby("family"):
        lo, hi = g["rank_ci_low"].to_numpy(float), g["rank_ci_high"].to_numpy(float)
        for i in range(len(g)):
            for j in range(len(g)):
                if i != j and hi[i] < lo[j]:
                    return True
    return False


def covers(board: Leaderboard, label: str, truth: float) -> tuple[bool, bool]:
    """(whether ``label``'s hypervolume interval in the first family covers ``truth``, whether
    it misses low)."""
    row = board.families[(board.families["family"] == "text") & (board.families["label"] == label)]
    lo, hi = float(row["hv_ci_low"].iloc[0]), float(row["hv_ci_high"].iloc[0])
    return lo <= truth <= hi, hi < truth
