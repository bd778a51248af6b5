"""The first estimate on a fresh machine: shipped reference costs, scaled to this machine.

Before a machine has measured anything (an empty ``costs.json`` section, no inverter
``timings.json``), the estimate prices components from the **reference cost book** shipped in
the package (``privaudit/data/costs/reference.json``): per-component rates measured on one
machine by a whole run, in the keys of :class:`privaudit.audit.estimate.CostBook`, with that
machine's **speed score** and its inverter pre-training rate. This machine's own score (a
fixed, model-free workload shaped like a BERT-sized encoder's feed-forward layers, timed in
about a second at each run's start) divided by the reference's is the **speed ratio** that
scales every reference rate: ×2 on a machine half as fast. The reference is used only on
the device kind it was measured on (a GPU's matmul speed says little about a CPU-measured
grid, and the reverse).

**Measured at each run's start, never reused.** The score says how fast this machine is *now*:
a score taken while a test suite ran read "×8.2 slower" and, kept in the cache, priced a grid
started half an hour later on a quiet machine at 2.2 h (it took 42 min). So every run (and
every ``--estimate``) measures its own, once, at its first use (:func:`run_score`), and the
measurements a run files carry the score they were made under: a rate measured under load is
rescaled by the score of the run that reads it (:class:`privaudit.audit.estimate.CostBook`).
``speed.json`` keeps the latest score with the load average it was taken under, for the
record; nothing reads it to price a run.

**A quiet reading is the machine's usual pace.** On a shared host the pace moves over seconds:
twenty quiet readings a second apart spanned 0.074-0.150 s (2×), while the real work's pace
over an hour stays within a few percent across days. So a score inside
:data:`QUIET_SPREAD` of the reference's typical score (:func:`typical_score`: the median of
spaced readings, what the shipped book is written with) reads as that typical score, and a
ratio between two quiet readings is 1 (:func:`score_ratio`); a score beyond it (a busy
machine, or a different one) is taken as measured.

Lookup order, most to least specific: this machine's measurements → reference × ratio → the
class's ``cost_prior`` (:mod:`privaudit.audit.estimate`); the same for pre-training
(:func:`pretrain_rate`). A missing or unreadable reference falls back to the priors (a
warning for an unreadable one). ``benchmarks/reference_costs.py`` (:func:`write_reference`)
refreshes the shipped file from a measured ``costs.json`` after a quiet run.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import math
import os
import platform
import statistics
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit.runtime.cache import cache_dir, cache_writable
from privaudit.runtime.devices import current_device, run_thread_count, torch_threads, use_device
from privaudit.runtime.memo import digest

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "costs" / "reference.json"
FORMAT = 1
SPEED_FILE = "speed.json"
#: The pre-training rate's key in a book and in ``inverters/timings.json``: seconds per
#: cost-weighted pair, the unit the pre-training's own progress counts in. (Older files
#: kept seconds per public document and epoch, blind to the sentences, the lengths and the
#: stages: a rate measured on 795 short comments priced 34,451 review texts at a fifth of
#: their cost. They are ignored.)
PRETRAIN_KEY = "pretrain_seconds_per_pair"
#: A ratio outside these bounds is a score taken while something else swamped the machine
#: (or a broken timer), not a machine 100× slower: the estimate keeps a sane scale.
RATIO_BOUNDS = (0.1, 10.0)
#: A score within this factor of the machine's typical one is that machine at its usual pace.
#: On the two-core machines here, twenty quiet readings a second apart spanned 0.074-0.150 s
#: around a median of 0.092 s (0.80-1.63×); windows of 2.5 s spanned 0.079-0.140 s. The real
#: work moves less over an hour (a quick grid's pre-training rate: within 6 % across days).
#: A single busy process beside a run read 1.8× and slowed an encoder 2.6×; three read 2.9×.
QUIET_SPREAD = 1.7
#: The speed workload: tokens × hidden width × feed-forward width, layers, timed repeats.
_TOKENS, _HIDDEN, _FFN, _LAYERS, _REPEATS = 1024, 768, 3072, 2, 9

_SCORES: dict[str, float] = {}  # machine -> score measured by this process


def machine_tag() -> str:
    """This machine's section of the book: measurements on a cluster node or a laptop are
    never mixed with these, nor a GPU's (``--device``) with the CPU's."""
    tag = f"{platform.system()}-{platform.machine()}-{os.cpu_count() or 1}cpu"
    device = current_device()
    return tag if device == "cpu" else f"{tag}-{device}"


def _device_kind(device: str) -> str:
    return device.split(":")[0]  # cuda:1 prices like cuda


def _entry_rate(entries: dict[str, dict[str, float]], keys: Sequence[str]) -> float | None:
    """Seconds per unit of the first of ``keys`` with units (the book's entry format)."""
    for key in keys:
        entry = entries.get(key)
        if entry and entry["units"] > 0:
            return entry["seconds"] / entry["units"]
    return None


@dataclass(frozen=True)
class Reference:
    """A reference cost book: one machine's measured rates and its speed score."""

    entries: dict[str, dict[str, float]]
    score: float  # seconds of the speed workload on the reference machine
    device: str  # the device kind its costs were measured on
    #: Inverter pre-training, seconds per cost-weighted pair
    #: (:func:`privaudit.attacks._inverter.pretraining.work`) at :attr:`score`.
    pretrain_rate: float | None
    machine: str = ""
    #: Names this book's contents: a machine's measurements are kept under the stamp of the
    #: reference they were made beside (:class:`privaudit.audit.estimate.CostBook`).
    stamp: str = ""

    def rate(self, keys: Sequence[str]) -> float | None:
        return _entry_rate(self.entries, keys)

    @classmethod
    def read(cls, path: Path) -> Reference:
        """The book at ``path``; ``OSError``/``ValueError`` (and kin) when it cannot be used."""
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"not a privaudit reference cost file of format {FORMAT}")
        entries = {
            str(k): {f: float(v[f]) for f in ("seconds", "units", "n")}
            for k, v in data["entries"].items()
        }
        score = float(data["score"])
        if not (math.isfinite(score) and score > 0):
            raise ValueError(f"speed score {score} is not a positive number of seconds")
        pretrain = data.get(PRETRAIN_KEY)  # an older book's per-document rate: none
        stamp = digest([json.dumps(entries, sort_keys=True), score])[:12]
        return cls(
            entries,
            score,
            _device_kind(str(data["device"])),
            None if pretrain is None else float(pretrain),
            str(data.get("machine", "")),
            stamp,
        )


