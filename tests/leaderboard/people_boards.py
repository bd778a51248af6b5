"""Null boards with people: identical defenses on victims who each wrote many documents.

``people_board(rep, units=...)`` builds a board straight through
:func:`privaudit.leaderboard.board.leaderboard` (no run) whose defenses are identical in
truth: every defense point's attack success on a document is Bernoulli with
``logit p = a_level + u_person + v_(person, cell)``: a person effect ``u`` shared by every
cell (some people are easier to attack) and a person-by-cell effect ``v`` (a defense point
and an attack happen to suit some people's documents: their vocabulary, their habits), the
same for all of a person's documents. Utility is drawn the same way. Shared by the tests
(``test_people_null_boards.py``) and the measurement script
(``benchmarks/null_boards_people.py``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from privaudit.leaderboard.board import Leaderboard, leaderboard
from privaudit.metrics.outcomes import Outcome
from privaudit.metrics.stats import Bootstrap, Outcomes
from privaudit.metrics.units import Units
from tests.leaderboard.sim_rows import simulated_row

BASE = 0.1
#: level: (logit of the attack's success, logit of utility) at the mean person.
LEVELS = {1: (0.0, 0.5), 2: (0.8, 1.1), 3: (1.6, 1.7)}


def people(n_people: int, per: int) -> Units:
    """``n_people`` people with ``per`` documents each, documents interleaved."""
    groups = np.tile(np.arange(n_people), per)
    return Units("person", tuple(int(g) for g in groups))


def people_board(
    rep: int,
    *,
    person_bootstrap: bool,
    n_people: int = 60,
    per: int = 16,
    defenses: int = 3,
    attacks: tuple[str, ...] = ("a", "b"),
    person_sd: float = 1.0,
    cell_sd: float = 0.5,
    resamples: int = 300,
) -> Leaderboard:
    """One null board (the same draws whichever bootstrap reads it)."""
    rng = np.random.default_rng([rep, 46])
    units = people(n_people, per)
    g = np.asarray(units.groups)
    n = len(g)
    u = rng.normal(0.0, person_sd, n_people)
    rows, entries = [], {}

    def bern(logit: float) -> np.ndarray:
        v = rng.normal(0.0, cell_sd, n_people)
        p = 1.0 / (1.0 + np.exp(-(logit + u[g] + v[g])))
        return (rng.random(n) < p).astype(float)

    def add(label: str, value: float, attack: str, score: float, util: float) -> None:
        key, point = f"{label}|{value}|{attack}", f"{label}|{value}"
        if (point, "utility") not in entries:
            entries[(point, "utility")] = Outcome.ratio(bern(util))
        hits = bern(score)
        entries[(key, "attack")] = Outcome.ratio(hits)
        entries[(key, "baseline")] = Outcome.ratio(np.full(n, BASE))
        rows.append(
            simulated_row(
                label,
                value,
                attack,
                family="text",
                seed=0,
                hits=hits,
                utility=float(entries[(point, "utility")].value()),
                key=key,
                point=point,
                baseline=BASE,
            )
        )

    for attack in attacks:
        add("none", 0, attack, 2.5, 2.2)
    for d in range(defenses):
        for level, (score, util) in LEVELS.items():
            for attack in attacks:
                add(f"d{d}", level, attack, score, util)
    boot = Bootstrap(resamples, 0.95, rep, units=units if person_bootstrap else None)
    return leaderboard(
        pd.DataFrame(rows),
        0.5,
        outcomes=Outcomes(entries),
        bootstrap=boot,
        fit_sd=dict.fromkeys(attacks, 0.0),
        utility_fit_sd=0.0,
    )


def false_claim(board: Leaderboard) -> bool:
    """Whether the board claims that one identical defense beats another in the family."""
    assert board.verdict is not None
    (fv,) = board.verdict.families
    return len(fv.undominated) < fv.n_ranked
