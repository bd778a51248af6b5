"""A defense's formal privacy guarantee as a typed object: computed, rendered, compared.

A :class:`Guarantee` holds what a privacy claim says, in fields a program can use: its kind
(:class:`Kind`: metric d_X-privacy, ε-LDP, ε-DP, none), the privacy parameter's name and value
(``eta = 100.0``), the protected unit (:class:`Unit`: a token within its word class, a
coordinate, ...), the metric d of d_X or the sensitivity Δ the noise is calibrated to, and what
the units compose into (a document of n tokens, a d-dimensional vector). Each defense computes
its guarantee from its own parameters, the way opacus's accountant computes ε from the noise
multiplier: ``T2T(eta=50).guarantee`` is η = 50 per token, and the class-level
``T2T.guarantee`` is the one at the default parameters (:class:`guarantee_property`).

Two renderings:

- ``str(g)`` — the statement in symbols (``"eta·d_X-privacy per token, within its word class
  (Feyisetan et al. 2020)"``). It does not depend on the parameter's value, and it is what the
  results' ``guarantee`` column shows, so a built-in's text must not change between versions
  (CAPE and DPNR keep their prose in :attr:`Guarantee.wording`).
- ``g.describe()`` — with the values filled in (``"η=100 · d_X-privacy per token, ..."``).

Comparison: guarantees of the same kind, unit and metric compare by how much they let leak per
unit (:meth:`Guarantee.loss`): **smaller η or ε is the stronger guarantee**, so ``g1 < g2``
reads "g1 promises less than g2 lets leak" (``g1.stronger_than(g2)`` says the same in words).
Across kinds, units or metrics there is no order: comparing raises a one-line ``TypeError``.
Equality and hashing compare every field.

The guarantee audit reads :meth:`Guarantee.loss` (the claimed bound on the log
likelihood ratio of two inputs at a distance), :attr:`Guarantee.unit`, :attr:`Guarantee.metric`
and :attr:`Guarantee.sensitivity`, and calls the defense's method :attr:`Guarantee.mechanism`
names (its declared sampler or kernel); :meth:`Guarantee.to_dict` gives all fields as plain
values.

This module is low in the layers: it imports only the standard library and
:mod:`privaudit.params`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from privaudit.numbers import shown

__all__ = [
    "Guarantee",
    "Kind",
    "PerUnit",
    "Sensitivity",
    "Unit",
    "as_guarantee",
    "embedding_distance",
    "guarantee_property",
]


class Kind(StrEnum):
    """What a guarantee promises."""

    DX = "d_X-privacy"  # metric DP: P[M(x) ∈ S] <= exp(η·d(x, x')) P[M(x') ∈ S], per unit
    LDP = "epsilon-LDP"  # local DP: any two inputs of the unit, ε per Δ of their distance
    DP = "epsilon-DP"  # central DP over neighbouring data sets
    NONE = "none"  # no formal guarantee (empirical protection at most)
    STATED = "stated"  # a statement in words that privaudit cannot compute with (a user's string)
    UNKNOWN = "unknown"  # nothing declared


#: The kinds with a parameter: only these compare, compose and bound a likelihood ratio.
FORMAL: frozenset[Kind] = frozenset({Kind.DX, Kind.LDP, Kind.DP})


class Unit(StrEnum):
    """What one application of the guarantee protects."""

    TOKEN = "token"
    WORD = "word"
    TOKEN_REPRESENTATION = "token representation"  # a token's vector at a split layer
    TOKEN_EMBEDDING = "token embedding"
    COORDINATE = "coordinate"
    VECTOR = "vector"
    DOCUMENT = "document"


@dataclass(frozen=True)
class Sensitivity:
    """The Δ a noise mechanism is calibrated to (Laplace scale Δ/ε), in a norm, of a quantity:
    two inputs at distance t in that norm are (ε·t/Δ)-indistinguishable."""

    value: float
    norm: str = "L1"
    of: str = ""  # what the norm measures, e.g. "one coordinate of the [0,1]^d vector"

    def __post_init__(self) -> None:
        value = float(self.value)
        if not value > 0 or math.isinf(value):
            raise ValueError(f"A sensitivity is a finite number > 0, got {self.value!r}.")
        object.__setattr__(self, "value", value)


@dataclass(frozen=True)
class PerUnit:
    """A per-unit parameter that varies over the open interval (low·value, high·value) of the
    guarantee's parameter: SAP-CTI's η_m in (0, 2·η0) is ``PerUnit("eta_m", 0, 2)``."""

    name: str
    low: float
    high: float

    def __post_init__(self) -> None:
        if not 0 <= self.low < self.high:
            raise ValueError(f"A per-unit range needs 0 <= low < high, got {self.low, self.high}.")


_SYMBOLS = {"eta": "η", "eta0": "η0", "eta_m": "η_m", "epsilon": "ε", "delta": "δ"}


def _greek(name: str) -> str:
    return _SYMBOLS.get(name, name)


def _factor(f: float, name: str) -> str:
    """``0``, ``eta0`` or ``2·eta0``: a bound of a per-unit range in symbols."""
    if f == 0:
        return "0"
    return name if f == 1 else f"{shown(f)}·{name}"


@dataclass(frozen=True)
class Guarantee:
    """One privacy claim, typed. Build it with :meth:`dx`, :meth:`ldp`, :meth:`dp`,
    :meth:`none`, :meth:`stated` or :meth:`unknown`; see the module docstring for the
    renderings and the order."""

    kind: Kind
    parameter: str = ""  # its name in the statement: "eta", "eta0", "epsilon"
    value: float | None = None  # its value (the defense's knob); None without a parameter
    unit: Unit | None = None
    within: str = ""  # the unit is protected only among these: "its word class"
    selected: bool = False  # only units the mechanism selects are perturbed; others go as they are
    per_unit: PerUnit | None = None  # the parameter varies per unit within a range (SAP-CTI)
    metric: str = ""  # d of d_X, or the space an LDP/DP distance is measured in
    sensitivity: Sensitivity | None = None  # Δ of a noise mechanism (LDP/DP)
    dimension: int | None = None  # number of coordinates, where known
    composes_over: Unit | None = None  # what a sequence of units makes up (document, vector)
    source: str = ""  # citation, shown in parentheses
    notes: str = ""  # what the statement leaves out; a none guarantee's reason
    wording: str = ""  # the statement's own words where the generic rendering differs
    # The defense's method that declares the mechanism this claim is proved for (a
    # privaudit.mechanisms.audited declaration): what the guarantee audit tests. "" = none
    # declared: the audit runs privatize on one-word texts (a black box).
    mechanism: str = ""

    def __post_init__(self) -> None:
        kind = _member(Kind, self.kind, "kind")
        object.__setattr__(self, "kind", kind)
        if self.unit is not None:
            object.__setattr__(self, "unit", _member(Unit, self.unit, "unit"))
        if self.composes_over is not None:
            object.__setattr__(self, "composes_over", _member(Unit, self.composes_over, "unit"))
        if kind in FORMAL:
            if not self.parameter or self.value is None or self.unit is None:
                raise ValueError(
                    f"A {kind} guarantee needs its parameter's name and value and the unit it "
                    f"protects; got parameter={self.parameter!r}, value={self.value!r}, "
                    f"unit={self.unit!r}."
                )
            value = float(self.value)
            if not value >= 0:
                raise ValueError(f"A privacy parameter is a number >= 0, got {self.value!r}.")
            object.__setattr__(self, "value", value)
        elif self.value is not None:
            raise ValueError(f"A guarantee of kind {kind} has no parameter value.")

    # ---- constructors ---------------------------------------------------------------------
    @classmethod
    def dx(
        cls, parameter: str, value: float, *, unit: Unit, metric: str, **fields: Any
    ) -> Guarantee:
        """η·d_X-privacy per ``unit`` for the distance ``metric`` (Chatzikokolakis et al. 2013;
        Feyisetan et al. 2020 for text)."""
        return cls(Kind.DX, parameter, value, unit, metric=metric, **fields)

    @classmethod
    def ldp(
        cls,
        parameter: str,
        value: float,
        *,
        unit: Unit,
        sensitivity: Sensitivity,
        metric: str = "",
        **fields: Any,
    ) -> Guarantee:
        """ε-LDP per ``unit``, the noise calibrated to ``sensitivity``."""
        return cls(
            Kind.LDP, parameter, value, unit, metric=metric, sensitivity=sensitivity, **fields
        )

    @classmethod
    def dp(
        cls, parameter: str, value: float, *, unit: Unit, sensitivity: Sensitivity, **fields: Any
    ) -> Guarantee:
        """ε-DP (central) over data sets differing in one ``unit``."""
        return cls(Kind.DP, parameter, value, unit, sensitivity=sensitivity, **fields)

    @classmethod
    def none(cls, reason: str = "") -> Guarantee:
        """No formal guarantee: ``"none"``, or ``"none (reason)"``."""
        return cls(Kind.NONE, notes=reason)

    @classmethod
    def stated(cls, text: str) -> Guarantee:
        """A guarantee stated in words only (a user's string): rendered as given, never
        compared or audited."""
        return cls(Kind.STATED, wording=str(text))

    @classmethod
    def unknown(cls, reason: str = "") -> Guarantee:
        """Nothing declared: ``"unknown"``, or ``"unknown (reason)"``."""
        return cls(Kind.UNKNOWN, notes=reason)

    # ---- what it bounds -------------------------------------------------------------------
    @property
    def formal(self) -> bool:
        """Whether the guarantee has a parameter (d_X, LDP, DP) that bounds a likelihood ratio."""
        return self.kind in FORMAL

    @property
    def largest(self) -> float:
        """The largest per-unit parameter: the value, or the top of a per-unit range (SAP-CTI:
        2·η0, not attained); ``inf`` without a formal guarantee."""
        if self.value is None:
            return math.inf
        return self.value * (self.per_unit.high if self.per_unit else 1.0)

    def loss(self, distance: float = 1.0) -> float:
        """The claimed bound on |ln P[M(x) ∈ S] / P[M(x') ∈ S]| for inputs that differ in one
        unit at ``distance``: for d_X, η·d(x, x') in :attr:`metric`; for ε-LDP/DP, ε·t/Δ for
        inputs at distance t in the sensitivity's norm (one [0,1] coordinate: t <= 1; a whole
        d-dimensional vector: t <= d). ``inf`` without a formal guarantee."""
        if not self.formal:
            return math.inf
        delta = self.sensitivity.value if self.sensitivity else 1.0
        return self.largest * float(distance) / delta

    def composed(self, n: int) -> Guarantee:
        """Basic sequential composition over ``n`` units (the tokens of a document, the
        coordinates of a vector): the parameter times n, protecting :attr:`composes_over`
        (d_X: for n units each at most d apart, exp(n·η·d); ε-LDP per coordinate: n·ε/Δ for
        the whole vector)."""
        if not self.formal or self.value is None:
            raise TypeError(f"A guarantee of kind {self.kind} does not compose.")
        if int(n) < 1:
            raise ValueError(f"Compose over at least one unit, got n={n!r}.")
        over = self.composes_over or Unit.DOCUMENT
        metric = self.metric and f"the largest over its {int(n)} {self.unit}s of: {self.metric}"
        return dataclasses.replace(
            self,
            value=self.value * int(n),
            unit=over,
            metric=metric,
            composes_over=None,
            wording="",
            within="",
            dimension=None,
        )

    def noting(self, note: str) -> Guarantee:
        """The same guarantee with ``note`` added to its notes (not to the symbolic text)."""
        return dataclasses.replace(self, notes="; ".join(n for n in (self.notes, note) if n))

    def with_dimension(self, dimension: int) -> Guarantee:
        """The same guarantee with the vector's dimension d known (e.g. from the backbone)."""
        return dataclasses.replace(self, dimension=int(dimension))

    # ---- order ----------------------------------------------------------------------------
    def _scope(self) -> tuple[Any, ...]:
        norm = (self.sensitivity.norm, self.sensitivity.of) if self.sensitivity else None
        return (self.kind, self.unit, self.within, self.selected, self.metric, norm)

    def _check_comparable(self, other: Guarantee) -> None:
        if not (self.formal and other.formal):
            weak = self if not self.formal else other
            raise TypeError(
                f"A guarantee of kind {weak.kind} has no parameter to compare: "
                f"{str(self)!r} vs {str(other)!r}."
            )
        if self._scope() != other._scope():
            raise TypeError(
                "Guarantees compare only within one kind, unit and metric: "
                f"{self._label()} vs {other._label()}."
            )

    def _label(self) -> str:
        within = f" within {self.within}" if self.within else ""
        metric = f" ({self.metric})" if self.metric else ""
        return f"{self.kind} per {self.unit}{within}{metric}"

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Guarantee):
            return NotImplemented
        self._check_comparable(other)
        return self.loss() < other.loss()

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Guarantee):
            return NotImplemented
        self._check_comparable(other)
        return self.loss() <= other.loss()

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Guarantee):
            return NotImplemented
        self._check_comparable(other)
        return self.loss() > other.loss()

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Guarantee):
            return NotImplemented
        self._check_comparable(other)
        return self.loss() >= other.loss()

    def stronger_than(self, other: Guarantee) -> bool:
        """Whether this guarantee lets strictly less leak per unit than ``other`` (smaller η
        or ε); a ``TypeError`` when the two do not compare."""
        return self < other

    # ---- renderings -----------------------------------------------------------------------
    def __str__(self) -> str:
        """The statement in symbols, independent of the values (the results' column)."""
        if self.wording:
            return self.wording
        if not self.formal:
            return f"{self.kind} ({self.notes})" if self.notes else str(self.kind)
        symbol = self.per_unit.name if self.per_unit else self.parameter
        kind = "d_X-privacy" if self.kind is Kind.DX else f"{str(self.kind).split('-')[1]}"
        head = f"{symbol}·{kind}" if self.kind is Kind.DX else f"{symbol}-{kind}"
        text = f"{head} per {'selected ' if self.selected else ''}{self.unit}"
        if self.within:
            text += f", within {self.within}"
        if self.per_unit:
            lo = _factor(self.per_unit.low, self.parameter)
            hi = _factor(self.per_unit.high, self.parameter)
            text += f", {self.per_unit.name} in ({lo}, {hi})"
        return f"{text} ({self.source})" if self.source else text

    def describe(self) -> str:
        """The guarantee with its values filled in, e.g. ``"η=100 · d_X-privacy per token,
        within its word class; d_X: Euclidean distance in ...; a document of n tokens:
        n·η (sequential composition) (Feyisetan et al. 2020)"``."""
        if not self.formal or self.value is None:
            return str(self)
        p = _greek(self.parameter)
        kind = "d_X-privacy" if self.kind is Kind.DX else str(self.kind).replace("epsilon", "ε")
        parts = [
            f"{p}={shown(self.value)} · {kind} per {'selected ' if self.selected else ''}"
            f"{self.unit}{f', within {self.within}' if self.within else ''}"
        ]
        if self.per_unit:
            lo, hi = self.per_unit.low * self.value, self.per_unit.high * self.value
            parts[0] += f", {_greek(self.per_unit.name)} in ({shown(lo)}, {shown(hi)})"
        if self.metric:
            parts.append(f"{'d_X' if self.kind is Kind.DX else 'metric'}: {self.metric}")
        if self.sensitivity:
            s = self.sensitivity
            of = f" of {s.of}" if s.of else ""
            parts.append(f"Laplace scale Δ/{p}, Δ={shown(s.value)} in {s.norm}{of}")
        if self.composes_over:
            u = self.unit
            if self.dimension is not None and self.kind is not Kind.DX:
                total = self.composed(self.dimension).loss()
                parts.append(f"the whole {self.dimension}-dim {self.composes_over}: {shown(total)}")
            else:
                per = _factor(self.per_unit.high, p) if self.per_unit else p
                per = f"{per}/Δ" if self.sensitivity and self.sensitivity.value != 1 else per
                parts.append(f"a {self.composes_over} of n {u}s: n·{per} (sequential composition)")
        text = "; ".join(parts)
        if self.source:
            text += f" ({self.source})"
        if self.notes:
            text += f". {self.notes}"
        return text

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain values (enums as their strings), plus :meth:`loss` per unit
        and both renderings: what the guarantee audit and JSON outputs read."""
        out = dataclasses.asdict(self)
        for key in ("kind", "unit", "composes_over"):
            out[key] = None if out[key] is None else str(out[key])
        out["loss_per_unit"] = self.loss()
        out["text"] = str(self)
        out["description"] = self.describe()
        return out


def embedding_distance(backbone: str | None, layer: int = 0, *, pooled: str = "") -> str:
    """The metric of a d_X guarantee on a backbone's vectors, in words: Euclidean distance in
    the input-embedding space (``layer`` 0) or between hidden states after encoder ``layer``,
    of the named backbone (``None``: privaudit's default one)."""
    where = backbone or "the default backbone"
    if pooled:
        return f"{pooled} of {where}"
    if layer == 0:
        return f"Euclidean distance in the input-embedding space of {where}"
    return f"Euclidean distance between hidden states after encoder layer {layer} of {where}"


def _member(enum: type[StrEnum], value: Any, what: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        known = ", ".join(repr(str(m)) for m in enum)
        raise ValueError(f"Unknown guarantee {what} {value!r}; known: {known}.") from None


def as_guarantee(
    value: Any, *, where: str = "guarantee", default: Guarantee | None = None
) -> Guarantee:
    """A declared guarantee as a :class:`Guarantee`: the object itself, a string wrapped as a
    :meth:`~Guarantee.stated` one (rendered as written), nothing (``None``, a blank string)
    as ``default`` (:meth:`~Guarantee.unknown` if not given). Any other type is a one-line
    ``TypeError`` naming what was expected."""
    if isinstance(value, Guarantee):
        return value
    if value is None or (isinstance(value, str) and not value.strip()):
        return Guarantee.unknown() if default is None else default
    if isinstance(value, str):
        return Guarantee.stated(value)
    raise TypeError(
        f"{where} has type {type(value).__name__}; declare a privaudit.guarantees.Guarantee, "
        "a string, or nothing."
    )


class guarantee_property:  # lower case: used as a decorator, like property
    """``@guarantee_property`` on a defense method computing its :class:`Guarantee` from the
    instance's parameters. Read on an instance, it is that instance's guarantee; read on the
    class, the guarantee at the default parameters (the class built with no arguments, which
    is cheap: ``__init__`` only stores parameters; ``"unknown (set by its parameters)"`` for
    a class that needs arguments). A non-data descriptor, so an instance may set its own (the
    user-plugin wrapper does)."""

    def __init__(self, func: Callable[[Any], Guarantee]) -> None:
        self.func = func
        self.__doc__ = func.__doc__
        self.__name__ = getattr(func, "__name__", "guarantee")

    def __get__(self, obj: Any, owner: type | None = None) -> Guarantee:
        if obj is None:
            if owner is None:
                raise TypeError("guarantee_property read without an instance or a class.")
            try:
                obj = owner()
            except Exception:  # parameters without defaults: no default guarantee to show
                return Guarantee.unknown("set by its parameters")
        return as_guarantee(self.func(obj), where=f"{type(obj).__name__}.guarantee")
