"""Null boards with clustered people (issue 46): identical defenses, 60 people with 16
documents each and a person effect. Resampling documents makes false family-wise claims;
resampling people does not. The full measurement (>= 200 boards) is
``benchmarks/null_boards_people.py``."""

from __future__ import annotations

from tests.leaderboard.people_boards import false_claim, people_board


def test_the_person_bootstrap_controls_what_the_document_bootstrap_does_not() -> None:
    reps = range(24)
    by_docs = sum(false_claim(people_board(r, person_bootstrap=False)) for r in reps)
    by_people = sum(false_claim(people_board(r, person_bootstrap=True)) for r in reps)
    assert by_people <= 2, by_people
    assert by_docs >= by_people + 4, (by_docs, by_people)


def test_the_board_says_who_the_victims_are() -> None:
    board = people_board(0, person_bootstrap=True, resamples=50)
    assert board.notes[0].startswith("Victims: 960 documents by 60 people; every interval")
    docs = people_board(0, person_bootstrap=False, resamples=50)
    assert docs.notes[0].startswith("Victims: 960 documents; intervals resample documents")
