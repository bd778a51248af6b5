"""The leaderboard's headline: what can and cannot be concluded, per family, with intervals.

Every statement is a **paired** comparison on the run's bootstrap resamples over test
documents (the same resamples the board ranks on, :mod:`privaudit.metrics.stats`): for two
defenses A and B ranked in a family, the difference of their worst-case hypervolumes is
recomputed on every resample, and A and B are **separated** when the percentile interval of
that difference, at the board's level, excludes 0. From the pairs come:

* **decisiveness**: the share of pairs separated, per family and overall;
* the **non-dominated set**: the defenses that no other defense beats with confidence;
* **beats the undefended release**: hypervolume above ``none``'s with confidence (``none``'s
  normalised privacy is 0 by definition, so its hypervolume is 0 where it was not run);
* **power**: for a tied pair, the number of victims (test documents) at which the interval
  would exclude 0 if the observed difference held. The interval's half-width is about
  z·se and shrinks as 1/√n, so ``n_needed = n · (z · se / |diff|)²`` with ``se`` the
  bootstrap standard deviation of the paired difference and ``n`` the family's ``n_test``.
  It counts victims only: the variance between attacker fits is not in these intervals.

The pairs, the non-dominated set and "beats the undefended release" compare the hypervolumes
the board **ranks** on: the worst case over the attacks every ranked defense of the family
faced (like with like). The best utility at worst-case privacy ≥ :data:`HEADLINE_PRIVACY` is
a privacy level a defense reaches, so it is read from the board's matched-privacy table, whose
worst case is over **every** attack a defense faced (the strongest adversary sets privacy; a
subset would over-credit it), with its rule for what reaches a level.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

from privaudit.api import NONE, REFERENCES
from privaudit.leaderboard.render import Table, html_table, knob_text_of, markdown_table
from privaudit.metrics.outcomes import interval

if TYPE_CHECKING:
    import pandas as pd

#: The worst-case normalised privacy the headline's "best utility" line asks for.
HEADLINE_PRIVACY = 0.75
#: Beyond this multiple of the current victims, a number of victims is not realistic.
REALISTIC_FACTOR = 100.0
#: A hypervolume difference this small is no difference (the hypervolume is in [0, 1]).
NO_DIFFERENCE = 1e-6
#: Tied pairs listed per family in the power lines; the rest are counted.
POWER_SHOWN = 3


@dataclass(frozen=True)
class Pair:
    """Two defenses of a family, ``a`` the one with the larger point hypervolume: the paired
    difference ``diff`` = HV(a) − HV(b) with its interval and bootstrap ``se``; ``n`` victims
    now, ``n_needed`` to separate them (``inf`` when no realistic number would; the current
    ``n`` or less when the normal approximation already separates a pair the percentile
    interval does not)."""

    a: str
    b: str
    diff: float
    ci_low: float
    ci_high: float
    se: float
    n: int
    n_needed: float

    @property
    def separated(self) -> bool:
        return bool(self.ci_low > 0 or self.ci_high < 0)


@dataclass(frozen=True)
class Scored:
    """A defense's worst-case hypervolume in a family, with its interval."""

    label: str
    hypervolume: float
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Best:
    """The best utility among points reaching the privacy level, with the point."""

    label: str
    point: str  # "eta=50"
    utility: float
    ci_low: float
    ci_high: float
    privacy: float
    privacy_ci_low: float
    privacy_ci_high: float


@dataclass(frozen=True)
class FamilyVerdict:
    """One family's headline: pairs, non-dominated set, best utility at the privacy level,
    defenses that beat ``none`` (``beats_none``) and those that do not (``not_beats_none``,
    with the interval of their hypervolume above ``none``'s). ``ranked_on``: the attacks the
    hypervolumes compared here take their worst case over (every ranked defense faced them;
    empty: they share none, each on its own; None: not known)."""

    family: str
    n: int
    pairs: tuple[Pair, ...]
    undominated: tuple[Scored, ...]
    beats_none: tuple[str, ...]
    not_beats_none: tuple[Scored, ...]
    best: Best | None
    ranked_on: tuple[str, ...] | None = None
    format_only: tuple[str, ...] = ()  # privacy that is the release format's alone

    @property
    def separated(self) -> int:
        return sum(p.separated for p in self.pairs)

    @property
    def n_ranked(self) -> int:
        return len(self.beats_none) + len(self.not_beats_none)


