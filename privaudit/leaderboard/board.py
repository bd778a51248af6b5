"""The leaderboard: how much of the privacy-utility box each defense's frontier dominates.

Per attack, each defense label's Pareto frontier (:func:`privaudit.leaderboard.pareto.frontier`)
is scored by its **hypervolume**, defenses are ranked by it, and the overall standing is the
mean rank over the attacks a defense was scored on. Several run directories can be merged
first (:func:`merge_runs`), so a leaderboard can grow run by run.
"""

from __future__ import annotations

import html
import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.leaderboard.pareto import NONE, seed_means, with_labels

if TYPE_CHECKING:
    import pandas as pd

HYPERVOLUME_DEFINITION = (
    "Hypervolume: per attack, the area of the region dominated by a defense's frontier points "
    "inside the box privacy ∈ [0, 1] × utility ∈ [chance, 1], as a fraction of that box "
    "(1 = perfect privacy at perfect utility). Utility at or below the majority-class chance "
    "level contributes nothing; privacy is clipped to [0, 1]. For attacks whose privacy is a "
    "reconstruction MSE (embedding_mse), privacy is first divided by the largest MSE observed "
    "for that attack across all defenses. Seeds are averaged before frontiers are taken. Rank "
    "1 is the largest hypervolume (ties share the smallest rank, except that a defense whose "
    "releases equal the originals, replacement rate 0 at every point, ranks below a defense "
    "that changed the text and has the same score); the overall rank orders the mean rank over "
    "the attacks a defense was scored on, with the same tie rule. The undefended `none` is not "
    "ranked."
)

# Column -> header of the overall table, in display order.
OVERALL_HEADERS = {
    "rank": "rank",
    "label": "defense",
    "mean_rank": "mean rank",
    "n_attacks": "attacks",
    "mean_hypervolume": "mean hypervolume",
    "best_utility": "best utility",
    "guarantee": "guarantee",
    "s_per_1k_words": "s / 1k words",
}


@dataclass(frozen=True)
class Table:
    """A display table: headers and rows of already formatted strings."""

    headers: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Leaderboard:
    """Per-attack and overall standings (see :data:`HYPERVOLUME_DEFINITION`).

    ``per_attack``: one row per (attack, label) with ``hypervolume``, ``rank`` (nullable Int64;
    missing for ``none``), ``n_points``, ``n_frontier`` and ``privacy_scale`` (the MSE divisor,
    1 for other metrics). ``overall``: one row per label, ranked defenses first, ``none`` last
    with no rank (its ``best_utility`` is the undefended reference). ``notes``: caveats a
    reader should see beside the numbers (missing costs, normalised MSE axes, ...).
    """

    overall: pd.DataFrame
    per_attack: pd.DataFrame
    chance: float
    notes: tuple[str, ...] = ()

    def wide(self) -> pd.DataFrame:
        """The overall table with ``hypervolume[<attack>]`` and ``rank[<attack>]`` columns."""
        wide = self.overall.set_index("label")
        for attack, sub in self.per_attack.groupby("attack", sort=True):
            sub = sub.set_index("label")
            wide[f"hypervolume[{attack}]"] = sub["hypervolume"]
            wide[f"rank[{attack}]"] = sub["rank"]
        wide = wide.reset_index()
        return wide[["rank", "label", *[c for c in wide.columns if c not in ("rank", "label")]]]

    def tables(self) -> dict[str, Table]:
        """Formatted tables: ``overall`` and ``per attack`` (hypervolume with rank per attack)."""
        overall = Table(
            headers=list(OVERALL_HEADERS.values()),
            rows=[
                [_fmt(row[col], col) for col in OVERALL_HEADERS]
                for _, row in self.overall.iterrows()
            ],
        )
        attacks = sorted(self.per_attack["attack"].unique())
        cells = self.per_attack.set_index(["label", "attack"])
        rows = []
        for label in self.overall["label"]:
            row = [str(label)]
            for attack in attacks:
                if (label, attack) not in cells.index:
                    row.append("—")  # never scored: n/a or failed on this attack
                    continue
                cell = cells.loc[(label, attack)]
                rank = "ref" if label == NONE else str(cell["rank"])
                row.append(f"{cell['hypervolume']:.3f} ({rank})")
            rows.append(row)
        per_attack = Table(headers=["defense", *attacks], rows=rows)
        return {"overall": overall, "per attack": per_attack}


