"""A failed cell's reason, kept free of corpus text.

A failing component's message may quote what it was given (``ValueError(f"cannot handle
input: {texts[0]!r}")``), and the reason is written to ``cells/*.json``, ``results.csv``,
``results.parquet`` and ``report.html``, none of which may hold the user's corpus unless asked
(``show_examples``). So the stored reason is cut to the exception type, its message with
every quoted span (a quoted string may be a document, whole or cut short) and every other span
of at least :data:`LONG_SPAN` characters that occurs in the corpus replaced by :data:`TEXT`,
and the ``file:line`` of the raising frame. The full message travels beside it in the record
(:data:`FULL`) to the driver, which prints it to the terminal and drops it before the record is
stored, unless the run keeps examples (:func:`full_reasons`).
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: Stands in for corpus text in a stored reason.
TEXT = "<text>"
#: An unquoted span this long that occurs in the corpus is taken for corpus text.
LONG_SPAN = 20
#: The record field of a failed row that holds the full message on its way to the driver.
FULL = "reason_full"
#: Longer messages are cut before scrubbing (each window is searched in the whole corpus).
MAX_MESSAGE = 2000

# A quoted string: '...' or "..." with escapes (a repr), opened where no word character
# precedes (an apostrophe in "can't" opens nothing); an opening quote never closed (a repr cut
# by a format width, ``{text!r:.40}``) runs to the end of the message.
_QUOTED = re.compile(
    r"""(?<!\w)(?:'(?:[^'\\]|\\.)*'(?!\w)|"(?:[^"\\]|\\.)*"(?!\w)|['"].*)""", re.DOTALL
)


def scrub(message: str, corpus: str) -> str:
    """``message`` with every quoted span, and every other span of at least
    :data:`LONG_SPAN` characters found in ``corpus`` (the run's texts, joined), replaced by
    :data:`TEXT`."""
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE] + "…"
    message = _QUOTED.sub(TEXT, message)
    covered = [False] * len(message)
    for i in range(len(message) - LONG_SPAN + 1):
        if message[i : i + LONG_SPAN] in corpus:
            covered[i : i + LONG_SPAN] = [True] * LONG_SPAN
    out, i = [], 0
    while i < len(message):
        if covered[i]:
            while i < len(message) and covered[i]:
                i += 1
            out.append(TEXT)
        else:
            out.append(message[i])
            i += 1
    return "".join(out)


def corpus_text(*splits: Sequence[str]) -> str:
    """The texts a reason is scrubbed against, as one string (documents apart by newlines)."""
    return "\n".join(text for split in splits for text in split)


def failure_reason(exc: BaseException, corpus: str) -> tuple[str, str]:
    """(the reason to store, the full message): ``Type: message at file:line``, the stored one
    scrubbed of corpus text (:func:`scrub`)."""
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" at {package_path(last[0].filename)}:{last[0].lineno}" if last else ""
    kind, message = type(exc).__name__, str(exc)
    return f"{kind}: {scrub(message, corpus)}{where}", f"{kind}: {message}{where}"


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
