"""The pre-trained inverter on disk: read, or pre-trained once and written (under a lock),
and its one-time cost estimated from the latest measured rate."""

from __future__ import annotations

import json
import os
import sys
import time
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.attacks._inverter.model import Inverter, InverterSpec, build_model
from privaudit.attacks._inverter.pretraining import pretrain, work
from privaudit.runtime.cache import cache_dir, cache_writable, locked
from privaudit.runtime.costs import pretrain_rate, record_pretrain_rate
from privaudit.runtime.devices import current_device, module_device, torch_threads
from privaudit.runtime.memory import HeapTrimmer, release_freed

if TYPE_CHECKING:
    from privaudit.models.backbone import Backbone


def load_or_pretrain(
    bb: Backbone,
    spec: InverterSpec,
    *,
    threads: int | None = None,
    progress: bool | None = None,
) -> tuple[Inverter, dict[str, Any]]:
    """The pre-trained inverter for ``bb`` and ``spec``: read from the disk cache, or trained
    (its seed drawn from the cache key, so the model is a pure function of the key) and saved
    there. Returns the inverter and a note (``cache``: hit or miss, ``seconds``).

    A read-only cache (:func:`~privaudit.runtime.cache.cache_writable`) is read without a
    lock (nobody can write the entry), and a model it lacks is trained and not kept."""

    path = spec.path(bb)
    if not cache_writable():
        return _load_or_pretrain(bb, spec, path, threads, progress, keep=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    # One pre-training per machine: a pool's other workers wait for it, then read it.
    with locked(path.with_suffix(".lock")):
        return _load_or_pretrain(bb, spec, path, threads, progress)


def _load_or_pretrain(
    bb: Backbone,
    spec: InverterSpec,
    path: Path,
    threads: int | None,
    progress: bool | None,
    *,
    keep: bool = True,
) -> tuple[Inverter, dict[str, Any]]:
    start = time.perf_counter()
    if path.exists():
        try:
            if not _whole(path):  # said as what it is, not as torch's zip-reader error
                size = path.stat().st_size
                raise ValueError(f"truncated: {size:,} bytes, and no zip directory at its end")
            inv = _read(path, bb, spec)
        except Exception as exc:  # a torn or stale file: rebuild it rather than fail the run
            # Said, not silent: the rebuild costs a pre-training (minutes).
            why = f"{type(exc).__name__}: {str(exc)[:200]}"
            print(
                f"privaudit: the cached inverter {path} cannot be read ({why}); it is "
                + ("rebuilt." if keep else "trained again and not kept (read-only cache)."),
                file=sys.stderr,
                flush=True,
            )
            if keep:
                path.unlink(missing_ok=True)
        else:
            return inv, {"cache": "hit", "seconds": round(time.perf_counter() - start, 2)}
    # Trimmed seldom (PRETRAIN_TRIM_S): a trim makes the training loop fault pages back in.
    trim = float(os.environ.get(PRETRAIN_TRIM_ENV, PRETRAIN_TRIM_S))
    with torch_threads(threads), HeapTrimmer(trim):
        inv = pretrain(bb, spec, progress=progress)
    release_freed()  # the pre-training's data and optimiser, before the grid's first point
    seconds = time.perf_counter() - start
    if keep:
        _write(path, inv)
        record_pretrain_rate(_timings_path(), seconds, float(inv.info["pretrain_pairs"]))
    inv.info["pretrain_seconds"] = round(seconds, 1)
    return inv, {"cache": "miss", "seconds": round(seconds, 1)}


def cached(bb: Backbone, spec: InverterSpec) -> bool:
    """Whether ``spec``'s model is on disk whole. A torch file is a zip archive whose
    directory sits at its end, so a truncated one (a copy cut short, a full disk) is not
    cached: the estimate prices its rebuild, and a run rebuilds it before its first cell,
    saying so (:func:`load_or_pretrain`), rather than inside a cell."""
    return _whole(spec.path(bb))


def _whole(path: Path) -> bool:
    try:
        return path.is_file() and zipfile.is_zipfile(path)
    except OSError:  # unreadable: not usable as cached either
        return False


#: Seconds per cost-weighted pair (:func:`~privaudit.attacks._inverter.pretraining.work`)
#: before any measurement here and without a reference book: the default inverter (8,000
#: documents, 34,451 texts with their sentences, 3 + 2 epochs: 175,512 pairs) took 738–792 s
#: on two quiet AVX512-BF16 CPU cores with bucketed batches and mixed precision (2026-11-27).
PRETRAIN_PRIOR = 0.0045
#: Seconds between the heap trims while the inverter pre-trains (0: none), and the variable
#: that overrides it. Side by side, one thread each, 3,000 public documents: every 10 s
#: took the peak from 3,531 to 2,767 MiB at 1.03× the time (770 → 795 s); every second had
#: cost 1.24× (each trim makes the training loop fault its freed pages back in).
PRETRAIN_TRIM_S = 10.0
PRETRAIN_TRIM_ENV = "PRIVAUDIT_PRETRAIN_TRIM_PERIOD"


def pretrain_estimate(bb: Backbone, spec: InverterSpec) -> float | None:
    """Estimated seconds to pre-train ``spec`` here, now: its cost-weighted pairs
    (:func:`~privaudit.attacks._inverter.pretraining.work`: the texts with their sentences,
    their pieces, each stage's epochs) × the latest measured rate rescaled to this run's
    speed score, else the shipped reference machine's × this machine's speed ratio, else the
    prior (:func:`privaudit.runtime.costs.pretrain_rate`); None when the model is cached."""
    if cached(bb, spec):
        return None
    return pretrain_rate(_timings_path(), PRETRAIN_PRIOR) * work(bb, spec)


def _timings_path() -> Path:
    return cache_dir() / "inverters" / "timings.json"


def _write(path: Path, inv: Inverter) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "decoder": _own_weights(inv.decoder),
            "corrector": _own_weights(inv.corrector),
            "vocab_ids": inv.vocab_ids,
            "mean": inv.mean,
            "std": inv.std,
            "info": json.dumps(inv.info),
        },
        tmp,
    )
    tmp.replace(path)  # atomic: a killed run leaves no torn cache entry


def _own_weights(model: Any) -> dict[str, Any]:
    """The weights to save: all but the frozen word embeddings (the backbone's own, 47 MB)."""
    return {k: v for k, v in model.state_dict().items() if "word_embeddings" not in k}


def _read(path: Path, bb: Backbone, spec: InverterSpec) -> Inverter:
    import torch

    blob = torch.load(path, map_location="cpu", weights_only=False)
    vocab_ids = np.asarray(blob["vocab_ids"], np.int64)
    models = []
    for name in ("decoder", "corrector"):
        m = build_model(bb, spec, vocab_ids)
        # strict but for the frozen word embeddings, which build_model took from the backbone
        result = m.load_state_dict(blob[name], strict=False)
        if [k for k in result.missing_keys if "word_embeddings" not in k] or result.unexpected_keys:
            raise ValueError(f"{path} does not hold this inverter's weights")
        m.to(module_device(m) if current_device() == "cpu" else current_device())
        m.eval()
        models.append(m)
    return Inverter(
        models[0],
        models[1],
        vocab_ids,
        np.asarray(blob["mean"], np.float32),
        np.asarray(blob["std"], np.float32),
        json.loads(blob["info"]),
    )
