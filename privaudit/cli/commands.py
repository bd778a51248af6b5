"""The ``privaudit`` command line: the commands, their options and how they end.

Each command lives with those it serves, registered on the one typer ``app`` of
:mod:`privaudit.cli.base` (with the exit codes and :func:`user_errors`); importing them here,
in this order, is what lists them in ``privaudit --help`` in this order:
:mod:`.listing` (``list``), :mod:`.run` (``run``, ``pretrain``), :mod:`.privatize`
(``privatize``, ``calibrate``), :mod:`.audit` (``audit``, ``audit-guarantee``), :mod:`.board`
(``leaderboard``, ``report``), :mod:`.tab` (``tab-score``) and :mod:`.cache` (``cache``: the
cell store).

What the commands share in reading their input is in :mod:`privaudit.cli.options`, what they
print to the terminal in :mod:`privaudit.cli.render`. Heavy libraries (and the run store, the
runner and the leaderboard) load inside the commands that use them, so ``privaudit --help``
and ``privaudit list`` answer at once (under two seconds) and ``privaudit privatize`` loads
only its defense. A mistake a user can make is a one-line ``ValueError`` (what was wrong, what
was expected, what to try), turned into exit code 2, never a traceback from deep inside torch.
"""

from __future__ import annotations

from privaudit.cli.base import app

# Importing a module registers its commands on `app`, and the import order is the order
# `privaudit --help` lists them in: kept out of the import sorter's reach.
# isort: off
from privaudit.cli.listing import list_cmd
from privaudit.cli.run import pretrain, run
from privaudit.cli.privatize import calibrate, privatize
from privaudit.cli.audit import audit, audit_guarantee_cmd
from privaudit.cli.board import leaderboard_cmd, report
from privaudit.cli.tab import tab_score
from privaudit.cli.cache import cache_show
# isort: on

COMMANDS = (
    list_cmd,
    run,
    pretrain,
    privatize,
    calibrate,
    audit,
    audit_guarantee_cmd,
    leaderboard_cmd,
    report,
    tab_score,
    cache_show,
)


def main() -> None:  # pragma: no cover
    app()
