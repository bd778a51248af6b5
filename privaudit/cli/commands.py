"""The ``privaudit`` command line: the commands, their options and how they end.

Each command lives with those it serves, registered on the one typer ``app`` of
:mod:`privaudit.cli.base` (with the exit codes and :func:`_user_errors`); importing them here,
in this order, is what lists them in ``privaudit --help`` in this order:
:mod:`.listing` (``list``), :mod:`.run` (``run``, ``pretrain``), :mod:`.privatize`
(``privatize``, ``calibrate``), :mod:`.audit` (``audit``, ``audit-guarantee``), :mod:`.board`
(``leaderboard``, ``report``) and :mod:`.tab` (``tab-score``).

What the commands share in reading their input is in :mod:`privaudit.cli.options`, what they
print to the terminal in :mod:`privaudit.cli.render`. Heavy libraries (and the run store, the
runner and the leaderboard) load inside the commands that use them, so ``privaudit --help``
and ``privaudit list`` answer at once (under two seconds) and ``privaudit privatize`` loads
only its defense. A mistake a user can make is a one-line ``ValueError`` (what was wrong, what
was expected, what to try), turned into exit code 2, never a traceback from deep inside torch.
"""

from __future__ import annotations

from privaudit.cli.base import (
    EXIT_CELLS_FAILED,
    EXIT_DISK_FULL,
    EXIT_GUARANTEE_VIOLATED,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_UNFINISHED,
    EXIT_USAGE,
    _user_errors,
    app,
)

# Import order is registration order: the order `privaudit --help` lists the commands in.
# isort: off
from privaudit.cli.listing import list_cmd
from privaudit.cli.run import pretrain, run
from privaudit.cli.privatize import calibrate, privatize
from privaudit.cli.audit import audit, audit_guarantee_cmd
from privaudit.cli.board import leaderboard_cmd, report
from privaudit.cli.tab import tab_score
# isort: on

__all__ = [
    "EXIT_CELLS_FAILED",
    "EXIT_DISK_FULL",
    "EXIT_GUARANTEE_VIOLATED",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "EXIT_UNFINISHED",
    "EXIT_USAGE",
    "_user_errors",
    "app",
    "audit",
    "audit_guarantee_cmd",
    "calibrate",
    "leaderboard_cmd",
    "list_cmd",
    "main",
    "pretrain",
    "privatize",
    "report",
    "run",
    "tab_score",
]


def main() -> None:  # pragma: no cover
    app()
