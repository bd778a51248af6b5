"""Which tests a defense's guarantee gets, run at one confidence, and the table they make.

:func:`audit_guarantee` takes one defense at one privacy level and reads its
:class:`~privaudit.guarantees.Guarantee`. The guarantee names (``mechanism``) the defense's
method that declares what the claim is proved for (:mod:`privaudit.mechanisms.audited`): a
:class:`UnitMechanism` (the release on one-unit inputs, with its d_X noise step), a
:class:`DXNoise` (a noise step released as it is) or a :class:`PooledLaplace`. The audit
reads only that declaration, so a built-in and a plugin are audited through the same path
and no concrete defense is imported here. A claim without a declaration is audited as a black
box: ``privatize`` on one-word texts, when it is a claim per token or word.

Tests per declaration: a unit mechanism gets a release test per word pair (drawn as often as
its claim needs, up to a cap; not drawn where the cap could not test it), independence across
documents and tokens, and its noise step's tests (:mod:`.dx`); a Laplace step the tests of
:mod:`.ldp`. The m tests of one audit share the error α (Bonferroni: each Clopper–Pearson
bound at α / 2m); each level is an audit of its own at α (no correction across levels).

Verdicts: **violated** (a test's lower bound above its claim), **holds** (none, and at least
one release test could have shown a violation: its claim below its sample's ceiling; only
the events the tests search are covered, see :mod:`.stats`),
**untestable at n = …** (no release test could: the table gives the ceiling and the draws that
would test it), "no formal claim", "not tested".

Draws: a release test draws twice what its claim needs, between a floor and a cap of 5·10⁴
per input (a word's projection costs ~0.35 ms); a test the cap cannot decide is not drawn.

Where the audit runs: ``privaudit audit-guarantee`` (the table is
:func:`privaudit.cli.render.print_guarantees`; ``--strict`` exits 6); ``privaudit audit
--strict`` (a declared guarantee is tested after conformance, before the grid:
``AuditResult.guarantees``); every run, through ``outputs.write_outputs`` → ``guarantees.csv``
(``RunDir.guarantees_csv``, at ``QUICK_SIZES``) → the report's "Guarantee audit" section.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privaudit.api import Defense
from privaudit.audit.guarantee_audit.dx import (
    independence_tests,
    noise_tests,
    release_tests,
    word_pairs,
)
from privaudit.audit.guarantee_audit.ldp import check_only, laplace_tests, tests_count
from privaudit.audit.guarantee_audit.stats import INDEPENDENCE, RELEASE, Evidence, fisher_p
from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.guarantees import Guarantee, Kind, Unit
from privaudit.mechanisms.audited import (
    Declared,
    DXNoise,
    PooledLaplace,
    UnitMechanism,
    text_units,
)
from privaudit.models.backbone import backbone
from privaudit.numbers import shown


@dataclass(frozen=True)
class Sizes:
    """Draws per input: ``release`` at least, and at most ``release_cap``, for a release test
    (as many as its claim needs between the two: :func:`.dx.pair_draws`); ``noise`` for the
    noise-step tests; ``laplace`` at least, ``laplace_cap`` at most, for the pooled-vector
    tests."""

    release: int = 1200
    noise: int = 50_000
    laplace: int = 6000
    release_cap: int = 50_000
    laplace_cap: int = 100_000


#: Smaller samples for the audit a grid run adds to its outputs.
QUICK_SIZES = Sizes(release=600, noise=20_000, laplace=3000, release_cap=20_000, laplace_cap=30_000)

#: The verdicts, worst first.
VIOLATED, HOLDS, UNTESTABLE, NO_CLAIM, NOT_TESTED = (
    "violated",
    "holds",
    "untestable",
    "no formal claim",
    "not tested",
)


@dataclass
class GuaranteeAudit:
    """The audit of one defense at one level: its claim, every test's evidence and the
    verdict at confidence 1 − α."""

    defense: str
    knob: str | None
    knob_value: float | None
    guarantee: Guarantee
    alpha: float
    seed: int
    evidence: list[Evidence] = field(default_factory=list)
    note: str = ""  # why there is no test, or what the tests left out
    seconds: float = 0.0
    skipped: bool = False  # the defense could not be rebuilt to test (see the note)

    @property
    def violations(self) -> list[Evidence]:
        return [e for e in self.evidence if e.violated]

    @property
    def certifying(self) -> list[Evidence]:
        """The release tests that could have shown a violation (claim below the ceiling)."""
        return [e for e in self.evidence if e.role == RELEASE and e.drawn and e.testable]

    @property
    def verdict(self) -> str:
        if self.skipped:
            return NOT_TESTED
        if not self.guarantee.formal:
            return NO_CLAIM
        if not self.evidence:
            return NOT_TESTED
        if self.violations:
            return VIOLATED
        return HOLDS if self.certifying else UNTESTABLE

    @property
    def best(self) -> Evidence | None:
        """The test with the highest lower bound relative to its claim (a violation's; else
        the release tests that could test their claim first)."""
        if not self.evidence:
            return None
        return max(
            self.evidence,
            key=lambda e: (e.violated, e in self.certifying, e.role == RELEASE, e.ratio, e.lower),
        )

    @property
    def ceiling(self) -> float:
        """The largest lower bound the release tests' samples could show."""
        released = [e.ceiling for e in self.evidence if e.role == RELEASE]
        return max(released) if released else math.nan

    @property
    def needed(self) -> float:
        """The fewest draws per input that would let some release test contradict its claim."""
        released = [e.needed for e in self.evidence if e.role == RELEASE]
        return min(released) if released else math.nan

    @property
    def draws(self) -> int:
        """The largest sample a release test drew or, not drawn, could draw at its cap
        (estimation draws per input)."""
        return max((e.n for e in self.evidence if e.role == RELEASE), default=0)

    @property
    def level(self) -> str:
        return "-" if self.knob is None else f"{self.knob}={shown(self.knob_value)}"

    def line(self) -> str:
        """One line: the verdict, and for a violation the pair and the event."""
        head = f"{self.defense} {self.level}".replace(" -", "")
        conf = f"confidence {1 - self.alpha:.0%}"
        if self.verdict == VIOLATED and self.best is not None:
            e = self.best
            claim = self.guarantee.describe().split(";")[0]
            if e.role == INDEPENDENCE and e.bound is not None:  # continuous: a repeat is proof
                return (
                    f"GUARANTEE VIOLATED: {head} claims {claim}, but {e.test} test: {e.pair}, "
                    f"{e.event}: an exact repeat has probability 0 under a noise density, "
                    f"so the noise is not drawn afresh, at {conf}"
                )
            if e.role == INDEPENDENCE:
                return (
                    f"GUARANTEE VIOLATED: {head} claims {claim}, but {e.test} test: {e.pair}, "
                    f"{e.event}: {e.k}/{e.n} vs {e.k2}/{e.n2} (one-sided Fisher p = "
                    f"{fisher_p(e):.2g}): the noise is not drawn afresh, at {conf}"
                )
            if e.role == "scale":
                return (
                    f"GUARANTEE VIOLATED: {head} claims {claim}, but {e.test} test: {e.pair}, "
                    f"event {e.event}: {e.k}/{e.n}: the noise is that of a parameter >= "
                    f"{e.lower:.3g} > claimed {e.claimed:.3g} (its declared density), at {conf}"
                )
            return (
                f"GUARANTEE VIOLATED: {head} claims {claim}, but {e.test} test: {e.pair} "
                f"(d = {e.distance:.3g}), event {e.event}: P = {e.k}/{e.n} vs {e.k2}/{e.n2}, "
                f"privacy loss >= {e.lower:.3g} > claimed {e.claimed:.3g} at {conf}"
            )
        released = [e.claimed for e in self.evidence if e.role == RELEASE]
        if self.verdict == UNTESTABLE and not released:  # only tests that certify nothing ran
            return (
                f"{head}: untestable: no release test ran ({self.note or 'none planned'}), and "
                f"the others found no violation ({conf})"
            )
        if self.verdict == UNTESTABLE:
            smallest = min(released)
            return (
                f"{head}: untestable at n = {self.draws or self.evidence[0].n:,}: the largest "
                f"lower bound a release test's sample could show is {self.ceiling:.3g}, below "
                f"every claim it tested (smallest {smallest:.3g}); "
                + (
                    f"≈ {self.needed:.3g} draws per input would test it ({conf})"
                    if math.isfinite(self.needed)
                    else f"more than 1e14 draws per input would test it: no feasible audit ({conf})"
                )
            )
        if self.verdict == HOLDS and self.best is not None:
            e = self.best
            return (
                f"guarantee not contradicted: {head}: largest lower bound {max(e.lower, 0):.3g} "
                f"= {e.ratio:.2g} × the claim {e.claimed:.3g} ({e.test} test; its sample could "
                f"show up to {e.ceiling:.3g}; {conf})"
            )
        return f"{head}: {self.verdict}{f' ({self.note})' if self.note else ''}"

    @property
    def claim(self) -> str:
        """The claim in a few symbols: ``η=50 d_X per token``, ``ε=3 LDP per coordinate``."""
        g = self.guarantee
        if not g.formal or g.value is None:
            return str(g)
        symbol = {"eta": "η", "eta0": "η0", "epsilon": "ε"}.get(g.parameter, g.parameter)
        kind = {Kind.DX: "d_X", Kind.LDP: "LDP", Kind.DP: "DP"}[g.kind]
        text = f"{symbol}={shown(g.value)} {kind} per {g.unit}"
        return text + (f" (η_m < {shown(g.largest)})" if g.per_unit else "")

    def release_evidence(self) -> Evidence | None:
        """The strongest drawn test of the release itself (not the noise step)."""
        released = [e for e in self.evidence if e.role == RELEASE and e.drawn]
        return max(released, key=lambda e: (e.testable, e.ratio, e.lower)) if released else None

    def row(self) -> dict[str, Any]:
        """One row of ``guarantees.csv`` / the table (:data:`COLUMNS`)."""
        e = self.best
        eta_hat = (
            e.lower / e.claimed * self.guarantee.value
            if e is not None
            and self.guarantee.value
            and 0 < e.claimed < math.inf
            and e.role == RELEASE
            and e.lower > -math.inf
            else math.nan
        )
        r = self.release_evidence()
        return {
            "defense": self.defense,
            "knob": self.knob,
            "knob_value": self.knob_value,
            "guarantee": str(self.guarantee),
            "claim": self.claim,
            "kind": str(self.guarantee.kind),
            "verdict": self.verdict,
            "test": e.test if e else "",
            "pair": e.pair if e else "",
            "event": e.event if e else "",
            "distance": e.distance if e else math.nan,
            "claimed_loss": e.claimed if e else math.nan,
            "lower_bound": e.lower if e else math.nan,
            "estimate": eta_hat,
            "ratio": e.ratio if e else math.nan,
            "confidence": 1 - self.alpha,
            "release_bound": r.lower if r else math.nan,
            "release_ratio": r.ratio if r else math.nan,
            "ceiling": self.ceiling,
            "draws_needed": self.needed,
            "tests": len(self.evidence),
            "testable": len(self.certifying),
            "n": e.n if e else 0,
            "seconds": self.seconds,
            "note": self.note,
            "seed": self.seed,
        }


