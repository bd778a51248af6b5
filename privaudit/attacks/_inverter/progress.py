"""The one-time pre-training's progress: a bar with an ETA, or a line every half minute."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Stage:
    """A step of the pre-training that :class:`PretrainProgress` follows: ``rows`` per epoch
    (texts encoded, pairs trained on, documents decoded), ``epochs`` of them, and what the
    logs call it."""

    name: str
    rows: int
    epochs: int = 1
    unit: str = "documents"
    doing: str = ""  # the log's verb phrase ("" : the name)

    @property
    def weight(self) -> float:
        """Seconds a row costs relative to a decoder training pair (:data:`STAGE_COST`)."""
        return STAGE_COST.get(self.name, 1.0)


#: Relative cost per row of each pre-training stage, against a decoder training pair (a
#: public text: 17 pieces on average), so the ETA weighs what is left by what it costs: an
#: encoded piece, a document decoded and re-encoded, a corrector pair (a whole document,
#: its memory holding the guess). Measured on two quiet CPU cores, default inverter: 80 s to
#: encode 663,549 pieces, 120 s a decoder epoch of 34,024 pairs, 50 s to decode and re-encode
#: 8,000 documents, 65 s a corrector epoch of 7,600 (2026-11-27).
STAGE_COST = {"encoding": 0.034, "decoder": 1.0, "decoding": 1.8, "corrector": 2.4}


class PretrainProgress:
    """The one-time pre-training's progress through its :class:`Stage` s: a bar with an ETA
    on the terminal (``progress`` True), else a line on stderr every :data:`LOG_EVERY`
    seconds (``--no-progress`` logs) with the stage, its epoch and rows, the time elapsed
    and the time left. The ETA extrapolates the cost-weighted rate so far
    (:data:`STAGE_COST`) over the weighted rows left."""

    def __init__(self, stages: list[Stage], progress: bool | None) -> None:
        from tqdm.auto import tqdm

        self.stages = {st.name: st for st in stages}
        self.total = sum(st.rows * st.epochs * st.weight for st in stages)
        self.done = 0.0
        self.start = self.last_log = time.perf_counter()
        self.current: Stage | None = None
        self.stage_done = 0
        self.bar: Any = None
        if progress:
            self.bar = tqdm(
                total=round(self.total),
                desc="pre-training the inverter",
                unit="pair",
                leave=False,
                file=sys.stderr,
            )

    def say(self, what: str) -> None:
        line = f"privaudit: pre-training the inverter (once; cached after): {what}"
        if self.bar is None:
            print(line, file=sys.stderr, flush=True)
        else:
            self.bar.write(line, file=sys.stderr)

    def stage(self, name: str) -> Callable[[int], None]:
        """Start stage ``name``; returns its ``advance(rows)``."""
        self.current, self.stage_done = self.stages[name], 0
        return self.advance

    def where(self) -> str:
        st = self.current
        assert st is not None
        if st.epochs > 1:
            epoch = min(st.epochs, max(self.stage_done - 1, 0) // max(st.rows, 1) + 1)
            return f"{st.doing or st.name} epoch {epoch}/{st.epochs}, " + (
                f"{self.stage_done - (epoch - 1) * st.rows:,}/{st.rows:,} {st.unit}"
            )
        return f"{st.doing or st.name} {self.stage_done:,}/{st.rows:,} {st.unit}"

    def advance(self, rows: int) -> None:
        assert self.current is not None
        self.stage_done += rows
        step = rows * self.current.weight
        self.done += step
        now = time.perf_counter()
        if self.bar is not None:
            self.bar.set_postfix_str(self.where(), refresh=False)
            self.bar.update(step)
        elif now - self.last_log >= LOG_EVERY:
            self.last_log = now
            elapsed = now - self.start
            left = elapsed / self.done * (self.total - self.done)
            print(
                f"privaudit: pre-training the inverter: {self.where()}; {_clock(elapsed)} "
                f"elapsed, about {_clock(left)} left",
                file=sys.stderr,
                flush=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


#: Seconds between two progress lines of a pre-training run without a progress bar.
LOG_EVERY = 30.0


def _clock(seconds: float) -> str:
    m, s = divmod(round(seconds), 60)
    return f"{m // 60}:{m % 60:02d}:{s:02d}" if m >= 60 else f"{m}:{s:02d}"
