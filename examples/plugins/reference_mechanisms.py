"""The PyPI implementations of the word-level metric-DP mechanisms, as plugins to audit.

``pypantera`` (SanText, CusText, TEM, Mahalanobis, Vickrey), ``mldp-text`` (TEM,
Mahalanobis, Vickrey) and ``dp-diffractor`` (1-Diffractor) each state a privacy parameter ε
and nothing checks it. These wrappers give each one's stated guarantee to ``privaudit
audit-guarantee``, which tests it on the package's own code:

    export PRIVAUDIT_REFENV_PYTHON=/tmp/refenv/bin/python PRIVAUDIT_REFMECH=/tmp/refmech
    privaudit audit-guarantee --defense examples/plugins/reference_mechanisms.py:MldpTEM

Set-up (benchmarks/reference_mechanisms/README.md): the packages live in a separate
environment (``PRIVAUDIT_REFENV_PYTHON``, its Python; they pin numpy < 2 and pull faiss,
gensim and numba), and run in a worker process there (``reference_worker.py``); the shared
vocabulary (``PRIVAUDIT_REFMECH``: the 2,000 GloVe 6B 50d words ``ours.py`` exports) is the
space the claims are stated in, so the audit's word pairs and distances are GloVe's.

Claims, as the packages state them: ε·d_X-privacy per word, d the Euclidean distance of the
GloVe vectors (SanText, TEM, Mahalanobis's d_R, Vickrey); CusText's ε-LDP among the words
that share an output set (the paper's: the pool is the first output set the paper's mapping
would build, the most frequent word and its K − 1 nearest).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from privaudit.guarantees import Guarantee, Kind, Unit
from privaudit.mechanisms.audited import UnitMechanism

WORKER = Path(__file__).with_name("reference_worker.py")
GLOVE = "Euclidean distance of GloVe 6B 50d vectors (the shared 2,000-word vocabulary)"


def _shared() -> tuple[Path, list[str], np.ndarray]:
    folder = Path(os.environ.get("PRIVAUDIT_REFMECH", "/tmp/refmech"))
    if not (folder / "words.txt").is_file():
        raise ValueError(
            f"No shared vocabulary in {folder}: run benchmarks/reference_mechanisms"
            "/ours.py first, or set PRIVAUDIT_REFMECH."
        )
    words = (folder / "words.txt").read_text(encoding="utf-8").split("\n")
    return folder, words, np.load(folder / "vectors.npy")


class _Reference:
    """One package's mechanism at one ε, run by a worker in the package's environment."""

    package: ClassVar[str] = ""
    mechanism: ClassVar[str] = ""
    source: ClassVar[str] = ""
    knob: ClassVar[str] = "epsilon"
    levels: ClassVar[tuple[float, ...]] = ()

    def __init__(self, epsilon: float = 1.0) -> None:
        if not epsilon > 0:
            raise ValueError(f"epsilon is a positive number, got {epsilon!r}.")
        self.epsilon = float(epsilon)
        self._proc: subprocess.Popen[str] | None = None

    @property
    def name(self) -> str:
        return f"{self.package}-{self.mechanism}"

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee.dx(
            "epsilon",
            self.epsilon,
            unit=Unit.WORD,
            metric=GLOVE,
            source=self.source,
            mechanism="word_kernel",
        )

    def _run(self, words: list[str], seed: int) -> list[str]:
        if self._proc is None or self._proc.poll() is not None:
            python = os.environ.get("PRIVAUDIT_REFENV_PYTHON", "/tmp/refenv/bin/python")
            folder = _shared()[0]
            env = dict(os.environ, NLTK_DATA=str(folder / "nltk_data"), OPENBLAS_NUM_THREADS="1")
            self._proc = subprocess.Popen(
                [python, str(WORKER), self.package, self.mechanism, str(self.epsilon), str(folder)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"seed": seed, "words": words}) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"The {self.package} worker stopped (see its stderr).")
        return json.loads(line)["words"]

    def pool(self, words: list[str], vectors: np.ndarray) -> np.ndarray:
        return np.arange(len(words))

    def word_kernel(self) -> UnitMechanism:
        _, words, vectors = _shared()

        def draw(units: Sequence[int], rng: np.random.Generator) -> list[Hashable]:
            seed = int(rng.integers(2**31 - 1))
            return list(self._run([words[int(u)] for u in units], seed))

        return UnitMechanism(
            draw, vectors, self.pool(words, vectors), lambda u: words[int(u)], document=draw
        )

    def privatize(self, texts: list[str], rng: np.random.Generator) -> list[str]:
        split = [t.lower().split() for t in texts]
        flat = [w for ws in split for w in ws]
        out = iter(self._run(flat, int(rng.integers(2**31 - 1))) if flat else [])
        return [" ".join(next(out) for _ in ws) for ws in split]

    def __del__(self) -> None:
        if getattr(self, "_proc", None) is not None and self._proc.poll() is None:
            self._proc.kill()


class PypanteraSanText(_Reference):
    package, mechanism, source = "pypantera", "santext", "pypantera SanText"
    levels = (1.0, 2.0, 3.0)


class PypanteraTEM(_Reference):
    package, mechanism, source = "pypantera", "tem", "pypantera TEM"
    levels = (1.0, 2.0, 3.0)


class PypanteraMahalanobis(_Reference):
    package, mechanism, source = "pypantera", "mahalanobis", "pypantera Mahalanobis"
    levels = (10.0, 20.0, 40.0)

    @property
    def guarantee(self) -> Guarantee:  # d_R: distances in the whitened space (points below)
        return Guarantee.dx(
            "epsilon",
            self.epsilon,
            unit=Unit.WORD,
            source=self.source,
            metric="regularised Mahalanobis distance (λ = 0.2) of GloVe 6B 50d "
            "vectors (the shared vocabulary)",
            mechanism="word_kernel",
        )

    def word_kernel(self) -> UnitMechanism:
        from privaudit.mechanisms.elliptical import Regularised

        kernel = super().word_kernel()
        whiten = Regularised.of(kernel.points, 0.2).whiten
        points = (kernel.points @ whiten).astype(np.float32)
        return UnitMechanism(kernel.draw, points, kernel.pool, kernel.name, document=kernel.draw)


class PypanteraVickrey(_Reference):
    package, mechanism, source = "pypantera", "vickrey", "pypantera VickreyCMP"
    levels = (10.0, 20.0, 40.0)


class PypanteraCusText(_Reference):
    package, mechanism, source = "pypantera", "custext", "pypantera CusText"
    levels = (1.0, 3.0, 6.0)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee(
            Kind.LDP,
            "epsilon",
            self.epsilon,
            Unit.WORD,
            within="its output set",
            metric="words sharing an output set of 20 nearest GloVe 6B 50d vectors",
            source=self.source,
            mechanism="word_kernel",
        )

    def pool(self, words: list[str], vectors: np.ndarray) -> np.ndarray:
        d = np.linalg.norm(vectors - vectors[0], axis=1)
        return np.sort(np.argsort(d, kind="stable")[:20])


class MldpTEM(_Reference):
    package, mechanism, source = "mldp", "tem", "mldp-text TEM"
    levels = (1.0, 2.0, 3.0)


class MldpMahalanobis(PypanteraMahalanobis):
    package, mechanism, source = "mldp", "mahalanobis", "mldp-text Mahalanobis"


class MldpVickrey(_Reference):
    package, mechanism, source = "mldp", "vickrey", "mldp-text VickreyMechanism"
    levels = (10.0, 20.0, 40.0)


class DpDiffractor(_Reference):
    """dp-diffractor's geometric mechanism on its 1-D list of the shared vocabulary; the claim's
    distance is the distance of positions in that list (privaudit's ``greedy_order`` builds the
    same list: checked equal on the shared vocabulary)."""

    package, mechanism, source = "diffractor", "diffractor", "dp-diffractor"
    levels = (0.2, 1.1, 2.5)

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee.dx(
            "epsilon",
            self.epsilon,
            unit=Unit.WORD,
            source=self.source,
            metric="distance of positions in the greedy list of GloVe 6B 50d vectors (the "
            "shared vocabulary)",
            mechanism="word_kernel",
        )

    def word_kernel(self) -> UnitMechanism:
        from privaudit.defenses.diffractor import greedy_order
        from privaudit.mechanisms.nearest import NearestNeighbourIndex

        kernel = super().word_kernel()
        vectors = kernel.points
        order = greedy_order(NearestNeighbourIndex(vectors).k_nearest(vectors, 50)[0])
        # centred, and pairs searched in a window: the audit's float32 distances (see
        # privaudit.defenses.diffractor.OneDiffractor.audit_points)
        position = np.empty(len(order), dtype=np.float32)
        position[order] = np.arange(len(order)) - len(order) // 2
        mid = len(order) // 2
        window = np.sort(order[mid - 100 : mid + 100])
        return UnitMechanism(
            kernel.draw, position[:, None], window, kernel.name, document=kernel.draw
        )


__all__: list[Any] = [
    "MldpMahalanobis",
    "MldpTEM",
    "MldpVickrey",
    "PypanteraCusText",
    "PypanteraMahalanobis",
    "PypanteraSanText",
    "PypanteraTEM",
    "PypanteraVickrey",
]
