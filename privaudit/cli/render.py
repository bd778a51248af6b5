"""Terminal output of the ``privaudit`` commands: a run's summary (its cells, failures and
leaderboard), the leaderboard tables and the calibration table, drawn with rich.

It imports the run store and the leaderboard, so :mod:`privaudit.cli` imports it inside the
commands that print these (run, audit, leaderboard, calibrate), never for ``--help``, ``list``
or ``privatize``.
"""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from privaudit.audit.store import RunDir
from privaudit.leaderboard.render import tables as board_tables
from privaudit.leaderboard.unscored import na_summary
from privaudit.leaderboard.verdict_words import terminal_lines
from privaudit.numbers import shown


def print_summary(result: Any) -> None:
    """A finished run: the leaderboard's verdict first, then its cells (a small grid only),
    failures, n/a count, chance level, partial objectives, its leaderboard and the files it
    wrote."""
    frame = result.frame
    console = Console(width=max(110, Console().width))
    board = result.board  # the run's own (outputs computed it; None: its problem is said)
    if board is not None:
        print_verdict(board, console)
    if len(frame) <= 60:  # a big grid's cells belong in the report, not the terminal
        table = Table(title=f"privaudit run: {result.run_dir.name}")
        for col in ("defense", "knob", "attack", "status", "privacy", "utility", "repl. rate", "s"):
            left = col in ("defense", "attack", "status")
            table.add_column(col, justify="left" if left else "right", no_wrap=True)

        def fmt(x: Any, spec: str = ".3f") -> str:
            try:
                return "-" if x != x else format(float(x), spec)
            except (TypeError, ValueError):
                return str(x)

        for _, row in frame.iterrows():
            knob = (
                f"{row['knob']}={shown(row['knob_value'])}" if isinstance(row["knob"], str) else "-"
            )
            table.add_row(
                Text(row["label"]),
                knob,
                Text(row["attack"]),
                row["status"],
                fmt(row["empirical_privacy"]),
                fmt(row["utility"]),
                fmt(row["replacement_rate"]),
                fmt(row["seconds"], ".1f"),
            )
        console.print(table)
    for _, row in frame[frame["status"] == "failed"].iterrows():
        console.print(
            f"failed: {row['label']} × {row['attack']}: {row['reason']}",
            soft_wrap=True,
            markup=False,
            style="yellow",
        )
    na_line = na_summary(frame)  # by cause: the corpus's reasons are not the release's
    if na_line is not None:
        typer.echo(na_line)
    typer.echo(f"chance level of the utility metric: {result.chance:.3f}")
    if "objective" in frame.columns:
        partial = frame[frame["objective"].astype(str).str.startswith("not applied")]
        for label in sorted(partial["label"].astype(str).unique()):
            typer.secho(
                f"Warning: {label}: the utility evaluator did not train its service-side "
                "objective, so its rows measure the noise alone (see the leaderboard notes).",
                fg=typer.colors.YELLOW,
                err=True,
            )
    if board is not None:
        print_board(board, "leaderboard (this run)", verdict=False)  # printed first, above
    typer.echo("Wrote:")  # plain echo: paths must stay whole and copyable
    rd = RunDir(result.run_dir)
    for path in [rd.results_csv, rd.results_parquet, *result.plots]:
        typer.echo(f"  {path}")


def print_verdict(board: Any, console: Console) -> None:
    """The leaderboard's headline and power lines (:mod:`privaudit.leaderboard.verdict`)."""
    if board.verdict is not None:
        for line in terminal_lines(board.verdict):
            console.print(line, soft_wrap=True, markup=False, highlight=False)


