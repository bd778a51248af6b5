"""How a number is printed, once: every table, sentence and error message uses :func:`shown`."""

from __future__ import annotations


def shown(value: float, digits: int = 4) -> str:
    """A knob value as tables, plot labels and the report show it: ``digits`` significant
    digits (a calibrated ``105.16591384263059`` shows as ``105.2``); the data keep the exact
    value."""
    return f"{float(value):.{digits}g}"
