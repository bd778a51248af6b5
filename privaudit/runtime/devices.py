"""Where torch computations run: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.

One device per block of work: :func:`use_device` sets it (a context variable, so threads and
nested blocks see their own), and every torch computation reads :func:`current_device`
(backbone forwards, nearest-neighbour search off the CPU, attacks' and trainers' networks,
the defenses' torch code). ``auto`` (the default) is a GPU when torch sees one: CUDA, else
Apple's MPS, else the CPU.

Torch is imported only to resolve ``auto``, ``cuda*`` or ``mps``: ``cpu`` needs none, so a
run that never touches torch (T2T on text) does not load it.

Numpy code with a torch variant (the nearest-neighbour search) asks :func:`offload_device`,
which stays ``None`` (numpy) on the CPU, and under ``auto`` while torch is not loaded.

**Who honours it.** The backbone's forwards (``_pooled``, ``pooled_from_word_embeddings``,
``hidden_at_layer``, ``pooled_from_layer``: the encoder moves to the device, outputs come back
as numpy; the pooled memo is keyed by device); the nearest-neighbour search off the CPU (the
same chunked search in torch; the CPU keeps the benchmarked numpy path); mlp- and
ae-inversion, attribute-inference, bow-inversion and geia (the pre-training memo keyed by
device; the decoder and its decoding), ner's ``finetuned`` tagger, optimization-inversion
(bottom model and relaxed selection); the utility trainers (peft and its methods, the
pooled-vector head, a defense objective's head and loss); the backbone encodings of cape,
dpnr, sap/sap-cti and the probe; has's generative hide model. Pure numpy components (t2t,
pct2t, rapt and embedding-dx's noise, nn-inversion, has-deanonymization, spaCy) are unchanged
apart from the search. ``Component.gpu`` is the share of one GPU a cell wants (0.25: attacks'
networks, backbone encoders, the probe; 0.5: geia, peft), which the Ray executor requests.

**Mixed precision** (:func:`bf16`, :func:`fast_precision`): where the device runs bfloat16
natively, the attacker's own heavy work runs in it: the inverter's pre-training steps,
per-point fine-tune and decoding (the output layer cast once per decode), its own encodings
(``Backbone.own_pooled``: public text, re-embedded guesses, by a bfloat16 copy of the
encoder) and optimization-inversion's two selection products. What the defenses release, the
service's training and every score stay float32; the pre-trained inverter's cache key names
the precision.

Randomness stays on the CPU where it can: seeds come from the cell's numpy generator, data
order and initial draws come from a CPU ``torch.Generator`` and are moved to the device, so a
seeded result is reproducible on the same device (a GPU's kernels may differ numerically from
the CPU's, so results are not bitwise equal across devices). Laplace noise is drawn on its
generator's device (``laplace_like``); ``seeded_torch`` forks and seeds the current CUDA
device's state too (dropout there). On CUDA, cuDNN is set deterministic and
``CUBLAS_WORKSPACE_CONFIG`` is set when unset. The device is in no cell key: ``--resume`` may
change it, and ``run.json``'s ``provenance.device`` records it.

**Tested on the CPU only** (``tests/runtime/test_devices.py``): resolution and its errors, the CLI
option, the config field, Ray's placement, and components run on torch's ``meta`` device
(which refuses to mix with CPU tensors, so every tensor of their computation is on the device
given): mlp-inversion's training, attribute-inference's heads, Laplace noise. Nothing here
has run on a real GPU: CUDA and MPS numerics, determinism and speed are untested.
"""

from __future__ import annotations

import contextvars
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: What ``--device`` and the grid's ``device:`` accept.
DEVICE_HELP = "auto (a GPU when torch sees one), cpu, cuda, cuda:N or mps"

_PATTERN = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "privaudit_device", default=None
)


def check_device(spec: object) -> str:
    """``spec`` normalised (stripped, lower case) if it names a device kind, else a one-line
    ``ValueError``/``TypeError``; does not look at the hardware (see :func:`resolve_device`)."""
    if spec is None:
        return "auto"
    if not isinstance(spec, str):
        raise TypeError(f"A device is a string ({DEVICE_HELP}), got {type(spec).__name__}.")
    value = spec.strip().lower()
    if not _PATTERN.match(value):
        raise ValueError(f"Unknown device {spec!r}: expected {DEVICE_HELP}.")
    return value


def _mps_available(torch: Any) -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def resolve_device(spec: str | None = "auto") -> str:
    """The concrete device for ``spec``: ``auto`` → ``cuda`` if torch sees a CUDA GPU, else
    ``mps`` if available, else ``cpu``. A GPU asked for but not present is a one-line
    ``ValueError`` saying what to do."""
    value = check_device(spec)
    if value == "cpu":
        return "cpu"
    import torch

    if value == "auto":
        if torch.cuda.is_available():
            return "cuda"
        return "mps" if _mps_available(torch) else "cpu"
    if value == "mps":
        if not _mps_available(torch):
            raise ValueError(
                "Device 'mps' is not available (torch sees no Apple GPU); use --device cpu "
                "or --device auto."
            )
        return value
    if not torch.cuda.is_available():
        raise ValueError(
            f"Device {value!r} is not available: torch {torch.__version__} sees no CUDA GPU "
            "(a CPU-only build, or no driver); use --device cpu or --device auto, or install "
            "a CUDA build of torch."
        )
    index = int(value.split(":")[1]) if ":" in value else 0
    count = torch.cuda.device_count()
    if index >= count:
        raise ValueError(
            f"Device {value!r} is not available: torch sees {count} CUDA GPU(s), numbered "
            f"0..{count - 1}."
        )
    return value


