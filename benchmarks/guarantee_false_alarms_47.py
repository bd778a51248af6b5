"""False alarms of the guarantee audit after issue 47: the built-in Laplace step (dpnr at
Δ = 1 and Δ = d, the documented whole-vector setting; cape) and d_X mechanisms (t2t's word
replacement, embedding-dx's noisy hidden states) at two levels each over many seeds. Prints,
per defense and level, the share flagged "violated" (must stay <= α), its exact 95 % upper
bound, the verdicts seen and any false alarm's line.

    .venv/bin/python benchmarks/guarantee_false_alarms_47.py [seeds] [backbone]
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

from scipy.stats import beta

from privaudit.audit.guarantee_audit import Sizes, audit_levels
from privaudit.models.backbone import backbone as load_backbone

SIZES = Sizes(release=300, noise=20_000, laplace=2000, release_cap=5000, laplace_cap=10_000)


def settings(dim: int) -> list[tuple[str, list[float], dict[str, Any]]]:
    """(defense, its two levels, extra parameters)."""
    return [
        ("dpnr", [1.0, 3.0], {}),
        ("dpnr", [1.0, 3.0], {"sensitivity": float(dim)}),
        ("cape", [3.0, 10.0], {"sensitivity": 7.3}),
        ("t2t", [5.0, 50.0], {}),
        ("embedding-dx", [50.0, 100.0], {}),
    ]


def main(seeds: int, bb: str | None) -> None:
    dim = load_backbone(bb).dim
    for name, levels, params in settings(dim):
        counts: dict[float, Counter[str]] = {v: Counter() for v in levels}
        t0 = time.perf_counter()
        for seed in range(seeds):
            found = audit_levels(name, levels, params=params, backbone=bb, seed=seed, sizes=SIZES)
            for r in found:
                counts[float(r.knob_value or 0)][r.verdict] += 1
                if r.verdict == "violated":
                    print("  FALSE ALARM:", r.line(), flush=True)
        for v, c in counts.items():
            k = c["violated"]
            upper = float(beta.ppf(0.95, k + 1, seeds - k)) if k < seeds else 1.0
            print(
                f"{name} {params or ''} {v:g}: violated {k}/{seeds} ({k / seeds:.1%}, "
                f"95 % upper {upper:.1%}); {dict(c)}",
                flush=True,
            )
        print(f"  {name}: {time.perf_counter() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 25, sys.argv[2] if len(sys.argv) > 2 else None)
