"""Issue 47 (items 2-3): the board's comparative claims on simulated boards.

    nice .venv/bin/python -m benchmarks.null_boards_47 [setting ...] [--boards N]

Settings (``tests/leaderboard/claims_boards.py`` builds every board; 1,000 victims, 3 knob
points, 2 equally strong attacks per family, 250 resamples):

* ``fw10``, ``fw3``: null boards of 10 / 3 identical defenses, one family: the rate of a
  family-wise separation, of identical defenses' rank intervals that do not overlap, and of a
  power line that predicts a separation;
* ``fw10fit``: as ``fw10`` with the fits' spread real (attack sd .01, service .015) but
  declared 0 (item 1 of the issue measures it; here it is only reported);
* ``fw10meas``: as ``fw10fit``, with the spreads measured as a run's ``fit_noise`` does (the
  sample sd of the fit and 2 refits at the undefended point; the board uses the larger of
  measured and declared);
* ``fam3``: 3 identical defenses in each of 3 families: per family and per board;
* ``beats{D}x{K}``: D defenses (1 or 3) that buy nothing (every point the undefended
  release's) at K points (1 or 3): the rate of "beats the undefended release";
* ``cover``: one defense, 300 boards: how often its hypervolume interval covers the true
  value, and how often it misses low;
* ``power``: two defenses a true difference apart (only on a tree with ``difference=``):
  the victims and seeds the board says are needed for it, and the rate at which boards of
  that size separate the pair (40 boards).

Each rate is printed with its Clopper-Pearson 95 % interval. The same script runs against an
older tree (``git worktree add /tmp/wt47 <commit>``, copy this file and claims_boards.py
there, run it from there) for the before figures.
"""

from __future__ import annotations

import inspect
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from scipy.stats import binomtest

from privaudit.leaderboard.board import leaderboard
from privaudit.leaderboard.verdict_words import power_lines
from tests.leaderboard.claims_boards import (
    claims_board,
    covers,
    false_beats,
    false_separation,
    rank_intervals_apart,
    true_hv,
)

#: A power line that says more data would separate a named pair (the post-hoc fallacy).
PREDICTS = re.compile(r"cannot separate .* would|seeds per point .* would")


def rate(name: str, k: int, n: int) -> str:
    ci = binomtest(k, n).proportion_ci(0.95, method="exact") if n else None
    tail = f" [{ci.low:.1%}, {ci.high:.1%}]" if ci else ""
    line = f"{name}: {k}/{n} ({k / max(n, 1):.1%}{tail})"
    print(line, flush=True)
    return line


def fw(boards: int, **kw: Any) -> None:
    fam = brd = apart = predicts = total_f = 0
    for r in range(boards):
        b = claims_board(r, **kw)
        sep = false_separation(b)
        fam += sum(sep)
        total_f += len(sep)
        brd += any(sep)
        apart += rank_intervals_apart(b)
        assert b.verdict is not None
        predicts += any(PREDICTS.search(line) for line in power_lines(b.verdict))
        if (r + 1) % 50 == 0 and r + 1 < boards:  # a partial count, should the run be cut
            print(
                f"  after {r + 1}: per board {brd}, apart {apart}, predicts {predicts}", flush=True
            )
    rate("  false separation per family", fam, total_f)
    rate("  false separation per board", brd, boards)
    rate("  identical defenses' rank intervals apart", apart, boards)
    rate("  a power line predicts a separation", predicts, boards)


def beats(boards: int, nothing: int, points: int) -> None:
    k = sum(
        any(false_beats(claims_board(r, defenses=0, nothing=nothing, points=points)))
        for r in range(boards)
    )
    rate(f"  'beats the undefended release' ({nothing} defenses x {points} points)", k, boards)


def cover(boards: int) -> None:
    truth = true_hv(3)
    found = [covers(claims_board(r, defenses=1), "d0", truth) for r in range(boards)]
    rate(f"  d0's HV interval covers its true value {truth:.4f}", sum(c for c, _ in found), boards)
    rate("  misses low", sum(low for _, low in found), boards)


def power(boards: int, shift: float = 0.04) -> None:
    if "difference" not in inspect.signature(leaderboard).parameters:
        print("  (this tree has no leaderboard(difference=...))")
        return
    delta = true_hv(3, shift) - true_hv(3)
    kw = {
        "defenses": 2,
        "attacks": 1,
        "shift": {"d0": shift},
        "true_fit_sd": 0.01,
        "true_utility_fit_sd": 0.015,
        "resamples": 400,
    }
    first = claims_board(1000, difference=delta, **kw)
    assert first.verdict is not None
    (fv,) = first.verdict.families
    need = fv.power.needed_for(delta)
    print(f"  true difference {delta:.4f}: the board at 1,000 victims says {need}", flush=True)
    if need is None or not need.feasible:
        return
    n, seeds = int(need.units), int(need.seeds)
    hits = 0
    for r in range(boards):
        b = claims_board(r, n=n, seeds=seeds, **kw)
        assert b.verdict is not None
        hits += any(p.separated for p in b.verdict.families[0].pairs)
    rate(f"  separated at {n:,} victims and {seeds} seed(s) per point", hits, boards)
    mdd = fv.power.mdd
    print(f"  the board's minimum detectable difference at 1,000 victims: {mdd:.4f}", flush=True)


SETTINGS: dict[str, Callable[[int], None]] = {
    "fw10": lambda b: fw(b, defenses=10),
    "fw3": lambda b: fw(b, defenses=3),
    "fw10fit": lambda b: fw(
        b, defenses=10, true_fit_sd=0.01, true_utility_fit_sd=0.015, fit_sd=0.0, utility_fit_sd=0.0
    ),
    "fw10meas": lambda b: fw(
        b,
        defenses=10,
        true_fit_sd=0.01,
        true_utility_fit_sd=0.015,
        fit_sd=0.0,
        utility_fit_sd=0.0,
        measured_refits=2,
    ),
    "fam3": lambda b: fw(b, defenses=3, families=3),
    "beats1x1": lambda b: beats(b, 1, 1),
    "beats1x3": lambda b: beats(b, 1, 3),
    "beats3x1": lambda b: beats(b, 3, 1),
    "beats3x3": lambda b: beats(b, 3, 3),
    "cover": cover,
    "power": power,
}
DEFAULT_BOARDS = {"cover": 300, "power": 40}


def main(argv: list[str]) -> None:
    boards = None
    if "--boards" in argv:
        i = argv.index("--boards")
        boards = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2 :]
    for name in argv or list(SETTINGS):
        n = boards or DEFAULT_BOARDS.get(name, 200)
        t = time.time()
        print(f"{name} ({n} boards):", flush=True)
        SETTINGS[name](n)
        print(f"  [{time.time() - t:.0f} s]", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