COLUMNS = [
    "defense",
    "knob",
    "knob_value",
    "guarantee",
    "claim",
    "kind",
    "verdict",
    "test",
    "pair",
    "event",
    "distance",
    "claimed_loss",
    "lower_bound",
    "estimate",
    "ratio",
    "confidence",
    "release_bound",
    "release_ratio",
    "ceiling",
    "draws_needed",
    "tests",
    "testable",
    "n",
    "seconds",
    "note",
    "seed",
]


# ---- the plans: read from the defense's declaration ------------------------------------------
Plan = tuple[int, Callable[[float, np.random.Generator], list[Evidence]]]


def declaration(defense: Any) -> Declared | None:
    """The mechanism the defense's guarantee names (``Guarantee.mechanism``: a method of the
    defense), or None when it names none. A defense that must be fitted first (SAP-CTI's
    token budgets) is fitted on a small seeded synthetic-reviews sample (public data), as a
    grid would fit it on its corpus, and asked again."""
    name = defense.guarantee.mechanism
    if not name:
        return None
    # a user's plain class wrapped by privaudit audit declares it on itself, not the wrapper
    method = getattr(defense, name, None) or getattr(getattr(defense, "_impl", None), name, None)
    if not callable(method):
        raise TypeError(
            f"{type(defense).__name__}'s guarantee names the mechanism {name!r}, "
            "which is not a method of it."
        )
    try:
        return _probed(method())
    except ValueError:
        if type(defense).fit is Defense.fit:
            raise
        defense.fit(synthetic_reviews(n_docs=300, seed=0).split("train"))
        return _probed(method())


