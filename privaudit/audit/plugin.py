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
3. runs a grid: the user's privatizer at each knob value, the undefended baseline and the
   built-in defenses to compare with (``t2t`` and ``pct2t`` by default) at the preset's
   privacy levels, every applicable attack and the preset's utility evaluator; the run ends
   with the Pareto plots, the leaderboard and the HTML report, as every run does.
"""

from __future__ import annotations

import copy
import difflib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from privaudit.api import Defense, Release
from privaudit.audit.config import PRESETS, load_config
from privaudit.audit.runner import run_grid
from privaudit.guarantees import Guarantee, as_guarantee
from privaudit.mechanisms.inputs import check_rng, check_texts
from privaudit.registry import DEFENSES, load_object

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


class UserDefense(Defense):
    """A user's privatizer as a defense (the ``privaudit audit`` wrapper).

    ``target`` is ``module:Class`` or ``path/file.py:Class``; ``knob`` names the constructor
    parameter that sets the privacy level (or None); every other keyword goes to the user's
    constructor. The class may set ``name`` and ``guarantee`` (a
    :class:`~privaudit.guarantees.Guarantee`, a string shown as written, or nothing for
    ``"unknown (user privatizer)"``; another type is a ``TypeError``); its
    ``privatize(texts, rng)`` may return strings (wrapped in a text release) or a Release.
    Threat model, knob units and guarantee are the user's; privaudit measures, it does not
    certify.
    """

    name: ClassVar[str] = "user"
    knob: ClassVar[str | None] = "(set by the user)"  # a class-level stand-in; see __init__
    guarantee: ClassVar[Guarantee] = Guarantee.unknown("user privatizer")

    def __init__(self, target: str, knob: str | None = None, **options: Any) -> None:
        self.target = target
        self.knob = knob  # type: ignore[misc]
        self.options = options
        self._impl: Any = None
        self._train: Any = None  # what fit() saw: a copy at another knob value refits on it

    def _load(self) -> Any:
        if self._impl is None:
            cls = load_object(self.target) if isinstance(self.target, str) else None
            if not callable(cls):
                raise ValueError(f"{self.target!r} does not name a class or factory.")
            try:
                impl = cls(**self.options)
            except TypeError as exc:
                raise ValueError(
                    f"Cannot construct {self.target} with {self.options}: {exc}. Pass its "
                    "parameters with --param key=value (and the knob with --knob)."
                ) from None
            if not callable(getattr(impl, "privatize", None)):
                raise ValueError(f"{self.target} has no privatize(texts, rng) method.")
            if self._train is not None and callable(getattr(impl, "fit", None)):
                impl.fit(self._train)
            self._impl = impl
            # The user's own name and guarantee, where given, label the results.
            self.name = str(getattr(impl, "name", "") or cls.__name__)  # type: ignore[misc]
            given = getattr(impl, "guarantee", None)
            self.guarantee = as_guarantee(  # type: ignore[misc]
                given, where=f"{self.target}.guarantee", default=UserDefense.guarantee
            )
        return self._impl

    def fit(self, train: Any) -> UserDefense:
        self._train, self._impl = train, None
        self._load()
        return self

    def privatize(self, texts: Any, *, rng: np.random.Generator) -> Release:
        texts = check_texts(texts)
        check_rng(rng)
        out = self._load().privatize(list(texts), rng=rng)
        if isinstance(out, Release):
            release = out
        elif isinstance(out, (list, tuple)):
            bad = next((i for i, t in enumerate(out) if not isinstance(t, str)), None)
            if bad is not None:
                value = out[bad]
                item = "None" if value is None else f"{value!r:.40} ({type(value).__name__})"
                raise TypeError(
                    f"{self.target}.privatize returned a {type(out).__name__} whose item {bad} "
                    f"is {item}; return a list of strings (one per input) or a privaudit Release."
                )
            release = Release("text", texts=list(out))
        else:
            raise TypeError(
                f"{self.target}.privatize returned {type(out).__name__}; return a list of "
                "strings (one per input) or a privaudit Release."
            )
        if len(release) != len(texts):
            raise ValueError(
                f"{self.target}.privatize returned {len(release)} outputs for {len(texts)} "
                "inputs; it must return exactly one per input, in order."
            )
        if release.kind == "text" and "replaced" not in release.audit:
            # The runner's replacement rate: 0 tells the leaderboard the text went out unchanged.
            masks = [
                changed_words(a, b) for a, b in zip(texts, release.content_texts(), strict=True)
            ]
            release.audit = {**release.audit, "replaced": masks}
        return release

    def params(self) -> dict[str, Any]:
        return {"target": self.target, "knob": self.knob, **self.options}

    @property
    def knob_value(self) -> Any:
        return None if self.knob is None else self.options.get(self.knob)

    def with_knob(self, value: float) -> UserDefense:
        if self.knob is None:
            raise ValueError("This privatizer was given no knob; use --knob NAME=v1,v2,...")
        other = copy.copy(self)  # the user's name, guarantee and fit data stay
        other.options = {**self.options, self.knob: value}
        other._impl = None  # rebuilt (and refitted) with the new value on first use
        return other


def changed_words(original: str, released: str) -> np.ndarray:
    """Per whitespace-split word of ``original``: True unless it survives, in order, in
    ``released`` (a word-level diff; a user's privatizer reports no mask of its own)."""
    words = original.split()
    kept = np.zeros(len(words), dtype=bool)
    matcher = difflib.SequenceMatcher(None, words, released.split(), autojunk=False)
    for block in matcher.get_matching_blocks():
        kept[block.a : block.a + block.size] = True
    return ~kept


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
        CHANGES_TEXT, True, warn=True,
        detail=f"IDENTITY: every word of the {len(texts)} check texts came back unchanged"
        f"{where}{' (every knob value)' if every and where else ''}; those releases are the "
        "original texts and protect nothing. Check that privatize() returns the privatized "
        "texts; the leaderboard ranks it below any defense it ties with.",
    )  # fmt: skip


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

    first = attempt("one output per input",
                    lambda: defense.privatize(texts, rng=np.random.default_rng(0)))  # fmt: skip
    if first is not None:
        checks.append(Check("one output per input", True, f"{len(first)} for {len(texts)}"))
        again = attempt("deterministic for a seed",
                        lambda: defense.privatize(texts, rng=np.random.default_rng(0)))  # fmt: skip
        if again is not None:
            same = _same(first, again)
            checks.append(Check("deterministic for a seed", same,
                                "same seed, same output" if same else "two calls with "
                                "default_rng(0) gave different outputs; draw all randomness "
                                "from the rng argument"))  # fmt: skip
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
        checks.append(Check("speed", rate >= min_speed,
                            f"{rate:,.0f} words/s (at least {min_speed:,.0f} needed)"))  # fmt: skip
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

    @property
    def warnings(self) -> list[Check]:
        return [c for c in self.checks if c.passed and c.warn]


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
) -> AuditResult:
    """Check, then benchmark, the privatizer ``target`` at each value of ``knob``
    (``"NAME=v1,v2"``); ``compare`` names the built-in defenses drawn beside it (their
    privacy levels from ``preset``, else from the quick preset); ``corpus_params`` are merged
    over the grid's ``corpus.params``; ``device`` (default: the grid's) is where torch runs;
    ``outputs`` writes the plots, leaderboard and report (:func:`privaudit.outputs.audit` passes
    it)."""
    knob_name, values = parse_knob(knob)
    options = dict(params or {})
    probe = UserDefense(target, knob_name, **options)
    if knob_name is not None:
        probe = probe.with_knob(values[len(values) // 2])  # check at a middle level
    probe.fit([])
    checks = conformance(probe, min_speed=min_speed)
    failed = [c for c in checks if not c.passed]
    if knob_name is not None and not failed:
        # Identity at any knob value, not only the middle one the checks ran at.
        levels = {f"{knob_name}={v:g}": probe.with_knob(v) for v in values}
        identity = identity_check(levels)
        checks = [c for c in checks if c.name != CHANGES_TEXT]
        if identity is not None:
            checks.append(identity)
    shown = label or probe.name
    if failed:
        return AuditResult(checks, None, shown, failed)

    base = load_config(preset)
    data = base.model_dump()
    data["corpus"]["params"].update(corpus_params or {})  # --map: merged over the grid's
    quick = {d["name"]: d for d in PRESETS["quick"]["defenses"]}
    from_preset = {d["name"]: d for d in data["defenses"]}
    defenses = [{"name": "none"}]
    for name in compare:
        DEFENSES.get(name)  # a typo fails here, before any work
        if name == "none":
            continue
        spec = copy.deepcopy(from_preset.get(name) or quick.get(name) or {"name": name})
        defenses.append(spec)
    user = {"name": USER, "label": shown, "params": {"target": target, "knob": knob_name,
                                                       **options}}  # fmt: skip
    if knob_name is not None:
        user["knob_values"] = values
    defenses.append(user)
    data.update(name=f"audit-{shown}", defenses=defenses)
    if device is not None:
        data["device"] = device  # checked with the rest of the config
    config = load_config(data)
    result = run_grid(
        config, run_dir=run_dir, reports_root=reports_root, progress=progress, outputs=outputs
    )
    return AuditResult(checks, result, shown, [])