def current_device() -> str:
    """The device torch code runs on: the innermost :func:`use_device`'s, resolved; ``auto``
    (also when no block is active) is resolved once per process."""
    value = _CURRENT.get()
    return _auto() if value in (None, "auto") else value


def offload_device() -> str | None:
    """The current device when it is not the CPU, for numpy code with a torch variant (the
    nearest-neighbour search); ``None`` means "stay in numpy". Under ``auto`` this never
    imports torch: while torch is not loaded (a run that needs no torch, e.g. T2T on text),
    the answer is ``None``; an explicit ``cuda``/``mps`` always offloads."""
    value = _CURRENT.get()
    if value in (None, "auto") and "torch" not in sys.modules:
        return None
    device = current_device()
    return None if device == "cpu" else device


_AUTO: str | None = None


def _auto() -> str:
    global _AUTO
    if _AUTO is None:
        _AUTO = resolve_device("auto")
        if _AUTO.startswith("cuda"):
            _deterministic_cuda()
    return _AUTO


@contextmanager
def use_device(spec: str | None = "auto") -> Iterator[str]:
    """Run the block with torch computations on ``spec``; yields the spec checked (``auto``
    stays ``auto``, resolved on first use, so a block that needs no torch never imports it;
    ``cuda``/``mps`` are checked against the hardware here, a one-line ``ValueError``)."""
    value = check_device(spec)
    device = value if value == "auto" else resolve_device(value)
    if device.startswith("cuda"):
        _deterministic_cuda()
    token = _CURRENT.set(device)
    try:
        yield device
    finally:
        _CURRENT.reset(token)


def _deterministic_cuda() -> None:
    """Deterministic cuDNN and cuBLAS for this process (seeded runs repeat on one GPU)."""
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


def torch_device() -> Any:
    """The current device as a ``torch.device``."""
    import torch

    return torch.device(current_device())


def tensor(array: Any, dtype: Any = None) -> Any:
    """A numpy array (or list) as a tensor on the current device (no copy on the CPU)."""
    import numpy as np
    import torch

    value = (
        torch.from_numpy(np.ascontiguousarray(array))
        if isinstance(array, np.ndarray)
        else (torch.as_tensor(array))
    )
    return value.to(device=current_device(), dtype=dtype)


def numpy(value: Any) -> Any:
    """A tensor, wherever it lives, as a numpy array (detached, on the CPU)."""
    return value.detach().cpu().numpy()


def module_device(module: Any) -> Any:
    """The device of a module's first parameter (the CPU for one without parameters)."""
    import torch

    for parameter in module.parameters():
        return parameter.device
    return torch.device("cpu")


def to_device(value: Any, device: Any = None) -> Any:
    """A tensor, or a dict/list/tuple of them (other values kept), moved to ``device``
    (default: the current one)."""
    target = current_device() if device is None else device
    if isinstance(value, dict):
        return {k: to_device(v, target) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(to_device(v, target) for v in value)
    return value.to(target) if hasattr(value, "to") and hasattr(value, "device") else value


def describe_device(device: str | None = None) -> str:
    """``device`` (default: the current one) for a record, e.g. ``cuda:0 (NVIDIA H100)``;
    ``cpu`` as it is (no torch imported for it)."""
    value = current_device() if device is None else device
    if not value.startswith("cuda"):
        return value
    import torch

    index = torch.device(value).index or 0
    return f"cuda:{index} ({torch.cuda.get_device_name(index)})"


#: Set to 0 to keep the inverter's decoding and pre-training in float32 on every machine.
BF16_ENV = "PRIVAUDIT_BF16"


def bf16() -> bool:
    """Whether the generative inverter computes in bfloat16 on the current device: on a
    CUDA GPU that supports it, or a CPU whose oneDNN kernels run it natively (AVX512-BF16 or
    AMX; elsewhere it is emulated and slower than float32), unless ``PRIVAUDIT_BF16=0``.
    Measured on two AVX512-BF16 cores: greedy decoding over the backbone's 29,524 pieces
    4-5 times faster, 88 % of decodings identical to float32's, word F1 unchanged."""
    if os.environ.get(BF16_ENV, "1").strip() in ("0", "false", "no"):
        return False
    import torch

    device = current_device()
    if device.startswith("cuda"):
        return bool(torch.cuda.is_bf16_supported())
    if device != "cpu":
        return False
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(check is not None and check())


def fast_precision() -> Any:
    """A context in which torch computes in bfloat16 where :func:`bf16` says it pays (the
    weights stay float32: mixed precision), else a no-op."""
    import contextlib

    import torch

    if not bf16():
        return contextlib.nullcontext()
    return torch.autocast(
        "cuda" if current_device().startswith("cuda") else "cpu", dtype=torch.bfloat16
    )


def run_thread_count() -> int:
    """The intra-op threads torch runs the models with: every core, unless ``OMP_NUM_THREADS``
    says otherwise (a shared machine, or parallel test workers that split the cores)."""
    asked = os.environ.get("OMP_NUM_THREADS", "")
    return int(asked) if asked.isdigit() and int(asked) > 0 else os.cpu_count() or 1


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run torch with ``n`` intra-op threads inside the block, then restore the previous count
    (``None``: leave it). Small networks gain little from more threads and lose a lot when the
    cores are shared with other processes (e.g. parallel grid cells)."""
    import torch

    if n is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(previous)