def _probed(found: Any) -> Declared:
    """The declaration, its per-unit budget called once (a fit it needs fails here)."""
    if not isinstance(found, (UnitMechanism, DXNoise, PooledLaplace)):
        raise TypeError(
            f"A guarantee's mechanism returns a privaudit.mechanisms.audited "
            f"declaration, got {type(found).__name__}."
        )
    noise = found.noise if isinstance(found, UnitMechanism) else found
    if isinstance(noise, DXNoise) and noise.unit_eta is not None:
        pool = found.pool if isinstance(found, UnitMechanism) else noise.units
        if pool is not None:
            noise.unit_eta(np.asarray(pool[:1]))
    return found


def _unit_plans(
    mech: UnitMechanism, g: Guarantee, sizes: Sizes, rng: np.random.Generator
) -> list[Plan]:
    """Release tests per pair, independence, and the noise step where declared."""
    pairs = word_pairs(mech.points, mech.pool, rng)
    if g.kind is not Kind.DX:  # ε-LDP/DP per word: any two words are neighbours (distance 1)
        pairs = [(i, j, 1.0) for i, j, _ in pairs]
    test = f"release ({mech.category})" if mech.category else "release"
    per_pair = 2 if mech.continuous else 1
    plans: list[Plan] = [
        (
            per_pair * len(pairs),
            lambda a, r: release_tests(
                mech, pairs, g, a=a, base=sizes.release, cap=sizes.release_cap, rng=r, test=test
            ),
        ),
        (2, lambda a, r: independence_tests(mech, pairs[0][0], a=a, rng=r)),
    ]
    if mech.noise is not None and g.kind is Kind.DX:
        plans.append(_noise_plan(mech.noise, g, sizes, mech.points, mech.pool))
    return plans


