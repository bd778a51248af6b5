"""The worker behind ``reference_mechanisms.py``: runs one PyPI mechanism in *its own*
environment (pypantera, mldp-text: never dependencies of privaudit) and answers JSON lines on
stdin/stdout: ``{"seed": int, "words": [...]}`` -> ``{"words": [...]}``.

    python reference_worker.py PACKAGE MECHANISM EPSILON SHARED_DIR

It reuses the reference comparison's adapters (benchmarks/reference_mechanisms/theirs.py), so
the audit and the distribution check run the packages the same way. Each request seeds numpy's
and Python's global generators (what the packages draw from) with the request's seed.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "reference_mechanisms"))
from theirs import CHUNK, PACKAGES


def main() -> None:
    package, name, eps, folder = sys.argv[1], sys.argv[2], float(sys.argv[3]), Path(sys.argv[4])
    mech = PACKAGES[package][0](name, eps, folder)
    for line in sys.stdin:
        request = json.loads(line)
        np.random.seed(int(request["seed"]))
        random.seed(int(request["seed"]))
        words, out = request["words"], []
        for s in range(0, len(words), CHUNK):
            out += mech(words[s : s + CHUNK])
        sys.stdout.write(json.dumps({"words": out}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
