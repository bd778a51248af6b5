"""The plots of a run: one style per defense label everywhere, knob labels that neither overlap
nor leave the axes, error bars from interval columns, and the per-family worst-case figure.

Every frame is made here by hand; no model is loaded.
"""

from __future__ import annotations

import math
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.text import Annotation

from privaudit.api import NONE
from privaudit.leaderboard.family_figure import FAMILY_PRIVACY_LABEL, family_figure
from privaudit.leaderboard.figures import (
    NONE_STYLE,
    frontier_figure,
    label_styles,
    pareto_figure,
    run_styles,
)
from privaudit.leaderboard.frontier import seed_means
from privaudit.leaderboard.labels import KnobLabel, place_labels
from privaudit.outputs.plots import plot_families, plot_pareto
from tests.leaderboard.test_leaderboard import cell

CI = {
    "empirical_privacy_ci_low": -0.05,
    "empirical_privacy_ci_high": 0.05,
    "utility_ci_low": -0.02,
    "utility_ci_high": 0.03,
}


def row(
    label: str,
    value: float,
    attack: str,
    privacy: float,
    utility: float,
    *,
    seed: int = 0,
    status: str = "ok",
    ci: bool = False,
) -> dict[str, Any]:
    """One results row with the columns the plots read; ``ci`` adds interval bounds around
    the point (privacy −0.05/+0.05, utility −0.02/+0.03)."""
    out = cell(label, value, attack, privacy, utility, seed=seed, status=status)
    out |= {"utility_metric": "balanced_accuracy", "guarantee": ""}
    if ci:
        out["empirical_privacy_ci_low"] = privacy + CI["empirical_privacy_ci_low"]
        out["empirical_privacy_ci_high"] = privacy + CI["empirical_privacy_ci_high"]
        out["utility_ci_low"] = utility + CI["utility_ci_low"]
        out["utility_ci_high"] = utility + CI["utility_ci_high"]
    return out


def run_frame(*, ci: bool = False) -> pd.DataFrame:
    """Two attacks with different label subsets: a1 has aaa and t2t, a2 has t2t and zzz, so a
    per-panel colour choice would give t2t the first colour in one and the second in the other.
    """
    rows = [
        row("aaa", 1, "a1", 0.3, 0.8, ci=ci),
        row("aaa", 2, "a1", 0.6, 0.7, ci=ci),
        row("t2t", 1, "a1", 0.2, 0.85, ci=ci),
        row("t2t", 2, "a1", 0.7, 0.6, ci=ci),
        row("t2t", 1, "a2", 0.4, 0.85, ci=ci),
        row("t2t", 2, "a2", 0.5, 0.6, ci=ci),
        row("zzz", 1, "a2", 0.9, 0.55, ci=ci),
        row("none", 0, "a1", 0.0, 0.9, ci=ci),
        row("none", 0, "a2", 0.1, 0.9, ci=ci),
        # A label whose every cell failed still owns its colour in the run.
        row("mmm", 1, "a2", 0.5, 0.5, status="failed"),
    ]
    return pd.DataFrame(rows)


def marker_lines(ax: Any) -> dict[str, tuple[float, ...]]:
    """Colour of each plotted line with markers, keyed by its marker (the style's marker)."""
    return {
        str(line.get_marker()): to_rgba(line.get_color())
        for line in ax.get_lines()
        if line.get_marker() not in (None, "None", "") and len(line.get_xdata())
    }


# ---- one style per label ---------------------------------------------------------------------


def test_styles_come_from_every_label_of_the_run() -> None:
    frame = run_frame()
    styles = run_styles(frame)
    assert styles[NONE] == NONE_STYLE
    assert sorted(styles) == ["aaa", "mmm", NONE, "t2t", "zzz"]
    # A subset's styles differ, which is why one mapping is built per run and passed around.
    assert label_styles(["t2t", "zzz"])["t2t"] != styles["t2t"]
    # Any order of the same labels gives the same styles.
    assert label_styles(["zzz", "t2t", "mmm", "aaa"]) == styles


