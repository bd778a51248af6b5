"""A user's privatizer as a defense: the wrapper ``privaudit audit`` builds, and what a run
config's plain class (one with ``privatize(texts, rng)`` that does not derive from
:class:`~privaudit.api.Defense`) is wrapped in when the grid is built
(:func:`privaudit.audit.cells.build_components`)."""

from __future__ import annotations

import copy
import difflib
from typing import Any, ClassVar

import numpy as np

from privaudit.api import Defense, Release
from privaudit.guarantees import Guarantee, as_guarantee
from privaudit.mechanisms.inputs import check_rng, check_texts
from privaudit.registry import load_object


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
                    f"Cannot construct {self.target} with {self.options}: {exc}. Give its "
                    "constructor's parameters (a grid config's params and knob_values; "
                    "--param key=value and --knob with `privaudit audit`)."
                ) from None
            if not callable(getattr(impl, "privatize", None)):
                raise ValueError(
                    f"{self.target} has no privatize(texts, rng) method; give it one (one "
                    "string per input text), or derive it from privaudit.api.Defense."
                )
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

    def check(self) -> None:
        """Build the user's object now (its constructor and ``privatize`` checked), so that a
        class that cannot be built fails before any work rather than at its first point."""
        self._load()

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
        other = copy.copy(self)  # the fit data stay
        other.options = {**self.options, self.knob: value}
        other._impl = None
        # The name and guarantee were read from the instance at the old value (a guarantee
        # often states the knob: η·d_X): forget them, and read them from the instance built
        # with the new value, so no one (the guarantee audit first) sees the old level's.
        for attr in ("name", "guarantee"):
            other.__dict__.pop(attr, None)
        if self._impl is not None:
            other._load()  # (refitted on the same data) as this one was: its labels now
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
