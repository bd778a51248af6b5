"""Table primitives: a display table, its cells formatted (numbers, intervals, knob values)
and written as Markdown or HTML. Knows nothing of a board; every leaderboard view builds on it."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.numbers import shown

TABLE_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem;
       color: #1d1d1f; max-width: 1200px; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #d0d0d5; padding: 0.3rem 0.6rem; text-align: left; }
th { background: #f2f2f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.scroll { overflow-x: auto; max-width: 100%; }
tbody tr:nth-child(even) { background: #fafafc; }
.note { color: #555; font-size: 0.9rem; }
"""


@dataclass(frozen=True)
class Table:
    """A display table: headers and rows of already formatted strings."""

    headers: list[str]
    rows: list[list[str]]


def with_span(lo: Any, hi: Any) -> str:
    """`` [lo, hi]`` after a value, or nothing when the interval is unknown."""
    text = span(lo, hi)
    return "" if text == "—" else f" {text}"


def with_ci(value: Any, lo: Any, hi: Any) -> str:
    """``value [lo, hi]`` (3 decimals), or the value alone when the interval is unknown."""
    text = fmt_number(value)
    return text if text == "—" else text + with_span(lo, hi)


def pd_isna(value: Any) -> bool:
    import pandas as pd

    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def span(lo: Any, hi: Any, spec: str = ".3f") -> str:
    """``[lo, hi]``, or ``—`` when the interval is unknown."""
    if pd_isna(lo) or pd_isna(hi):
        return "—"
    if spec == "d":
        return f"{int(lo)}–{int(hi)}"
    return f"[{format(float(lo), spec)}, {format(float(hi), spec)}]"


def knob_text_of(row: Any) -> str:
    knob, value = row.get("knob"), row.get("knob_value")
    if isinstance(knob, str) and not pd_isna(value):
        return f"{knob}={shown(value)}"
    return "its only point"


def fmt(value: Any, column: str = "") -> str:
    """Display form of a table value: '—' for missing, 3 decimals, costs with 3 significant."""
    import pandas as pd

    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "—"
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if column == "s_per_1k_words":
            return f"{value:.3g}"
        if column == "mean_rank":
            return f"{value:.2f}"
        return f"{value:.3f}"
    return str(value)


def fmt_number(value: Any, spec: str = ".3f") -> str:
    """A number for display (``spec``), ``—`` for a missing one, a string as it is."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "—" if value is None else str(value)
    return "—" if np.isnan(number) else format(number, spec)


def markdown_table(table: Table) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(cell(h) for h in table.headers) + " |",
        "|" + "|".join("---" for _ in table.headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def html_table(table: Table, *, numeric_from: int = 1) -> str:
    """An HTML ``<table>``, every cell escaped; columns from ``numeric_from`` right-aligned
    where they look numeric."""

    def cell(tag: str, text: str, k: int) -> str:
        numeric = k >= numeric_from and _looks_numeric(text)
        cls = ' class="num"' if numeric else ""
        return f"<{tag}{cls}>{html.escape(text)}</{tag}>"

    head = "".join(cell("th", h, -1) for h in table.headers)
    thead = f"<thead><tr>{head}</tr></thead>\n" if table.headers else ""  # none: key/value
    body = "\n".join(
        "<tr>" + "".join(cell("td", c, k) for k, c in enumerate(row)) + "</tr>"
        for row in table.rows
    )
    # The wrapper scrolls a wide table sideways instead of widening the whole page.
    return f'<div class="scroll"><table>\n{thead}<tbody>\n{body}\n</tbody>\n</table></div>'


def _looks_numeric(text: str) -> bool:
    head = text.split(" ")[0]
    try:
        float(head)
    except ValueError:
        return head == "—"
    return True