def load_reference(path: Path | None = None) -> Reference | None:
    """The reference book at ``path`` (default :data:`SHIPPED`; each read once per process);
    None when it is missing or unreadable (a warning: the estimate falls back to priors)."""
    return _load(Path(path) if path is not None else SHIPPED)


@functools.lru_cache(maxsize=8)
def _load(path: Path) -> Reference | None:
    try:
        return Reference.read(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        warnings.warn(
            f"ignoring the unreadable reference cost file {path} ({type(exc).__name__}: "
            f"{exc}); a machine with no measurements is estimated from priors",
            stacklevel=4,
        )
        return None


class ScaledReference:
    """A reference book priced for this machine: its rates × :func:`speed_ratio`, the ratio
    of this run's score (:func:`run_score`, measured at its first use: an estimate that needs
    no reference rate runs no workload)."""

    def __init__(self, reference: Reference, score: RunScore | None = None) -> None:
        self.reference = reference
        self.score = score if score is not None else run_score()
        self._ratio: float | None = None

    @property
    def ratio(self) -> float:
        if self._ratio is None:
            self._ratio = speed_ratio(self.reference.score, self.score)
        return self._ratio

    def rate(self, keys: Sequence[str]) -> float | None:
        rate = self.reference.rate(keys)
        return None if rate is None else rate * self.ratio


def reference_stamp() -> str:
    """The shipped reference's :attr:`Reference.stamp` ("" without one): a new release ships a
    new reference with its code, and measurements made by the old code stop counting."""
    reference = load_reference()
    return reference.stamp if reference is not None else ""


def scaled_reference(
    path: Path | None = None, score: RunScore | None = None
) -> ScaledReference | None:
    """The shipped reference for this machine, scaled by ``score`` (default: this run's,
    :func:`run_score`); None without one, or on another device kind."""
    reference = load_reference(path)
    if reference is None or reference.device != _device_kind(current_device()):
        return None
    return ScaledReference(reference, score)


class RunScore:
    """One run's speed score: measured (:func:`speed_score` ``fresh``) at its first use and
    kept for the run, so a run's estimate, its reference ratio and the score its measurements
    are filed under agree. ``value``: seconds of the speed workload."""

    def __init__(self, value: float | None = None) -> None:
        self._value = value

    @property
    def value(self) -> float:
        if self._value is None:
            self._value = speed_score(fresh=True)
        return self._value

    @property
    def measured(self) -> bool:
        return self._value is not None


_RUN: list[RunScore] = []


def run_score(*, new: bool = False) -> RunScore:
    """The current run's :class:`RunScore`; ``new``: a run starts (``privaudit run``, an
    ``--estimate``), and measures its own score at its first use."""
    if new or not _RUN:
        _RUN[:] = [RunScore()]
    return _RUN[0]


def measure_score() -> float:
    """Seconds of a fixed workload: ``_LAYERS`` feed-forward blocks of a BERT-sized encoder
    (768 → 3072 → 768, GELU, layer norm) over 1,024 tokens, no model loaded; the median of
    ``_REPEATS`` after a warm-up.

    The median, not the best: on a shared host the best of three read 0.071-0.132 s over 15
    quiet rounds a few seconds apart (1.9×), while an encoder pass over 256 texts in the
    same rounds read 0.75-1.16 s (1.6×): the machine's pace moves over seconds, and the
    best reading kept its luckiest moment. A reference scored at such a moment priced every
    later run on the same machine 1.6× too slow (the quiet estimate of 86 min for a 52 min
    grid)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    device = current_device()
    x = torch.randn(_TOKENS, _HIDDEN, generator=gen).to(device)
    w1 = (torch.randn(_HIDDEN, _FFN, generator=gen) / _HIDDEN**0.5).to(device)
    w2 = (torch.randn(_FFN, _HIDDEN, generator=gen) / _FFN**0.5).to(device)
    times: list[float] = []
    # With the threads the models run with (OMP_NUM_THREADS, else every core): a run on one
    # thread scored on two filed its single-thread costs under a two-thread score, and the
    # next run's estimate read them as a slow machine's.
    with torch.no_grad(), torch_threads(run_thread_count()):
        for _ in range(_REPEATS + 1):  # one more: the first pays allocation and warm-up
            start = time.perf_counter()
            h = x
            for _ in range(_LAYERS):
                h = torch.nn.functional.layer_norm(
                    h + torch.nn.functional.gelu(h @ w1) @ w2, (_HIDDEN,)
                )
            float(h.sum())  # waits for an asynchronous device
            times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def _speed_path() -> Path | None:
    with contextlib.suppress(OSError, ValueError):  # no usable cache: measured, not kept
        return cache_dir() / SPEED_FILE
    return None


def _read_scores(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(k): float(v) for k, v in data["machines"].items() if float(v) > 0}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}  # absent or unreadable: measured again and rewritten


def _write_atomic(path: Path, data: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def speed_score(*, fresh: bool = False) -> float:
    """This machine's speed score (:func:`measure_score`) in this process: measured at the
    first call (``fresh``: again), never read back from another process, whose machine may
    have been busier or quieter. The latest score is written to ``speed.json`` with the load
    average it was taken under, for the record."""
    machine = machine_tag()
    if not fresh and machine in _SCORES:
        return _SCORES[machine]
    score = measure_score()
    _SCORES[machine] = score
    path = _speed_path()
    if path is not None and cache_writable():
        load = None
        with contextlib.suppress(OSError, AttributeError):  # no load average on Windows
            load = round(os.getloadavg()[0], 2)
        with contextlib.suppress(OSError, ValueError):  # a record: never a run's failure
            _write_atomic(
                path,
                {
                    "format": FORMAT,
                    "machines": _read_scores(path) | {machine: score},
                    "load": {machine: load},
                },
            )
    return score


def score_ratio(now: float, then: float, typical: float | None = None) -> float:
    """How much longer work takes at speed score ``now`` than at ``then`` (>1: slower),
    within :data:`RATIO_BOUNDS`: what rescales a reference rate, a measurement filed under
    another run's score, and a pre-training rate. Each score inside the quiet spread of
    ``typical`` (default: the shipped reference's, on its device kind) reads as ``typical``
    (:func:`quiet_or_busy`): two quiet readings are the same pace."""
    if typical is None:
        reference = load_reference()
        if reference is not None and reference.device == _device_kind(current_device()):
            typical = reference.score
    if typical is not None:
        now, then = quiet_or_busy(now, typical), quiet_or_busy(then, typical)
    low, high = RATIO_BOUNDS
    return min(high, max(low, now / then))


def quiet_or_busy(score: float, typical: float) -> float:
    """``typical`` when ``score`` lies within :data:`QUIET_SPREAD` of it either way (the
    machine at its usual pace, read at a lucky or unlucky second), else ``score`` itself (a
    machine that is busy, or another machine)."""
    return typical if typical / QUIET_SPREAD <= score <= typical * QUIET_SPREAD else score


def typical_score(readings: int = 15, pause: float = 1.0) -> float:
    """The median of ``readings`` scores ``pause`` seconds apart: a machine's usual pace, for
    the reference book (one reading can land on a fast or a slow few seconds)."""
    values = []
    for i in range(readings):
        if i:
            time.sleep(pause)
        values.append(measure_score())
    return statistics.median(values)


def speed_ratio(reference_score: float, score: RunScore | None = None) -> float:
    """How much longer this machine takes than the reference machine (>1: slower) at
    ``score`` (default: this run's): :func:`score_ratio` around the reference's score."""
    value = (score if score is not None else run_score()).value
    return score_ratio(value, reference_score, reference_score)


def pretrain_rate(timings: Path, prior: float) -> float:
    """Seconds per cost-weighted pair of the inverter's pre-training here, now: the rate
    measured in ``timings`` (``{PRETRAIN_KEY: ..., "score": ...}``) rescaled from the speed
    score it was measured under to this run's (:func:`run_score`), so a pre-training timed
    under load does not price the next one on a quiet machine; else the reference machine's
    × :func:`speed_ratio`; else ``prior``."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):  # unreadable: next
        data = json.loads(timings.read_text())
        rate, then = float(data[PRETRAIN_KEY]), float(data["score"])
        if rate > 0 and then > 0:
            return rate * score_ratio(run_score().value, then)
    scaled = scaled_reference()
    if scaled is not None and scaled.reference.pretrain_rate is not None:
        return scaled.reference.pretrain_rate * scaled.ratio
    return prior


def record_pretrain_rate(timings: Path, seconds: float, pairs: float) -> None:
    """File a pre-training's measured rate (``seconds`` over ``pairs`` cost-weighted pairs)
    in ``timings`` with the speed score of the run that measured it."""
    timings.parent.mkdir(parents=True, exist_ok=True)
    record = {PRETRAIN_KEY: seconds / max(pairs, 1.0), "score": run_score().value}
    _write_atomic(timings, record | {"seconds": round(seconds, 1), "pairs": round(pairs)})


def write_reference(
    costs: Path,
    out: Path = SHIPPED,
    *,
    machine: str | None = None,
    score: float | None = None,
    timings: Path | None = None,
) -> Reference:
    """Write the reference book ``out`` from ``machine``'s section (default: this machine's)
    of the measured ``costs`` file, with this machine's speed score (default: its typical
    score now, :func:`typical_score`) and the pre-training rate of ``timings`` (default:
    ``inverters/timings.json`` beside ``costs``; none when absent). Run it on the machine
    that measured the costs, right after a quiet run, so the score and costs agree. Entries
    of the book at ``out`` that ``costs`` lacks are kept, rescaled to the new score."""
    machine = machine or machine_tag()
    data = json.loads(Path(costs).read_text(encoding="utf-8"))
    section = data["machines"].get(machine)
    if not section:
        known = ", ".join(sorted(data["machines"])) or "none"
        raise ValueError(f"{costs} has no costs for machine {machine!r} (it has: {known})")
    timings = timings if timings is not None else Path(costs).parent / "inverters/timings.json"
    device = machine.rsplit("cpu-", 1)[1] if "cpu-" in machine else "cpu"  # tag's suffix
    if score is None:  # on the device the costs were measured on
        with use_device(device):
            score = typical_score()
    score = float(score)
    pretrain = None
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):  # at the book's score
        data = json.loads(timings.read_text())
        pretrain = float(data[PRETRAIN_KEY]) / score_ratio(float(data["score"]), score, score)
    entries = {k: {f: float(v[f]) for f in ("seconds", "units", "n")} for k, v in section.items()}
    for key, entry in entries.items():  # each at the score of the run that measured it
        then = section[key].get("score")
        if then:
            entry["seconds"] /= score_ratio(float(then), score, score)
    # What this run did not measure (the smoke grid's probe, after a quick-grid refresh) is
    # kept from the book it replaces, rescaled to this book's speed score.
    previous = None
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
        previous = Reference.read(out)
    if previous is not None and previous.device == _device_kind(device):
        scale = 1 / score_ratio(previous.score, score, score)
        for key, entry in previous.entries.items():
            if key not in entries:
                entries[key] = entry | {"seconds": entry["seconds"] * scale}
        if pretrain is None and previous.pretrain_rate is not None:
            pretrain = previous.pretrain_rate * scale
    book = {
        "format": FORMAT,
        "machine": machine,
        "device": _device_kind(device),
        "score": score,
        PRETRAIN_KEY: pretrain,
        "written": datetime.date.today().isoformat(),
        "entries": dict(sorted(entries.items())),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(out, book)
    _load.cache_clear()
    return Reference.read(out)
