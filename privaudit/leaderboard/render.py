"""The whole board as a reader sees it: its tables (overall, per family, matched privacy, per
attack, replacement rates) in reading order with their captions, and as an HTML fragment with
the definitions beside them. Ranking is :mod:`privaudit.leaderboard.board`'s; the table
primitives (cells, Markdown, HTML) are :mod:`privaudit.leaderboard.tables`'."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from privaudit.api import NONE, REFERENCES
from privaudit.leaderboard.overall import OVERALL_HEADERS
from privaudit.leaderboard.tables import (
    Table,
    fmt,
    html_table,
    knob_text_of,
    pd_isna,
    span,
    with_span,
)

if TYPE_CHECKING:
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
    "class balance). Intervals are percentile bootstrap intervals over the victims' units, "
    "one set of resamples per run shared by every cell (paired), each resample adding to "
    "every learned attack cell an independent fit effect with its attack's declared "
    "between-fit sd (attacker randomness; the notes list them); a hypervolume's interval is "
    "bias-corrected (Efron's BC: its worst case over attacks is biased down). Ranks are "
    "recomputed on every resample: 'holds' is the share of resamples in which a defense keeps "
    "its rank. A rank interval runs from 1 + the defenses that beat it family-wise (the "
    "verdict's Holm-tested pairs) to the ranked count − those it beats, and a defense is tied "
    "with every defense it is not separated from, so identical defenses are tied. Only "
    "defenses that faced the whole family (no failed or missing cell) are ranked in it; the "
    "overall rank orders the mean family rank of defenses ranked in every family, its "
    "interval from the mean of the family intervals' ends (tied: those mean intervals "
    "overlap), its 'holds' recomputed on every resample. Seeds are averaged. The undefended "
    "`none` is the reference (privacy 0), never ranked; `clean` (the original text released "
    "as vectors, no mechanism) is the format reference, never ranked; a defense whose "
    "releases equal the originals ranks below any defense it ties with."
)
PER_ATTACK_DEFINITION = (
    "Per attack (raw privacy): the hypervolume of each defense's frontier of empirical "
    "privacy (1 − the attack's success; the embedding MSE divided by the largest seen for "
    "that attack) against utility, in the same box; `none` is scored for reference."
)

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


def tables(board: Leaderboard) -> dict[str, Table]:
    """Formatted tables: ``overall``, ``family <f>`` per family, ``matched <f>`` per
    family, and ``per attack``."""
    overall = [[_overall_cell(r, c) for c in OVERALL_HEADERS] for _, r in board.overall.iterrows()]
    out = {"overall": Table(headers=list(OVERALL_HEADERS.values()), rows=overall)}
    for family, sub in board.families.groupby("family", sort=True):
        sub = sub.sort_values(["is_none", "ranked_order", "label"])
        rows = []
        for _, r in sub.iterrows():
            rows.append(
                [
                    "ref" if r["defense"] in REFERENCES else fmt(r["rank"]),
                    span(r["rank_ci_low"], r["rank_ci_high"], "d"),
                    str(r["label"]),
                    fmt(r["hypervolume"]),
                    span(r["hv_ci_low"], r["hv_ci_high"]),
                    fmt(r.get("hv_all"))
                    + with_span(r.get("hv_all_ci_low"), r.get("hv_all_ci_high")),
                    "—" if pd_isna(r["stability"]) else f"{100 * r['stability']:.0f} %",
                    _tied_cell(r),
                    str(r["strongest"] or "—"),
                    str(int(r["n_points"])),
                ]
            )
        out[f"family {family}"] = Table(list(FAMILY_HEADERS.values()), rows)
    for family, sub in board.matched.groupby("family", sort=True):
        out[f"matched {family}"] = _matched_table(sub)
    out["per attack"] = _per_attack_table(board)
    if board.rates is not None and len(board.rates):
        # The target rate only where a grid calibrated by rate; a column of dashes says nothing.
        calibrated = bool(board.rates["target_rate"].notna().any())
        out["rates"] = Table(
            [
                "replacement rate",
                "defense",
                "knob",
                *(["target rate"] if calibrated else []),
                "utility",
                "text privacy (worst case)",
            ],
            [
                [
                    f"{r['replacement_rate']:.3f}",
                    str(r["label"]),
                    knob_text_of(r),
                    *(
                        ["—" if pd_isna(r["target_rate"]) else f"{r['target_rate']:.3g}"]
                        if calibrated
                        else []
                    ),
                    f"{r['utility']:.3f} {span(r['utility_ci_low'], r['utility_ci_high'])}",
                    "—"
                    if pd_isna(r["privacy"])
                    else f"{r['privacy']:.3f} {span(r['privacy_ci_low'], r['privacy_ci_high'])}",
                ]
                for _, r in board.rates.iterrows()
            ],
        )
    return out


def _matched_table(sub: Any) -> Table:
    """One family's matched-privacy table: per defense, its best utility at each level."""
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
                ci = span(r["utility_ci_low"], r["utility_ci_high"])
                at = knob_text_of(r)
                row.append(f"{r['utility']:.3f} {ci} at {at}")
        rows.append(row)
    return Table(["defense", *[f"privacy ≥ {lv:g}" for lv in levels]], rows)


