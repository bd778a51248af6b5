"""The leaderboard's files in a directory: Markdown, CSV, a standalone HTML page and the
worst-case points."""

from __future__ import annotations

from pathlib import Path

from privaudit.audit.store import RunDir, write_atomic, write_text
from privaudit.leaderboard.board import Leaderboard
from privaudit.leaderboard.render import (
    HYPERVOLUME_DEFINITION,
    PER_ATTACK_DEFINITION,
    TABLE_CSS,
    leaderboard_html_body,
    markdown_table,
    sections,
)


def write_leaderboard(board: Leaderboard, out_dir: str | Path) -> list[Path]:
    """Write leaderboard.md, leaderboard.csv (overall plus per-family and per-attack columns),
    leaderboard.html (a plain standalone page) and worst_case_points.csv (per family, label
    and knob value: worst-case privacy and utility with intervals, their spread across seeds
    ``privacy_sd``/``utility_sd``, the strongest attack) into ``out_dir``; return the paths."""
    rd = RunDir(out_dir).create()
    body = "".join(
        f"## {title}\n\n" + (f"{caption}\n\n" if caption else "") + markdown_table(t) + "\n\n"
        for title, t, caption in sections(board)
    )
    md = write_text(
        rd.leaderboard("md"),
        "# privaudit leaderboard\n\n"
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
        + leaderboard_html_body(board)
        + "</body>\n</html>\n",
    )
    return [md, csv, page, points]
