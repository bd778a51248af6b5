"""False alarms of the guarantee audit (issue 37): correct t2t, pct2t, dpnr and cape at two
levels each over many seeds; prints the share flagged "violated" per defense and level (must
stay <= α) and the verdicts seen.

    .venv/bin/python benchmarks/guarantee_false_alarms_37.py [seeds] [backbone]
"""

from __future__ import annotations

import sys
import time
from collections import Counter

from privaudit.audit.guarantee_audit import Sizes, audit_levels

LEVELS = {"t2t": [5.0, 50.0], "pct2t": [5.0, 50.0], "dpnr": [1.0, 3.0], "cape": [3.0, 10.0]}
SIZES = Sizes(release=300, noise=20_000, laplace=2000, release_cap=5000, laplace_cap=10_000)


def main(seeds: int, backbone: str | None) -> None:
    for name, levels in LEVELS.items():
        counts: dict[float, Counter[str]] = {v: Counter() for v in levels}
        t0 = time.perf_counter()
        for seed in range(seeds):
            for r in audit_levels(name, levels, backbone=backbone, seed=seed, sizes=SIZES):
                counts[float(r.knob_value or 0)][r.verdict] += 1
                if r.verdict == "violated":
                    print("  FALSE ALARM:", r.line(), flush=True)
        for v, c in counts.items():
            print(
                f"{name} {v:g}: violated {c['violated']}/{seeds} "
                f"({c['violated'] / seeds:.1%}); {dict(c)}",
                flush=True,
            )
        print(f"  {name}: {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 25, sys.argv[2] if len(sys.argv) > 2 else None)
