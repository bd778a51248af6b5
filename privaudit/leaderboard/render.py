"""The leaderboard as tables a person reads: formatted cells, Markdown and HTML, with the
definitions printed beside them. Ranking is :mod:`privaudit.leaderboard.board`'s."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import NONE, REFERENCES
from privaudit.numbers import shown

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.leaderboard.board import Leaderboard


HYPERVOLUME_DEFINITION = (
    "Worst-case hypervolume: per attack family (text recovery, entity recovery, each private "
    "attribute), a defense point's privacy is its worst-case normalised privacy, the minimum "
    "over the family's attacks that read every ranked defense's release (so defenses are "
    "ranked on the same attacks; 'all attacks' takes the minimum over every attack that read "
    "its own release) of clip((s_none − s) / (s_none − s_baseline), 0, 1) (1 = the attacker "
    "does no better than its no-information baseline, 0 = as well as against the undefended "
    "text); the hypervolume is the area of the region its frontier dominates inside the box "
    "privacy ∈ [0, 1] × utility ∈ [chance, 1], as a fraction of that box. Only the ranks use "
    "the attacks every ranked defense faced; every privacy level a defense is said to reach "
    "(utility at matched privacy, the worst-case points and figure, the verdict's best "
    "utility) is the minimum over all its attacks, since the strongest adversary sets "
    "privacy. Utility is the headline metric (balanced accuracy: chance = 1/K whatever the "
    "class balance). Intervals are percentile bootstrap intervals over test documents, one "
    "set of resamples per run shared by every cell (paired), each resample adding to every "
    "learned attack cell an independent fit effect with its attack's declared between-fit sd "
    "(attacker randomness; the notes list them); ranks are recomputed on every "
    "resample: 'holds' is the share of resamples in which a defense keeps its rank, and "
    "defenses whose rank intervals overlap are statistically tied. Only defenses that faced "
    "the whole family (no failed or missing cell) are ranked in it; the overall rank orders "
    "the mean family rank of defenses ranked in every family, recomputed on every resample "
    "for its interval and ties as in the family tables. Seeds are averaged. The undefended "
    "`none` is the reference (privacy 0), never ranked; `clean` (the original text released "
    "as vectors, no mechanism) is the format reference, never ranked; a defense whose "
    "releases equal the originals ranks below any defense it ties with."
)
PER_ATTACK_DEFINITION = (
    "Per attack (raw privacy): the hypervolume of each defense's frontier of empirical "
    "privacy (1 − the attack's success; the embedding MSE divided by the largest seen for "
    "that attack) against utility, in the same box; `none` is scored for reference."
)

# Column -> header of the overall table, in display order.
OVERALL_HEADERS = {
    "rank": "rank",
    "rank_ci": "rank interval",
    "label": "defense",
    "mean_rank": "mean family rank",
    "stability": "holds rank",
    "tied_with": "tied with",
    "families": "families",
    "best_utility": "best utility",
    "s_per_1k_words": "s / 1k words",
    "guarantee": "guarantee",
}
# Column -> header of a family's table.
FAMILY_HEADERS = {
    "rank": "rank",
    "rank_ci": "rank interval",
    "label": "defense",
    "hypervolume": "worst-case HV",
    "hv_ci": "HV interval",
    "hv_all": "worst-case HV, all attacks",
    "stability": "holds rank",
    "tied_with": "tied with",
    "strongest": "strongest attack",
    "n_points": "points",
}


@dataclass(frozen=True)
class Table:
    """A display table: headers and rows of already formatted strings."""

    headers: list[str]
    rows: list[list[str]]


def tables(board: Leaderboard) -> dict[str, Table]:
    """Formatted tables: ``overall``, ``family <f>`` per family, ``matched <f>`` per
    family, and ``per attack``."""
    overall = [[_overall_cell(r, c) for c in OVERALL_HEADERS] for _, r in board.overall.iterrows()]
    out = {"overall": Table(headers=list(OVERALL_HEADERS.values()), rows=overall)}
    for family, sub in board.families.groupby("family", sort=True):
        sub = sub.sort_values(["is_none", "ranked_order", "label"])
        rows = []
        for _, r in sub.iterrows():
            rows.append([
                "ref" if r["defense"] in REFERENCES else _fmt(r["rank"]),
                _span(r["rank_ci_low"], r["rank_ci_high"], "d"),
                str(r["label"]),
                _fmt(r["hypervolume"]),
                _span(r["hv_ci_low"], r["hv_ci_high"]),
                _fmt(r.get("hv_all")) + _with_span(r.get("hv_all_ci_low"), r.get("hv_all_ci_high")),
                "—" if pd_isna(r["stability"]) else f"{100 * r['stability']:.0f} %",
                _tied_cell(r),
                str(r["strongest"] or "—"),
                str(int(r["n_points"])),
            ])  # fmt: skip
        out[f"family {family}"] = Table(list(FAMILY_HEADERS.values()), rows)
    for family, sub in board.matched.groupby("family", sort=True):
        levels = sorted(sub["level"].unique())
        rows = []
        for label, g in sub.groupby("label", sort=False):
            g = g.set_index("level")
            row = [str(label)]
            for lv in levels:
                r = g.loc[lv]
                if pd_isna(r["utility"]) and r.get("at_chance"):
                    row.append(f"not reached (only at chance utility: {r['at_chance']})")
                elif pd_isna(r["utility"]):
                    row.append("not reached")
                else:
                    ci = _span(r["utility_ci_low"], r["utility_ci_high"])
                    at = knob_text_of(r)
                    row.append(f"{r['utility']:.3f} {ci} at {at}")
            rows.append(row)
        out[f"matched {family}"] = Table(["defense", *[f"privacy ≥ {lv:g}" for lv in levels]], rows)
    attacks = sorted(board.per_attack["attack"].unique()) if len(board.per_attack) else []
    cells = board.per_attack.set_index(["label", "attack"]) if attacks else None
    rows = []
    for label in board.overall["label"]:
        row = [str(label)]
        for attack in attacks:
            assert cells is not None
            if (label, attack) not in cells.index:
                row.append("—")  # never scored: n/a or failed on this attack
                continue
            cell = cells.loc[(label, attack)]
            rank = "ref" if cell["defense"] in REFERENCES else _fmt(cell["rank"])
            row.append(f"{cell['hypervolume']:.3f} ({rank})")
        rows.append(row)
    out["per attack"] = Table(headers=["defense", *attacks], rows=rows)
    if board.rates is not None and len(board.rates):
        # The target rate only where a grid calibrated by rate; a column of dashes says nothing.
        calibrated = bool(board.rates["target_rate"].notna().any())
        out["rates"] = Table(
            ["replacement rate", "defense", "knob", *(["target rate"] if calibrated else []),
             "utility", "text privacy (worst case)"],
            [[f"{r['replacement_rate']:.3f}", str(r["label"]), knob_text_of(r),
              *(["—" if pd_isna(r["target_rate"]) else f"{r['target_rate']:.3g}"]
                if calibrated else []),
              f"{r['utility']:.3f} {_span(r['utility_ci_low'], r['utility_ci_high'])}",
              "—" if pd_isna(r["privacy"])
              else f"{r['privacy']:.3f} {_span(r['privacy_ci_low'], r['privacy_ci_high'])}"]
             for _, r in board.rates.iterrows()],
        )  # fmt: skip
    return out


def _tied_cell(row: Any) -> str:
    """A family table's tie column: the ties, why a defense is not ranked, or what a
    reference is."""
    if row["tied_with"]:
        return str(row["tied_with"])
    if row["defense"] in REFERENCES and row["defense"] != NONE:
        return "format reference (never ranked)"
    return "—" if row["complete"] else f"not ranked: {row['reason']}"


def _overall_cell(row: Any, column: str) -> str:
    """One cell of the overall table: the rank interval and holding share as in the family
    tables; the reference's tie column empty."""
    if column == "rank_ci":
        return _span(row["rank_ci_low"], row["rank_ci_high"], "d")
    if column == "stability":
        return "—" if pd_isna(row["stability"]) else f"{100 * row['stability']:.0f} %"
    if column == "tied_with":
        return str(row["tied_with"] or "—")
    return _fmt(row[column], column)


