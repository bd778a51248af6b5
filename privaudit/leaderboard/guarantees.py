"""The guarantee audit (``guarantees.csv``) for a reader: its display table, the lines naming
each violated claim, and the note that explains its columns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from privaudit.leaderboard.tables import Table, fmt_number

if TYPE_CHECKING:
    import pandas as pd

GUARANTEE_NOTE = (
    "Each stated guarantee tested empirically: pairs of inputs differing in one protected "
    "unit, the output event chosen on held-out draws, exact (Clopper–Pearson) bounds with a "
    "Bonferroni correction over the tests of a point; 'lower bound' is ln(p_low/q_high), "
    "'claimed' the guarantee's bound at the same distance, 'ratio' their quotient (how "
    "tight the claim is; above 1 it is violated)."
)


def guarantee_table(table: pd.DataFrame) -> Table:
    """The guarantee audit (``guarantees.csv``) as a display table: per defense point its
    claim, verdict, test, pair and event, the empirical lower bound on the privacy loss, the
    claim at the same distance, their ratio and the confidence."""
    headers = [
        "defense",
        "knob",
        "value",
        "claim",
        "verdict",
        "test",
        "pair",
        "event",
        "lower bound",
        "claimed",
        "ratio",
        "confidence",
    ]
    rows = [
        [
            str(r["defense"]),
            str(r["knob"]) if isinstance(r["knob"], str) else "—",
            fmt_number(r["knob_value"], ".4g"),
            str(r["claim"]) if r["claim"] != "-" else str(r["guarantee"]),
            str(r["verdict"]),
            *(str(r[c]) if isinstance(r[c], str) else "" for c in ("test", "pair", "event")),
            fmt_number(r["lower_bound"]),
            fmt_number(r["claimed_loss"]),
            fmt_number(r["ratio"], ".2f"),
            fmt_number(r["confidence"], ".0%"),
        ]
        for _, r in table.iterrows()
    ]
    return Table(headers, rows)


def guarantee_violations(table: pd.DataFrame) -> list[str]:
    """One line per violated claim, with the test, pair and event that showed it."""
    return [
        f"Guarantee violated: {r['defense']} {r['knob']}={fmt_number(r['knob_value'], '.4g')}: "
        f"the {r['test']} test shows a privacy loss of at least {fmt_number(r['lower_bound'])}, "
        f"above the claimed {fmt_number(r['claimed_loss'])} ({r['pair']}, event {r['event']})."
        for _, r in table[table["verdict"] == "violated"].iterrows()
    ]