def _noise_plan(
    noise: DXNoise, g: Guarantee, sizes: Sizes, points: np.ndarray | None, pool: np.ndarray | None
) -> Plan:
    count = 3 if noise.unit_eta is not None else 2
    return (
        count,
        lambda a, r: noise_tests(noise, g, a=a, n=sizes.noise, rng=r, points=points, pool=pool),
    )


def plan(
    defense: Defense,
    sizes: Sizes,
    rng: np.random.Generator,
    backbone_name: str | None = None,
    tests: Sequence[str] | None = None,
) -> tuple[list[Plan], str]:
    """The tests for ``defense``'s guarantee, and a note (why none, or what is left out).
    ``tests``: only these of a Laplace step's tests (:data:`.ldp.NAMES`)."""

    g = defense.guarantee
    if not g.formal:
        return [], "no formal claim" if g.kind is Kind.NONE else f"{g.kind}: nothing to test"
    if g.value is not None and math.isinf(g.largest):
        return [], "no noise (the parameter is inf): the claim bounds nothing"
    found = declaration(defense)
    if tests is not None and not isinstance(found, PooledLaplace):
        raise ValueError(
            f"{defense.name} declares no Laplace step: choosing tests is for the pooled-Laplace "
            "audit (cape, dpnr, or a plugin declaring PooledLaplace); run it without --test."
        )
    if isinstance(found, PooledLaplace):
        step = found

        def laplace(a: float, r: np.random.Generator) -> list[Evidence]:
            return laplace_tests(
                step, g, a=a, base=sizes.laplace, cap=sizes.laplace_cap, rng=r, only=tests
            )

        note = "" if tests is None else f"only the test(s) {', '.join(tests)}; the rest off"
        return [(tests_count(tests), laplace)], note
    if isinstance(found, DXNoise):
        return [_noise_plan(found, g, sizes, None, found.units)], (
            "the noise step is the release (hidden states plus noise)"
        )
    if isinstance(found, UnitMechanism):
        return _unit_plans(found, g, sizes, rng), ""
    # No declaration: a black box, one-word texts through privatize.
    if g.unit not in (Unit.TOKEN, Unit.WORD) or (
        g.kind is Kind.DX and "embedding" not in (g.metric or "embedding")
    ):
        return [], (
            f"a {g.kind} claim per {g.unit} has no generic test (one-word texts test "
            "claims per token or word)"
        )
    bb = backbone(backbone_name)
    pool = bb.candidate_ids[bb.subwords.classes[bb.candidate_ids] == 0]  # one-token texts
    return _unit_plans(text_units(defense.privatize, bb, pool), g, sizes, rng), (
        "no mechanism declared: privatize on one-word texts (a black box)"
    )


def audit_guarantee(
    defense: Defense,
    *,
    alpha: float = 0.05,
    seed: int = 0,
    sizes: Sizes | None = None,
    backbone: str | None = None,
    label: str | None = None,
    tests: Sequence[str] | None = None,
) -> GuaranteeAudit:
    """Test ``defense``'s stated guarantee at its current level: the verdict at confidence
    1 − ``alpha`` with every test's evidence (see the module docstring). ``backbone`` names
    the embeddings of a user privatizer's word pairs (the default backbone if None);
    ``tests`` runs only these of a Laplace step's tests (:data:`.ldp.NAMES`), the others
    switched off (the Bonferroni count is theirs)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha is a probability in (0, 1), got {alpha!r}.")
    tests = None if tests is None else sorted(check_only(tests) or ())
    sizes = sizes or Sizes()
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    g = defense.guarantee
    knob = getattr(defense, "knob", None)  # a user wrapper's is set per instance
    knob = knob if isinstance(knob, str) and not knob.startswith("(") else None
    result = GuaranteeAudit(
        label or defense.name,
        knob,
        _as_float(defense.knob_value),
        g,
        alpha,
        seed,
    )
    plans, result.note = plan(defense, sizes, rng, backbone, tests)
    m = sum(count for count, _ in plans)
    a = alpha / (2 * max(m, 1))
    for _, run in plans:
        result.evidence.extend(run(a, np.random.default_rng(rng.integers(2**63))))
    result.seconds = time.perf_counter() - t0
    return result


def _as_float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def to_frame(audits: Sequence[GuaranteeAudit]) -> Any:
    """The table (``guarantees.csv``): one row per defense and level, columns :data:`COLUMNS`."""
    return pd.DataFrame([a.row() for a in audits], columns=COLUMNS)
