"""The progress of a run's stages after the grid (fit-noise refits, the strength curve): a
bar on a terminal, else one line per finished step, so a ``--no-progress`` log is never
silent for the minutes a stage takes."""

from __future__ import annotations

import sys
import time
from typing import Any

from privaudit.audit.estimate import duration


class StageProgress:
    """``total`` steps of stage ``desc`` (``unit`` each): :meth:`step` before one starts
    (what it is), :meth:`advance` after. With ``progress`` a tqdm bar; without, a line per
    advance on stderr: the stage, steps done, what just finished, elapsed time and the ETA,
    extrapolated from the stage's own pace."""

    def __init__(self, desc: str, total: int, unit: str, *, progress: bool) -> None:
        from tqdm.auto import tqdm

        self.desc, self.total, self.unit = desc, total, unit
        self.done, self.what = 0, ""
        self.started = time.perf_counter()
        self.bar: Any = tqdm(total=total, desc=desc, unit=unit, disable=not progress or not total)
        self.lines = not progress and total > 0

    def step(self, what: str) -> None:
        self.what = what
        self.bar.set_postfix_str(what, refresh=True)

    def advance(self, n: int = 1) -> None:
        self.done += n
        self.bar.update(n)
        if self.lines:
            print(self.line(), file=sys.stderr, flush=True)

    def line(self) -> str:
        elapsed = time.perf_counter() - self.started
        left = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        return (
            f"privaudit: {self.desc} {self.done}/{self.total} {self.unit}s done ({self.what}) · "
            f"elapsed {duration(elapsed)} · ETA {duration(left)}"
        )

    def close(self) -> None:
        self.bar.close()
