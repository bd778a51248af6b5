"""Constructor parameters, declared once and checked in one place.

A component (defense, attack, utility evaluator, corpus factory) declares its parameters in
its constructor's signature, with types and constraints as annotations (scikit-learn's
``_parameter_constraints``, written where the parameter is)::

    def __init__(self, eta: PositiveFloat = 100.0, backbone: str | None = None) -> None:

:func:`validate_params` checks names and values against that declaration (pydantic, strict:
``True`` is not a number and ``"3"`` is not an integer); :class:`privaudit.api.Component`
calls it on every construction, so a grid that builds its components when it is planned
rejects a bad value before any work starts. ``params()`` reads the same declaration.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Annotated, Any

from annotated_types import Ge, Gt, Le, Lt
from pydantic import AllowInfNan

PositiveFloat = Annotated[float, Gt(0)]
NonNegativeFloat = Annotated[float, Ge(0)]
PositiveInt = Annotated[int, Ge(1)]
NonNegativeInt = Annotated[int, Ge(0)]
Fraction = Annotated[float, Ge(0), Lt(1)]  # a rate in [0, 1)
Probability = Annotated[float, Ge(0), Le(1)]
OpenFraction = Annotated[float, Gt(0), Lt(1)]  # strictly between 0 and 1
FinitePositiveFloat = Annotated[float, Gt(0), AllowInfNan(False)]
FiniteNonNegativeFloat = Annotated[float, Ge(0), AllowInfNan(False)]

__all__ = [
    "FiniteNonNegativeFloat",
    "FinitePositiveFloat",
    "Fraction",
    "NonNegativeFloat",
    "NonNegativeInt",
    "OpenFraction",
    "ParamError",
    "PositiveFloat",
    "PositiveInt",
    "Probability",
    "checked",
    "declared",
    "validate_params",
]


class ParamError(ValueError):
    """A parameter name or value that its component's declaration does not allow."""


def _owner_name(target: Any) -> str:
    return str(getattr(target, "name", "") or getattr(target, "__name__", type(target).__name__))


@functools.cache
def declared(target: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """The declared parameters of a class's constructor (or a factory function), in order,
    with their annotations resolved (``Any`` where an annotation names a type that exists only
    for type checkers)."""
    func = target.__init__ if isinstance(target, type) else target
    sig = inspect.signature(func)
    module = inspect.getmodule(func)
    namespace = dict(vars(module)) if module is not None else {}
    namespace.update(vars(typing))
    namespace.update({"Annotated": Annotated, "Any": Any})
    out: dict[str, inspect.Parameter] = {}
    for name, param in sig.parameters.items():
        if name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = param.annotation
        if isinstance(annotation, str):
            try:
                annotation = eval(annotation, namespace)  # our own modules' annotations
            except Exception:  # a TYPE_CHECKING-only name: accept any value
                annotation = Any
        if annotation is inspect.Parameter.empty:
            annotation = Any
        out[name] = param.replace(annotation=annotation)
    return out


@functools.cache
def _adapter(annotation: Any) -> Any:
    from pydantic import ConfigDict, TypeAdapter

    return TypeAdapter(annotation, config=ConfigDict(strict=True, arbitrary_types_allowed=True))


def _plain(value: Any) -> Any:
    """numpy scalars as the Python numbers they hold (a YAML or numpy source, same check)."""
    item = getattr(value, "item", None)
    if item is not None and type(value).__module__ == "numpy" and getattr(value, "ndim", 1) == 0:
        return item()
    return value


def _allowed(annotation: Any) -> str:
    """The declaration in words, for error messages: ``float > 0``, ``one of 'a', 'b'``."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Annotated:
        ops = {Gt: ">", Ge: ">=", Lt: "<", Le: "<="}
        bounds = []
        for meta in args[1:]:
            for kind, op in ops.items():
                if isinstance(meta, kind):
                    bounds.append(f"{op} {getattr(meta, kind.__name__.lower())}")
        return " ".join([_allowed(args[0]), " and ".join(bounds)]).strip()
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if args and origin in (typing.Union, types.UnionType):
        return " or ".join("None" if a is type(None) else _allowed(a) for a in args)
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def validate_params(
    target: Callable[..., Any], values: Mapping[str, Any], *, where: str = ""
) -> None:
    """Check ``values`` (name → value) against ``target``'s declared parameters: unknown names
    (with did-you-mean) and values outside the declared type or range raise :class:`ParamError`
    in one line naming the parameter, the value and what is allowed."""
    params = declared(target)
    owner = where or _owner_name(target)
    for name, value in values.items():
        if name not in params:
            close = difflib.get_close_matches(str(name), list(params), n=2, cutoff=0.6)
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise ParamError(
                f"{owner} has no parameter {name!r}.{hint} "
                f"It takes: {', '.join(params) or '(none)'}."
            )
        annotation = params[name].annotation
        if annotation is Any:
            continue
        try:
            _adapter(annotation).validate_python(_plain(value))
        except Exception as exc:  # pydantic.ValidationError: one line, the first reason
            errors = getattr(exc, "errors", None)
            msg = errors()[0]["msg"] if callable(errors) else str(exc)
            raise ParamError(
                f"{owner} parameter {name}={value!r} is not allowed: {msg} "
                f"(declared: {_allowed(annotation)})."
            ) from None


def checked(func: Callable[..., Any]) -> Callable[..., Any]:
    """Check a function's declared parameters on every call, as components' are on
    construction (mechanism kernels, corpus factories): an unknown name or a value outside
    its declaration is a one-line :class:`ParamError`."""
    sig = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            unknown = sorted(set(kwargs) - set(declared(func)))
            if unknown:
                validate_params(func, {unknown[0]: kwargs[unknown[0]]})
            missing = [n for n in _required(sig)[len(args) :] if n not in kwargs]
            if missing:  # e.g. the corpus `file` without its `path`
                raise ParamError(
                    f"{func.__name__}() needs the parameter {missing[0]!r}, which was not "
                    f"given; it takes {', '.join(declared(func))}."
                ) from None
            raise ParamError(
                f"{func.__name__}() takes {', '.join(declared(func))}; got {len(args)} "
                f"positional and {sorted(kwargs)}."
            ) from None
        validate_params(func, declared_arguments(sig, bound.arguments))
        return func(*args, **kwargs)

    return wrapper


def _required(sig: inspect.Signature) -> list[str]:
    """The parameters without a default, in order (``self`` and ``*args`` aside)."""
    return [
        n
        for n, p in sig.parameters.items()
        if p.default is p.empty
        and n not in ("self", "cls")
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def declared_arguments(sig: inspect.Signature, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Bound arguments without ``self`` and ``*args``/``**kwargs`` (nothing to check there)."""
    skip = {"self", "cls"} | {
        n for n, p in sig.parameters.items() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    return {k: v for k, v in arguments.items() if k not in skip}
