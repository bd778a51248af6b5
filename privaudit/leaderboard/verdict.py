"""The leaderboard's headline: what can and cannot be concluded, per family, with intervals.

Every statement is a **paired** comparison on the run's bootstrap resamples over test
documents (the same resamples the board ranks on, :mod:`privaudit.metrics.stats`): for two
defenses A and B ranked in a family, the difference of their worst-case hypervolumes is
recomputed on every resample, and A and B are **separated** when the percentile interval of
that difference, at the board's level, excludes 0. From the pairs come:

* **family-wise confidence**: a family compares all its pairs at once, so a pair counts as
  separated only when its own interval excludes 0 **and** Holm's step-down procedure over
  the family's m pairs rejects "no difference" at ``1 − level`` (Holm 1979, Scand. J.
  Statist. 6:65–70), each pair's p-value ``2·Φ(−|diff| / se)`` from its bootstrap standard
  error. Holm holds the chance of any false separation in a family at ``1 − level``
  whatever the dependence between pairs (they share defenses). A bootstrap max-|t|
  (Romano & Wolf 2005) uses that dependence and is less conservative, but on 100 boards of
  10 identical defenses it made a false claim on 6–7 of them at B = 250–400; Holm on at
  most 5 at B = 400 and 1,000 (per-pair intervals: 59). The interval shown is
  Bonferroni's ``diff ± z(1 − (1 − level)/(2m))·se``
  and the power lines use its critical value. The unadjusted per-pair count is shown
  beside the family-wise one where the two differ;
* **decisiveness**: the share of pairs separated, per family and overall;
* the **non-dominated set**: the defenses that no other defense beats with family-wise
  confidence; a family with one ranked defense makes no comparative claim;
* **beats the undefended release** (:data:`BEATS_NONE`, the one definition the notes use too):
  the frontier's hypervolume above the undefended point's, both on each attack's own scale
  (privacy 1 at the no-information baseline, 0 for a perfect attacker: ``none`` keeps the
  privacy it has), the worst case over the attacks the family ranks on, paired interval;
* **undecided because of the attacker**: a family whose attacker is weak
  (:attr:`privaudit.leaderboard.strength.FamilyStrength.weak`: under 10 % of the way from
  its baseline to a perfect attacker against the undefended release) gets one line with that
  attack's strength, its published figure and what would make it stronger, and its
  decisiveness; no non-dominated set, no "beats the undefended release", no power lines: its
  attacks cannot tell defenses apart, which is no evidence that privatizing buys nothing;
* **power**: for a tied pair, the victims (test documents) at which the family-wise
  interval would exclude 0 if the observed difference held. The paired difference's
  variance is split: ``se² = se_docs² + se_fit²``, ``se_docs`` from the documents (it
  shrinks as 1/n), ``se_fit`` from the declared between-fit sds of the attackers and the
  utility service (:mod:`privaudit.metrics.stats`: it does not shrink with victims, only as
  1/K with K seeds per point). ``se_docs`` is the spread of the difference on the same
  resamples without the fit effects; ``se_fit² = se² − se_docs²``. Victims needed:
  ``n · se_docs² / ((diff / c)² − se_fit²)``; none when ``c · se_fit ≥ |diff|`` (the fits'
  own randomness spans the difference), and then the seeds that would.

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
from typing import TYPE_CHECKING

import numpy as np

from privaudit.api import NONE, REFERENCES
from privaudit.leaderboard.paired import Pair, pairs
from privaudit.leaderboard.strength import FamilyStrength
from privaudit.leaderboard.tables import Table, html_table, knob_text_of, markdown_table
from privaudit.metrics.outcomes import interval

if TYPE_CHECKING:
    import pandas as pd

#: The worst-case normalised privacy the headline's "best utility" line asks for.
HEADLINE_PRIVACY = 0.75
#: Tied pairs listed per family in the power lines; the rest are counted.
POWER_SHOWN = 3
#: What "beats the undefended release" means, wherever the board says it (headline, notes).
BEATS_NONE = (
    "a defense beats the undefended release in a family when its frontier's hypervolume is "
    "above the undefended point's with confidence, both on each attack's own scale (privacy 1 "
    "at the attack's no-information baseline, 0 for a perfect attacker, so the undefended "
    "release keeps the privacy it has), worst case over the attacks the family ranks on"
)


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
    #: Not scored: why this corpus cannot judge the family's attacks (no truth for them).
    unscorable: str = ""
    #: The non-dominated count by per-pair intervals (no family-wise correction).
    n_undominated_raw: int | None = None
    #: How much its attacker gets from the undefended release (None: not known).
    strength: FamilyStrength | None = None

    @property
    def undecided(self) -> bool:
        """Undecided because of the attacker (:attr:`FamilyStrength.weak`): no verdict on
        the defenses, and left out of the overall ranking."""
        return self.strength is not None and self.strength.weak

    @property
    def separated(self) -> int:
        return sum(p.separated for p in self.pairs)

    @property
    def separated_raw(self) -> int:
        return sum(p.separated_raw for p in self.pairs)

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

    @property
    def n_separated_raw(self) -> int:
        return sum(f.separated_raw for f in self.families)


def _undominated(order: Sequence[Scored], found: Sequence[Pair], raw: bool) -> list[Scored]:
    """The defenses no pair shows beaten (per-pair intervals when ``raw``, else family-wise)."""
    beaten = set()
    for p in found:
        if p.separated_raw if raw else p.separated:
            beaten.add(p.b if p.ci_low > 0 else p.a)
    return [s for s in order if s.label not in beaten]


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
    doc_samples: Mapping[tuple[str, str], np.ndarray] | None = None,
    seeds: Mapping[str, int] | None = None,
    own_scale: Mapping[tuple[str, str], tuple[float, np.ndarray]] | None = None,
    unscorable: Mapping[str, str] | None = None,
    strengths: Mapping[str, FamilyStrength] | None = None,
) -> Verdict:
    """The headline of a board: ``families`` (the board's family table: ranked labels have a
    rank), ``samples`` the hypervolume resamples per (family, label) the board ranked on,
    ``matched`` its utility-at-matched-privacy table and ``points`` its worst-case points
    (both over every attack a defense faced), ``n_test`` the victims per family and
    ``ranked_on`` the attacks each family ranked on (to say so), ``format_only`` per family
    the defenses whose privacy is their release format's alone (to say so where they beat
    ``none``: :mod:`privaudit.leaderboard.formats`). ``doc_samples``: ``samples`` without the
    fit effects (the documents' share of each difference), ``seeds`` the seeds per point per
    family (for the power lines). ``own_scale``: per (family, label), ``none`` included, the
    hypervolume and its resamples on each attack's own scale (:data:`BEATS_NONE`); without
    it ``none``'s hypervolume is the normalised one, 0. ``unscorable``: families the corpus
    cannot score, with why (no comparison, one line). ``strengths``: per family, its
    attacker's strength (:func:`privaudit.leaderboard.strength.family_strengths`); a weak
    one makes the family undecided because of the attacker (no verdict on its defenses)."""
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
        docs = None
        if doc_samples is not None:
            docs = {lb: doc_samples[(family, lb)] for lb in scored if (family, lb) in doc_samples}
        found = pairs({lb: s.hypervolume for lb, s in scored.items()}, own, n, level,
                      doc_samples=docs, seeds=int((seeds or {}).get(family, 1)))  # fmt: skip
        order = sorted(scored.values(), key=lambda s: (-s.hypervolume, s.label))
        undominated = tuple(_undominated(order, found, raw=False))
        # BEATS_NONE: on each attack's own scale none keeps its privacy; without that scale
        # (an older caller) none's normalised privacy is 0, so its hypervolume is 0.
        beat_on = {lb: own[lb] for lb in scored}
        points_on = {lb: s.hypervolume for lb, s in scored.items()}
        none_hv, none_s = 0.0, samples.get((family, NONE))
        if own_scale is not None:
            for lb in scored:
                points_on[lb], beat_on[lb] = own_scale.get((family, lb), (math.nan, own[lb]))
            none_hv, none_s = own_scale.get((family, NONE), (0.0, None))
        if none_s is None or not np.isfinite(none_s).any():
            none_s = np.zeros(b)
        beats, not_beats = [], []
        for s in order:
            lo, hi = interval(np.asarray(beat_on[s.label], float) - none_s, level)
            if lo > 0:
                beats.append(s.label)
            else:
                not_beats.append(Scored(s.label, points_on[s.label] - none_hv, lo, hi))
        out.append(FamilyVerdict(
            family=family, n=n, pairs=tuple(found), undominated=undominated,
            beats_none=tuple(beats), not_beats_none=tuple(not_beats),
            best=_best(family, matched, points),
            ranked_on=None if ranked_on is None else tuple(ranked_on.get(family, ())),
            format_only=tuple(sorted((format_only or {}).get(family, set()))),
            unscorable=(unscorable or {}).get(family, ""),
            n_undominated_raw=len(_undominated(order, found, raw=True)),
            strength=(strengths or {}).get(family),
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
        if fv.unscorable:
            why = f"({fv.unscorable}); left out of the overall ranking."
            out.append((fv.family, [f"not scored: this corpus has no truth for its attacks {why}"]))
            continue
        if fv.undecided and fv.strength is not None:  # no verdict on defenses from it
            share = _share(fv.separated, len(fv.pairs), fv.separated_raw)
            out.append(
                (fv.family, [fv.strength.headline(), f"decisiveness: {share} at {fv.n:,} victims."])
            )
            continue
        if not fv.undominated:
            out.append((fv.family, ["no defense is ranked in this family (see its table); "
                                    "it is left out of the overall ranking."]))  # fmt: skip
            continue
        names = ", ".join(f"{s.label} {s.hypervolume:.3f} {_ci(s.ci_low, s.ci_high)}"
                          for s in fv.undominated)  # fmt: skip
        hv = f"worst-case hypervolume{_ranked_on(fv.ranked_on)}"
        raw = fv.n_undominated_raw
        if fv.n_ranked < 2:  # nothing to compare with: no comparative claim
            lines.append(f"only {names} is ranked ({hv}): no other defense to compare it with.")
        elif len(fv.undominated) == 1:
            lines.append(f"best: {names} ({hv}); it beats every other defense with {pct} "
                         f"family-wise confidence ({len(fv.pairs)} pairs at once).")  # fmt: skip
        else:
            unadj = ""
            if raw is not None and raw != len(fv.undominated):
                unadj = f"; unadjusted per-pair intervals would leave {raw} of {fv.n_ranked}"
            lines.append(f"not beaten with {pct} family-wise confidence by any other defense "
                         f"({len(fv.undominated)} of {fv.n_ranked}, {hv}{unadj}): "
                         f"{names}.")  # fmt: skip
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
            lines.append(f"beat the undefended release (hypervolume on the attacks' own scale "
                         f"above the undefended point's{same}, {pct}): {shown}.")  # fmt: skip
        else:
            lines.append("no defense beats the undefended release with confidence.")
        if fv.not_beats_none:
            rest = ", ".join(f"{s.label} ({s.hypervolume:+.3f} {_ci(s.ci_low, s.ci_high)})"
                             for s in fv.not_beats_none)  # fmt: skip
            lines.append(f"do not beat it: {rest}.")
        share = _share(fv.separated, len(fv.pairs), fv.separated_raw)
        lines.append(f"decisiveness: {share} at {fv.n:,} victims.")
        out.append((fv.family, lines))
    share = _share(verdict.n_separated, verdict.n_pairs, verdict.n_separated_raw)
    out.append(("overall", [f"{share} over {len(verdict.families)} families (each family "
                            f"controlled at {pct})."]))  # fmt: skip
    return out


def power_lines(verdict: Verdict, shown: int = POWER_SHOWN) -> list[str]:
    """Per family, the tied pairs closest to separation, "cannot separate A and B with N
    victims; about M would", at most ``shown`` of them, then a count of the rest."""
    if not verdict.available:
        return []
    out = []
    for fv in verdict.families:
        if fv.undecided:  # more victims would not make its attacker stronger
            continue
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
    if p.fit_bound:  # more victims shrink only the documents' share of the variance
        why = (
            f"no number of victims would: the attackers' and the service's own randomness "
            f"(between-fit sd of the difference {p.se_fit:.3f}, × {p.crit:.2f}) spans it"
        )
        if not math.isfinite(p.seeds_needed):
            return f"{head}; {why}, and no realistic number of seeds either {gap}."
        at = ("" if p.victims_with_seeds <= p.n
              else f" and about {_victims(p.victims_with_seeds)} victims")  # fmt: skip
        return (f"{head}; {why}; about {p.seeds_needed:.0f} seeds per point (now {p.seeds})"
                f"{at} would {gap}.")  # fmt: skip
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
                     str(fv.separated_raw), _pct(fv.separated, len(fv.pairs)),
                     f"{fv.n:,}"])  # fmt: skip
    rows.append(["overall", "—", str(verdict.n_pairs), str(verdict.n_separated),
                 str(verdict.n_separated_raw), _pct(verdict.n_separated, verdict.n_pairs),
                 "—"])  # fmt: skip
    headers = ["family", "defenses", "pairs", "separated", "unadjusted", "share", "victims"]
    return Table(headers, rows)


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
    "For tied pairs, the victims (test documents) at which the family-wise (Bonferroni) "
    "interval would "
    "exclude 0 if the observed difference held. Counted: the documents' share of the "
    "difference's bootstrap variance, which shrinks as 1/n, and the share of the attackers' "
    "and the utility service's refits (their declared between-fit sds), which does not: "
    "where that share alone spans the difference, no number of victims would, and the line "
    "gives the seeds per point (refits, averaged) that would. Not counted: a between-fit "
    "spread that no component declared."
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
