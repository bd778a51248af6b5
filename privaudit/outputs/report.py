"""One self-contained HTML report for a run directory.

The page carries everything inline (plots as base64 PNG data URIs, CSS, a few lines of script),
so it can be mailed or archived as one file and opened offline. It never shows original corpus
text unless asked to (``show_examples``), following the project rule that reports and logs
hold no user text by default.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.audit.store import RunDir, cell_counts, write_text
from privaudit.corpora.base import describe_dropped
from privaudit.leaderboard.board import Leaderboard
from privaudit.leaderboard.family_figure import family_figure
from privaudit.leaderboard.figures import frontier_figure, pareto_figure, run_styles
from privaudit.leaderboard.guarantees import (
    GUARANTEE_NOTE,
    guarantee_table,
    guarantee_violations,
)
from privaudit.leaderboard.render import HYPERVOLUME_DEFINITION, leaderboard_html_body
from privaudit.leaderboard.service import html_fragment as service_html
from privaudit.leaderboard.strength import (
    STRENGTH_NOTE,
    saturation,
    strength_figure,
    undefended_table,
)
from privaudit.leaderboard.tables import TABLE_CSS, Table, fmt_number, html_table
from privaudit.leaderboard.verdict_words import html_fragment as verdict_html
from privaudit.metrics.spec import find_metric
from privaudit.metrics.stats import with_labels
from privaudit.outputs.runs import load_runs, read_run, run_chance, unfinished
from privaudit.records import unit_kinds

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

REPORT_CSS = (
    TABLE_CSS
    + """
