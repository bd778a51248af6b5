"""The verdict in words (:mod:`privaudit.leaderboard.verdict` decides it): the headline, the
power lines, the decisiveness table, and the markdown, HTML and terminal renderings."""

from __future__ import annotations

import html
import math

import numpy as np

from privaudit.leaderboard.paired import FamilyPower
from privaudit.leaderboard.tables import Table, html_table, markdown_table
from privaudit.leaderboard.verdict import BEATS_NONE, FamilyVerdict, Scored, Verdict, unit_count


def _ci(lo: float, hi: float) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "[no interval]"
    return f"[{lo:.3f}, {hi:.3f}]"


def _victims(n: float) -> str:
    """A count rounded up to two significant figures: 1,234 -> 1,300, 302 -> 310."""
    step = 10 ** max(0, math.floor(math.log10(n)) - 1) if n >= 1 else 1
    return f"{math.ceil(n / step) * step:,}"


def _ranked_on(attacks: tuple[str, ...] | None) -> str:
    """Which attacks a ranking hypervolume is over, for the headline ("" when not known)."""
    if attacks is None:
        return ""
    if not attacks:
        return ", each defense on its own attacks: they share none"
    return f", ranked on the attacks every defense faced: {', '.join(attacks)}"


def _share(k: int, n: int, raw: int | None = None) -> str:
    """The separated share ("k of n pairs ..."), with the unadjusted count where it differs."""
    if not n:
        return "no pair to compare"
    more = f"; {raw} by unadjusted per-pair intervals" if raw is not None and raw != k else ""
    return f"{k} of {n} pairs separated family-wise ({100 * k / n:.0f} %{more})"


def headline(verdict: Verdict) -> list[tuple[str, list[str]]]:
    """Per family, (family, lines); then ("overall", [the separated share]). The lines a
    reader acts on: the non-dominated set, the best utility at the privacy level, the
    defenses that do and do not beat the undefended release, the decisiveness."""
    first = [("read first", list(verdict.cautions))] if verdict.cautions else []
    return first + _headline(verdict)


def _headline(verdict: Verdict) -> list[tuple[str, list[str]]]:
    if not verdict.available:
        return [
            (
                "overall",
                [
                    "No per-document outcomes (an older run, or merged runs without them): no "
                    "comparison has an interval, so nothing is concluded with confidence; the "
                    "tables below are point estimates."
                ],
            )
        ]
    out = [(fv.family, _family_lines(verdict, fv)) for fv in verdict.families]
    share = _share(verdict.n_separated, verdict.n_pairs, verdict.n_separated_raw)
    out.append(
        ("overall", [f"{share} over {len(verdict.families)} families.", board_error_line(verdict)])
    )
    return out


def _family_lines(verdict: Verdict, fv: FamilyVerdict) -> list[str]:
    """One family's headline lines: why it is not scored or undecided, or its ranking, its
    best utility at the privacy level, the defenses that beat ``none`` and its decisiveness."""
    if fv.unscorable:
        why = f"({fv.unscorable}); left out of the overall ranking."
        return [f"not scored: this corpus has no truth for its attacks {why}"]
    if fv.undecided and fv.strength is not None:  # no verdict on defenses from it
        share = _share(fv.separated, len(fv.pairs), fv.separated_raw)
        at = _at(verdict, fv.n)
        return [fv.strength.headline(), f"decisiveness: {share} at {at}."]
    if not fv.undominated:
        return [
            "no defense is ranked in this family (see its table); "
            "it is left out of the overall ranking."
        ]
    pct = f"{100 * verdict.level:.0f} %"
    lines = [_ranking_line(fv, pct), _best_line(verdict, fv), *_beats_none_lines(fv, pct)]
    share = _share(fv.separated, len(fv.pairs), fv.separated_raw)
    lines.append(f"decisiveness: {share} at {_at(verdict, fv.n)}.")
    return lines