@dataclass(frozen=True)
class Verdict:
    """The headline of a leaderboard (see the module docstring). ``available`` is False when
    the run has no per-document outcomes: then no comparison has an interval."""

    families: tuple[FamilyVerdict, ...]
    level: float
    chance: float
    available: bool
    privacy_level: float = HEADLINE_PRIVACY
    #: Lines a reader must see before any verdict (e.g. an attack that cannot write the
    #: victims' words: :func:`privaudit.leaderboard.reach.reach_cautions`).
    cautions: tuple[str, ...] = ()

    @property
    def n_pairs(self) -> int:
        return sum(len(f.pairs) for f in self.families)

    @property
    def n_separated(self) -> int:
        return sum(f.separated for f in self.families)


def needed_victims(diff: float, se: float, n: int, level: float) -> float:
    """Victims at which a paired difference ``diff`` with bootstrap standard error ``se`` at
    ``n`` victims would have an interval excluding 0 (normal approximation, se ∝ 1/√n);
    ``inf`` when ``diff`` is about 0 or the number exceeds :data:`REALISTIC_FACTOR` · n."""
    if not (np.isfinite(diff) and np.isfinite(se)) or abs(diff) <= NO_DIFFERENCE or n <= 0:
        return math.inf
    z = NormalDist().inv_cdf((1 + level) / 2)
    needed = n * (z * se / abs(diff)) ** 2
    return needed if needed <= REALISTIC_FACTOR * n else math.inf


def pairs(
    scores: Mapping[str, float], samples: Mapping[str, np.ndarray], n: int, level: float
) -> list[Pair]:
    """Every pair of ``scores``' labels, compared on their paired resamples."""
    labels = sorted(scores, key=lambda lb: (-scores[lb], lb))
    out = []
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            d = np.asarray(samples[a], float) - np.asarray(samples[b], float)
            lo, hi = interval(d, level)
            diff = float(scores[a] - scores[b])
            finite = d[np.isfinite(d)]
            se = float(np.std(finite, ddof=1)) if finite.size > 1 else math.nan
            out.append(Pair(a, b, diff, lo, hi, se, n, needed_victims(diff, se, n, level)))
    return out