def _with_span(lo: Any, hi: Any) -> str:
    """`` [lo, hi]`` after a value, or nothing when the interval is unknown."""
    text = _span(lo, hi)
    return "" if text == "—" else f" {text}"


def with_ci(value: Any, lo: Any, hi: Any) -> str:
    """``value [lo, hi]`` (3 decimals), or the value alone when the interval is unknown."""
    text = fmt_number(value)
    return text if text == "—" else text + _with_span(lo, hi)


def pd_isna(value: Any) -> bool:
    import pandas as pd

    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def _span(lo: Any, hi: Any, spec: str = ".3f") -> str:
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


def _fmt(value: Any, column: str = "") -> str:
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


def sections(board: Leaderboard) -> list[tuple[str, Table, str]]:
    """(title, table, caption) in reading order: overall, each family with its matched-privacy
    table, then the per-attack view."""
    tables = board.tables()
    level = f"{100 * board.level:.0f} %"
    out = [("Overall", tables["overall"], (
        f"Rank intervals: {level} bootstrap, the overall rank recomputed on every resample "
        "from the family ranks; defenses whose intervals overlap are tied."
    ))]  # fmt: skip
    for name, table in tables.items():
        if name.startswith("family "):
            family = name[len("family ") :]
            out.append((
                f"Family: {family} (worst-case privacy)", table,
                f"Intervals: {level} bootstrap over test documents and attacker fits; 'holds "
                "rank' = share of resamples in which the defense keeps this rank. "
                f"{_ranked_on(board, family)}; "
                "'all attacks' is the worst case over every attack a defense faced (the notes "
                "name who faced more).",
            ))  # fmt: skip
            matched = tables.get(f"matched {family}")
            if matched is not None:
                out.append((
                    f"Utility at matched privacy: {family}", matched,
                    "Best measured utility among a defense's points whose worst-case "
                    "normalised privacy over all the attacks it faced (not only those the "
                    "ranking compares on) reaches the level (measured points only). A point "
                    "at chance utility (its point, or its interval's upper end, at or "
                    f"below chance {board.chance:.3g}) does not reach a level: it bought its "
                    "privacy with all of its utility.",
                ))  # fmt: skip
            formats = board.formats.tables.get(family) if board.formats is not None else None
            if formats is not None:
                out.append((f"Format and mechanism: {family}", formats,
                            board.formats.caption if board.formats else ""))  # fmt: skip
    if "rates" in tables:
        out.append((
            "Text defenses at equal replacement rate", tables["rates"],
            "Every point of the defenses that replace words, ordered by the measured share of "
            "tokens changed, so T2T, PCT2T and RAPT can be compared at equal rate (RAPT Table "
            "II) as well as at equal η; 'target rate' (shown when the grid gave knob values "
            "as target replacement rates, η calibrated per rate) is the rate asked for; text "
            "privacy is the worst case over every text attack the defense faced.",
        ))  # fmt: skip
    out.append(("Per attack: raw-privacy hypervolume (rank)", tables["per attack"], ""))
    return out


