"""A failed cell's reason, free of corpus text by construction.

A failing component's message may quote what it was given (``ValueError(f"cannot handle
{texts[0]!r}")``, ``"bad token zqxwv in input"``, or a message that is a document), and the
reason is written to ``cells/*.json``, ``results.csv``, ``results.parquet`` and
``report.html``, none of which may hold the user's corpus unless asked (``show_examples``).
No pattern can tell a corpus word from any other, so the stored reason is built only from what
cannot be corpus text:

- the exception's type and the ``file:line`` of the frame that raised it, always;
- its message only when it is **privaudit's own** (:func:`own_message`): the exception's class
  is defined in the ``privaudit`` package *and* the frame that raised it is a file of the
  installed ``privaudit`` package. privaudit's own exception classes (``ParamError``,
  ``NotScorable``, ...) are raised with messages privaudit wrote, which never quote the
  corpus. A built-in or library exception (``ValueError``, ``KeyError('word')``, a tokenizer's
  error) is never privaudit's own, even when raised inside privaudit code (``int(text)``
  quotes its argument); neither is any exception raised in a plugin's file, whatever its class.

Every other message is replaced by :data:`NOT_STORED`. The full message travels beside the
stored reason in the record (:data:`FULL`) to the driver, which prints it to the terminal and
drops it before the record is stored, unless the run keeps examples (:func:`full_reasons`).
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

#: Stands in for a message that is not privaudit's own in a stored reason.
NOT_STORED = "(message not stored: it may quote the corpus; see the terminal or --show-examples)"
#: The record field of a failed row that holds the full message on its way to the driver.
FULL = "reason_full"
#: The installed package: a frame in a file under it is privaudit code.
_PACKAGE = Path(__file__).resolve().parents[1]


def own_message(exc: BaseException) -> bool:
    """Whether ``exc``'s message is privaudit's own (see the module docstring): its class is
    defined in ``privaudit`` and the innermost frame of its traceback is a privaudit file."""
    module = type(exc).__module__
    if module != "privaudit" and not module.startswith("privaudit."):
        return False
    frames = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
    if not frames:
        return False
    try:
        Path(frames[-1].filename).resolve().relative_to(_PACKAGE)
    except ValueError:  # raised in a plugin's (or a test's) file
        return False
    return True


def failure_reason(exc: BaseException) -> tuple[str, str]:
    """(the reason to store, the full message): ``Type: message at file:line``, the stored one
    with :data:`NOT_STORED` for a message that is not privaudit's own (:func:`own_message`)."""
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" at {package_path(last[0].filename)}:{last[0].lineno}" if last else ""
    kind, message = type(exc).__name__, str(exc)
    stored = message if own_message(exc) else NOT_STORED
    return f"{kind}: {stored}{where}", f"{kind}: {message}{where}"


def full_reasons(record: dict[str, Any], *, keep: bool) -> list[str]:
    """The full messages of ``record``'s failed rows (those that differ from the stored
    reason), taken out of the rows unless ``keep`` (the run keeps examples, so the run
    directory may hold corpus text)."""
    found = []
    for row in record.get("rows", []):
        full = row.get(FULL) if keep else row.pop(FULL, None)
        if full is not None:
            found.append(str(full))
    return found


def package_path(filename: str) -> str:
    """``privaudit/utility/probe.py`` rather than this machine's install path; a file outside
    the package by its name alone."""
    parts = Path(filename).parts
    if "privaudit" in parts:
        return "/".join(parts[len(parts) - 1 - parts[::-1].index("privaudit") :])
    return Path(filename).name