def decide(
    families: pd.DataFrame,
    samples: Mapping[tuple[str, str], np.ndarray],
    matched: pd.DataFrame,
    points: pd.DataFrame,
    *,
    n_test: Mapping[str, int],
    level: float,
    chance: float,
    available: bool,
    ranked_on: Mapping[str, Sequence[str]] | None = None,
    format_only: Mapping[str, set[str]] | None = None,
    cautions: tuple[str, ...] = (),
) -> Verdict:
    """The headline of a board: ``families`` (the board's family table: ranked labels have a
    rank), ``samples`` the hypervolume resamples per (family, label) the board ranked on,
    ``matched`` its utility-at-matched-privacy table and ``points`` its worst-case points
    (both over every attack a defense faced), ``n_test`` the victims per family and
    ``ranked_on`` the attacks each family ranked on (to say so), ``format_only`` per family
    the defenses whose privacy is their release format's alone (to say so where they beat
    ``none``: :mod:`privaudit.leaderboard.formats`)."""
    out = []
    for family, sub in families.groupby("family", sort=True):
        family = str(family)
        ranked = sub[sub["rank"].notna() & ~sub["defense"].isin(REFERENCES)]
        scored = {
            str(r["label"]): Scored(str(r["label"]), float(r["hypervolume"]),
                                    float(r["hv_ci_low"]), float(r["hv_ci_high"]))
            for _, r in ranked.iterrows()
        }  # fmt: skip
        n = int(n_test.get(family, 0))
        b = len(next(iter(samples.values()))) if samples else 0
        own = {lb: samples.get((family, lb), np.full(b, np.nan)) for lb in scored}
        found = pairs({lb: s.hypervolume for lb, s in scored.items()}, own, n, level)
        beaten = {p.b for p in found if p.ci_low > 0} | {p.a for p in found if p.ci_high < 0}
        order = sorted(scored.values(), key=lambda s: (-s.hypervolume, s.label))
        undominated = tuple(s for s in order if s.label not in beaten)
        # none's privacy is 0 by definition: its hypervolume is 0 where it was not measured.
        none_s = samples.get((family, NONE))
        if none_s is None or not np.isfinite(none_s).any():
            none_s = np.zeros(b)
        none_row = sub[sub["label"] == NONE]
        none_hv = float(none_row["hypervolume"].iloc[0]) if len(none_row) else 0.0
        beats, not_beats = [], []
        for s in order:
            lo, hi = interval(np.asarray(own[s.label], float) - none_s, level)
            if lo > 0:
                beats.append(s.label)
            else:
                not_beats.append(Scored(s.label, s.hypervolume - none_hv, lo, hi))
        out.append(FamilyVerdict(
            family=family, n=n, pairs=tuple(found), undominated=undominated,
            beats_none=tuple(beats), not_beats_none=tuple(not_beats),
            best=_best(family, matched, points),
            ranked_on=None if ranked_on is None else tuple(ranked_on.get(family, ())),
            format_only=tuple(sorted((format_only or {}).get(family, set()))),
        ))  # fmt: skip
    return Verdict(tuple(out), level=level, chance=chance, available=available,
                   cautions=tuple(cautions))  # fmt: skip


def _best(family: str, matched: pd.DataFrame, points: pd.DataFrame) -> Best | None:
    """The highest utility at the headline's privacy level: the matched-privacy table's row
    (its rule for reaching a level), or, if the table has no such level, the points'."""
    cols = ("label", "utility", "utility_ci_low", "utility_ci_high", "privacy", "knob",
            "knob_value")  # fmt: skip
    rows = matched[(matched["family"] == family) & np.isclose(matched["level"], HEADLINE_PRIVACY)]
    if rows.empty and len(points):
        rows = points[(points["family"] == family) & ~points["defense"].isin(REFERENCES)
                      & (points["privacy"] >= HEADLINE_PRIVACY)]  # fmt: skip
    rows = rows[np.isfinite(rows["utility"].astype(float))] if len(rows) else rows
    if rows.empty:
        return None
    top = rows.loc[rows["utility"].astype(float).idxmax(), list(cols)]
    p_lo = p_hi = math.nan
    if len(points):
        at = points[(points["family"] == family) & (points["label"] == top["label"])
                    & np.isclose(points["knob_value"].astype(float).fillna(np.inf),
                                 float(top["knob_value"]) if top["knob_value"] == top["knob_value"]
                                 else np.inf)]  # fmt: skip
        if len(at):
            p_lo, p_hi = float(at["privacy_ci_low"].iloc[0]), float(at["privacy_ci_high"].iloc[0])
    return Best(
        label=str(top["label"]), point=knob_text_of(top), utility=float(top["utility"]),
        ci_low=float(top["utility_ci_low"]), ci_high=float(top["utility_ci_high"]),
        privacy=float(top["privacy"]), privacy_ci_low=p_lo, privacy_ci_high=p_hi,
    )  # fmt: skip


# ---- words ---------------------------------------------------------------------------------


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


def _share(k: int, n: int) -> str:
    return f"{k} of {n} pairs separated ({100 * k / n:.0f} %)" if n else "no pair to compare"