def _per_attack_table(board: Leaderboard) -> Table:
    """Per defense, its hypervolume and rank against each attack."""
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
            rank = "ref" if cell["defense"] in REFERENCES else fmt(cell["rank"])
            row.append(f"{cell['hypervolume']:.3f} ({rank})")
        rows.append(row)
    return Table(headers=["defense", *attacks], rows=rows)


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
        return span(row["rank_ci_low"], row["rank_ci_high"], "d")
    if column == "stability":
        return "—" if pd_isna(row["stability"]) else f"{100 * row['stability']:.0f} %"
    if column == "tied_with":
        return str(row["tied_with"] or "—")
    return fmt(row[column], column)


def sections(board: Leaderboard) -> list[tuple[str, Table, str]]:
    """(title, table, caption) in reading order: overall, each family with its matched-privacy
    table, then the per-attack view."""
    by_name = tables(board)
    level = f"{100 * board.level:.0f} %"
    out = [
        (
            "Overall",
            by_name["overall"],
            (
                f"Rank intervals: {level} bootstrap, the overall rank recomputed on every resample "
                "from the family ranks; defenses whose intervals overlap are tied."
            ),
        )
    ]
    for name, table in by_name.items():
        if name.startswith("family "):
            family = name[len("family ") :]
            out.append(
                (
                    f"Family: {family} (worst-case privacy)",
                    table,
                    f"Intervals: {level} bootstrap over the victims (people where the corpus has "
                    "them) and attacker fits; 'holds "
                    "rank' = share of resamples in which the defense keeps this rank. "
                    f"{_ranked_on(board, family)}; "
                    "'all attacks' is the worst case over every attack a defense faced (the notes "
                    "name who faced more).",
                )
            )
            matched = by_name.get(f"matched {family}")
            if matched is not None:
                out.append(
                    (
                        f"Utility at matched privacy: {family}",
                        matched,
                        "Best measured utility among a defense's points whose worst-case "
                        "normalised privacy over all the attacks it faced (not only those the "
                        "ranking compares on) reaches the level (measured points only). A point "
                        "at chance utility (its point, or its interval's upper end, at or "
                        f"below chance {board.chance:.3g}) does not reach a level: it bought its "
                        "privacy with all of its utility.",
                    )
                )
            formats = board.formats.tables.get(family) if board.formats is not None else None
            if formats is not None:
                out.append(
                    (
                        f"Format and mechanism: {family}",
                        formats,
                        board.formats.caption if board.formats else "",
                    )
                )
    if "rates" in by_name:
        out.append(
            (
                "Text defenses at equal replacement rate",
                by_name["rates"],
                "Every point of the defenses that replace words, ordered by the measured share of "
                "tokens changed, so T2T, PCT2T and RAPT can be compared at equal rate (RAPT Table "
                "II) as well as at equal η; 'target rate' (shown when the grid gave knob values "
                "as target replacement rates, η calibrated per rate) is the rate asked for; text "
                "privacy is the worst case over every text attack the defense faced.",
            )
        )
    out.append(("Per attack: raw-privacy hypervolume (rank)", by_name["per attack"], ""))
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