def _ranking_line(fv: FamilyVerdict, pct: str) -> str:
    """The family's non-dominated defenses, with their hypervolumes."""
    names = ", ".join(
        f"{s.label} {s.hypervolume:.3f} {_ci(s.ci_low, s.ci_high)}" for s in fv.undominated
    )
    hv = f"worst-case hypervolume{_ranked_on(fv.ranked_on)}"
    raw = fv.n_undominated_raw
    if fv.n_ranked < 2:  # nothing to compare with: no comparative claim
        return f"only {names} is ranked ({hv}): no other defense to compare it with."
    if len(fv.undominated) == 1:
        return (
            f"best: {names} ({hv}); it beats every other defense with {pct} "
            f"family-wise confidence ({len(fv.pairs)} pairs at once)."
        )
    unadj = ""
    if raw is not None and raw != len(fv.undominated):
        unadj = f"; unadjusted per-pair intervals would leave {raw} of {fv.n_ranked}"
    return (
        f"not beaten with {pct} family-wise confidence by any other defense "
        f"({len(fv.undominated)} of {fv.n_ranked}, {hv}{unadj}): "
        f"{names}."
    )


def _best_line(verdict: Verdict, fv: FamilyVerdict) -> str:
    """The family's best utility at the headline's worst-case privacy level."""
    level = f"worst-case privacy ≥ {verdict.privacy_level:g}"
    if fv.best is None:
        return (
            f"best utility at {level}: no defense point reaches it (worst case "
            "over every attack a defense faced)."
        )
    b = fv.best
    edge = ""
    if np.isfinite(b.ci_low) and b.ci_low <= verdict.chance:
        edge = f"; its interval reaches chance ({verdict.chance:.3g})"
    return (
        f"best utility at {level}: {b.utility:.3f} {_ci(b.ci_low, b.ci_high)}, "
        f"{b.label} at {b.point} (privacy {b.privacy:.3f} "
        f"{_ci(b.privacy_ci_low, b.privacy_ci_high)}, the worst case over every "
        f"attack it faced){edge}."
    )


def _beats_none_lines(fv: FamilyVerdict, pct: str) -> list[str]:
    """The defenses that beat the undefended release, and those that do not."""
    lines = []
    if fv.beats_none:
        same = ", on those attacks" if fv.ranked_on else ""
        shown = ", ".join(
            f"{lb} (format only: no more private than the clean release in its format)"
            if lb in fv.format_only
            else lb
            for lb in fv.beats_none
        )
        lines.append(
            f"beat the undefended release (a point's box, privacy × utility above "
            f"chance on the attacks' own scale{same}, above the undefended "
            f"point's; Holm over every point of the family's defenses, {pct}): "
            f"{shown}."
        )
    else:
        lines.append("no defense beats the undefended release with confidence.")
    if fv.not_beats_none:
        rest = ", ".join(_not_beating(s) for s in fv.not_beats_none)
        lines.append(
            f"do not beat it (best point's box minus the undefended point's, "
            f"family-wise interval): {rest}."
        )
    return lines


def _not_beating(s: Scored) -> str:
    at = f"{s.point}: " if s.point else ""
    return f"{s.label} ({at}{s.hypervolume:+.3f} {_ci(s.ci_low, s.ci_high)})"


def deciding(verdict: Verdict) -> list[FamilyVerdict]:
    """The families that make comparative claims: scored, decided by their attacker, with a
    ranked defense."""
    return [fv for fv in verdict.families if not (fv.unscorable or fv.undecided) and fv.n_ranked]


def board_error_line(verdict: Verdict) -> str:
    """The board's error rate, said: each family controls its claims; the board does not
    control them across families, so it states the Bonferroni bound over them."""
    alpha = 1 - verdict.level
    pct = f"{100 * alpha:.0f} %"
    k = len(deciding(verdict))
    rule = (
        f"each family holds the chance of any false separation at {pct} or less "
        f"(Holm over its pairs), and, separately, of any false 'beats the undefended "
        f"release' (Holm over its defenses' points)"
    )
    if k <= 1:
        return f"Error rates: {rule}; this board has one such family, so its rates are the board's."
    bound = min(1.0, k * alpha)
    return (
        f"Error rates: {rule}; not across families: over this board's {k} families, the "
        f"chance of some false separation is at most {100 * bound:.0f} % ({k} × {pct}, "
        f"Bonferroni), and so is that of some false 'beats'."
    )