def headline(verdict: Verdict) -> list[tuple[str, list[str]]]:
    """Per family, (family, lines); then ("overall", [the separated share]). The lines a
    reader acts on: the non-dominated set, the best utility at the privacy level, the
    defenses that do and do not beat the undefended release, the decisiveness."""
    first = [("read first", list(verdict.cautions))] if verdict.cautions else []
    return first + _headline(verdict)


def _headline(verdict: Verdict) -> list[tuple[str, list[str]]]:
    pct = f"{100 * verdict.level:.0f} %"
    if not verdict.available:
        return [("overall", [
            "No per-document outcomes (an older run, or merged runs without them): no "
            "comparison has an interval, so nothing is concluded with confidence; the tables "
            "below are point estimates."
        ])]  # fmt: skip
    out = []
    for fv in verdict.families:
        lines = []
        if not fv.undominated:
            out.append((fv.family, ["no defense is ranked in this family (see its table)."]))
            continue
        names = ", ".join(f"{s.label} {s.hypervolume:.3f} {_ci(s.ci_low, s.ci_high)}"
                          for s in fv.undominated)  # fmt: skip
        hv = f"worst-case hypervolume{_ranked_on(fv.ranked_on)}"
        if len(fv.undominated) == 1:
            lines.append(f"best: {names} ({hv}); it beats every other "
                         f"defense with {pct} confidence.")  # fmt: skip
        else:
            lines.append(f"not beaten with {pct} confidence by any other defense "
                         f"({len(fv.undominated)} of {fv.n_ranked}, {hv}): {names}.")  # fmt: skip
        level = f"worst-case privacy ≥ {verdict.privacy_level:g}"
        if fv.best is None:
            lines.append(f"best utility at {level}: no defense point reaches it (worst case "
                         "over every attack a defense faced).")  # fmt: skip
        else:
            b = fv.best
            edge = ""
            if np.isfinite(b.ci_low) and b.ci_low <= verdict.chance:
                edge = f"; its interval reaches chance ({verdict.chance:.3g})"
            lines.append(
                f"best utility at {level}: {b.utility:.3f} {_ci(b.ci_low, b.ci_high)}, "
                f"{b.label} at {b.point} (privacy {b.privacy:.3f} "
                f"{_ci(b.privacy_ci_low, b.privacy_ci_high)}, the worst case over every "
                f"attack it faced){edge}."
            )
        if fv.beats_none:
            same = ", on those attacks" if fv.ranked_on else ""
            shown = ", ".join(
                f"{lb} (format only: no more private than the clean release in its format)"
                if lb in fv.format_only else lb
                for lb in fv.beats_none
            )  # fmt: skip
            lines.append(f"beat the undefended release (ranking hypervolume above none's{same}, "
                         f"{pct}): {shown}.")  # fmt: skip
        else:
            lines.append("no defense beats the undefended release with confidence.")
        if fv.not_beats_none:
            rest = ", ".join(f"{s.label} (+{s.hypervolume:.3f} {_ci(s.ci_low, s.ci_high)})"
                             for s in fv.not_beats_none)  # fmt: skip
            lines.append(f"do not beat it: {rest}.")
        lines.append(f"decisiveness: {_share(fv.separated, len(fv.pairs))} at {fv.n:,} victims.")
        out.append((fv.family, lines))
    out.append(("overall", [f"{_share(verdict.n_separated, verdict.n_pairs)} over "
                            f"{len(verdict.families)} families."]))  # fmt: skip
    return out


def power_lines(verdict: Verdict, shown: int = POWER_SHOWN) -> list[str]:
    """Per family, the tied pairs closest to separation, "cannot separate A and B with N
    victims; about M would", at most ``shown`` of them, then a count of the rest."""
    if not verdict.available:
        return []
    out = []
    for fv in verdict.families:
        tied = sorted((p for p in fv.pairs if not p.separated),
                      key=lambda p: (p.n_needed, -abs(p.diff), p.a, p.b))  # fmt: skip
        for p in tied[:shown]:
            out.append(f"{fv.family}: {_power(p)}")
        rest = tied[shown:]
        if rest:
            hopeless = sum(not math.isfinite(p.n_needed) for p in rest)
            tail = f" ({hopeless} of them with no realistic number)" if hopeless else ""
            out.append(f"{fv.family}: and {len(rest)} more tied pairs{tail}.")
    return out