def hypervolume(
    privacy: Sequence[float] | np.ndarray,
    utility: Sequence[float] | np.ndarray,
    *,
    chance: float,
    privacy_scale: float = 1.0,
) -> float:
    """Fraction of the box privacy ∈ [0, 1] × utility ∈ [chance, 1] the points dominate.

    Privacy is divided by ``privacy_scale`` and clipped to [0, 1]; utility is mapped to
    ``(utility − chance) / (1 − chance)`` and clipped to [0, 1], so utility at or below chance
    adds nothing. The dominated region is the union of the rectangles [0, x] × [0, y] (the
    reference point is (privacy 0, utility chance)), computed by a sweep over decreasing
    privacy. Dominated points change nothing, so frontier points or all points give the same.
    """
    _check_chance(chance)
    if not privacy_scale > 0:
        raise ValueError(f"privacy_scale must be positive, got {privacy_scale!r}.")
    x = np.clip(np.asarray(privacy, float) / privacy_scale, 0.0, 1.0)
    y = np.clip((np.asarray(utility, float) - chance) / (1.0 - chance), 0.0, 1.0)
    if x.shape != y.shape:
        raise ValueError(f"privacy and utility differ in length: {x.shape} vs {y.shape}.")
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    area, best_y = 0.0, 0.0
    order = np.argsort(-x, kind="stable")
    for i, j in enumerate(order):
        best_y = max(best_y, float(y[j]))
        next_x = float(x[order[i + 1]]) if i + 1 < len(order) else 0.0
        area += (float(x[j]) - next_x) * best_y  # the strip between this x and the next
    return area


def _check_chance(chance: float) -> None:
    if chance is None or not np.isfinite(chance) or not 0.0 <= chance < 1.0:
        raise ValueError(
            f"The chance level must be a number in [0, 1), got {chance!r}. It is the "
            "majority-class accuracy that run.json records as chance_accuracy; pass it "
            "explicitly (e.g. `privaudit leaderboard --chance 0.5`) when run.json is missing."
        )


def leaderboard(frame: pd.DataFrame, chance: float) -> Leaderboard:
    """Rank the defense labels of a results table by the hypervolume of their frontiers.

    Per attack, each label's hypervolume is the fraction of the box privacy ∈ [0, 1] ×
    utility ∈ [chance, 1] its seed-averaged ok points dominate (see
    :data:`HYPERVOLUME_DEFINITION`; embedding-MSE privacy is divided by the largest MSE seen
    for that attack across defenses). Labels are ranked per attack (1 = best, ties share the
    smallest rank), then overall by their mean rank over the attacks they were scored on
    (``n_attacks``; a defense n/a on an attack is neither rewarded nor punished there). The
    undefended ``none`` is scored for reference but never ranked. Cost is privatization time in
    seconds per 1,000 words: ``privatize_seconds`` summed over defense points / ``n_words``
    summed × 1000 (NaN, with a note, when the results have no ``n_words``).

    Raises ``ValueError`` when ``chance`` is not in [0, 1) or no cell is ``ok``.
    """
    import pandas as pd

    _check_chance(chance)
    points = seed_means(frame)
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    for attack, sub in points.groupby("attack", sort=True):
        metric = str(sub["attack_metric"].iloc[0])
        scale = 1.0
        if metric == "embedding_mse":
            # MSE is unbounded: measure it against the most private point seen for this attack.
            top = float(sub["empirical_privacy"].max())
            scale = top if top > 0 else 1.0
            notes.append(
                f"{attack}: privacy is the embedding MSE divided by {scale:.4g}, the largest "
                "MSE observed for this attack."
            )
        for label, group in sub.groupby("label", sort=True):
            front = group[group["on_frontier"]]
            rows.append(
                {
                    "attack": attack,
                    "attack_metric": metric,
                    "label": label,
                    "defense": group["defense"].iloc[0],
                    "hypervolume": hypervolume(
                        front["empirical_privacy"],
                        front["utility"],
                        chance=chance,
                        privacy_scale=scale,
                    ),
                    "n_points": len(group),
                    "n_frontier": len(front),
                    "privacy_scale": scale,
                }
            )
    per_attack = pd.DataFrame(rows)
    identity = identity_labels(frame)
    for label in sorted(identity - {NONE}):
        notes.append(
            f"{label} changed no word at any privacy level (replacement rate 0): its releases "
            "are the original texts, so it protects nothing; it ranks below any defense it ties "
            "with."
        )
    ranked = per_attack["label"] != NONE
    # Rounded so that float noise in equal areas cannot break a tie.
    score = per_attack["hypervolume"].round(12).where(ranked)
    same = per_attack["label"].isin(identity)
    per_attack["rank"] = pd.concat(
        [_ranks(-score[idx], same[idx]) for idx in per_attack.groupby("attack").groups.values()]
    ).reindex(per_attack.index)
    overall = _overall(frame, per_attack, notes, identity)
    notes.append(f"Chance level (majority-class accuracy): {chance:.4g}.")
    return Leaderboard(overall=overall, per_attack=per_attack, chance=chance, notes=tuple(notes))


