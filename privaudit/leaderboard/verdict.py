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
  a defense beats it when one of its points dominates more of the box than the undefended
  point: the point's box, privacy × utility above chance, with privacy on each attack's own
  scale (1 at the no-information baseline, 0 for a perfect attacker: ``none`` keeps the
  privacy it has), worst case over the attacks the family ranks on. Then its frontier's
  hypervolume is above ``none``'s too. One one-sided test per point of every defense of the
  family (normal, from the paired bootstrap standard error), Holm over all of them at
  ``(1 − level) / 2``: the choice of the best of a defense's points and of the best defense
  is paid for, so a defense that buys nothing is said to beat the release in at most
  ``(1 − level) / 2`` of boards however many points and defenses the family has (the
  frontier's own hypervolume, a maximum over noisy points, was said to on 24 % of such boards
  at 3 points: issue 47);
* **undecided because of the attacker**: a family whose attacker is weak
  (:attr:`privaudit.leaderboard.strength.FamilyStrength.weak`: under 10 % of the way from
  its baseline to a perfect attacker against the undefended release) gets one line with that
  attack's strength, its published figure and what would make it stronger, and its
  decisiveness; no non-dominated set, no "beats the undefended release", no power lines: its
  attacks cannot tell defenses apart, which is no evidence that privatizing buys nothing;
* **power**, from the resampling spread, never from an observed difference
  (:class:`privaudit.leaderboard.paired.FamilyPower`): per family, the minimum detectable
  difference at the run's units and seeds, and the units (people where the corpus knows
  them) and seeds per point at which a difference (the user's ``difference``, else 0.05 of
  the hypervolume box, :data:`privaudit.leaderboard.paired.MATTERS`) would be separated with
  80 % power. The paired difference's variance is split: ``se² = se_docs² + se_fit²``,
  ``se_docs`` from the units (it shrinks as 1/N), ``se_fit`` from the declared between-fit
  sds of the attackers and the utility service (:mod:`privaudit.metrics.stats`: it shrinks
  only as 1/K with K seeds per point). No line names a tied pair: "about N victims would
  separate A and B", computed from their observed difference, was said of identical
  defenses on every null board (the post-hoc power fallacy);
* **rank intervals and ties** (:func:`privaudit.leaderboard.families.separation_ranks`): a
  defense's rank interval runs from 1 + the defenses that beat it family-wise to the ranked
  count − those it beats, and it is tied with every defense it is not separated from; so the
  tables make no comparative claim the pairs do not, and identical defenses are tied;
* **error rates**: each family holds its separations, and separately its "beats the
  undefended release" claims, at ``1 − level``; the board does not control them across
  families and says so, with the Bonferroni bound (families × ``1 − level``).

The pairs, the non-dominated set and "beats the undefended release" compare the hypervolumes
the board **ranks** on: the worst case over the attacks every ranked defense of the family
faced (like with like). The best utility at worst-case privacy ≥ :data:`HEADLINE_PRIVACY` is
a privacy level a defense reaches, so it is read from the board's matched-privacy table, whose
worst case is over **every** attack a defense faced (the strongest adversary sets privacy; a
subset would over-credit it), with its rule for what reaches a level.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING

import numpy as np

from privaudit.api import NONE, REFERENCES
from privaudit.leaderboard.paired import (
    MATTERS,
    NO_DIFFERENCE,
    FamilyPower,
    Pair,
    family_power,
    holm,
    pairs,
)
from privaudit.leaderboard.strength import FamilyStrength
from privaudit.leaderboard.tables import knob_text_of

if TYPE_CHECKING:
    import pandas as pd

    from privaudit.metrics.units import Units

#: The worst-case normalised privacy the headline's "best utility" line asks for.
HEADLINE_PRIVACY = 0.75
#: What "beats the undefended release" means, wherever the board says it (headline, notes).
BEATS_NONE = (
    "a defense beats the undefended release in a family when one of its points dominates more "
    "of the box than the undefended point with confidence: that point's privacy × utility "
    "above chance, privacy on each attack's own scale (1 at the attack's no-information "
    "baseline, 0 for a perfect attacker, so the undefended release keeps the privacy it has), "
    "worst case over the attacks the family ranks on; one test per point of every defense of "
    "the family, Holm over all of them, so picking the best point and the best defense is "
    "paid for (then the defense's frontier hypervolume is above the undefended point's too)"
)