def _at(verdict: Verdict, n_docs: int) -> str:
    """``1,000 victims`` or ``62 people (1,000 documents)``: the count in the board's unit."""
    n = unit_count(verdict.units, n_docs)
    if verdict.units is not None and verdict.units.grouped:
        return f"{n:,} {verdict.units.unit_name(n)} ({n_docs:,} documents)"
    return f"{n_docs:,} victims"


def power_lines(verdict: Verdict) -> list[str]:
    """Per family that compares defenses: the minimum detectable difference at the run's
    units and seeds, and the units and seeds a difference needs (the user's, else
    :data:`privaudit.leaderboard.paired.MATTERS`). From the resampling spread only: no line
    names a tied pair or says that more data would separate it."""
    if not verdict.available:
        return []
    out = []
    for fv in deciding(verdict):
        p = fv.power
        if p is None or fv.n_ranked < 2:
            continue
        pw = f"{100 * p.power:.0f} % power"
        seeds = f"{p.seeds} seed{'s' if p.seeds != 1 else ''} per point"
        lo, hi = p.mdd_range
        spread = f" ({lo:.3f}–{hi:.3f} over the pairs)" if hi - lo >= 0.0005 else ""
        out.append(
            f"{fv.family}: the smallest hypervolume difference this run separates with {pw}, "
            f"family-wise over its {p.n_pairs} pair{'s' if p.n_pairs != 1 else ''}: "
            f"{p.mdd:.3f}{spread}, at {_at(verdict, fv.n)} and {seeds}."
        )
        out.append(f"{fv.family}: {_needed(verdict, fv, p, pw)}")
    return out


def _needed(verdict: Verdict, fv: FamilyVerdict, p: FamilyPower, pw: str) -> str:
    """The units and seeds a difference needs, in words."""
    d = verdict.difference
    unit = "victims" if verdict.units is None else verdict.units.unit_name(2)
    what = (
        f"the difference you named ({d:.3f})"
        if verdict.difference_named
        else f"a difference of {d:.3f} (one that matters on this board's scale: "
        f"{d:g} of the hypervolume box)"
    )
    need = p.needed_for(d)
    if not need.feasible:
        return (
            f"{what} would take no realistic number of {unit} or seeds per point to "
            f"separate with {pw}."
        )
    n_units = max(math.ceil(need.units), 1)
    docs = ""
    if verdict.units is not None and verdict.units.grouped and p.n:
        per = fv.n / p.n
        one = verdict.units.unit_name(1)
        docs = f" (about {_victims(n_units * per)} documents at {per:.1f} per {one})"
    seeds = f"{need.seeds} seed{'s' if need.seeds != 1 else ''} per point"
    if n_units <= p.n and need.seeds <= p.seeds:
        return (
            f"{what}: this run separates it with {pw} or more (about "
            f"{_victims(n_units)} {unit} at {seeds} would; it has {p.n:,})."
        )
    return (
        f"{what} needs about {_victims(n_units)} {unit}{docs} at {seeds} to separate "
        f"with {pw} (now {p.n:,} at {p.seeds})."
    )


def decisiveness_table(verdict: Verdict) -> Table:
    """Per family and overall: defenses ranked, pairs, pairs separated, the share."""
    rows = []
    for fv in verdict.families:
        rows.append(
            [
                fv.family,
                str(fv.n_ranked),
                str(len(fv.pairs)),
                str(fv.separated),
                str(fv.separated_raw),
                _pct(fv.separated, len(fv.pairs)),
                _victims_cell(verdict, fv),
            ]
        )
    rows.append(
        [
            "overall",
            "—",
            str(verdict.n_pairs),
            str(verdict.n_separated),
            str(verdict.n_separated_raw),
            _pct(verdict.n_separated, verdict.n_pairs),
            "—",
        ]
    )
    headers = ["family", "defenses", "pairs", "separated", "unadjusted", "share", "victims"]
    return Table(headers, rows)


