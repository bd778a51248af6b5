"""The ``privaudit`` command line (typer): :mod:`.commands` (the commands and their exit codes),
:mod:`.options` (reading what the commands share), :mod:`.render` (terminal tables)."""

from privaudit.cli.commands import (
    EXIT_CELLS_FAILED,
    EXIT_DISK_FULL,
    EXIT_GUARANTEE_VIOLATED,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_UNFINISHED,
    EXIT_USAGE,
    app,
    main,
)

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