@dataclass(frozen=True)
class Scored:
    """A defense's worst-case hypervolume in a family, with its interval."""

    label: str
    hypervolume: float
    ci_low: float
    ci_high: float
    point: str = ""  # the point a "does not beat the undefended release" line is about


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
    #: What its data can decide (None: no spread, or undecided because of the attacker).
    power: FamilyPower | None = None

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
    #: The hypervolume difference the power lines give units and seeds for, and whether the
    #: user named it (else :data:`privaudit.leaderboard.paired.MATTERS`).
    difference: float = MATTERS
    difference_named: bool = False
    #: The board's units (people or documents; None: documents, not recorded).
    units: Units | None = None

    @property
    def n_pairs(self) -> int:
        return sum(len(f.pairs) for f in self.families)

    @property
    def n_separated(self) -> int:
        return sum(f.separated for f in self.families)

    @property
    def n_separated_raw(self) -> int:
        return sum(f.separated_raw for f in self.families)


def unit_count(units: Units | None, n_docs: int) -> int:
    """The units ``n_docs`` test documents stand for: people where the unit is the person
    (the people of a subset in proportion, when an attack scored fewer documents)."""
    if units is None or not units.grouped or not units.n_documents or n_docs <= 0:
        return n_docs
    if n_docs == units.n_documents:
        return units.n_units
    return max(1, round(units.n_units * n_docs / units.n_documents))


def _undominated(order: Sequence[Scored], found: Sequence[Pair], raw: bool) -> list[Scored]:
    """The defenses no pair shows beaten (per-pair intervals when ``raw``, else family-wise)."""
    beaten = set()
    for p in found:
        if p.separated_raw if raw else p.separated:
            beaten.add(p.b if p.ci_low > 0 else p.a)
    return [s for s in order if s.label not in beaten]


@dataclass(frozen=True)
class Evidence:
    """What a board hands its verdict (:func:`decide`). ``families``: the board's family table
    (ranked labels have a rank); ``samples``: the hypervolume resamples per (family, label) the
    board ranked on; ``matched``: its utility-at-matched-privacy table and ``points`` its
    worst-case points (both over every attack a defense faced); ``n_test``: the victims
    (documents) per family; ``ranked_on``: the attacks each family ranked on (to say so);
    ``format_only``: per family, the defenses whose privacy is their release format's alone
    (to say so where they beat ``none``: :mod:`privaudit.leaderboard.formats`).
    ``doc_samples``: ``samples`` without the fit effects (the documents' share of each
    difference), ``seeds`` the seeds per point per family (for the power lines).
    ``own_points``: per (family, label), ``none`` included, each point's name, its box
    (privacy × utility above chance on each attack's own scale) and the box's resamples
    (:data:`BEATS_NONE`). ``unscorable``: families the corpus cannot score, with why.
    ``strengths``: per family, its attacker's strength
    (:func:`privaudit.leaderboard.strength.family_strengths`); a weak one makes the family
    undecided because of the attacker (no verdict on its defenses). ``units``: the board's
    units (people or documents), in which power is stated (``n_test`` documents are
    converted); ``difference``: the hypervolume difference the power lines give the units
    and seeds for (``difference_named``: the user named it)."""

    families: pd.DataFrame
    samples: Mapping[tuple[str, str], np.ndarray]
    matched: pd.DataFrame
    points: pd.DataFrame
    n_test: Mapping[str, int]
    level: float
    chance: float
    available: bool
    ranked_on: Mapping[str, Sequence[str]] | None = None
    format_only: Mapping[str, set[str]] | None = None
    cautions: tuple[str, ...] = ()
    doc_samples: Mapping[tuple[str, str], np.ndarray] | None = None
    seeds: Mapping[str, int] | None = None
    own_points: Mapping[tuple[str, str], Sequence[tuple[str, float, np.ndarray]]] | None = None
    unscorable: Mapping[str, str] | None = None
    strengths: Mapping[str, FamilyStrength] | None = None
    units: Units | None = None
    difference: float = MATTERS
    difference_named: bool = False


