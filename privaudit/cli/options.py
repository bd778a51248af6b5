"""What the ``privaudit`` commands read besides their own options: ``key=value`` parameters,
corpus mappings (``--map``, ``--corpus-param``), the shared ``--device`` option, standard input
(``privatize``), and warnings shown as one line each. Used only by :mod:`privaudit.cli`.

Importing it loads nothing heavy: ``privaudit --help`` and ``privaudit privatize`` import it.
"""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Annotated, Any, TypeVar

import typer

from privaudit.runtime.devices import use_device

F = TypeVar("F", bound=Callable[..., Any])


def parse_params(items: list[str] | None) -> dict[str, Any]:
    """``key=value`` pairs; values are parsed as JSON where possible (numbers, true, null)."""
    params: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--param expects key=value, got {item!r}.")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value
    return params


MAP_HELP = (
    "Corpus parameters, merged over the config's corpus.params: "
    "'path=reviews.csv,text=review,label=stars,attributes=gender|age' (see docs/usage.md)."
)

#: ``--device`` of run, audit, privatize and calibrate (privaudit.runtime.devices).
DeviceOption = Annotated[
    str | None,
    typer.Option(
        help="Where torch runs: auto (a GPU when torch sees one), cpu, cuda, cuda:N or mps "
        "(default: a grid's `device:`, else auto)."
    ),
]


def on_device(func: F) -> F:
    """Run the command with torch on its ``device`` option (:func:`privaudit.runtime.devices.
    use_device`; a device that is not there is a one-line error)."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with use_device(kwargs.get("device")):
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def corpus_params(spec: str | None, items: list[str] | None = None) -> dict[str, Any]:
    """Corpus parameters from ``--map`` (one compact mapping) and ``--corpus-param key=value``
    (repeatable, values parsed as JSON where possible); the latter win on a shared key."""
    # lazy: the corpus loaders bring numpy and pydantic, which --help does not load
    from privaudit.corpora.files import parse_mapping

    params: dict[str, Any] = {}
    if spec is not None:
        try:
            params.update(parse_mapping(spec))
        except ValueError as exc:
            raise ValueError(f"--map: {exc}") from None
    for item in items or []:
        if "=" not in item.strip("="):
            raise ValueError(f"--corpus-param expects key=value, got {item!r}.")
        params.update(parse_params([item]))
    return params


@contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Warnings while a command works (rows a corpus dropped, a header it did not read) as
    one ``Warning:`` line each, not a source excerpt."""

    def show(message: Any, *args: Any, **kwargs: Any) -> None:
        typer.secho(f"Warning: {message}", fg=typer.colors.YELLOW, err=True)

    previous = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = previous


def read_stdin_lines() -> list[str]:
    """Standard input as UTF-8 lines, undecodable bytes replaced (U+FFFD) with one warning:
    one bad byte must not cost the whole batch (a strict decode, or surrogates, would)."""
    lines, bad = [], []
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        raw = raw.rstrip(b"\r\n")
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append(raw.decode("utf-8", errors="replace"))
            bad.append(number)
    if bad:
        more = f" and {len(bad) - 10} more" if len(bad) > 10 else ""
        shown = ", ".join(map(str, bad[:10])) + more
        typer.secho(
            f"Warning: stdin line(s) {shown} are not valid UTF-8; their undecodable bytes were "
            "replaced with U+FFFD (\ufffd). Convert the file to UTF-8 (e.g. iconv) to keep them.",
            fg=typer.colors.YELLOW,
            err=True,
        )
    return lines