def identity_labels(frame: pd.DataFrame) -> set[str]:
    """Labels whose releases equal the originals: the undefended ``none``, and any defense whose
    every point with a measured replacement rate changed nothing (rate 0). Vector releases and
    results without the column have no rate (NaN), so they are never counted here."""
    labelled = with_labels(frame)
    found = set(labelled.loc[labelled["defense"] == NONE, "label"])
    if "replacement_rate" in labelled.columns:
        rate = labelled["replacement_rate"].astype(float)
        measured = labelled[np.isfinite(rate)].groupby("label")["replacement_rate"]
        found |= {str(label) for label, top in measured.max().items() if top == 0.0}
    return found


def _ranks(cost: pd.Series, identity: pd.Series) -> pd.Series:
    """Rank 1 = smallest ``cost``; equal costs share the smallest rank, except that an identity
    defense (``identity`` True) ranks below a real one of equal cost, so doing nothing never
    wins a tie. NaN cost (the unranked ``none``) gets no rank."""
    import pandas as pd

    c, same = cost.to_numpy(float), identity.to_numpy(bool)
    ok = np.isfinite(c)
    ranks = [
        1 + int(np.sum(ok & ((c < c[i]) | ((c == c[i]) & ~same & same[i])))) if ok[i] else pd.NA
        for i in range(len(c))
    ]
    return pd.Series(ranks, index=cost.index, dtype="Int64")


def _overall(
    frame: pd.DataFrame, per_attack: pd.DataFrame, notes: list[str], identity: set[str]
) -> pd.DataFrame:
    """One row per label: mean rank, attacks scored, mean hypervolume, utility, guarantee, cost."""
    import pandas as pd

    labelled = with_labels(frame)
    by_label = per_attack.groupby("label")
    overall = pd.DataFrame(
        {
            "defense": by_label["defense"].first(),
            "mean_rank": by_label["rank"].apply(lambda r: r.astype(float).mean()),
            "n_attacks": by_label.size(),
            "mean_hypervolume": by_label["hypervolume"].mean(),
        }
    )
    overall.loc[overall.index == NONE, "mean_rank"] = math.nan
    # A defense with no ok cell at all still gets a row (0 attacks), never a silent gap.
    unscored = sorted(set(labelled["label"]) - set(overall.index))
    if unscored:
        overall = overall.reindex([*overall.index, *unscored])
        overall["n_attacks"] = overall["n_attacks"].fillna(0).astype(int)
        defenses = labelled.groupby("label")["defense"].first()
        overall["defense"] = overall["defense"].fillna(defenses)
        notes.append(f"No ok cell, so not ranked: {', '.join(unscored)} (see the failures).")
    overall["is_identity"] = overall.index.isin(list(identity))
    overall["rank"] = _ranks(overall["mean_rank"].round(12), overall["is_identity"])
    # Utility does not depend on the attack: any row of a defense point carries it.
    util = labelled[np.isfinite(labelled["utility"].astype(float))]
    util = util.groupby(["label", "knob_value"], dropna=False)["utility"].mean()
    overall["best_utility"] = util.groupby(level="label").max()
    if "guarantee" in labelled.columns:
        overall["guarantee"] = (
            labelled.dropna(subset=["guarantee"]).groupby("label")["guarantee"].first()
        )
    else:
        overall["guarantee"] = ""
    overall["s_per_1k_words"] = _cost(labelled, notes)
    scored = overall.loc[(overall.index != NONE) & (overall["n_attacks"] > 0), "n_attacks"]
    if scored.nunique() > 1:
        counts = ", ".join(f"{label} {n}" for label, n in scored.sort_values().items())
        notes.append(
            "Defenses were scored on different numbers of attacks (the others are n/a for "
            f"them), so their mean ranks average over different attack sets: {counts}."
        )
    overall.index.name = "label"
    overall = overall.reset_index()
    overall["is_none"] = overall["label"] == NONE
    overall = overall.sort_values(
        ["is_none", "rank", "is_identity", "mean_hypervolume", "label"],
        ascending=[True, True, True, False, True],
    )
    return overall[list(OVERALL_HEADERS)].reset_index(drop=True)