def test_a_label_has_one_colour_in_every_panel_and_figure() -> None:
    frame = run_frame()
    styles = run_styles(frame)
    want = {name: to_rgba(colour) for name, (colour, _) in styles.items()}

    fig = frontier_figure(frame, chance=0.5)  # default: the styles of the whole frame
    panels = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in panels] == ["a1", "a2"]
    first, second = (marker_lines(ax) for ax in panels)
    t2t_marker = styles["t2t"][1]
    assert first[t2t_marker] == second[t2t_marker] == want["t2t"]
    assert first[styles["aaa"][1]] == want["aaa"]
    assert second[styles["zzz"][1]] == want["zzz"]
    # The per-attack figures, each made from one attack's rows, agree when given the run's
    # styles; the undefended star is black in every one of them.
    ok = frame[frame["status"] == "ok"]
    for attack in ("a1", "a2"):
        one = pareto_figure(ok[ok["attack"] == attack], attack=attack, styles=styles)
        ax = one.axes[0]
        by_label = {line.get_label(): to_rgba(line.get_color()) for line in ax.get_lines()}
        assert by_label["t2t"] == want["t2t"]
        star = [c for c in ax.collections if c.get_label() == "none (undefended)"]
        assert len(star) == 1 and tuple(star[0].get_facecolors()[0]) == to_rgba("black")

    # And the family figure, whose panels again hold different subsets.
    points = family_points()
    fam = family_figure(points, chance=0.5, styles=styles)
    fam_panels = [ax for ax in fam.axes if ax.axison]
    assert marker_lines(fam_panels[0])[t2t_marker] == want["t2t"]
    assert marker_lines(fam_panels[1])[t2t_marker] == want["t2t"]
    assert marker_lines(fam_panels[1])[styles["zzz"][1]] == want["zzz"]


def test_frontier_panels_take_styles_from_the_whole_run_not_the_panel() -> None:
    # Without styles given, the frontier figure uses every label of the frame: the failed
    # label mmm still shifts t2t's colour exactly as run_styles says.
    frame = run_frame()
    fig = frontier_figure(frame, chance=None)
    t2t_colour, t2t_marker = run_styles(frame)["t2t"]
    for ax in (ax for ax in fig.axes if ax.axison):
        assert marker_lines(ax)[t2t_marker] == to_rgba(t2t_colour)


# ---- knob labels -----------------------------------------------------------------------------


def crowded_frame() -> pd.DataFrame:
    """Three defenses with 12 knob values each, packed into a small corner of the plot, and
    one point at the very edge whose label could only spill out of the axes."""
    rows = []
    for k, label in enumerate(("aaa", "bbb", "ccc")):
        for i in range(12):
            rows.append(
                row(label, 100.0 + i * 1.0165, "a", 0.40 + 0.004 * i + 0.002 * k, 0.7 - 0.002 * i)
            )
    rows.append(row("ddd", 105.16591384263059, "a", 1.03, 0.5))  # on the right edge
    rows.append(row("none", 0, "a", 0.0, 0.9))
    return pd.DataFrame(rows)


def drawn_labels(fig: Figure, ax: Any) -> list[Any]:
    fig.canvas.draw()  # the Agg canvas the figure functions attach
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    return [
        t.get_window_extent(renderer)
        for t in ax.texts
        if isinstance(t, Annotation) and t.get_visible()
    ]


def strictly_intersect(a: Any, b: Any) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_knob_labels_neither_overlap_nor_leave_the_axes() -> None:
    fig = pareto_figure(crowded_frame(), attack="a", chance=0.5)
    ax = fig.axes[0]
    boxes = drawn_labels(fig, ax)
    assert len(boxes) >= 6  # crowded, but not every label was dropped
    assert len(boxes) < 37  # ... and some had to be
    frame = ax.get_window_extent()
    for box in boxes:
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, (box, frame)
        assert frame.y0 <= box.y0 and box.y1 <= frame.y1, (box, frame)
    for a, b in combinations(boxes, 2):
        assert not strictly_intersect(a, b), (a, b)
    legend = ax.get_legend().get_window_extent()
    assert not any(strictly_intersect(box, legend) for box in boxes)
    # Values show 4 significant digits.
    texts = {t.get_text() for t in ax.texts}
    assert texts <= {f"eta={100.0 + i * 1.0165:.4g}" for i in range(12)} | {"eta=105.2"}
    assert "eta=100" in texts