def _ranked_on(board: Leaderboard, family: str) -> str:
    """The caption's sentence naming the attacks a family ranks on."""
    attacks = board.ranked_on.get(family)
    if attacks is None:
        return "Ranked on the attacks that read every ranked defense's release"
    if not attacks:
        return "Its defenses share no attack: each is ranked on the attacks it faced"
    return f"Ranked on the attacks every ranked defense faced ({', '.join(attacks)})"


def leaderboard_html_body(board: Leaderboard) -> str:
    """The leaderboard's tables, notes and definition as an HTML fragment (no page around it)."""
    parts = []
    for title, table, caption in sections(board):
        parts.append(f"<h3>{html.escape(title)}</h3>\n")
        if caption:
            parts.append(f'<p class="note">{html.escape(caption)}</p>\n')
        parts.append(html_table(table, numeric_from=0 if title == "Overall" else 1) + "\n")
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in board.notes)
    return (
        "".join(parts)
        + f'<ul class="note">{notes}</ul>\n'
        + f'<p class="note">{html.escape(HYPERVOLUME_DEFINITION)}</p>\n'
        + f'<p class="note">{html.escape(PER_ATTACK_DEFINITION)}</p>\n'
    )


GUARANTEE_NOTE = (
    "Each stated guarantee tested empirically: pairs of inputs differing in one protected "
    "unit, the output event chosen on held-out draws, exact (Clopper–Pearson) bounds with a "
    "Bonferroni correction over the tests of a point; 'lower bound' is ln(p_low/q_high), "
    "'claimed' the guarantee's bound at the same distance, 'ratio' their quotient (how "
    "tight the claim is; above 1 it is violated)."
)


def fmt_number(value: Any, spec: str = ".3f") -> str:
    """A number for display (``spec``), ``—`` for a missing one, a string as it is."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return "—" if value is None else str(value)
    return "—" if np.isnan(number) else format(number, spec)


def guarantee_table(table: pd.DataFrame) -> Table:
    """The guarantee audit (``guarantees.csv``) as a display table: per defense point its
    claim, verdict, test, pair and event, the empirical lower bound on the privacy loss, the
    claim at the same distance, their ratio and the confidence."""
    headers = ["defense", "knob", "value", "claim", "verdict", "test", "pair", "event",
               "lower bound", "claimed", "ratio", "confidence"]  # fmt: skip
    rows = [
        [
            str(r["defense"]), str(r["knob"]) if isinstance(r["knob"], str) else "—",
            fmt_number(r["knob_value"], ".4g"),
            str(r["claim"]) if r["claim"] != "-" else str(r["guarantee"]),
            str(r["verdict"]), *(str(r[c]) if isinstance(r[c], str) else "" for c in
                                 ("test", "pair", "event")),
            fmt_number(r["lower_bound"]), fmt_number(r["claimed_loss"]),
            fmt_number(r["ratio"], ".2f"),
            fmt_number(r["confidence"], ".0%"),
        ]
        for _, r in table.iterrows()
    ]  # fmt: skip
    return Table(headers, rows)


def guarantee_violations(table: pd.DataFrame) -> list[str]:
    """One line per violated claim, with the test, pair and event that showed it."""
    return [
        f"Guarantee violated: {r['defense']} {r['knob']}={fmt_number(r['knob_value'], '.4g')}: "
        f"the {r['test']} test shows a privacy loss of at least {fmt_number(r['lower_bound'])}, "
        f"above the claimed {fmt_number(r['claimed_loss'])} ({r['pair']}, event {r['event']})."
        for _, r in table[table["verdict"] == "violated"].iterrows()
    ]
