"""The planted-bug table of the guarantee audit (issue 37): every plant of
``tests/guarantee_plants.py`` at the quick grid's knob values and a small one, one row each
(verdict, the test that decided it, its bound and claim, the ceiling and the draws needed).

    .venv/bin/python benchmarks/guarantee_plants_table.py [backbone]
"""

from __future__ import annotations

import sys
import time

from privaudit.audit.guarantee_audit import audit_guarantee
from tests.guarantee_plants import PLANTS


def main(backbone: str | None) -> None:
    print("| plant | bug | level | verdict | test | lower bound | claimed | ceiling | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cls, bug, quick, small in PLANTS:
        base = cls(backbone=backbone)
        for value in (small, *quick):
            t0 = time.perf_counter()
            result = audit_guarantee(base.with_knob(value), seed=0)
            e = result.best
            row = (
                cls.name,
                bug,
                f"{base.knob}={value:g}",
                result.verdict
                + (
                    f" (n = {result.draws:,}, needs ≈ {result.needed:.2g})"
                    if result.verdict == "untestable"
                    else ""
                ),
                e.test if e else "",
                f"{e.lower:.3g}" if e else "",
                f"{e.claimed:.3g}" if e else "",
                f"{result.ceiling:.3g}",
                f"{time.perf_counter() - t0:.1f}",
            )
            print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
