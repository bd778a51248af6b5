"""The leaderboard's files in a directory: Markdown, CSV, a standalone HTML page and the
worst-case points."""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

from privaudit.audit.store import RunDir, write_atomic, write_text
from privaudit.leaderboard.board import Leaderboard
from privaudit.leaderboard.guarantees import (
    GUARANTEE_NOTE,
    guarantee_table,
    guarantee_violations,
)
from privaudit.leaderboard.render import (
    HYPERVOLUME_DEFINITION,
    PER_ATTACK_DEFINITION,
    leaderboard_html_body,
    sections,
)
from privaudit.leaderboard.service import html_fragment as service_html
from privaudit.leaderboard.service import markdown as service_markdown
from privaudit.leaderboard.strength import markdown as strength_markdown
from privaudit.leaderboard.tables import TABLE_CSS, html_table, markdown_table
from privaudit.leaderboard.verdict_words import html_fragment as verdict_html
from privaudit.leaderboard.verdict_words import markdown as verdict_markdown

if TYPE_CHECKING:
    import pandas as pd


def write_leaderboard(
    board: Leaderboard,
    out_dir: str | Path,
    guarantees: pd.DataFrame | None = None,
    *,
    frame: pd.DataFrame | None = None,
    strength: pd.DataFrame | None = None,
) -> list[Path]:
    """Write leaderboard.md, leaderboard.csv (overall plus per-family and per-attack columns),
    leaderboard.html (a plain standalone page) and worst_case_points.csv (per family, label
    and knob value: worst-case privacy over every attack faced and utility with intervals,
    their spread across seeds ``privacy_sd``/``utility_sd``, the strongest attack) into
    ``out_dir``; return the paths.
    ``guarantees`` (the runs' guarantee audit, ``guarantees.csv``) adds its section to the
    Markdown and HTML, a violated claim first; ``frame`` (the runs' results) adds the
    Markdown's "Attack strength" section, with the curve of ``strength`` (strength.csv) when
    the runs have one. RAPT's comparison and CAPE's adversary follow the tables when the runs
    have those defenses (:mod:`privaudit.leaderboard.service`)."""
    rd = RunDir(out_dir).create()
    audited = guarantees is not None and not guarantees.empty
    body = "".join(
        f"## {title}\n\n" + (f"{caption}\n\n" if caption else "") + markdown_table(t) + "\n\n"
        for title, t, caption in sections(board)
    )
    body += service_markdown(board.service)  # RAPT's comparison, CAPE's adversary (if run)
    if audited:
        assert guarantees is not None
        body += (
            "## Guarantee audit\n\n"
            + "".join(f"**{line}**\n\n" for line in guarantee_violations(guarantees))
            + f"{GUARANTEE_NOTE}\n\n{markdown_table(guarantee_table(guarantees))}\n\n"
        )
    if frame is not None and len(frame):
        body += strength_markdown(frame, strength)
    md = write_text(
        rd.leaderboard("md"),
        "# privaudit leaderboard\n\n"
        + (verdict_markdown(board.verdict) if board.verdict is not None else "")  # first
        + body
        + "".join(f"- {n}\n" for n in board.notes)
        + f"\n{HYPERVOLUME_DEFINITION}\n\n{PER_ATTACK_DEFINITION}\n",
    )
    csv = write_atomic(rd.leaderboard("csv"), lambda p: board.wide().to_csv(p, index=False))
    points = write_atomic(rd.worst_case_csv, lambda p: board.points.to_csv(p, index=False))
    page = write_text(
        rd.leaderboard("html"),
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<title>privaudit leaderboard</title>\n"
        f"<style>{TABLE_CSS}</style>\n</head>\n<body>\n<h1>privaudit leaderboard</h1>\n"
        + (f"<h2>Verdict</h2>\n{verdict_html(board.verdict)}" if board.verdict is not None else "")
        + leaderboard_html_body(board)
        + service_html(board.service)
        + (_guarantees_html(guarantees) if audited else "")
        + "</body>\n</html>\n",
    )
    return [md, csv, page, points]


def _guarantees_html(guarantees: pd.DataFrame) -> str:
    violated = "".join(
        f"<p><strong>{html.escape(line)}</strong></p>\n"
        for line in guarantee_violations(guarantees)
    )
    return (
        "<h3>Guarantee audit</h3>\n"
        + violated
        + f'<p class="note">{html.escape(GUARANTEE_NOTE)}</p>\n'
        + html_table(guarantee_table(guarantees), numeric_from=8)
        + "\n"
    )
