"""Attack strength, shown: each attack against the undefended release beside its
no-information baseline and its published figure, and the curve of strength against the
attacker's data (``strength.csv``, :mod:`privaudit.audit.strength`) with one sentence per
attack saying whether it has saturated. Pure functions of the tables; the report and the
leaderboard files place them.

Saturation: the last step of the curve (the last doubling of the aux with the default shares
0.25, 0.5, 1) moves the score by no more than the interval half-width of its last point.

**Undecided because of the attacker** (:func:`family_strengths`, issue 46): a family's
strength is that of the strongest attack it ranks on (the attacks every ranked defense faced)
against the undefended release, ``share = (score − baseline) / (perfect − baseline)`` on the
metric's own scale: the fraction of the way from its no-information baseline to a perfect
attacker (0 without a measurable advantage, :data:`privaudit.metrics.stats.MIN_SPAN`). Below
:data:`WEAK_SHARE` (10 %) the undefended release keeps more than 0.9 of the privacy axis on
that attack's own scale, so no defense has room to beat it or another: the family makes no
verdict on defenses (:mod:`privaudit.leaderboard.verdict`) and is left out of the overall
ranking (:mod:`privaudit.leaderboard.overall`). The published figure is set beside it but
not used in the rule: it comes from another encoder, corpus or metric (:data:`STRENGTH_NOTE`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.api import NONE
from privaudit.leaderboard.reach import attack_reach, reach_text
from privaudit.leaderboard.tables import Table, fmt_number, markdown_table, with_ci
from privaudit.metrics.published import published
from privaudit.metrics.spec import MetricSpec, find_metric

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from privaudit.metrics.stats import RunStats

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
    reach = attack_reach(frame)
    several = rows["seed"].nunique() > 1 if "seed" in rows.columns else False
    out = []
    for _, r in rows.sort_values(["attack", "seed"]).iterrows():
        spec = find_metric(str(r["attack_metric"]))
        label = spec.baseline.label if spec is not None and spec.baseline else ""
        papers = published(str(r["attack"])) if "[" not in str(r["attack"]) else ()
        figures = "; ".join(p.figure or "not comparable / not reported" for p in papers)
        settings = "; ".join(f"{p.setting} — {p.source}" for p in papers)
        out.append(
            [
                str(r["attack"]) + (f" (seed {int(r['seed'])})" if several else ""),
                _scored(spec, str(r["attack_metric"])),
                with_ci(
                    r["attack_score"], r.get("attack_score_ci_low"), r.get("attack_score_ci_high")
                ),
                fmt_number(r.get("attack_baseline")) + (f" ({label})" if label else ""),
                figures or "—",
                settings or "—",
                reach_text(reach.get(_base_name(str(r["attack"])), {})),
            ]
        )
    headers = [
        "attack",
        "metric",
        "score [interval]",
        "no-information baseline",
        "published figure",
        "published setting (source)",
        "reach: victims' tokens it can write; its public text's",
    ]
    return Table(headers, out)


#: What each curve varies (strength.csv's ``data``), as its axis says it.
DATA = {"aux": "aux documents", "public": "public pre-training documents"}


def _curves(curve: pd.DataFrame) -> list[tuple[Any, str, str, pd.DataFrame]]:
    """Per (seed, attack, data): its ok rows with ``x``, the documents of the data that
    varied (a strength.csv without a ``data`` column is an aux curve)."""
    ok = curve[curve["status"] == "ok"].copy()
    if "data" not in ok.columns:
        ok["data"] = "aux"
    public = ok["data"] == "public"
    ok["x"] = ok["n_aux"]
    if public.any():
        ok.loc[public, "x"] = ok.loc[public, "n_public"]
    ok["x"] = ok["x"].astype(int)
    groups = ok.groupby(["seed", "attack", "data"], sort=True)
    return [
        (seed, str(attack), str(data), sub.sort_values("x")) for (seed, attack, data), sub in groups
    ]


def saturation(curve: pd.DataFrame | None) -> list[str]:
    """One sentence per (seed, attack) of the curve: the last step's change against the last
    point's interval half-width, saturated or still growing (see the module docstring); the
    :data:`NOT_COMPUTED` note when there is no curve."""
    if curve is None:
        return [NOT_COMPUTED]
    if curve.empty:
        return [
            "No attack that learns from the aux split was ok at the undefended point; the "
            "curve is empty."
        ]
    seeds = curve["seed"].nunique() > 1
    lines = []
    for seed, attack, data, sub in _curves(curve):
        who = f"{attack} (seed {seed})" if seeds else attack
        who += "" if data == "aux" else f", over its {DATA[data]}"
        docs = DATA.get(data, data)
        if len(sub) < 2:
            lines.append(
                f"{who}: one point only ({int(sub['x'].iloc[-1])} {docs});"
                " the smaller shares failed."
            )
            continue
        prev, last = sub.iloc[-2], sub.iloc[-1]
        spec = find_metric(str(last["attack_metric"]))
        sign = 1.0 if spec is None or spec.higher_is_stronger else -1.0
        gain = sign * (float(last["attack_score"]) - float(prev["attack_score"]))
        half = (float(last["attack_score_ci_high"]) - float(last["attack_score_ci_low"])) / 2
        step = (
            f"{fmt_number(prev['attack_score'])} with {int(prev['x'])} {docs}, "
            f"{fmt_number(last['attack_score'])} with {int(last['x'])}"
        )
        if not math.isfinite(half):
            verdict = "no interval to judge saturation by"
        elif abs(gain) <= half:  # a zero-width interval (a perfect score) with no change
            verdict = (
                f"the last step changes it by {abs(gain):.3f}, within its interval "
                f"half-width {half:.3f}: saturated"
            )
        elif gain > 0:
            verdict = (
                f"the last step makes it stronger by {gain:.3f}, more than its interval "
                f"half-width {half:.3f}: still growing with more data"
            )
        else:
            verdict = (
                f"the last step makes it weaker by {-gain:.3f}, more than its interval "
                f"half-width {half:.3f}: not saturated (unstable in the data)"
            )
        lines.append(f"{who}: {step}; {verdict}.")
    failed = curve[curve["status"] == "failed"]
    for _, r in failed.iterrows():
        public = str(r.get("data", "aux")) == "public"
        n = int(r["n_public"] if public else r["n_aux"])
        lines.append(
            f"{r['attack']} could not be fitted on {n} "
            f"{DATA['public' if public else 'aux']}: {r['reason']}."
        )
    return lines


def strength_figure(curve: pd.DataFrame) -> Figure:
    """Score against the number of the attacker's documents (log scale), one line per attack
    with its interval as error bars and its no-information baseline dashed in the same
    colour; one panel per metric and data (aux, public pre-training: scores of different
    metrics share no axis, nor do different data). Raises ``ValueError`` when the curve has
    no ok row."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    curves = _curves(curve)
    if not curves:
        raise ValueError("The strength curve has no ok row; nothing to draw.")
    panels = sorted({(str(sub["attack_metric"].iloc[0]), data) for _, _, data, sub in curves})
    names = sorted({attack for _, attack, _, _ in curves})
    cmap = colormaps["tab10" if len(names) <= 10 else "tab20"]
    colour = {name: cmap(i % cmap.N) for i, name in enumerate(names)}
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(5.0 * ncols, 3.8 * nrows + 0.5), dpi=110)
    FigureCanvasAgg(fig)
    grid = fig.subplots(nrows, ncols, squeeze=False).ravel()
    for spare in grid[len(panels) :]:
        spare.set_visible(False)
    axes = grid[: len(panels)]
    seeds = len({seed for seed, _, _, _ in curves}) > 1
    for ax, (metric, data) in zip(axes, panels, strict=True):
        spec = find_metric(metric)
        ticks: set[int] = set()
        for seed, attack, kind, sub in curves:
            if str(sub["attack_metric"].iloc[0]) != metric or kind != data:
                continue
            ticks |= {int(n) for n in sub["x"]}
            x, y = sub["x"].to_numpy(float), sub["attack_score"].to_numpy(float)
            lo = sub["attack_score_ci_low"].to_numpy(float)
            hi = sub["attack_score_ci_high"].to_numpy(float)
            err = np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)])
            name = f"{attack} (seed {seed})" if seeds else attack
            ax.errorbar(
                x,
                y,
                yerr=np.nan_to_num(err),
                color=colour[attack],
                marker="o",
                ms=4,
                lw=1.6,
                capsize=3,
                label=name,
            )
            base = sub["attack_baseline"].to_numpy(float)
            if np.isfinite(base).any():
                ax.plot(x, base, color=colour[attack], ls="--", lw=1.0, alpha=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(ticks), [str(t) for t in sorted(ticks)])
        ax.minorticks_off()
        ax.set_xlabel(f"attacker's {DATA.get(data, data)} (log scale)", fontsize=8)
        shown = (spec.display or metric) if spec is not None else metric
        ax.set_ylabel(f"attack score ({shown})", fontsize=8)
        direction = "" if spec is None or spec.higher_is_stronger else " (lower = stronger)"
        ax.set_title(f"{metric}{direction} · {data}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(
        "Attack strength against the attacker's data at the undefended point "
        "(dashed: each attack's no-information baseline)",
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def markdown(frame: pd.DataFrame, curve: pd.DataFrame | None) -> str:
    """The section as Markdown (leaderboard.md): the table, then the curve's sentences."""

    table = undefended_table(frame)
    body = markdown_table(table) if table.rows else "No ok attack at the undefended point."
    lines = "".join(f"- {line}\n" for line in saturation(curve))
    return f"## Attack strength\n\n{STRENGTH_NOTE}\n\n{body}\n\n{lines}\n"


# ---- a family's attacker: strong enough for a verdict? ------------------------------------

#: A family whose strongest ranking attack covers less than this share of the way from its
#: no-information baseline to a perfect attacker, against the undefended release, is
#: undecided because of the attacker (:func:`family_strengths`).
WEAK_SHARE = 0.1

#: What would make a weak family's attacker stronger, as the headline says it.
STRONGER = (
    "public text of the victims' domain for its pre-training, or more aux documents "
    "(the Attack strength section's curve shows whether more data still helps)"
)


@dataclass(frozen=True)
class FamilyStrength:
    """How much a family's attacker gets from the undefended release.

    ``attack``: the strongest of the attacks the family ranks on, ``metric`` its metric,
    ``score`` its score against the undefended release and ``baseline`` without it (seeds
    averaged); ``share``: ``(score − baseline) / (perfect − baseline)`` on the metric's own
    scale, the fraction of the way from guessing without the release to a perfect attacker
    (0 when no attack has a measurable advantage there: ``informative`` False, and ``attack``
    is then the one closest to one); ``published``: its paper's figure and source ("" when
    none is listed)."""

    family: str
    attack: str
    metric: str
    score: float
    baseline: float
    share: float
    informative: bool
    published: str = ""

    @property
    def weak(self) -> bool:
        """Undecided because of the attacker: no measurable advantage, or a share below
        :data:`WEAK_SHARE`."""
        return not (self.informative and self.share >= WEAK_SHARE)

    def why(self) -> str:
        """Why the family is undecided, in one clause (the overall note's)."""
        if not self.informative:
            return "undecided because of the attacker: no attack has a measurable advantage"
        return (
            f"undecided because of the attacker: its strongest attack ({self.attack}) "
            f"covers {100 * self.share:.0f} % of the way to a perfect attacker, below "
            f"{100 * WEAK_SHARE:.0f} %"
        )

    def headline(self) -> str:
        """The family's headline line: the attacker's strength beside the published figure,
        what it shows and what would make it stronger."""
        spec = find_metric(self.metric)
        got = (
            f"{self.attack} scores {self.score:.3f} ({_scored(spec, self.metric)}) against "
            f"the undefended release and {self.baseline:.3f} without it"
        )
        if self.informative:
            got += (
                f": {100 * self.share:.0f} % of the way to a perfect attacker, below the "
                f"{100 * WEAK_SHARE:.0f} % a verdict needs"
            )
            which = "the strongest attack every defense faces, "
        else:
            got += ", no measurable advantage"
            which = "no attack learns anything measurable from the undefended release ("
            got += ")"
        paper = f"published: {self.published}" if self.published else "no published figure"
        return (
            f"undecided because of the attacker: {which}{got}; {paper}. Its attacks "
            "cannot tell the defenses apart here, which is no evidence that privatizing "
            f"buys nothing; a stronger attacker would decide it: {STRONGER}. It is left "
            "out of the overall ranking."
        )


def family_strengths(
    stats: RunStats, ranked_on: Mapping[str, Sequence[str]]
) -> dict[str, FamilyStrength]:
    """Per family with an ok undefended row: its attacker's strength (:class:`FamilyStrength`)
    over the attacks it ranks on (``ranked_on``, :attr:`privaudit.leaderboard.stats.
    AttackSets.common`; all its attacks where that is empty or not given). A family with no
    ok row at the undefended release (every attack n/a there) is not judged: it is absent."""
    f = stats.frame
    at_none = ((f["defense"] == NONE) & (f["status"] == "ok")).to_numpy()
    out: dict[str, FamilyStrength] = {}
    for family, fam in f[at_none].groupby("family", sort=True):
        attacks = set(ranked_on.get(str(family), ())) or set(fam["attack"])
        found = []
        for attack, rows in fam[fam["attack"].isin(attacks)].groupby("attack", sort=True):
            found.append(_attack_strength(stats, str(family), str(attack), rows))
        if found:
            out[str(family)] = max(found, key=lambda s: (s.informative, s.share))
    return out


def _attack_strength(
    stats: RunStats, family: str, attack: str, rows: pd.DataFrame
) -> FamilyStrength:
    """One attack's strength from its ok rows at the undefended release (one per seed)."""
    metric = str(rows["attack_metric"].iloc[0])
    spec = find_metric(metric)
    score = float(rows["attack_score"].astype(float).mean())
    base = float(rows["attack_baseline"].astype(float).mean())
    if not math.isfinite(base):
        base = 0.0 if spec is None else spec.null_score
    perfect = 1.0 if spec is None else spec.perfect
    informative = bool(np.isfinite(stats.normalised_point[rows.index.to_numpy()]).any())
    room = perfect - base
    share = (score - base) / room if math.isfinite(room) and abs(room) > 1e-12 else math.nan
    share = float(np.clip(share, 0.0, 1.0)) if math.isfinite(share) else 0.0
    papers = [p for p in published(_base_name(attack)) if p.figure]
    shown = f"{papers[0].figure} ({papers[0].source})" if papers else ""
    if not papers and published(_base_name(attack)):
        shown = f"none comparable ({published(_base_name(attack))[0].source})"
    return FamilyStrength(
        family, attack, metric, score, base, share if informative else 0.0, informative, shown
    )
