"""``privaudit audit``: a user's privatizer, checked for conformance, then benchmarked.

The user brings a class with ``privatize(texts, rng)`` returning one string per input (or a
:class:`~privaudit.api.Release`), given as ``module:Class`` or ``path/file.py:Class``. The
audit

1. wraps it as a defense (:class:`UserDefense`; plain strings become a text release);
2. runs conformance checks (:func:`conformance`): one output per input, the same output for
   the same seed, empty and non-ASCII text, and speed; any failure stops the audit before a
   grid is spent on a broken privatizer, with one line per check saying what was wrong. A
   privatizer that changes no word at some knob value passes with a warning (the leaderboard
   then ranks it below any real defense it ties with, and its notes say why);
3. when the class declares a formal guarantee, tests it at each knob value
   (:mod:`privaudit.audit.guarantee_audit`); under ``strict`` a violation stops here;
4. runs a grid: the user's privatizer at each knob value, the undefended baseline and the
   built-in defenses to compare with (``t2t`` and ``pct2t`` by default) at the preset's
   privacy levels, every applicable attack and the preset's utility evaluator; the run ends
   with the Pareto plots, the leaderboard and the HTML report, as every run does.

The same conformance checks run over every built-in defense in ``tests/test_conformance.py``
(exceptions declared with their reason, as scikit-learn's ``parametrize_with_checks`` tags
them), and over every built-in attack: one seed gives the same predictions twice, and their
kind is the metric's ``prediction_kind``.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import NONE, Defense, Release
from privaudit.audit.config import PRESETS, GridConfig, load_config
from privaudit.audit.guarantee_audit import VIOLATED, GuaranteeAudit, audit_guarantee
from privaudit.audit.runner import run_grid
from privaudit.audit.wrapper import UserDefense
from privaudit.registry import DEFENSES

if TYPE_CHECKING:
    from privaudit.audit.runner import OutputWriter

#: How grid configs name the wrapper (a ``module:Class`` path resolves in every worker).
USER = "privaudit.audit.plugin:UserDefense"
#: Below this speed a privatizer fails the speed check: the quick grid would spend hours.
MIN_WORDS_PER_SECOND = 50.0
_CHECK_TEXTS = [
    "The delivery was late, but the staff in Boston were kind and refunded me.",
    "I ordered the blue jacket for my daughter Emma; it fit well and arrived quickly.",
    "Terrible service. The manager, Mr. Li, never called back about my account.",
    "Great value for the price, would buy again from this shop in Leeds.",
]


@dataclass
class Check:
    name: str
    passed: bool
    detail: str
    warn: bool = False  # passed, but the user should look (e.g. nothing was changed)

    def line(self) -> str:
        status = "FAIL" if not self.passed else "WARN" if self.warn else "pass"
        return f"[{status}] {self.name}: {self.detail}"


CHANGES_TEXT = "changes the text"


def identity_check(levels: dict[str, Defense], texts: list[str] | None = None) -> Check | None:
    """Warn when a text privatizer returns every check text word for word at some level
    (``levels``: a description such as ``"p=0.2"`` → the defense at that level); None when
    the releases are not text, or privatizing fails (the other checks report that)."""
    texts = list(texts or _CHECK_TEXTS)
    unchanged = []
    for shown, defense in levels.items():
        try:
            release = defense.privatize(texts, rng=np.random.default_rng(3))
        except Exception:
            return None
        if release.kind != "text":
            return None
        if [t.split() for t in release.content_texts()] == [t.split() for t in texts]:
            unchanged.append(shown)
    if not unchanged:
        return Check(CHANGES_TEXT, True, f"{len(texts)} check texts changed")
    where = f" at {', '.join(u for u in unchanged if u)}" if any(unchanged) else ""
    every = len(unchanged) == len(levels)
    return Check(
        CHANGES_TEXT,
        True,
        warn=True,
        detail=f"IDENTITY: every word of the {len(texts)} check texts came back unchanged"
        f"{where}{' (every knob value)' if every and where else ''}; those releases are the "
        "original texts and protect nothing. Check that privatize() returns the privatized "
        "texts; the leaderboard ranks it below any defense it ties with.",
    )


def conformance(
    defense: Defense, texts: list[str] | None = None, *, min_speed: float = MIN_WORDS_PER_SECOND
) -> list[Check]:
    """Run the conformance checks; each failure's detail says what was wrong."""
    texts = list(texts or _CHECK_TEXTS)
    checks: list[Check] = []

    def attempt(name: str, func: Any) -> Any:
        try:
            return func()
        except Exception as exc:  # a check reports, it does not crash the audit
            checks.append(Check(name, False, f"raised {type(exc).__name__}: {exc}"))
            return None

    first = attempt(
        "one output per input", lambda: defense.privatize(texts, rng=np.random.default_rng(0))
    )
    if first is not None:
        checks.append(Check("one output per input", True, f"{len(first)} for {len(texts)}"))
        again = attempt(
            "deterministic for a seed",
            lambda: defense.privatize(texts, rng=np.random.default_rng(0)),
        )
        if again is not None:
            same = _same(first, again)
            checks.append(
                Check(
                    "deterministic for a seed",
                    same,
                    "same seed, same output"
                    if same
                    else "two calls with "
                    "default_rng(0) gave different outputs; draw all randomness "
                    "from the rng argument",
                )
            )
        identity = identity_check({"": defense}, texts)
        if identity is not None:
            checks.append(identity)
    odd = {"empty text": ["", "ok"], "non-ASCII text": ["Zoë's café in Zürich — 東京 ✓", "ok"]}
    for name, sample in odd.items():
        out = attempt(name, lambda s=sample: defense.privatize(s, rng=np.random.default_rng(1)))
        if out is not None:
            checks.append(Check(name, True, f"{len(out)} outputs"))
    batch = (texts * (1 + 2000 // max(1, sum(len(t.split()) for t in texts))))[:400]
    words = sum(len(t.split()) for t in batch)
    t0 = time.perf_counter()
    done = attempt("speed", lambda: defense.privatize(batch, rng=np.random.default_rng(2)))
    if done is not None:
        rate = words / max(time.perf_counter() - t0, 1e-9)
        checks.append(
            Check(
                "speed",
                rate >= min_speed,
                f"{rate:,.0f} words/s (at least {min_speed:,.0f} needed)",
            )
        )
    return checks


def _same(a: Release, b: Release) -> bool:
    if a.texts is not None or b.texts is not None:
        return a.texts == b.texts
    va, vb = a.vectors or [], b.vectors or []
    return len(va) == len(vb) and all(np.array_equal(x, y) for x, y in zip(va, vb, strict=True))


@dataclass
class AuditResult:
    checks: list[Check]
    run: Any = None  # RunResult, when the checks passed
    label: str = ""
    failed: list[Check] = field(default_factory=list)
    #: The guarantee audit of a declared formal guarantee, one per knob value (else empty).
    guarantees: list[GuaranteeAudit] = field(default_factory=list)

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.passed and c.warn]

    @property
    def violated(self) -> list[GuaranteeAudit]:
        """The knob values whose stated guarantee the guarantee audit contradicted."""
        return [g for g in self.guarantees if g.verdict == VIOLATED]


def parse_knob(spec: str | None) -> tuple[str | None, list[float]]:
    """``"eta=10,50,100"`` → ``("eta", [10.0, 50.0, 100.0])``."""
    if not spec:
        return None, []
    name, sep, values = spec.partition("=")
    if not sep or not name.strip() or not values.strip():
        raise ValueError(f"--knob expects NAME=v1,v2,... (e.g. eta=10,50,100), got {spec!r}.")
    try:
        numbers = [float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--knob values must be numbers, got {values!r}.") from None
    if not numbers:
        raise ValueError(f"--knob {name} has no values.")
    return name.strip(), numbers


def audit(
    target: str,
    *,
    knob: str | None = None,
    params: dict[str, Any] | None = None,
    preset: str | Path = "quick",
    compare: tuple[str, ...] | list[str] = ("t2t", "pct2t"),
    label: str | None = None,
    run_dir: str | Path | None = None,
    reports_root: str | Path = "reports",
    progress: bool = True,
    min_speed: float = MIN_WORDS_PER_SECOND,
    corpus_params: dict[str, Any] | None = None,
    device: str | None = None,
    outputs: OutputWriter | None = None,
    strict: bool = False,
    alpha: float = 0.05,
) -> AuditResult:
    """Check, then benchmark, the privatizer ``target`` at each value of ``knob``
    (``"NAME=v1,v2"``); ``compare`` names the built-in defenses drawn beside it (their
    privacy levels from ``preset``, else from the quick preset); ``corpus_params`` are merged
    over the grid's ``corpus.params``; ``device`` (default: the grid's) is where torch runs;
    ``outputs`` writes the plots, leaderboard and report (:func:`privaudit.outputs.audit` passes
    it).A privatizer that declares a formal guarantee (d_X, ε-LDP or ε-DP per token or word) has it
    tested at each knob value first (:mod:`privaudit.audit.guarantee_audit`, confidence
    1 − ``alpha``; :attr:`AuditResult.guarantees`); with ``strict`` a violated guarantee ends
    the audit before the grid."""
    knob_name, values = parse_knob(knob)
    options = dict(params or {})
    probe = UserDefense(target, knob_name, **options)
    if knob_name is not None:
        probe = probe.with_knob(values[len(values) // 2])  # check at a middle level
    probe.fit([])
    checks, failed = _checked(probe, knob_name, values, min_speed)
    shown = label or probe.name
    if failed:
        return AuditResult(checks, None, shown, failed)
    # A declared formal guarantee is tested at each knob value before the grid; under
    # ``strict`` a violated one stops the audit there (nothing is benchmarked).
    guarantees = _tested_guarantees(probe, values, alpha, shown, options.get("backbone"))
    if strict and any(g.verdict == VIOLATED for g in guarantees):
        return AuditResult(checks, None, shown, [], guarantees)
    user = _Privatizer(shown, target, knob_name, values, options)
    config = _audit_config(preset, corpus_params, compare, user, device)
    result = run_grid(
        config, run_dir=run_dir, reports_root=reports_root, progress=progress, outputs=outputs
    )
    return AuditResult(checks, result, shown, [], guarantees)


def _checked(
    probe: UserDefense, knob_name: str | None, values: list[float], min_speed: float
) -> tuple[list[Check], list[Check]]:
    """The conformance checks of ``probe`` (at its middle knob value) and the failed ones;
    when all pass and it has a knob, the identity check runs at every knob value instead."""
    checks = conformance(probe, min_speed=min_speed)
    failed = [c for c in checks if not c.passed]
    if knob_name is not None and not failed:
        # Identity at any knob value, not only the middle one the checks ran at.
        levels = {f"{knob_name}={v:g}": probe.with_knob(v) for v in values}
        identity = identity_check(levels)
        checks = [c for c in checks if c.name != CHANGES_TEXT]
        if identity is not None:
            checks.append(identity)
    return checks, failed


def _tested_guarantees(
    probe: UserDefense, values: list[float], alpha: float, shown: str, backbone: Any
) -> list[GuaranteeAudit]:
    """The guarantee audit at each knob value (or once, without a knob) whose defense
    declares a formal guarantee."""
    guarantees: list[GuaranteeAudit] = []
    for value in values or [None]:
        point = probe if value is None else probe.with_knob(value)
        point.fit([])
        if point.guarantee.formal:
            guarantees.append(audit_guarantee(point, alpha=alpha, label=shown, backbone=backbone))
    return guarantees


@dataclass(frozen=True)
class _Privatizer:
    """The user's privatizer as the audit's grid declares it: its label, the ``target`` it
    is built from, its knob (None: none) with the values to run, and its other parameters."""

    label: str
    target: str
    knob: str | None
    values: list[float]
    params: dict[str, Any]

    def spec(self) -> dict[str, Any]:
        """Its entry in the grid's ``defenses`` (knob values only with a knob)."""
        user: dict[str, Any] = {
            "name": USER,
            "label": self.label,
            "params": {"target": self.target, "knob": self.knob, **self.params},
        }
        if self.knob is not None:
            user["knob_values"] = self.values
        return user


def _audit_config(
    preset: str | Path,
    corpus_params: dict[str, Any] | None,
    compare: tuple[str, ...] | list[str],
    user: _Privatizer,
    device: str | None,
) -> GridConfig:
    """The audit's grid: ``preset``'s corpus, attacks and utility with the undefended
    baseline, the ``compare`` defenses and the ``user``'s privatizer at each knob value."""
    base = load_config(preset)
    data = base.model_dump()
    data["corpus"]["params"].update(corpus_params or {})  # --map: merged over the grid's
    quick = {d["name"]: d for d in PRESETS["quick"]["defenses"]}
    from_preset = {d["name"]: d for d in data["defenses"]}
    defenses = [{"name": NONE}]
    for name in compare:
        DEFENSES.get(name)  # a typo fails here, before any work
        if name == NONE:
            continue
        spec = copy.deepcopy(from_preset.get(name) or quick.get(name) or {"name": name})
        defenses.append(spec)
    defenses.append(user.spec())
    data.update(name=f"audit-{user.label}", defenses=defenses)
    if device is not None:
        data["device"] = device  # checked with the rest of the config
    return load_config(data)
