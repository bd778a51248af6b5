"""Figures written into a run directory, atomically (the leaderboard draws them, the
store writes them)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.audit.store import write_atomic
from privaudit.leaderboard.family_figure import family_figure
from privaudit.leaderboard.figures import Style, frontier_figure, pareto_figure

if TYPE_CHECKING:
    import pandas as pd


def plot_pareto(
    frame: Any,
    path: str | Path,
    *,
    attack: str,
    chance: float | None = None,
    styles: Mapping[str, Style] | None = None,
) -> Path:
    """One panel: empirical privacy (x) vs utility (y), a line per defense through its privacy
    levels (labelled with the knob value), the undefended point marked with a star and a dashed
    line at its utility, and the chance level of the utility metric dotted. Pass the run's
    ``styles`` (:func:`run_styles`) so colours agree with the run's other figures."""
    fig = pareto_figure(frame, attack=attack, chance=chance, styles=styles)
    return save_figure(fig, Path(path))


def save_figure(fig: Any, path: Path) -> Path:
    """Save atomically (a temporary file, then a rename): a crash or a full disk never leaves
    a truncated image. The format follows ``path``'s suffix (the temporary name has none)."""
    fmt = path.suffix.lstrip(".").lower() or "png"
    return write_atomic(path, lambda tmp: fig.savefig(tmp, format=fmt))


def plot_frontiers(
    frame: pd.DataFrame,
    path: str | Path,
    *,
    chance: float | None,
    styles: Mapping[str, Style] | None = None,
) -> Path:
    """Save one figure with a Pareto-frontier panel per attack (see :func:`frontier_figure`)."""
    return save_figure(frontier_figure(frame, chance=chance, styles=styles), Path(path))


def plot_families(
    points: pd.DataFrame,
    path: str | Path,
    *,
    chance: float | None,
    styles: Mapping[str, Style] | None = None,
) -> Path:
    """Save the worst-case figure, one panel per attack family (see :func:`family_figure`)."""
    return save_figure(family_figure(points, chance=chance, styles=styles), Path(path))