def test_place_labels_drops_what_does_not_fit() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = Figure(figsize=(2.0, 1.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    many = [KnobLabel(0.5, 0.5, f"knob={i}", "C0") for i in range(50)]
    outside = KnobLabel(2.0, 0.5, "far away", "C1")
    placed = place_labels(ax, [*many, outside])
    assert 1 <= len(placed) <= 16  # at most one per offset around the single point
    assert all(a.get_text() != "far away" for a in placed)
    boxes = drawn_labels(fig, ax)
    assert len(boxes) == len(placed)
    for a, b in combinations(boxes, 2):
        assert not strictly_intersect(a, b)


# ---- error bars ------------------------------------------------------------------------------


def error_segments(ax: Any) -> list[np.ndarray]:
    """Every error-bar segment drawn in ``ax`` (2 × 2 arrays: start and end point)."""
    segments = []
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer):
            for coll in container.lines[2]:
                assert isinstance(coll, LineCollection)
                segments.extend(np.asarray(s) for s in coll.get_segments())
    return segments


def test_seed_means_carry_interval_bounds() -> None:
    rows = [
        {**row("aaa", 1, "a", 0.4, 0.7, ci=True, seed=0)},
        {**row("aaa", 1, "a", 0.6, 0.8, ci=True, seed=1)},
    ]
    points = seed_means(pd.DataFrame(rows))
    (p,) = points.itertuples()
    assert p.empirical_privacy == pytest.approx(0.5)
    assert p.empirical_privacy_ci_low == pytest.approx(0.45)  # mean of 0.35 and 0.55
    assert p.empirical_privacy_ci_high == pytest.approx(0.55)
    assert (p.utility_ci_low, p.utility_ci_high) == pytest.approx((0.73, 0.78))
    # Older results without interval columns: the columns are there, NaN.
    old = seed_means(pd.DataFrame([row("aaa", 1, "a", 0.4, 0.7)]))
    assert old[["utility_ci_low", "empirical_privacy_ci_high"]].isna().all().all()


def test_every_point_gets_error_bars_when_the_frame_has_intervals() -> None:
    frame = run_frame(ci=True)
    ok = frame[(frame["status"] == "ok") & (frame["attack"] == "a1")]
    ax = pareto_figure(ok, attack="a1", styles=run_styles(frame)).axes[0]
    segments = error_segments(ax)
    # 5 points (aaa ×2, t2t ×2, none), each one horizontal and one vertical bar.
    assert len(segments) == 10
    horizontal = sorted(
        (float(s[0, 0]), float(s[1, 0]), float(s[0, 1])) for s in segments if s[0, 1] == s[1, 1]
    )
    assert horizontal[0] == pytest.approx((-0.05, 0.05, 0.9))  # none, at privacy 0
    # Thin, translucent, in the label's colour.
    t2t = to_rgba(run_styles(frame)["t2t"][0])
    colours = [
        tuple(coll.get_colors()[0])[:3]
        for c in ax.containers
        if isinstance(c, ErrorbarContainer)
        for coll in c.lines[2]
    ]
    assert t2t[:3] in colours
    for c in ax.containers:
        for coll in c.lines[2]:
            assert coll.get_alpha() == pytest.approx(0.5)
            assert coll.get_linewidths()[0] <= 1.0

    fig = frontier_figure(frame, chance=0.5)
    for ax in (ax for ax in fig.axes if ax.axison):
        n_points = 5 if ax.get_title() == "a1" else 4  # a2: t2t ×2, zzz, none
        assert len(error_segments(ax)) == 2 * n_points


def test_frames_without_intervals_plot_as_before(tmp_path: Path) -> None:
    frame = run_frame(ci=False)
    ok = frame[frame["status"] == "ok"]
    ax = pareto_figure(ok[ok["attack"] == "a1"], attack="a1").axes[0]
    assert error_segments(ax) == []
    fig = frontier_figure(frame, chance=0.5)
    assert all(error_segments(ax) == [] for ax in fig.axes)
    # Bounds on the wrong side of the point are drawn at the point, never as negative lengths.
    odd = ok[ok["attack"] == "a1"].assign(
        empirical_privacy_ci_low=ok["empirical_privacy"] + 0.01,
        empirical_privacy_ci_high=ok["empirical_privacy"] + 0.02,
    )
    path = plot_pareto(odd, tmp_path / "p.png", attack="a1")
    assert path.read_bytes()[:4] == b"\x89PNG"


# ---- the family figure -----------------------------------------------------------------------


def family_points() -> pd.DataFrame:
    """Worst-case points as the leaderboard computes them: text (aaa, t2t, none) and
    attribute[gender] (t2t, zzz, none), with intervals, one dominated point."""
    rows = [
        ("text", "aaa", "eta", 1.0, 0.30, 0.80, True),
        ("text", "aaa", "eta", 2.0, 0.60, 0.70, True),
        ("text", "t2t", "eta", 1.0, 0.20, 0.85, True),
        ("text", "t2t", "eta", 2.0, 0.70, 0.60, True),
        ("text", "t2t", "eta", 3.0, 0.50, 0.55, False),
        ("text", "none", None, math.nan, 0.0, 0.90, True),
        ("attribute[gender]", "t2t", "eta", 1.0, 0.40, 0.85, True),
        ("attribute[gender]", "t2t", "eta", 2.0, 0.55, 0.60, True),
        ("attribute[gender]", "zzz", "eps", 123.456789, 0.90, 0.55, True),
        ("attribute[gender]", "none", None, math.nan, 0.0, 0.90, True),
    ]
    frame = pd.DataFrame(
        rows, columns=["family", "label", "knob", "knob_value", "privacy", "utility", "on_frontier"]
    )
    frame["privacy_ci_low"] = (frame["privacy"] - 0.05).clip(0, 1)
    frame["privacy_ci_high"] = (frame["privacy"] + 0.05).clip(0, 1)
    frame["utility_ci_low"] = frame["utility"] - 0.02
    frame["utility_ci_high"] = frame["utility"] + 0.02
    return frame


def test_family_figure(tmp_path: Path) -> None:
    points = family_points()
    fig = family_figure(points, chance=0.5)
    panels = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in panels] == ["text", "attribute[gender]"]
    for ax in panels:
        assert " ".join(ax.get_xlabel().split()) == FAMILY_PRIVACY_LABEL
        assert ax.get_xlim() == pytest.approx((-0.03, 1.03))
        dashed = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        dotted = [ln for ln in ax.get_lines() if ln.get_linestyle() == ":"]
        assert [ln.get_ydata()[0] for ln in dashed] == [0.9]
        assert [ln.get_ydata()[0] for ln in dotted] == [0.5]
    # One legend for the figure.
    assert len(fig.legends) == 1 and not any(ax.get_legend() for ax in panels)
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert names == [
        "aaa",
        "t2t",
        "zzz",
        "none (undefended)",
        "chance",
        "dominated point",
    ]
    # The t2t line joins its frontier points only; the dominated one is faint, apart.
    styles = run_styles(points)
    text = panels[0]
    t2t = [ln for ln in text.get_lines() if ln.get_marker() == styles["t2t"][1]]
    assert len(t2t) == 1 and list(t2t[0].get_xdata()) == [0.2, 0.7]
    faint = [c for c in text.collections if c.get_alpha() == 0.25 and len(c.get_offsets())]
    assert len(faint) == 1 and tuple(faint[0].get_offsets()[0]) == (0.5, 0.55)
    # Error bars on every point: text has 6 points, attribute[gender] 4.
    assert [len(error_segments(ax)) for ax in panels] == [12, 8]
    # Knob labels, 4 significant digits, inside the axes and apart.
    texts = {t.get_text() for ax in panels for t in ax.texts}
    assert "eps=123.5" in texts and "eta=1" in texts
    for ax in panels:
        boxes = drawn_labels(fig, ax)
        frame = ax.get_window_extent()
        assert all(frame.contains(b.x0, b.y0) and frame.contains(b.x1, b.y1) for b in boxes)
        assert not any(strictly_intersect(a, b) for a, b in combinations(boxes, 2))
    path = plot_families(points, tmp_path / "families.png", chance=0.5)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000


def test_family_figure_without_none_intervals_or_chance() -> None:
    points = family_points()
    points = points[points["label"] != NONE].drop(
        columns=["privacy_ci_low", "privacy_ci_high", "utility_ci_low", "utility_ci_high"]
    )
    fig = family_figure(points, chance=None)
    panels = [ax for ax in fig.axes if ax.axison]
    for ax in panels:
        assert not [ln for ln in ax.get_lines() if ln.get_linestyle() in ("--", ":")]
        assert error_segments(ax) == []
    names = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "none (undefended)" not in names and "chance" not in names
    with pytest.raises(ValueError, match="lack the columns"):
        family_figure(points.drop(columns="on_frontier"), chance=None)
    with pytest.raises(ValueError, match="No family point"):
        family_figure(points.iloc[:0], chance=None)
