"""Attack strength, shown: each attack against the undefended release beside its
no-information baseline and its published figure, and the curve of strength against the
attacker's data (``strength.csv``, :mod:`privaudit.audit.strength`) with one sentence per
attack saying whether it has saturated. Pure functions of the tables; the report and the
leaderboard files place them.

Saturation: the last step of the curve (the last doubling of the aux with the default shares
0.25, 0.5, 1) moves the score by no more than the interval half-width of its last point.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import NONE
from privaudit.leaderboard.render import Table, fmt_number, with_ci
from privaudit.metrics.published import published
from privaudit.metrics.spec import MetricSpec, find_metric

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

#: What the report says when a run has no strength.csv.
NOT_COMPUTED = (
    "The curve of attack strength against the attacker's data was not computed; enable it "
    "with `strength: {fractions: [0.25, 0.5, 1.0]}` in the grid config (`privaudit run "
    "--config FILE`, or the same key in the config given to privaudit.outputs.run_grid) and "
    "run it again into the same --run-dir: finished cells are reused, only the curve is "
    "computed."
)

STRENGTH_NOTE = (
    "Each attack's score against the undefended release (the none point) with its interval, "
    "beside what it gets without the release (its no-information baseline) and, where a "
    "paper reports one, the published figure with the paper's setting: a figure from another "
    "encoder, corpus or metric is context, not a target."
)


def _base_name(attack: str) -> str:
    return attack.split("[", 1)[0]


def _scored(spec: MetricSpec | None, metric: str) -> str:
    """What the score measures, as declared (``balanced accuracy (attribute_accuracy)``)."""
    if spec is None or spec.display == metric:
        return metric
    return f"{spec.display} ({metric})"


def undefended_table(frame: pd.DataFrame) -> Table:
    """One row per ok attack row at the ``none`` point (per seed when there are several):
    attack, metric, score [interval], no-information baseline, published figure and its
    setting (:mod:`privaudit.metrics.published`; only on an attack's headline row, not its
    ``[target]`` rows)."""
    rows = frame[(frame["label"].astype(str) == NONE) & (frame["status"] == "ok")]
    several = rows["seed"].nunique() > 1 if "seed" in rows.columns else False
    out = []
    for _, r in rows.sort_values(["attack", "seed"]).iterrows():
        spec = find_metric(str(r["attack_metric"]))
        label = spec.baseline.label if spec is not None and spec.baseline else ""
        papers = published(str(r["attack"])) if "[" not in str(r["attack"]) else ()
        figures = "; ".join(p.figure or "not comparable / not reported" for p in papers)
        settings = "; ".join(f"{p.setting} — {p.source}" for p in papers)
        out.append([
            str(r["attack"]) + (f" (seed {int(r['seed'])})" if several else ""),
            _scored(spec, str(r["attack_metric"])),
            with_ci(r["attack_score"], r.get("attack_score_ci_low"),
                     r.get("attack_score_ci_high")),
            fmt_number(r.get("attack_baseline")) + (f" ({label})" if label else ""),
            figures or "—", settings or "—",
        ])  # fmt: skip
    headers = ["attack", "metric", "score [interval]", "no-information baseline",
               "published figure", "published setting (source)"]  # fmt: skip
    return Table(headers, out)


def _curves(curve: pd.DataFrame) -> list[tuple[Any, str, pd.DataFrame]]:
    ok = curve[curve["status"] == "ok"].copy()
    ok["n_aux"] = ok["n_aux"].astype(int)
    return [(seed, str(attack), sub.sort_values("n_aux"))
            for (seed, attack), sub in ok.groupby(["seed", "attack"], sort=True)]  # fmt: skip


def saturation(curve: pd.DataFrame | None) -> list[str]:
    """One sentence per (seed, attack) of the curve: the last step's change against the last
    point's interval half-width, saturated or still growing (see the module docstring); the
    :data:`NOT_COMPUTED` note when there is no curve."""
    if curve is None:
        return [NOT_COMPUTED]
    if curve.empty:
        return ["No attack that learns from the aux split was ok at the undefended point; the "
                "curve is empty."]  # fmt: skip
    seeds = curve["seed"].nunique() > 1
    lines = []
    for seed, attack, sub in _curves(curve):
        who = f"{attack} (seed {seed})" if seeds else attack
        if len(sub) < 2:
            lines.append(f"{who}: one point only ({int(sub['n_aux'].iloc[-1])} aux documents);"
                         " the smaller shares failed.")  # fmt: skip
            continue
        prev, last = sub.iloc[-2], sub.iloc[-1]
        spec = find_metric(str(last["attack_metric"]))
        sign = 1.0 if spec is None or spec.higher_is_stronger else -1.0
        gain = sign * (float(last["attack_score"]) - float(prev["attack_score"]))
        half = (float(last["attack_score_ci_high"]) - float(last["attack_score_ci_low"])) / 2
        step = (f"{fmt_number(prev['attack_score'])} with {int(prev['n_aux'])} aux documents, "
                f"{fmt_number(last['attack_score'])} with {int(last['n_aux'])}")  # fmt: skip
        if not math.isfinite(half):
            verdict = "no interval to judge saturation by"
        elif abs(gain) <= half:  # a zero-width interval (a perfect score) with no change
            verdict = (f"the last step changes it by {abs(gain):.3f}, within its interval "
                       f"half-width {half:.3f}: saturated")  # fmt: skip
        elif gain > 0:
            verdict = (f"the last step makes it stronger by {gain:.3f}, more than its interval "
                       f"half-width {half:.3f}: still growing with more data")  # fmt: skip
        else:
            verdict = (f"the last step makes it weaker by {-gain:.3f}, more than its interval "
                       f"half-width {half:.3f}: not saturated (unstable in the data)")  # fmt: skip
        lines.append(f"{who}: {step}; {verdict}.")
    failed = curve[curve["status"] == "failed"]
    for _, r in failed.iterrows():
        lines.append(f"{r['attack']} could not be fitted on {int(r['n_aux'])} aux documents: "
                     f"{r['reason']}.")  # fmt: skip
    return lines


def strength_figure(curve: pd.DataFrame) -> Figure:
    """Score against the number of aux documents (log scale), one line per attack with its
    interval as error bars and its no-information baseline dashed in the same colour; one
    panel per metric (scores of different metrics share no axis). Raises ``ValueError`` when
    the curve has no ok row."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    curves = _curves(curve)
    if not curves:
        raise ValueError("The strength curve has no ok row; nothing to draw.")
    metrics = sorted({str(sub["attack_metric"].iloc[0]) for _, _, sub in curves})
    names = sorted({attack for _, attack, _ in curves})
    cmap = colormaps["tab10" if len(names) <= 10 else "tab20"]
    colour = {name: cmap(i % cmap.N) for i, name in enumerate(names)}
    ncols = min(3, len(metrics))
    nrows = math.ceil(len(metrics) / ncols)
    fig = Figure(figsize=(5.0 * ncols, 3.8 * nrows + 0.5), dpi=110)
    FigureCanvasAgg(fig)
    grid = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for spare in grid[len(metrics) :]:
        spare.set_visible(False)
    axes = grid[: len(metrics)]
    ticks = sorted({int(n) for _, _, sub in curves for n in sub["n_aux"]})
    seeds = len({seed for seed, _, _ in curves}) > 1
    for ax, metric in zip(axes, metrics, strict=True):
        spec = find_metric(metric)
        for seed, attack, sub in curves:
            if str(sub["attack_metric"].iloc[0]) != metric:
                continue
            x, y = sub["n_aux"].to_numpy(float), sub["attack_score"].to_numpy(float)
            lo = sub["attack_score_ci_low"].to_numpy(float)
            hi = sub["attack_score_ci_high"].to_numpy(float)
            err = np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)])
            name = f"{attack} (seed {seed})" if seeds else attack
            ax.errorbar(x, y, yerr=np.nan_to_num(err), color=colour[attack], marker="o",
                        ms=4, lw=1.6, capsize=3, label=name)  # fmt: skip
            base = sub["attack_baseline"].to_numpy(float)
            if np.isfinite(base).any():
                ax.plot(x, base, color=colour[attack], ls="--", lw=1.0, alpha=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("attacker's aux documents (log scale)", fontsize=8)
        shown = (spec.display or metric) if spec is not None else metric
        ax.set_ylabel(f"attack score ({shown})", fontsize=8)
        direction = "" if spec is None or spec.higher_is_stronger else " (lower = stronger)"
        ax.set_title(f"{metric}{direction}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle("Attack strength against the attacker's data at the undefended point "
                 "(dashed: each attack's no-information baseline)", fontsize=10)  # fmt: skip
    fig.tight_layout()
    return fig


def markdown(frame: pd.DataFrame, curve: pd.DataFrame | None) -> str:
    """The section as Markdown (leaderboard.md): the table, then the curve's sentences."""
    from privaudit.leaderboard.render import markdown_table

    table = undefended_table(frame)
    body = markdown_table(table) if table.rows else "No ok attack at the undefended point."
    lines = "".join(f"- {line}\n" for line in saturation(curve))
    return f"## Attack strength\n\n{STRENGTH_NOTE}\n\n{body}\n\n{lines}\n"
