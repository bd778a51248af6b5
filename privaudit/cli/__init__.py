"""The ``privaudit`` command line (typer): :mod:`.commands` (every command, registered in
order, and their exit codes), :mod:`.base` (the app, the exit codes, how a command ends), the
commands by what they serve (:mod:`.listing`, :mod:`.run`, :mod:`.privatize`, :mod:`.audit`,
:mod:`.board`, :mod:`.tab`), :mod:`.options` (reading what the commands share), :mod:`.render`
(terminal tables)."""

from privaudit.cli.base import (
    EXIT_CELLS_FAILED,
    EXIT_DISK_FULL,
    EXIT_GUARANTEE_VIOLATED,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_UNFINISHED,
    EXIT_USAGE,
    app,
)
from privaudit.cli.commands import main

__all__ = [
    "EXIT_CELLS_FAILED",
    "EXIT_DISK_FULL",
    "EXIT_GUARANTEE_VIOLATED",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "EXIT_UNFINISHED",
    "EXIT_USAGE",
    "app",
    "main",
]
