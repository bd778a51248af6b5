"""Null boards with clustered people (issue 46): identical defenses, 60 people with 16
documents each and a person effect. Resampling documents makes false family-wise claims;
resampling people does not. The full measurement (>= 200 boards) is
``benchmarks/null_boards_people.py``."""

from __future__ import annotations

from privaudit.leaderboard.verdict_words import decisiveness_table
from tests.leaderboard.people_boards import false_claim, people_board


def test_the_person_bootstrap_controls_what_the_document_bootstrap_does_not() -> None:
    """A strong person-by-cell effect (sd 1 on the logit): 10 of these 24 boards claim a
    difference between identical defenses when documents are resampled, none when people are."""
    reps = range(24)
    docs = sum(false_claim(people_board(r, person_bootstrap=False, cell_sd=1.0)) for r in reps)
    people = sum(false_claim(people_board(r, person_bootstrap=True, cell_sd=1.0)) for r in reps)
    assert people <= 2, people
    assert docs >= people + 5, (docs, people)


def test_the_board_says_who_the_victims_are() -> None:
    board = people_board(0, person_bootstrap=True, resamples=50)
    assert board.notes[0].startswith("Victims: 960 documents by 60 people; every interval")
    docs = people_board(0, person_bootstrap=False, resamples=50)
    assert docs.notes[0].startswith("Victims: 960 documents; intervals resample documents")


def test_the_decisiveness_table_counts_documents_and_the_people_they_are_by() -> None:
    def victims(person_bootstrap: bool) -> str:
        board = people_board(0, person_bootstrap=person_bootstrap, resamples=50)
        assert board.verdict is not None
        return decisiveness_table(board.verdict).rows[0][-1]

    assert victims(True) == "960 by 60 people"
    assert victims(False) == "960"
