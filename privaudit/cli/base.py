"""The one typer ``app`` every command registers on, its exit codes, and how a command ends:
a user's error as one line (:func:`user_errors`), the cache checked before any work
(:func:`check_cache_dir`), failed cells as exit status 3 (:func:`exit_for_failures`).

Importing it loads nothing heavy: what an error needs is imported when the error comes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from privaudit import __version__
from privaudit.runtime.cache import check_cache

app = typer.Typer(
    name="privaudit",
    help="Adversarial privacy auditing for text privatization: attack every defense, measure "
    "utility, and plot the privacy-utility frontier.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])

#: Exit codes: 0 every cell ok or n/a; 2 a user error before any work; 3 the run finished but
#: some cells failed (their reasons are in the summary and the report; --allow-failures: 0);
#: 4 the disk (or quota) is full: finished cells are kept, free space and --resume; 130 Ctrl-C
#: and 143 SIGTERM (128 + the signal, as a shell reports it): the run stopped cleanly, its
#: workers ended, finished cells kept, and the --resume command is printed. `report` and
#: `leaderboard` exit 5 on an unfinished run (its run.json says finished: false): the files
#: are written, and the first line says how many cells are missing and how to --resume.
#: `audit-guarantee --strict` and `audit --strict` exit 6 when a stated guarantee is violated.
EXIT_USAGE, EXIT_CELLS_FAILED, EXIT_DISK_FULL, EXIT_UNFINISHED = 2, 3, 4, 5
EXIT_GUARANTEE_VIOLATED = 6
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


def _version(value: bool) -> None:
    if value:
        typer.echo(f"privaudit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Adversarial privacy auditing for text privatization: attack every defense, measure
    utility, and plot the privacy-utility frontier."""


class _Terminated(KeyboardInterrupt):
    """SIGTERM outside a run's own guard (:func:`privaudit.audit.executors.guard_run`):
    while a command loads, plans or pre-trains. Said in one line, as Ctrl-C is."""


#: What a command stopped by a signal outside a run's guard has kept, by command.
_STOPPED = {
    "run": "before the run's first cell: no new cell was computed; run the command again",
    "audit": "before the run's first cell: no new cell was computed; run the command again",
    "pretrain": "the model being trained was not kept (the cache holds only whole models); "
    "run privaudit pretrain again",
}


def _stopped_line(func: Callable[..., Any], signum: int) -> str:
    import signal

    name = signal.Signals(signum).name
    kept = _STOPPED.get(func.__name__.removesuffix("_cmd"))
    return f"Interrupted ({name}); {kept}." if kept else f"Interrupted ({name})."


@contextmanager
def _sigterm_said() -> Iterator[None]:
    """Within: SIGTERM raises :class:`_Terminated` (the default handler would end the process
    without a word); a run's guard takes it over while the grid runs. Only in the main
    thread, where signal handlers live."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, previous)  # a second SIGTERM: the old behaviour
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def user_errors(func: F) -> F:
    """Errors a user can cause end in one clear line and exit code 2, not a traceback; Ctrl-C
    and SIGTERM end in one line saying what was kept, and 130 or 143."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with _sigterm_said():
                return func(*args, **kwargs)
        except typer.Exit:  # a deliberate exit status (click's Exit is a RuntimeError)
            raise
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (Interrupted during a run)
            import signal

            # lazy: privaudit.audit brings numpy and pydantic; only these errors need it,
            # and --help and privatize must not load it
            from privaudit.audit.executors import Interrupted

            if isinstance(exc, Interrupted):
                message, code = str(exc), exc.exit_code
            else:
                signum = signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT
                message, code = _stopped_line(func, signum), 128 + signum
            typer.secho(message, fg=typer.colors.YELLOW, err=True)
            raise typer.Exit(code) from None
        except OSError as exc:
            # lazy: privaudit.audit (numpy, the records) is not for --help or privatize
            from privaudit.audit.store import DiskFull, is_disk_full

            if not is_disk_full(exc):
                if isinstance(exc, FileNotFoundError):
                    typer.secho(f"Error: {exc}", fg=typer.colors.RED, err=True)
                    raise typer.Exit(EXIT_USAGE) from None
                raise
            if not isinstance(exc, DiskFull):  # not one of our writes: name what it could
                exc = DiskFull(Path(exc.filename or "a file"))
            typer.secho(f"Error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(EXIT_DISK_FULL) from None
        except (ValueError, TypeError, RuntimeError) as exc:
            typer.secho(f"Error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(EXIT_USAGE) from None

    return wrapper  # type: ignore[return-value]


def exit_for_failures(frame: Any, allow: bool, strength_failed: int = 0) -> None:
    """One line on the failed cells (and failed strength.csv rows), then exit 3 (0 with
    --allow-failures)."""
    from privaudit.audit.store import cell_counts  # lazy: privaudit.audit is not for --help

    failed = frame[frame["status"] == "failed"]
    if strength_failed:  # a failed refit fails the run as a cell does
        typer.secho(
            f"{strength_failed} row(s) of strength.csv failed (their reasons are above)."
            + ("" if allow or not failed.empty else " Exit status 3; --allow-failures exits 0."),
            fg=typer.colors.RED,
            err=True,
        )
        if failed.empty and not allow:
            raise typer.Exit(EXIT_CELLS_FAILED)
    if failed.empty:
        return
    reasons = failed["reason"].astype(str).str.split(" at ").str[0].nunique()
    counts = cell_counts(frame)
    typer.secho(
        f"{counts['failed']} of {counts['all']} cells failed ({reasons} distinct reason(s); see "
        "above and the report's Failures section)."
        + ("" if allow else " Exit status 3; --allow-failures exits 0."),
        fg=typer.colors.RED,
        err=True,
    )
    if not allow:
        raise typer.Exit(EXIT_CELLS_FAILED)


def check_cache_dir() -> bool:
    """The cache directory, before any work: unusable → one line (CacheUnusable, exit 2);
    read-only → said once here, then used for reading. Whether it can be written."""
    note = check_cache()
    if note is not None:
        typer.secho(f"Warning: {note}", fg=typer.colors.YELLOW, err=True)
    return note is None
