"""What a finished run shows: ``privaudit leaderboard`` (runs merged and ranked) and
``privaudit report`` (one HTML file); both say first when a run is unfinished."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Annotated

import typer

from privaudit.cli.base import EXIT_UNFINISHED, app, user_errors


@app.command("leaderboard")
@user_errors
def leaderboard_cmd(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="Run directories to merge (later runs win on repeats).")
    ],
    out: Annotated[
        Path | None,
        typer.Option(help="Where leaderboard.md/.csv/.html go (default: the first run dir)."),
    ] = None,
    chance: Annotated[
        float | None,
        typer.Option(help="The utility chance level, if the runs have no run.json."),
    ] = None,
    mixed_corpora: Annotated[
        bool,
        typer.Option(
            "--mixed-corpora",
            help="Put runs of different corpora on one board, each row labelled "
            "'label @ corpus' (refused without it).",
        ),
    ] = False,
    difference: Annotated[
        float | None,
        typer.Option(
            help="The hypervolume difference (in (0, 1]) the verdict gives the victims and "
            "seeds for (default 0.05 of the box).",
        ),
    ] = None,
) -> None:
    """Rank defenses per attack family by worst-case privacy-utility hypervolume, with
    bootstrap intervals and rank stability.

    Exit status: 0; 2 for an error (nothing written); 5 when a run is unfinished (the files
    are written, and the first line says how many cells are missing and how to --resume)."""
    # lazy: the leaderboard, the run loader and the terminal tables bring numpy, pydantic,
    # privaudit.audit and privaudit.leaderboard, which --help does not load
    from privaudit.audit.store import check_writable
    from privaudit.cli.render import print_board
    from privaudit.leaderboard.board import check_difference
    from privaudit.outputs.leaderboard import write_leaderboard
    from privaudit.outputs.runs import load_runs

    check_difference(difference)  # before anything is read
    partial = [_say_unfinished(d) for d in run_dirs]  # before anything else is printed
    target = out if out is not None else (run_dirs[0] if run_dirs else None)
    if target is not None and (out is not None or target.is_dir()):  # else: not a run dir
        check_writable(target, "--out")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = load_runs(run_dirs, chance=chance, mixed_corpora=mixed_corpora)
    for warning in caught:  # one readable line each, not a warnings.warn source excerpt
        typer.secho(f"Warning: {warning.message}", fg=typer.colors.YELLOW, err=True)
    board = runs.board(difference)
    if any(partial):  # the files say it too, not only the terminal (issue 49)
        marks = tuple(f"UNFINISHED RUN: {note}" for note in partial if note)
        board = dataclasses.replace(board, notes=(*marks, *board.notes))
    print_board(board, f"privaudit leaderboard ({len(run_dirs)} run(s))")
    typer.echo("Wrote:")
    target = out if out is not None else run_dirs[0]
    for path in write_leaderboard(
        board, target, runs.guarantees, frame=runs.frame, strength=runs.strength
    ):
        typer.echo(f"  {path}")
    if any(partial):
        raise typer.Exit(EXIT_UNFINISHED)


def _say_unfinished(run_dir: Path) -> str | None:
    """Print, first, that ``run_dir`` is an unfinished run (how many cells are missing, the
    --resume command); that line, or None for a finished run. A directory that cannot be read
    says nothing here: reading it later names what is wrong."""
    # lazy: the run store brings numpy and pandas, which --help does not load
    from privaudit.audit.store import RunDir
    from privaudit.outputs.runs import unfinished

    rd = RunDir(run_dir)
    rows = _from_cells(run_dir)
    try:
        meta = rd.read_meta()
        if meta.get("finished") is not False:
            return None
        note = unfinished(run_dir, rd.read_results(), meta)
    except (OSError, ValueError):
        return None
    if note is not None:
        typer.secho(f"Warning: {note}", fg=typer.colors.YELLOW, bold=True, err=True)
    if rows:
        typer.secho(
            f"Its results table was built from the finished cells ({rows} rows, in "
            f"{rd.results_csv}); the board below shows only those.",
            fg=typer.colors.YELLOW,
            err=True,
        )
    return note


def _from_cells(run_dir: Path) -> int:
    """A killed run's results table from its finished cells, when it has none (its rows;
    :func:`privaudit.outputs.runs.results_from_cells`). One that cannot be built is one line
    with the way out: the table needs the run's corpus, read again."""
    from privaudit.outputs.runs import results_from_cells  # lazy: the outputs bring pandas

    try:
        return results_from_cells(run_dir)
    except (OSError, ValueError, TypeError, RuntimeError) as exc:
        raise ValueError(
            f"{run_dir} is an unfinished run with no results table, and building one from its "
            f"finished cells failed ({exc}); finish it with `privaudit run --resume {run_dir}`."
        ) from None


@app.command()
@user_errors
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `privaudit run`.")],
    show_examples: Annotated[
        bool,
        typer.Option(
            "--show-examples",
            help="Include original texts from the run dir's examples.json (off by default).",
        ),
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="Report file (default: RUN_DIR/report.html).")
    ] = None,
) -> None:
    """Write one self-contained HTML report (leaderboard, plots, cells, failures) for a run.

    Exit status: 0; 2 for an error (nothing written); 5 when the run is unfinished (the
    report is written with a banner at its top, and the first line printed says how many
    cells are missing and how to --resume)."""
    # lazy: the run store and the report writer bring numpy, pydantic and privaudit.audit,
    # which --help does not load
    from privaudit.audit.store import RunDir, check_output_file
    from privaudit.outputs.report import no_examples, write_report

    partial = _say_unfinished(run_dir)  # before anything else is printed
    if out is not None and out.is_dir():
        raise ValueError(f"--out {out} is a directory; give the report's file name.")
    if out is not None:
        check_output_file(out, "--out")
    elif run_dir.is_dir():  # else reading it says it is not a run dir
        check_output_file(RunDir(run_dir).report_html, "the run directory")
    path = write_report(run_dir, show_examples=show_examples, out=out)
    if show_examples and not RunDir(run_dir).examples_json.is_file():
        typer.secho(no_examples(run_dir), fg=typer.colors.YELLOW, err=True)
    typer.echo(str(path))
    if partial:
        raise typer.Exit(EXIT_UNFINISHED)
