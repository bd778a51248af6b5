"""Peak resident memory per component of the quick grid (issue 50): a grid of the quick
preset's every attack and service at ``none``, ``t2t`` η 75 and ``rapt`` η 75 (the heaviest
service) on its corpus, run with ``--jobs 1 --fresh`` in its own process with
``PRIVAUDIT_MEMORY_LOG`` set (:mod:`privaudit.runtime.memory`): each component's peak RSS,
the RSS it leaves behind and the tensor storage still reachable after it.

Target: no component's peak above :data:`TARGET_MB` (the quick grid's peak, ``--jobs 1``,
is the largest of them: nothing runs beside a cell). ``extra_info`` holds the table; run with
``make bench``. Minutes: a pre-trained inverter in the cache (``privaudit pretrain``) is
assumed, as after a first ``make run``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TARGET_MB = 4096.0
POINTS = {"none": None, "t2t": [75], "rapt": [75]}


def _config(path: Path) -> Path:
    from privaudit.audit.presets import PRESETS

    config = dict(PRESETS["quick"])
    config["name"] = "memory-benchmark"
    defenses = []
    for d in config["defenses"]:
        if d["name"] in POINTS:
            levels = POINTS[d["name"]]
            defenses.append(dict(d) | ({"knob_values": levels} if levels else {}))
    config["defenses"] = defenses
    path.write_text(json.dumps(config))
    return path


def test_peak_rss_per_component_of_the_quick_grid(benchmark, tmp_path: Path) -> None:
    log = tmp_path / "memory.jsonl"
    args = [
        sys.executable,
        "-m",
        "privaudit.cli",
        "run",
        "--config",
        str(_config(tmp_path / "c.json")),
    ]
    args += ["--jobs", "1", "--fresh", "--no-progress", "--run-dir", str(tmp_path / "run")]
    env = dict(os.environ) | {"PRIVAUDIT_MEMORY_LOG": str(log)}

    def run() -> None:
        subprocess.run(args, env=env, check=True, capture_output=True)

    benchmark.pedantic(run, rounds=1, iterations=1)
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    table = {f"{r['point']} · {r['component']}": round(r["peak_mb"]) for r in rows}
    benchmark.extra_info["peak_mb"] = table
    benchmark.extra_info["left_mb"] = {
        f"{r['point']} · {r['component']}": round(r["rss_mb"]) for r in rows
    }
    worst = max(rows, key=lambda r: r["peak_mb"])
    print("\n| point · component | peak MB | left MB | tensors MB |\n|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['point']} · {r['component']} | {r['peak_mb']:.0f} | {r['rss_mb']:.0f} "
            f"| {r['tensors_mb'] or 0:.0f} |"
        )
    assert worst["peak_mb"] <= TARGET_MB, worst