def _victims_cell(verdict: Verdict, fv: FamilyVerdict) -> str:
    """The family's victims: documents, and the people they are by where people are the unit
    (the power's count: the units the family's resampling draws)."""
    units = verdict.units
    if units is None or not units.grouped:
        return f"{fv.n:,}"
    n = fv.power.n if fv.power is not None else units.n_units if fv.n == units.n_documents else 0
    return f"{fv.n:,} by {n:,} {units.unit_name(n)}" if n else f"{fv.n:,}"


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.0f} %" if n else "—"


DECISIVENESS_CAPTION = (
    "A pair of defenses is separated when the paired bootstrap interval of the difference of "
    "their worst-case hypervolumes (the same resamples for both) excludes 0 and "
    "the family's pairs pass Holm's step-down test at 1 − the level (Holm 1979; p-values "
    "from the bootstrap standard error): the chance of any false separation in a family is "
    "at most 1 − the level. 'unadjusted': pairs whose own interval alone excludes 0. "
    f"Beating the undefended release: {BEATS_NONE}."
)
POWER_CAPTION = (
    "What this run's data can decide, from the resampling spread of the family's paired "
    "differences, never from an observed difference (a tied pair's observed difference is "
    "mostly noise: a figure computed from it would predict separations that are not there). "
    "The minimum detectable difference is (c + z(power)) × se, se the paired standard error "
    "of a typical pair (the median over the family's pairs) and c the family-wise "
    "(Bonferroni) critical value: a pair that truly differs by it is separated with that "
    "power. The units and seeds for a difference solve the same equation: the units' share "
    "of the variance shrinks as 1/N with N units (people where the corpus knows them, each "
    "with as many documents as now), the share of the attackers' and the service's refits "
    "(their between-fit sds) as 1/K with K seeds per point; where no number of units can "
    "reach it, the line gives the seeds."
)


def markdown(verdict: Verdict) -> str:
    """The headline, the power lines and the decisiveness table as Markdown (first in
    leaderboard.md)."""
    parts = [f"## Verdict ({100 * verdict.level:.0f} % paired bootstrap intervals)\n\n"]
    for family, lines in headline(verdict):
        parts.append(f"**{family}**\n\n" + "".join(f"- {line}\n" for line in lines) + "\n")
    power = power_lines(verdict)
    if power:
        parts.append(
            "### What this run's data can decide\n\n"
            + f"{POWER_CAPTION}\n\n"
            + "".join(f"- {line}\n" for line in power)
            + "\n"
        )
    if verdict.available:
        parts.append(
            f"### Decisiveness\n\n{DECISIVENESS_CAPTION}\n\n"
            f"{markdown_table(decisiveness_table(verdict))}\n\n"
        )
    return "".join(parts)


def html_fragment(verdict: Verdict) -> str:
    """The headline, the power lines and the decisiveness table as HTML (first in the
    report and leaderboard.html)."""
    e = html.escape
    parts = [f'<p class="note">{100 * verdict.level:.0f} % paired bootstrap intervals.</p>\n']
    for family, lines in headline(verdict):
        items = "".join(f"<li>{e(line)}</li>" for line in lines)
        parts.append(f"<p><strong>{e(family)}</strong></p>\n<ul>{items}</ul>\n")
    power = power_lines(verdict)
    if power:
        items = "".join(f"<li>{e(line)}</li>" for line in power)
        parts.append(
            f'<h3>What this run\'s data can decide</h3>\n<p class="note">'
            f"{e(POWER_CAPTION)}</p>\n<ul>{items}</ul>\n"
        )
    if verdict.available:
        parts.append(
            f'<h3>Decisiveness</h3>\n<p class="note">{e(DECISIVENESS_CAPTION)}</p>\n'
            + html_table(decisiveness_table(verdict))
            + "\n"
        )
    return "".join(parts)


def terminal_lines(verdict: Verdict) -> list[str]:
    """The headline and the power lines as plain lines (the terminal's first output)."""
    out = [f"Verdict ({100 * verdict.level:.0f} % paired bootstrap intervals)"]
    for family, lines in headline(verdict):
        out.append(f"{family}:")
        out.extend(f"  - {line}" for line in lines)
    power = power_lines(verdict)
    if power:
        out.append("What this run's data can decide:")
        out.extend(f"  - {line}" for line in power)
    return out
