"""The reference packages' side of the comparison: run with the *separate* environment's
Python (pypantera, mldp-text; never a dependency of privaudit; README.md).

Reads the shared vocabulary ``ours.py`` exported, draws replacements of each input word at
each ε through each package's own mechanism (its public per-text or per-word call, default
settings but the shared parameters of ``common.PARAMS``), saves the counts to
``theirs_<package>.npz`` and times each on the same 10,000 words (``theirs_times.json``).

    NLTK_DATA=/tmp/refmech/nltk_data /tmp/refenv/bin/python \
        benchmarks/reference_mechanisms/theirs.py --out /tmp/refmech --draws 20000

Offline: mldp-text asks NLTK for WordNet at import (and downloads it if missing); an empty
``corpora/wordnet`` folder under ``NLTK_DATA`` satisfies the lookup (only its SynTF, not
compared, reads WordNet). Both packages draw from numpy's global generator: seeded per
(mechanism, ε, word) with ``np.random.seed`` (and ``random.seed``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import EPSILONS, INPUTS, PARAMS, load_vocabulary, load_words10k

#: Draws per call of a per-text API (pypantera): its distance matrix is (words x V x dim).
CHUNK = 50


def pypantera(name: str, eps: float, folder: Path) -> Callable[[list[str]], list[str]]:
    """A pypantera mechanism as words -> words."""
    emb = str(folder / "glove.txt")
    if name == "santext":
        from src.SamplingPerturbationMechanism.santext import SanText

        mech = SanText({"embPath": emb, "epsilon": eps})
        return lambda ws: mech.processText(ws).split(" ")
    if name == "custext":
        from src.SamplingPerturbationMechanism.custext import CusText

        mech = CusText(
            {"embPath": emb, "epsilon": eps, "k": PARAMS[name]["k"], "distance": "euclidean"}
        )
        return lambda ws: mech.processText(ws).split(" ")
    if name == "tem":
        from src.SamplingPerturbationMechanism.tem import TEM

        mech = TEM({"embPath": emb, "epsilon": eps, "beta": PARAMS[name]["beta"]})
        return lambda ws: mech.processText(ws).split(" ")
    if name == "mahalanobis":
        from src.EmbeddingPerturbationMechanism.mahalanobis import Mahalanobis

        mech = Mahalanobis({"embPath": emb, "epsilon": eps, "lam": PARAMS[name]["lam"]})
        return lambda ws: mech.processText(mech.noisyEmb(ws)).split(" ")
    if name == "vickrey":
        from src.EmbeddingPerturbationMechanism.vickrey import VickreyCMP

        mech = VickreyCMP({"embPath": emb, "epsilon": eps, "t": PARAMS[name]["t"]})
        return lambda ws: mech.processText(mech.noisyEmb(ws)).split(" ")
    raise KeyError(name)


_KV: dict[str, object] = {}


def mldp(name: str, eps: float, folder: Path) -> Callable[[list[str]], list[str]]:
    """An mldp-text mechanism as words -> words (its ``replace_word``, one word at a time)."""
    import mldp_text
    from gensim.models import KeyedVectors

    if "kv" not in _KV:
        _KV["kv"] = KeyedVectors.load_word2vec_format(str(folder / "glove_w2v.txt"))
    kv = _KV["kv"]
    words = set(kv.index_to_key)
    dim = kv.vector_size
    if name == "tem":
        mech = mldp_text.TEM(eps, embedding_matrix=kv, dim=dim, vocab=words)
    elif name == "mahalanobis":
        mech = mldp_text.Mahalanobis(
            eps, embedding_matrix=kv, lambd=PARAMS[name]["lam"], dim=dim, vocab=words
        )
    elif name == "vickrey":  # its own rule: k = 2, t = [1, 0] (the package's defaults)
        mech = mldp_text.VickreyMechanism(eps, embedding_matrix=kv, dim=dim, vocab=words)
    else:
        raise KeyError(name)
    return lambda ws: [mech.replace_word(w) for w in ws]


def dp_diffractor(name: str, eps: float, folder: Path) -> Callable[[list[str]], list[str]]:
    """dp-diffractor's per-token mechanism (``apply_privacy_mechanism``, geometric) on its own
    1-D list of the shared vocabulary (``EmbeddingManager.create_sorted_list``). Its
    ``Diffractor.rewrite`` is bypassed: it needs NLTK's punkt and downloads its lists; stop
    words are replaced (``replace_stopwords``), as privaudit's ``diffractor`` does."""
    import diffractor.core as core
    from diffractor.utils import EmbeddingManager

    if name != "diffractor":
        raise KeyError(name)
    if "list" not in _KV:
        words, vectors = load_vocabulary(folder)
        _KV["list"] = EmbeddingManager.create_sorted_list(vectors.astype(np.float32), words)
    s_list = _KV["list"]
    config = core.DiffractorConfig(
        epsilon=eps, method="geometric", replace_stopwords=True, verbose=False
    )
    core._RESOURCES = {
        "list": s_list,
        "mapping": {w: i for i, w in enumerate(s_list)},
        "config": config,
        "rng": np.random.default_rng(0),
    }
    return lambda ws: [core.apply_privacy_mechanism(w, eps) or w for w in ws]