def _power(p: Pair) -> str:
    head = f"cannot separate {p.a} and {p.b} with {p.n:,} victims"
    gap = f"(HV difference {p.diff:+.3f} {_ci(p.ci_low, p.ci_high)})"
    if not math.isfinite(p.n_needed):
        return f"{head}; no realistic number would {gap}."
    if p.n_needed <= p.n:  # skewed resamples: the normal approximation is already past it
        return f"{head}; slightly more would {gap}."
    return f"{head}; about {_victims(p.n_needed)} would {gap}."


def decisiveness_table(verdict: Verdict) -> Table:
    """Per family and overall: defenses ranked, pairs, pairs separated, the share."""
    rows = []
    for fv in verdict.families:
        rows.append([fv.family, str(fv.n_ranked), str(len(fv.pairs)), str(fv.separated),
                     _pct(fv.separated, len(fv.pairs)), f"{fv.n:,}"])  # fmt: skip
    rows.append(["overall", "—", str(verdict.n_pairs), str(verdict.n_separated),
                 _pct(verdict.n_separated, verdict.n_pairs), "—"])  # fmt: skip
    return Table(["family", "defenses", "pairs", "separated", "share", "victims"], rows)


def _pct(k: int, n: int) -> str:
    return f"{100 * k / n:.0f} %" if n else "—"


DECISIVENESS_CAPTION = (
    "A pair of defenses is separated when the paired bootstrap interval of the difference of "
    "their worst-case hypervolumes (the same resamples for both) excludes 0."
)
POWER_CAPTION = (
    "For tied pairs, the victims (test documents) at which the interval would exclude 0 if "
    "the observed difference held (its half-width shrinks as 1/√n); attacker-fit variance is "
    "not counted."
)


def markdown(verdict: Verdict) -> str:
    """The headline, the power lines and the decisiveness table as Markdown (first in
    leaderboard.md)."""
    parts = [f"## Verdict ({100 * verdict.level:.0f} % paired bootstrap intervals)\n\n"]
    for family, lines in headline(verdict):
        parts.append(f"**{family}**\n\n" + "".join(f"- {line}\n" for line in lines) + "\n")
    power = power_lines(verdict)
    if power:
        parts.append("### What more victims would decide\n\n" + f"{POWER_CAPTION}\n\n"
                     + "".join(f"- {line}\n" for line in power) + "\n")  # fmt: skip
    if verdict.available:
        parts.append(f"### Decisiveness\n\n{DECISIVENESS_CAPTION}\n\n"
                     f"{markdown_table(decisiveness_table(verdict))}\n\n")  # fmt: skip
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
        parts.append(f"<h3>What more victims would decide</h3>\n<p class=\"note\">"
                     f"{e(POWER_CAPTION)}</p>\n<ul>{items}</ul>\n")  # fmt: skip
    if verdict.available:
        parts.append(f'<h3>Decisiveness</h3>\n<p class="note">{e(DECISIVENESS_CAPTION)}</p>\n'
                     + html_table(decisiveness_table(verdict)) + "\n")  # fmt: skip
    return "".join(parts)


def terminal_lines(verdict: Verdict) -> list[str]:
    """The headline and the power lines as plain lines (the terminal's first output)."""
    out = [f"Verdict ({100 * verdict.level:.0f} % paired bootstrap intervals)"]
    for family, lines in headline(verdict):
        out.append(f"{family}:")
        out.extend(f"  - {line}" for line in lines)
    power = power_lines(verdict)
    if power:
        out.append("What more victims would decide:")
        out.extend(f"  - {line}" for line in power)
    return out