def decide(ev: Evidence) -> Verdict:
    """The headline of a board from its :class:`Evidence`: per family the pairs separated
    family-wise, the non-dominated set, the best utility at the privacy level, who beats the
    undefended release, and what the data can decide."""
    out = []
    for family, sub in ev.families.groupby("family", sort=True):
        family = str(family)
        ranked = sub[sub["rank"].notna() & ~sub["defense"].isin(REFERENCES)]
        scored = {
            str(r["label"]): Scored(
                str(r["label"]),
                float(r["hypervolume"]),
                float(r["hv_ci_low"]),
                float(r["hv_ci_high"]),
            )
            for _, r in ranked.iterrows()
        }
        n_docs = int(ev.n_test.get(family, 0))
        n = unit_count(ev.units, n_docs)
        b = len(next(iter(ev.samples.values()))) if ev.samples else 0
        own = {lb: ev.samples.get((family, lb), np.full(b, np.nan)) for lb in scored}
        docs = None
        if ev.doc_samples is not None:
            docs = {
                lb: ev.doc_samples[(family, lb)] for lb in scored if (family, lb) in ev.doc_samples
            }
        found = pairs(
            {lb: s.hypervolume for lb, s in scored.items()},
            own,
            n,
            ev.level,
            doc_samples=docs,
            seeds=int((ev.seeds or {}).get(family, 1)),
        )
        order = sorted(scored.values(), key=lambda s: (-s.hypervolume, s.label))
        undominated = tuple(_undominated(order, found, raw=False))
        beats, not_beats = beats_none(family, list(order), own, ev.own_points, ev.level)
        found_power = None if strength_weak(ev.strengths, family) else family_power(found)
        out.append(
            FamilyVerdict(
                family=family,
                n=n_docs,
                pairs=tuple(found),
                undominated=undominated,
                beats_none=tuple(beats),
                not_beats_none=tuple(not_beats),
                best=_best(family, ev.matched, ev.points),
                ranked_on=None if ev.ranked_on is None else tuple(ev.ranked_on.get(family, ())),
                format_only=tuple(sorted((ev.format_only or {}).get(family, set()))),
                unscorable=(ev.unscorable or {}).get(family, ""),
                n_undominated_raw=len(_undominated(order, found, raw=True)),
                strength=(ev.strengths or {}).get(family),
                power=found_power,
            )
        )
    return Verdict(
        tuple(out),
        level=ev.level,
        chance=ev.chance,
        available=ev.available,
        cautions=tuple(ev.cautions),
        difference=ev.difference,
        difference_named=ev.difference_named,
        units=ev.units,
    )


def strength_weak(strengths: Mapping[str, FamilyStrength] | None, family: str) -> bool:
    s = (strengths or {}).get(family)
    return s is not None and s.weak