def print_board(board: Any, title: str, *, verdict: bool = True) -> None:
    """The verdict first (unless ``verdict`` is False: the caller printed it), then the
    overall leaderboard as a terminal table, the family tables and the notes."""
    overall = board_tables(board)["overall"]
    console = Console(width=max(110, Console().width))
    if verdict:
        print_verdict(board, console)
    table = Table(title=title)
    short = {
        "mean family rank": "mean rank",
        "best utility": "best util.",
        "s / 1k words": "s/1k words",
    }
    headers = [short.get(h, h) for h in overall.headers]
    g, d = headers.index("guarantee"), headers.index("defense")
    # The rank with its interval in one column ("2 (1–4)"); ties and holding shares are in
    # leaderboard.md. The long prose goes last.
    r, ci = headers.index("rank"), headers.index("rank interval")
    rows = [
        [f"{row[r]} ({row[ci]})" if row[ci] != "—" else row[r], *row[1:]] for row in overall.rows
    ]
    drop = {ci, headers.index("tied with"), headers.index("holds rank"), g}
    order = [k for k in range(len(headers)) if k not in drop] + [g]
    widths = [max([len(headers[k])] + [len(row[k]) for row in rows]) for k in order]
    # Labels and numbers keep their width; the guarantee gets what the terminal leaves.
    room = max(12, console.width - sum(widths[:-1]) - 3 * len(order) - 1)
    for k, width in zip(order, widths, strict=True):
        table.add_column(
            headers[k],
            justify="left" if k in (d, g) else "right",
            no_wrap=True,
            overflow="ellipsis",
            width=min(width, room) if k == g else width,
        )
    for row in rows:
        table.add_row(*(Text(row[k]) for k in order))  # Text: has[mode=x] is not markup
    console.print(table)
    # The terminal keeps the ranking; ties and the strongest attack are in leaderboard.md.
    keep = ("rank", "rank interval", "defense", "worst-case HV", "HV interval", "holds rank")
    for name, fam in board_tables(board).items():
        if not name.startswith("family "):
            continue
        cols = [fam.headers.index(h) for h in keep]
        family = name[len("family ") :]
        # Text: "attribute[gender]" is not rich markup
        sub = Table(title=Text(f"{family}: worst-case privacy"), title_justify="left")
        for k in cols:
            sub.add_column(fam.headers[k], justify="left" if k == 2 else "right", no_wrap=True)
        for row in fam.rows:
            sub.add_row(*(Text(row[k]) for k in cols))
        console.print(sub)
    for note in board.notes:
        console.print(f"- {note}", soft_wrap=True, markup=False)


def print_calibration(result: Any, n_docs: int, rate: float | None) -> None:
    """The knob → replacement-rate table of ``privaudit calibrate``; with a solution, a line
    naming it and then the bare value (last line, for scripts)."""
    table = Table(title=f"{result.defense}: {result.knob} → replacement rate ({n_docs} docs)")
    table.add_column(result.knob, justify="right")
    table.add_column("replacement rate", justify="right")
    for value, measured in result.points:
        mark = "  ← solution" if value == result.solution else ""
        table.add_row(f"{value:.4g}", f"{measured:.4f}{mark}")
    console = Console()
    console.print(table)
    if result.solution is not None:
        console.print(
            f"{result.knob} = {result.solution:.4g} gives replacement rate "
            f"{result.solved_rate:.4f} (target {rate})"
        )
        typer.echo(f"{result.solution:.6g}")


def print_guarantees(audits: Any, title: str = "guarantee audit") -> None:
    """The guarantee audit's table (``privaudit audit-guarantee``): per defense and level the
    claim, the verdict, the largest empirical lower bound on the privacy loss (at the table's
    confidence) with the test that gave it, the claim at the same distance, their ratio
    (tightness), and the release tests' own ratio; then, in red, one line per violated claim
    with the pair and the event that showed it."""
    console = Console(width=max(190, Console().width))  # one line per point
    table = Table(title=title)
    for col in (
        "defense",
        "level",
        "claim",
        "verdict",
        "test",
        "lower bound",
        "claimed",
        "ratio",
        "release ratio",
        "ceiling",
        "draws needed",
        "s",
    ):
        left = col in ("defense", "level", "claim", "verdict", "test")
        table.add_column(
            col,
            justify="left" if left else "right",
            no_wrap=True,
            min_width=24 if col == "claim" else None,
        )

    def num(x: float, spec: str = ".3g") -> str:
        return "-" if x != x else format(x, spec)

    for a in audits:
        row = a.row()
        style = {"violated": "bold red", "untestable": "yellow"}.get(a.verdict, "")
        # ceiling: the largest lower bound the release tests' samples could show; a claim
        # above it is "untestable", and "draws needed" would test it
        verdict = a.verdict + (f" at n = {a.draws:,}" if a.verdict == "untestable" else "")
        table.add_row(
            Text(a.defense),
            a.level,
            Text(row["claim"]),
            Text(verdict, style=style),
            Text(row["test"]),
            num(row["lower_bound"]),
            num(row["claimed_loss"]),
            num(row["ratio"], ".2f"),
            num(row["release_ratio"], ".2f"),
            num(row["ceiling"]),
            num(row["draws_needed"], ".2g"),
            f"{a.seconds:.1f}",
        )
    console.print(table)
    console.print(
        f"{len(audits)} levels; each level's tests share its α (Bonferroni), and the levels are "
        "not corrected across: with L correct levels, up to L·α false alarms are expected.",
        soft_wrap=True,
        markup=False,
    )
    for a in audits:
        if a.verdict in ("violated", "untestable"):
            style = "bold red" if a.verdict == "violated" else "yellow"
            console.print(a.line(), style=style, soft_wrap=True, markup=False)