h1 { margin-bottom: 0.2rem; }
h2 { border-bottom: 2px solid #e3e3e8; padding-bottom: 0.2rem; margin-top: 2.2rem; }
nav a { margin-right: 0.8rem; }
img { max-width: 100%; height: auto; border: 1px solid #e3e3e8; margin: 0.4rem 0; }
pre { background: #f6f6f8; padding: 0.8rem; overflow-x: auto; font-size: 0.8rem; }
code { font-size: 0.85rem; }
details { margin: 0.4rem 0; }
summary { cursor: pointer; font-weight: 600; }
.ok { color: #1a7f37; } .failed { color: #b42318; } .na { color: #8a6d00; }
.unfinished { background: #fff4e5; border: 2px solid #b54708; padding: 0.6rem 0.8rem;
              font-weight: 600; }
"""
)

# Sets data-images-loaded on <body> to how many images decoded, so a headless browser test
# (chromium --dump-dom) can tell that every embedded plot renders.
IMAGES_LOADED_JS = """
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var loaded = images.filter(function (img) { return img.complete && img.naturalWidth > 0; });
  document.body.dataset.imagesLoaded = String(loaded.length);
  document.body.dataset.imagesTotal = String(images.length);
});
"""


def environment(meta: dict[str, Any]) -> list[list[str]]:
    """The run's provenance as recorded in run.json when it started: package versions, git
    commit, Python, platform, CPU count (a run written before provenance existed says so)."""
    prov = meta.get("provenance")
    if not isinstance(prov, dict):
        return [["provenance", "not recorded (a run from an older privaudit)"]]
    rows = [
        ["started", str(prov.get("started", "—"))],
        ["git commit", str(prov.get("git_commit") or "not a checkout")],
    ]
    rows += [[k, str(v)] for k, v in (prov.get("packages") or {}).items()]
    rows += [
        ["python", str(prov.get("python", "—"))],
        ["platform", str(prov.get("platform"))],
        ["cpu count", str(prov.get("cpu_count"))],
        ["device", str(prov.get("device", "not recorded"))],
    ]
    return rows


def figure_png(fig: Figure) -> bytes:
    """A figure rendered to PNG bytes in memory (Agg; nothing written to disk)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _note(text: str) -> str:
    return f'<p class="note">{html.escape(text)}</p>'


def _summary(run_dir: Path, frame: pd.DataFrame, meta: dict[str, Any]) -> str:
    counts = cell_counts(frame)  # as the progress bar and the terminal count them
    facts = {
        "run directory": str(run_dir.resolve()),
        "cells": f"{counts['all']}: "
        + ", ".join(f"{counts[s]} {s}" for s in ("ok", "n/a", "failed"))
        + (f" ({len(frame)} result rows)" if len(frame) != counts["all"] else ""),
        "defense labels": str(frame["label"].nunique()),
        "attacks": str(frame["attack"].nunique()),
        "utility metric": str(meta.get("utility_metric", "accuracy")),
        "chance level of the utility metric": fmt_number(run_chance(meta)),
        "majority-class accuracy": fmt_number(meta.get("chance_accuracy")),
    }
    if meta.get("finished") is False:  # "cells" counts what finished, not the whole grid
        planned = meta.get("cells")
        status = "unfinished" + (f": {planned} cells planned" if isinstance(planned, int) else "")
        facts = {"run status": status} | facts
    for col, name in (
        ("corpus", "corpus"),
        ("backbone", "backbone"),
        ("utility_evaluator", "utility"),
        ("privaudit_version", "privaudit version of the run"),
        ("seed", "seeds"),
    ):
        if col in frame.columns:
            facts[name] = ", ".join(str(v) for v in sorted(frame[col].dropna().unique(), key=str))
    if "corpus_sizes" in meta:
        facts["corpus sizes"] = ", ".join(f"{k} {v}" for k, v in meta["corpus_sizes"].items())
    unit = meta.get("unit") or {}
    if unit.get("label"):  # who the victims are: what every interval resamples
        spec = unit_kinds().get(str(unit.get("kind")))
        what = spec.many if spec is not None and spec.grouped else "documents"
        facts["victims"] = f"{unit['label']} (intervals resample {what})"
    if (meta.get("corpus_dropped") or {}).get("dropped_rows"):  # rows the loader left out
        facts["corpus rows"] = describe_dropped(meta["corpus_dropped"])
    rows = [[k, v] for k, v in facts.items()]
    return html_table(Table(headers=[], rows=rows), numeric_from=99)


def _board(run_dir: Path, chance: float) -> Leaderboard | str:
    """The run's leaderboard with its intervals, or why there is none."""
    try:
        runs = load_runs([run_dir], chance=chance if math.isfinite(chance) else None)
        return runs.board()
    except ValueError as exc:  # no ok cell, or no chance level: say so, keep the report
        return f"No leaderboard: {exc}"


def _leaderboard_section(board: Leaderboard | str) -> str:
    if isinstance(board, str):
        return _note(board) + _note(HYPERVOLUME_DEFINITION)
    return leaderboard_html_body(board)


def _families_section(board: Leaderboard | str, frame: pd.DataFrame) -> str:
    """The worst-case frontiers per family (one panel each), with intervals."""
    if isinstance(board, str) or board.points.empty:
        return _note("No worst-case frontier to draw.")

    chance = board.chance if math.isfinite(board.chance) else None
    fig = family_figure(board.points, chance=chance, styles=run_styles(frame))
    return _img(figure_png(fig), "Worst-case frontiers per attack family")


def _plots_section(frame: pd.DataFrame, chance: float) -> tuple[str, str]:
    """(combined frontier figure, per-attack Pareto plots) as HTML with embedded PNGs."""
    chance_arg = chance if math.isfinite(chance) else None
    styles = run_styles(frame)
    try:
        frontiers = _img(
            figure_png(frontier_figure(frame, chance=chance_arg, styles=styles)),
            "Pareto frontiers",
        )
    except ValueError as exc:
        return _note(f"No frontier to draw: {exc}"), ""
    ok = frame[frame["status"] == "ok"]
    parts = []
    for attack in sorted(ok["attack"].unique()):
        fig = pareto_figure(
            ok[ok["attack"] == attack], attack=attack, chance=chance_arg, styles=styles
        )
        parts.append(
            f"<h3>{html.escape(attack)}</h3>\n" + _img(figure_png(fig), f"Pareto plot: {attack}")
        )
    return frontiers, "\n".join(parts)


def _guarantees_section(table: pd.DataFrame | None) -> str:
    """The guarantee audit (``guarantees.csv``): per defense point its claim, the empirical
    lower bound on the privacy loss at the run's confidence, the claim at the same distance,
    their ratio and the verdict; a violated claim is named first, in a banner."""
    if table is None or table.empty:
        return _note("No guarantee audit in this run directory (guarantees.csv).")
    banner = "".join(
        f'<p class="unfinished">{html.escape(line)}</p>\n' for line in guarantee_violations(table)
    )
    return banner + _note(GUARANTEE_NOTE) + html_table(guarantee_table(table), numeric_from=8)


def _strength_section(frame: pd.DataFrame, curve: pd.DataFrame | None) -> str:
    """Each attack against the undefended release beside its baseline and published figure,
    then the curve of strength against the attacker's data (``strength.csv``) with one
    sentence per attack, or what enables it."""
    table = undefended_table(frame)
    parts = [_note(STRENGTH_NOTE)]
    none = "No ok attack at the undefended point (the none defense)."
    parts.append(html_table(table, numeric_from=2) if table.rows else _note(none))
    if curve is not None and not curve.empty:
        try:
            fig = strength_figure(curve)
            parts.append(_img(figure_png(fig), "Attack strength against the attacker's data"))
        except ValueError as exc:  # no ok row: the sentences say why
            parts.append(_note(str(exc)))
    items = "".join(f"<li>{html.escape(line)}</li>" for line in saturation(curve))
    return "\n".join(parts) + f'\n<ul class="note">{items}</ul>'


def _cells_section(frame: pd.DataFrame) -> str:
    parts = []
    # The rate asked for, where the grid calibrated knob values by replacement rate.
    rated = "target_rate" in frame.columns and bool(frame["target_rate"].notna().any())
    headers = [
        "defense",
        "knob",
        "value",
        *(["target rate"] if rated else []),
        "seed",
        "attack",
        "status",
        "privacy",
        "normalised privacy",
        "utility",
        "s",
    ]
    for attack, sub in frame.groupby("attack", sort=True):
        sub = sub.sort_values(["label", "knob_value", "seed"], na_position="first")
        rows = [
            [
                str(r["label"]),
                str(r["knob"]) if isinstance(r["knob"], str) else "—",
                fmt_number(r["knob_value"], ".4g"),
                *([fmt_number(r["target_rate"], ".3g")] if rated else []),
                fmt_number(r["seed"], "g"),
                str(attack),
                str(r["status"]),
                _with_ci(r, "empirical_privacy"),
                _with_ci(r, "normalised_privacy"),
                _with_ci(r, "utility"),
                fmt_number(r.get("seconds"), ".1f"),
            ]
            for _, r in sub.iterrows()
        ]
        counts = sub["status"].value_counts().to_dict()
        summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
        metric = sub["attack_metric"].dropna() if "attack_metric" in sub.columns else ()
        spec = find_metric(str(metric.iloc[0])) if len(metric) else None
        if spec is not None:  # name what the privacy column measures, as the metric declares
            summary += f"; privacy = {spec.privacy_label}"
        parts.append(
            f"<details open><summary>{html.escape(str(attack))} ({html.escape(summary)})"
            f"</summary>\n{html_table(Table(headers, rows), numeric_from=2)}\n</details>"
        )
    return "\n".join(parts)


def _with_ci(row: Any, column: str) -> str:
    """``value [low, high]`` when the row has the interval, else the value."""
    value = fmt_number(row.get(column))
    lo, hi = row.get(f"{column}_ci_low"), row.get(f"{column}_ci_high")
    if value == "—" or fmt_number(lo) == "—" or fmt_number(hi) == "—":
        return value
    return f"{value} [{fmt_number(lo)}, {fmt_number(hi)}]"


def _grouped_reasons(frame: pd.DataFrame, status: str) -> str:
    """Rows of one status grouped by reason: count and the (defense, attack) pairs."""
    sub = frame[frame["status"] == status]
    if sub.empty:
        return _note(f"No cell has status {status!r}.")
    rows = []
    reasons = sub.assign(reason=sub["reason"].fillna("(no reason given)").astype(str))
    for reason, group in reasons.groupby("reason", sort=False):
        pairs = sorted({f"{r['label']} × {r['attack']}" for _, r in group.iterrows()})
        shown = ", ".join(pairs[:12]) + (f", … ({len(pairs) - 12} more)" if len(pairs) > 12 else "")
        rows.append([str(len(group)), str(reason), shown])
    rows.sort(key=lambda r: -int(r[0]))
    return html_table(Table(["cells", "reason", "defense × attack"], rows), numeric_from=0)


def no_examples(run_dir: str | Path) -> str:
    """What to do when a run kept no examples (runs keep no corpus text unless asked)."""
    return (
        f"{run_dir} kept no examples (runs store no corpus text unless asked); to keep them, "
        f"run `privaudit run --resume {run_dir} --show-examples`, then "
        f"`privaudit report {run_dir} --show-examples`."
    )


def _examples_section(run_dir: Path, show_examples: bool) -> str:
    if not show_examples:
        return _note(
            "Original texts are not shown. Pass --show-examples (show_examples=True) to include "
            "the examples in the run directory's examples.json."
        )
    rd = RunDir(run_dir)
    path = rd.examples_json
    examples = rd.read_examples()
    if examples is None:
        return _note(no_examples(run_dir))
    keys = ("defense", "knob_value", "original", "released")
    if not isinstance(examples, list) or not all(
        isinstance(e, dict) and set(keys) <= set(e) for e in examples
    ):
        raise ValueError(f"{path} must be a JSON list of objects with the keys {', '.join(keys)}.")
    rows = [
        [
            str(e["defense"]),
            fmt_number(e["knob_value"], ".4g"),
            str(e["original"]),
            str(e["released"]),
        ]
        for e in examples
    ]
    return html_table(
        Table(["defense", "knob value", "original", "released"], rows), numeric_from=99
    )


def write_report(
    run_dir: str | Path,
    *,
    show_examples: bool = False,
    out: str | Path | None = None,
    board: Leaderboard | None = None,
) -> Path:
    """Write one self-contained HTML report for ``run_dir`` (default ``run_dir/report.html``);
    ``board`` is the run's leaderboard when the caller has computed it already (the runner),
    else it is computed here from the run directory.

    It holds the leaderboard's verdict (first), the run summary, the leaderboard, the
    combined frontier figure and every per-attack Pareto plot (rendered from the results
    table, embedded as PNG data URIs), per-cell tables, failures and n/a reasons grouped with
    counts, the config and the environment. Original texts appear only with
    ``show_examples=True``, and then only those in ``run_dir/examples.json`` (a list of
    ``{defense, knob_value, original, released}``).
    All text is HTML-escaped; the page loads nothing from outside itself.
    """
    run_dir = Path(run_dir)
    frame, meta = read_run(run_dir)
    frame = with_labels(frame)
    for col in ("knob", "knob_value", "seed", "reason", "empirical_privacy", "utility"):
        if col not in frame.columns:
            frame[col] = None if col in ("knob", "reason") else math.nan
    chance = run_chance(meta)
    chance = float(chance) if chance is not None else math.nan
    board = board if board is not None else _board(run_dir, chance)
    sections = _sections(run_dir, frame, meta, board, chance, show_examples)
    # Before anything else on the page: every number below is of a partial run.
    partial = unfinished(run_dir, frame, meta)
    banner = f'<p class="unfinished">{html.escape(partial)}</p>\n' if partial else ""
    page = _page(run_dir, sections, banner)
    out_path = Path(out) if out is not None else RunDir(run_dir).report_html
    out_path.parent.mkdir(parents=True, exist_ok=True)
    return write_text(out_path, page)


def _sections(
    run_dir: Path,
    frame: pd.DataFrame,
    meta: dict[str, Any],
    board: Leaderboard | str,
    chance: float,
    show_examples: bool,
) -> list[tuple[str, str, str]]:
    """The report's sections in page order, each (anchor, title, HTML content)."""
    saved = RunDir(run_dir).read_config()
    config = (
        json.dumps(saved, indent=2)
        if saved is not None
        else "(no config.json in the run directory)"
    )
    env_rows = environment(meta)
    frontiers, per_attack = _plots_section(frame, chance)
    strength = _strength_section(frame, RunDir(run_dir).read_strength())
    verdict = board.verdict if isinstance(board, Leaderboard) else None
    sections = [
        # The headline first: what can and cannot be concluded, before any table.
        *([("verdict", "Verdict", verdict_html(verdict))] if verdict is not None else []),
        ("summary", "Summary", _summary(run_dir, frame, meta)),
        ("leaderboard", "Leaderboard", _leaderboard_section(board)),
        # RAPT's Table II and CAPE's adversary, only when the run has those defenses.
        *(
            [("service", "The service's objectives, measured", service_html(board.service))]
            if isinstance(board, Leaderboard) and board.service and board.service.sections()
            else []
        ),
        ("guarantees", "Guarantee audit", _guarantees_section(RunDir(run_dir).read_guarantees())),
        ("strength", "Attack strength", strength),
        ("families", "Worst-case frontiers per attack family", _families_section(board, frame)),
        ("frontiers", "Pareto frontiers per attack", frontiers),
        ("pareto", "Pareto plots per attack", per_attack or _note("No ok cell to plot.")),
        ("cells", "Cells", _cells_section(frame)),
        ("failures", "Failures", _grouped_reasons(frame, "failed")),
        ("na", "Not applicable (n/a)", _grouped_reasons(frame, "n/a")),
        ("config", "Config", f"<pre>{html.escape(config)}</pre>"),
        (
            "environment",
            "Environment (recorded when the run started)",
            html_table(Table([], env_rows), numeric_from=99),
        ),
        ("examples", "Examples", _examples_section(run_dir, show_examples)),
    ]
    return sections


def _page(run_dir: Path, sections: list[tuple[str, str, str]], banner: str) -> str:
    """The whole page: title, the unfinished run's ``banner``, the time written, the
    navigation, every section, and the script that counts decoded images."""
    nav = " ".join(f'<a href="#{key}">{html.escape(title)}</a>' for key, title, _ in sections)
    body = "\n".join(
        f'<section id="{key}">\n<h2>{html.escape(title)}</h2>\n{content}\n</section>'
        for key, title, content in sections
    )
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    title = f"privaudit report: {run_dir.resolve().name}"
    page = (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{REPORT_CSS}</style>\n</head>\n<body>\n"
        f"<h1>{html.escape(title)}</h1>\n{banner}"
        f'<p class="note">Written {html.escape(stamp)} by privaudit.</p>\n<nav>{nav}</nav>\n'
        f"{body}\n<script>{IMAGES_LOADED_JS}</script>\n</body>\n</html>\n"
    )
    return page
