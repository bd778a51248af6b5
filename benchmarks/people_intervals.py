"""Document against person bootstrap on a stored run (issue 46): the intervals the board's own
code gives each statistic when it resamples documents and when it resamples people.

    .venv/bin/python -m benchmarks.people_intervals RUN_DIR [RESAMPLES] [AUTHORS_JSON]

``AUTHORS_JSON`` (a list of each test document's author, in victim order) gives the people of a
run stored before runs recorded their unit; without it the run's own ``unit`` is used.

Prints, per attack row at the undefended point and at each other point of the first defense,
the score with both intervals and the width ratio, then the paired differences none − other
point for every attack row (separated or not under each bootstrap)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace

from privaudit.metrics.outcomes import interval
from privaudit.metrics.stats import run_stats
from privaudit.metrics.units import Units
from privaudit.outputs.runs import load_runs
from privaudit.registry import attack_fit_sds


def main(run_dir: str, resamples: int = 2000, authors: str | None = None) -> None:
    runs = load_runs([run_dir])
    frame = runs.frame[runs.frame["status"] == "ok"].reset_index(drop=True)
    person = replace(runs.bootstrap, resamples=resamples)
    if authors is not None:
        with open(authors, encoding="utf-8") as f:
            person = replace(person, units=Units.of_authors(json.load(f)))
    boots = {"documents": replace(person, units=None), "people": person}
    units = person.units
    print(f"{run_dir}: {units.label() if units else 'no units recorded'}; {resamples} resamples")
    stats = {
        k: run_stats(frame, runs.outcomes, b, fit_sd=attack_fit_sds(frame["attack"]))
        for k, b in boots.items()
    }
    label = (
        frame["label"].astype(str)
        + " "
        + frame["knob_value"].map(lambda v: "" if v != v else f"{v:g}")
        + " · "
        + frame["attack"].astype(str)
    )
    print("| statistic | score | document bootstrap | person bootstrap | width ratio |")
    print("|---|---|---|---|---|")
    for r in range(len(frame)):
        d = interval(stats["documents"].score[r])
        p = interval(stats["people"].score[r])
        ratio = (p[1] - p[0]) / (d[1] - d[0]) if d[1] > d[0] else float("nan")
        print(
            f"| {label[r]} | {frame.at[r, 'attack_score']:.3f} | [{d[0]:.3f}, {d[1]:.3f}] "
            f"| [{p[0]:.3f}, {p[1]:.3f}] | {ratio:.1f}x |"
        )
    print("\n| paired: none − point | difference | document bootstrap | person bootstrap |")
    print("|---|---|---|---|")
    none = frame.index[frame["defense"] == "none"]
    for r in none:
        others = frame.index[
            (frame["attack"] == frame.at[r, "attack"]) & (frame["defense"] != "none")
        ]
        for o in others:
            cells = []
            for k in ("documents", "people"):
                s = stats[k].score
                lo, hi = interval(s[r] - s[o])
                sep = "separated" if lo > 0 or hi < 0 else "not separated"
                cells.append(f"[{lo:+.3f}, {hi:+.3f}] {sep}")
            diff = frame.at[r, "attack_score"] - frame.at[o, "attack_score"]
            print(
                f"| {frame.at[r, 'attack']}: none − {label[o].split(' · ')[0]} | {diff:+.3f} | "
                f"{cells[0]} | {cells[1]} |"
            )


if __name__ == "__main__":
    main(
        sys.argv[1],
        int(sys.argv[2]) if len(sys.argv) > 2 else 2000,
        sys.argv[3] if len(sys.argv) > 3 else None,
    )
