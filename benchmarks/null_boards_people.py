"""Null boards with clustered people (issue 46): the family-wise false-claim rate when the
board resamples documents and when it resamples people, on the same simulated outcomes.

    .venv/bin/python -m benchmarks.null_boards_people [boards] [cell_sd]

Identical defenses (3 defenses x 3 levels, 2 attacks), 60 people x 16 documents, a person
effect (sd 1 on the logit) and a person-by-cell effect (``cell_sd``): see
``tests/leaderboard/people_boards.py``. Prints each rate with its Clopper-Pearson interval."""

from __future__ import annotations

import sys

from scipy.stats import binomtest

from tests.leaderboard.people_boards import false_claim, people_board


def main(boards: int = 200, cell_sd: float = 0.5) -> None:
    for person in (False, True):
        k = sum(
            false_claim(people_board(r, person_bootstrap=person, cell_sd=cell_sd))
            for r in range(boards)
        )
        ci = binomtest(k, boards).proportion_ci(0.95, method="exact")
        what = "person bootstrap" if person else "document bootstrap"
        print(
            f"{what}: {k}/{boards} null boards with a family-wise false claim "
            f"({k / boards:.1%} [{ci.low:.1%}, {ci.high:.1%}])",
            flush=True,
        )


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 200,
        float(sys.argv[2]) if len(sys.argv) > 2 else 0.5,
    )