def _cost(labelled: pd.DataFrame, notes: list[str]) -> pd.Series:
    """Seconds of privatization per 1,000 words, per label (NaN where n_words is unknown)."""
    import pandas as pd

    labels = labelled["label"].unique()
    if "n_words" not in labelled.columns or labelled["n_words"].isna().all():
        notes.append(
            "Cost (s / 1k words) is not available: these results have no n_words column "
            "(written by an older runner); re-run the grid to measure it."
        )
        return pd.Series(math.nan, index=labels)
    if "privatize_seconds" not in labelled.columns:
        notes.append("Cost (s / 1k words) is not available: no privatize_seconds column.")
        return pd.Series(math.nan, index=labels)
    # privatize_seconds and n_words repeat on every attack row of a defense point: count once.
    keys = [c for c in ("label", "knob_value", "seed", "defense_params") if c in labelled.columns]
    point = labelled.drop_duplicates(subset=keys, keep="last")
    point = point[
        np.isfinite(point["privatize_seconds"].astype(float))
        & np.isfinite(point["n_words"].astype(float))
    ]
    sums = point.groupby("label")[["privatize_seconds", "n_words"]].sum()
    cost = sums["privatize_seconds"] / sums["n_words"].where(sums["n_words"] > 0) * 1000.0
    unknown = sorted(set(labels) - set(cost.dropna().index))
    if unknown:
        notes.append(f"Cost (s / 1k words) unknown for {', '.join(unknown)} (no n_words).")
    return cost.reindex(labels)


def _fmt(value: Any, column: str = "") -> str:
    """Display form of a table value: '—' for missing, 3 decimals, costs with 3 significant."""
    import pandas as pd

    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "—"
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if column == "s_per_1k_words":
            return f"{value:.3g}"
        if column == "mean_rank":
            return f"{value:.2f}"
        return f"{value:.3f}"
    return str(value)


# ---- reading runs ----------------------------------------------------------------------------