def beats_none(
    family: str,
    order: Sequence[Scored],
    own: Mapping[str, np.ndarray],
    own_points: Mapping[tuple[str, str], Sequence[tuple[str, float, np.ndarray]]] | None,
    level: float,
) -> tuple[list[str], list[Scored]]:
    """:data:`BEATS_NONE`: the defenses of ``order`` with a point whose box (privacy ×
    utility above chance, on each attack's own scale) is above the undefended point's, one
    one-sided test per point of every defense, Holm over all of them at ``(1 − level) / 2``
    (with one point of one defense: the lower end of the ``level`` interval above 0). The
    rest with their best point's difference and its Bonferroni interval. Without
    ``own_points`` (an older caller), each defense's resamples in ``own`` are its one point
    and the undefended release's hypervolume is 0 (normalised privacy)."""
    tests: list[tuple[str, str, float, float]] = []  # (label, point, difference, se)
    if own_points is None:
        b = len(next(iter(own.values()))) if own else 0
        none_s, none_v = np.zeros(b), 0.0
        per = {s.label: [("", s.hypervolume, np.asarray(own[s.label], float))] for s in order}
    else:
        none = own_points.get((family, NONE)) or [("", 0.0, None)]
        _, none_v, none_s = none[0]
        per = {s.label: list(own_points.get((family, s.label), ())) for s in order}
    for s in order:
        for point, value, samples in per[s.label]:
            d = np.asarray(samples, float) - (0.0 if none_s is None else np.asarray(none_s))
            finite = d[np.isfinite(d)]
            se = float(np.std(finite, ddof=1)) if finite.size > 1 else math.nan
            tests.append((s.label, point, float(value - none_v), se))
    alpha = (1 - level) / 2
    p_values = [_one_sided(diff, se) for _, _, diff, se in tests]
    rejected = holm(p_values, alpha)
    m = max(sum(np.isfinite(p_values)), 1)
    crit = NormalDist().inv_cdf(1 - alpha / m)
    beats, not_beats = [], []
    for s in order:
        mine = [(t, r) for t, r in zip(tests, rejected, strict=True) if t[0] == s.label]
        if any(r for _, r in mine):
            beats.append(s.label)
            continue
        if not mine:
            not_beats.append(Scored(s.label, math.nan, math.nan, math.nan))
            continue
        (_, point, diff, se), _ = max(mine, key=lambda tr: tr[0][2] - crit * _or0(tr[0][3]))
        lo, hi = (diff - crit * se, diff + crit * se) if np.isfinite(se) else (math.nan,) * 2
        not_beats.append(Scored(s.label, diff, lo, hi, point=point))
    return beats, not_beats


def _or0(x: float) -> float:
    return x if np.isfinite(x) else 0.0


def _one_sided(diff: float, se: float) -> float:
    """The one-sided p-value of "no more than the undefended release" (normal, from the
    bootstrap standard error); NaN without a spread, except a certain difference."""
    if not np.isfinite(diff):
        return math.nan
    if not (np.isfinite(se) and se > 0):
        return 0.0 if diff > NO_DIFFERENCE else 1.0
    return NormalDist().cdf(-diff / se)


def _best(family: str, matched: pd.DataFrame, points: pd.DataFrame) -> Best | None:
    """The highest utility at the headline's privacy level: the matched-privacy table's row
    (its rule for reaching a level), or, if the table has no such level, the points'."""
    cols = (
        "label",
        "utility",
        "utility_ci_low",
        "utility_ci_high",
        "privacy",
        "knob",
        "knob_value",
    )
    rows = matched[(matched["family"] == family) & np.isclose(matched["level"], HEADLINE_PRIVACY)]
    if rows.empty and len(points):
        rows = points[
            (points["family"] == family)
            & ~points["defense"].isin(REFERENCES)
            & (points["privacy"] >= HEADLINE_PRIVACY)
        ]
    rows = rows[np.isfinite(rows["utility"].astype(float))] if len(rows) else rows
    if rows.empty:
        return None
    top = rows.loc[rows["utility"].astype(float).idxmax(), list(cols)]
    p_lo = p_hi = math.nan
    if len(points):
        at = points[
            (points["family"] == family)
            & (points["label"] == top["label"])
            & np.isclose(
                points["knob_value"].astype(float).fillna(np.inf),
                float(top["knob_value"]) if top["knob_value"] == top["knob_value"] else np.inf,
            )
        ]
        if len(at):
            p_lo, p_hi = float(at["privacy_ci_low"].iloc[0]), float(at["privacy_ci_high"].iloc[0])
    return Best(
        label=str(top["label"]),
        point=knob_text_of(top),
        utility=float(top["utility"]),
        ci_low=float(top["utility_ci_low"]),
        ci_high=float(top["utility_ci_high"]),
        privacy=float(top["privacy"]),
        privacy_ci_low=p_lo,
        privacy_ci_high=p_hi,
    )
