"""Refresh the shipped reference cost book (``privaudit/data/costs/reference.json``) from a
measured ``costs.json``: the first estimate on a fresh machine scales it by that machine's
speed (:mod:`privaudit.runtime.costs`).

Run it on the machine whose costs it copies, right after a quiet, complete run (the quick
grid, with the inverter pre-trained in the same sitting), so that its speed score, measured
now (the median of 15 readings a second apart: the machine's usual pace), matches the costs:

    .venv/bin/python benchmarks/reference_costs.py --from ~/.cache/privaudit/costs.json

``--machine TAG`` copies another section of the file (then pass ``--score`` measured on that
machine: ``python -c "from privaudit.runtime.costs import typical_score; print(
typical_score())"``); ``--timings`` names the pre-training rate file (default
``inverters/timings.json`` beside the costs); ``--out`` writes elsewhere than the package.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from privaudit.runtime.costs import SHIPPED, write_reference


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--from",
        dest="costs",
        type=Path,
        required=True,
        help="a measured costs.json (read, never changed)",
    )
    parser.add_argument("--machine", help="its section to copy (default: this machine's tag)")
    parser.add_argument("--score", type=float, help="that machine's speed score, seconds")
    parser.add_argument("--timings", type=Path, help="the inverter's timings.json")
    parser.add_argument("--out", type=Path, default=SHIPPED, help=f"default {SHIPPED}")
    args = parser.parse_args(argv)
    ref = write_reference(
        args.costs.expanduser(),
        args.out,
        machine=args.machine,
        score=args.score,
        timings=args.timings.expanduser() if args.timings else None,
    )
    rate = ref.pretrain_rate
    pretrain = "none" if rate is None else f"{rate:.4g} s per weighted pair"
    print(
        f"{args.out}: {len(ref.entries)} entries of {ref.machine} ({ref.device}), speed "
        f"score {ref.score:.4g} s, inverter pre-training {pretrain}"
    )


if __name__ == "__main__":
    main()
