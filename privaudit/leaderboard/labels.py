"""Knob labels beside plotted points, placed greedily so that none overlaps another, a marker,
the legend or the axes' edge (a label with no free spot is left out)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.numbers import shown

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.backend_bases import RendererBase
    from matplotlib.figure import Figure
    from matplotlib.text import Annotation
    from matplotlib.transforms import Bbox


@dataclass(frozen=True)
class KnobLabel:
    """A text to write beside the data point (x, y) of an axes; ``group`` (the defense label)
    decides the order of placement (see :func:`place_labels`)."""

    x: float
    y: float
    text: str
    colour: Any
    group: str = ""


def _round_robin(labels: Sequence[KnobLabel]) -> list[KnobLabel]:
    """The labels taken in turn from each group (groups in order of first appearance), so in a
    crowded plot every defense gets some of the free spots, not the first one all of them."""
    groups: dict[str, list[KnobLabel]] = {}
    for lab in labels:
        groups.setdefault(lab.group, []).append(lab)
    queues = list(groups.values())
    longest = max((len(q) for q in queues), default=0)
    return [q[i] for i in range(longest) for q in queues if i < len(q)]


# Offsets (points) of a label's anchor from its point, tried in order, with the alignment that
# keeps the text on that side: above right first, then the other corners, sides, and farther.
_NEAR: tuple[tuple[float, float, str, str], ...] = (
    (4, 4, "left", "bottom"),
    (4, -4, "left", "top"),
    (-4, 4, "right", "bottom"),
    (-4, -4, "right", "top"),
    (0, 6, "center", "bottom"),
    (0, -6, "center", "top"),
    (6, 0, "left", "center"),
    (-6, 0, "right", "center"),
)
_OFFSETS: tuple[tuple[float, float, str, str], ...] = tuple(
    (dx * r, dy * r, ha, va) for r in (1.0, 2.0) for dx, dy, ha, va in _NEAR
)


def figure_renderer(fig: Figure) -> RendererBase:
    """The figure's Agg renderer (attaching an Agg canvas to a bare Figure if need be)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = fig.canvas
    if not isinstance(canvas, FigureCanvasAgg):
        canvas = FigureCanvasAgg(fig)
    return canvas.get_renderer()


def freeze(ax: Axes, renderer: RendererBase) -> list[Bbox]:
    """Fix the axes' limits and its legend's spot, so that the labels placed next measure
    against what will be drawn; returns the legend's box (an obstacle), if any."""
    ax.set_xlim(ax.get_xlim())
    ax.set_ylim(ax.get_ylim())
    legend = ax.get_legend()
    if legend is None:
        return []
    box = legend.get_window_extent(renderer)  # where "best" puts it, before any label exists
    corner = ax.transAxes.inverted().transform((box.x0, box.y0))
    legend.set_loc((float(corner[0]), float(corner[1])))
    return [legend.get_window_extent(renderer)]


def place_labels(
    ax: Axes,
    labels: Sequence[KnobLabel],
    *,
    markers: Sequence[tuple[float, float]] = (),
    obstacles: Sequence[Bbox] = (),
    fontsize: float = 7.0,
) -> list[Annotation]:
    """Write each label beside its point where it fits, greedily, in display coordinates.

    Labels are taken in turn from each ``group`` (:func:`_round_robin`); for each, the offsets
    of :data:`_OFFSETS` are tried, and the first whose text box lies inside the axes and
    overlaps no label placed before it (nor an ``obstacles`` box, such as the legend) wins.
    Spots that also keep clear of every data point (``markers``, plus the labels' own points)
    are preferred. A label with no such spot is dropped, never drawn outside the axes or over
    another. Call it after the figure's layout is final (after ``tight_layout``): the boxes are
    measured with the figure's renderer at that moment.
    """
    if not labels:
        return []
    fig = ax.get_figure()
    assert fig is not None
    renderer = figure_renderer(fig)  # type: ignore[arg-type]
    frame = ax.get_window_extent(renderer)
    pad = 1.0  # pixels kept between boxes and from the axes' edge
    radius = 3.0 * fig.dpi / 72.0  # a marker's half-width, in pixels
    from matplotlib.transforms import Bbox

    points = [*markers, *((lab.x, lab.y) for lab in labels)]
    marker_boxes = [
        Bbox.from_extents(px - radius, py - radius, px + radius, py + radius)
        for px, py in ax.transData.transform(np.asarray(points, float).reshape(-1, 2))
        if np.isfinite(px) and np.isfinite(py)
    ]
    taken = [*obstacles]
    drawn: list[Annotation] = []

    def fits(box: Bbox, avoid: list[Bbox]) -> bool:
        inside = (
            box.x0 >= frame.x0 + pad
            and box.x1 <= frame.x1 - pad
            and box.y0 >= frame.y0 + pad
            and box.y1 <= frame.y1 - pad
        )
        return inside and not any(box.padded(pad).overlaps(other) for other in avoid)

    for lab in _round_robin(labels):
        if not (np.isfinite(lab.x) and np.isfinite(lab.y)):
            continue
        px, py = ax.transData.transform((lab.x, lab.y))
        if not frame.contains(px, py):
            continue
        ann = ax.annotate(
            lab.text,
            (lab.x, lab.y),
            xytext=_OFFSETS[0][:2],
            textcoords="offset points",
            fontsize=fontsize,
            color=lab.colour,
            ha=_OFFSETS[0][2],
            va=_OFFSETS[0][3],
        )
        chosen: Bbox | None = None
        for avoid in ([*taken, *marker_boxes], taken):
            for dx, dy, ha, va in _OFFSETS:
                ann.xyann = (dx, dy)
                ann.set_horizontalalignment(ha)
                ann.set_verticalalignment(va)
                box = ann.get_window_extent(renderer)
                if fits(box, avoid):
                    chosen = box
                    break
            if chosen is not None:
                break
        if chosen is None:
            ann.remove()
            continue
        taken.append(chosen)
        drawn.append(ann)
    return drawn


def knob_text(knob: Any, value: float) -> str:
    """``eta=105.2``: the knob's name (when known) and its value to 4 significant digits."""
    return f"{knob}={shown(value)}" if isinstance(knob, str) and knob else shown(value)