def read_run(run_dir: str | Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A run directory's results table (parquet, else csv) and its run.json (``{}`` if absent).

    Raises ``FileNotFoundError`` naming the directory and what to do when there are no results.
    """
    from privaudit.audit.store import RunDir

    rd = RunDir(run_dir)
    return rd.read_results(), rd.read_meta()


def merge_runs(
    run_dirs: Iterable[str | Path], *, chance: float | None = None
) -> tuple[pd.DataFrame, float]:
    """Concatenate several runs' results; a later run's row replaces an earlier one's.

    Rows are de-duplicated on ``cell_key`` keeping the last (the key hashes everything that
    determines a cell, so a repeated cell is the same measurement, re-run). The chance level
    comes from the runs' run.json (``chance`` overrides it); runs on different corpora or with
    different chance levels are merged with a warning, using the highest chance level (the
    stricter box). Raises ``ValueError`` for no directories, a directory without results, or
    no chance level anywhere.
    """
    import pandas as pd

    dirs = [Path(d) for d in run_dirs]
    if not dirs:
        raise ValueError("No run directory given; pass one or more (reports/<run-id>/).")
    frames, chances = [], []
    for run_dir in dirs:
        frame, meta = read_run(run_dir)
        frames.append(frame)
        value = meta.get("chance_accuracy")
        if value is not None and np.isfinite(value):
            chances.append(float(value))
    merged = pd.concat(frames, ignore_index=True)
    if "cell_key" in merged.columns:
        keyed = merged["cell_key"].notna()
        unique = merged[keyed].drop_duplicates(subset="cell_key", keep="last")
        merged = pd.concat([unique, merged[~keyed]]).sort_index().reset_index(drop=True)
    if "corpus_fingerprint" in merged.columns:
        prints = merged["corpus_fingerprint"].dropna().unique()
        if len(prints) > 1:
            warnings.warn(
                f"The runs used {len(prints)} different corpora (corpus_fingerprint); their "
                "utilities and privacies are not measured on the same data.",
                stacklevel=2,
            )
    if chance is None:
        if not chances:
            raise ValueError(
                f"None of {', '.join(map(str, dirs))} has a run.json with chance_accuracy (an "
                "interrupted run writes none). Pass the majority-class accuracy with --chance."
            )
        if max(chances) - min(chances) > 1e-9:
            warnings.warn(
                f"The runs have different chance levels {sorted(set(chances))}; using the "
                f"highest, {max(chances):.4g}.",
                stacklevel=2,
            )
        chance = max(chances)
    return merged, float(chance)


# ---- writing ---------------------------------------------------------------------------------


def markdown_table(table: Table) -> str:
    """A GitHub-flavoured Markdown table (pipes in cells escaped)."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [
        "| " + " | ".join(cell(h) for h in table.headers) + " |",
        "|" + "|".join("---" for _ in table.headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in table.rows]
    return "\n".join(lines)


def html_table(table: Table, *, numeric_from: int = 1) -> str:
    """An HTML ``<table>``, every cell escaped; columns from ``numeric_from`` right-aligned
    where they look numeric."""

    def cell(tag: str, text: str, k: int) -> str:
        numeric = k >= numeric_from and _looks_numeric(text)
        cls = ' class="num"' if numeric else ""
        return f"<{tag}{cls}>{html.escape(text)}</{tag}>"

    head = "".join(cell("th", h, -1) for h in table.headers)
    thead = f"<thead><tr>{head}</tr></thead>\n" if table.headers else ""  # none: key/value
    body = "\n".join(
        "<tr>" + "".join(cell("td", c, k) for k, c in enumerate(row)) + "</tr>"
        for row in table.rows
    )
    # The wrapper scrolls a wide table sideways instead of widening the whole page.
    return f'<div class="scroll"><table>\n{thead}<tbody>\n{body}\n</tbody>\n</table></div>'


def _looks_numeric(text: str) -> bool:
    head = text.split(" ")[0]
    try:
        float(head)
    except ValueError:
        return head == "—"
    return True


TABLE_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem;
       color: #1d1d1f; max-width: 1200px; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border: 1px solid #d0d0d5; padding: 0.3rem 0.6rem; text-align: left; }
th { background: #f2f2f5; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.scroll { overflow-x: auto; max-width: 100%; }
tbody tr:nth-child(even) { background: #fafafc; }
.note { color: #555; font-size: 0.9rem; }
"""


def leaderboard_html_body(board: Leaderboard) -> str:
    """The leaderboard's tables, notes and definition as an HTML fragment (no page around it)."""
    tables = board.tables()
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in board.notes)
    return (
        "<h3>Overall</h3>\n"
        + html_table(tables["overall"], numeric_from=0)
        + "\n<h3>Hypervolume (rank) per attack</h3>\n"
        + html_table(tables["per attack"])
        + f'\n<ul class="note">{notes}</ul>\n'
        + f'<p class="note">{html.escape(HYPERVOLUME_DEFINITION)}</p>\n'
    )


def write_leaderboard(board: Leaderboard, out_dir: str | Path) -> list[Path]:
    """Write leaderboard.md, leaderboard.csv (overall plus per-attack columns) and
    leaderboard.html (a plain standalone page) into ``out_dir``; return their paths."""
    from privaudit.audit.store import RunDir, write_atomic, write_text

    rd = RunDir(out_dir).create()
    tables = board.tables()
    md = write_text(
        rd.leaderboard("md"),
        "# privaudit leaderboard\n\n## Overall\n\n"
        + markdown_table(tables["overall"])
        + "\n\n## Hypervolume (rank) per attack\n\n"
        + markdown_table(tables["per attack"])
        + "\n\n"
        + "".join(f"- {n}\n" for n in board.notes)
        + f"\n{HYPERVOLUME_DEFINITION}\n",
    )
    csv = write_atomic(rd.leaderboard("csv"), lambda p: board.wide().to_csv(p, index=False))
    page = write_text(
        rd.leaderboard("html"),
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        "<title>privaudit leaderboard</title>\n"
        f"<style>{TABLE_CSS}</style>\n</head>\n<body>\n<h1>privaudit leaderboard</h1>\n"
        + leaderboard_html_body(board)
        + "</body>\n</html>\n",
    )
    return [md, csv, page]