PACKAGES = {
    "pypantera": (pypantera, ("santext", "custext", "tem", "mahalanobis", "vickrey")),
    "mldp": (mldp, ("tem", "mahalanobis", "vickrey")),
    "diffractor": (dp_diffractor, ("diffractor",)),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--draws", type=int, default=20_000)
    ap.add_argument("--package", choices=sorted(PACKAGES), action="append")
    ap.add_argument("--only", action="append", help="mechanisms to run (default: all)")
    ap.add_argument("--inputs", type=int, default=len(INPUTS), help="the first N input words")
    ap.add_argument(
        "--time-words",
        type=int,
        default=10_000,
        help="time on the first N of the 10,000 words (scaled to 10,000)",
    )
    args = ap.parse_args()
    words, _ = load_vocabulary(args.out)
    row = {w: i for i, w in enumerate(words)}
    stream = load_words10k(args.out)[: args.time_words]
    times_path = args.out / "theirs_times.json"
    times = json.loads(times_path.read_text()) if times_path.is_file() else {}
    for package in args.package or sorted(PACKAGES):
        build, names = PACKAGES[package]
        path = args.out / f"theirs_{package}.npz"
        counts = dict(np.load(path)) if path.is_file() else {}
        for name in names:
            if args.only and name not in args.only:
                continue
            for eps in EPSILONS[name]:
                mech = build(name, eps, args.out)
                for k, word in enumerate(INPUTS[: args.inputs]):
                    np.random.seed(1000 * k + int(eps * 100))
                    random.seed(1000 * k + int(eps * 100))
                    got: list[str] = []
                    t0 = time.perf_counter()
                    while len(got) < args.draws:
                        got += mech([word] * min(CHUNK, args.draws - len(got)))
                    c = np.bincount([row.get(w, len(words)) for w in got], minlength=len(words) + 1)
                    counts[f"{name}|{eps:g}|{word}"] = c
                    print(
                        f"{package} {name} eps={eps:g} {word}: {args.draws} draws in "
                        f"{time.perf_counter() - t0:.1f} s",
                        flush=True,
                    )
                np.savez_compressed(path, **counts)
            mech = build(name, EPSILONS[name][1], args.out)
            np.random.seed(0)
            t0 = time.perf_counter()
            for s in range(0, len(stream), CHUNK):  # texts of CHUNK words
                mech(stream[s : s + CHUNK])
            seconds = (time.perf_counter() - t0) * 10_000 / len(stream)
            times[f"{package}|{name}"] = seconds
            times_path.write_text(json.dumps(times, indent=1))
            print(f"{package} {name}: 10,000 words in {seconds:.1f} s", flush=True)


if __name__ == "__main__":
    main()
