"""RAPT Table II / VIII cells one at a time, as measured for issue 6.

Each cell privatizes the first 600 train and 400 test reviews of the default corpus with one
defense at one η (seeded), trains prompt tuning (quick profile) on the release and prints one
JSON line. Usage (η values from `privaudit calibrate --defense t2t --rate 0.5` etc.):

    python examples/rapt_table2.py --seeds 0,1,2 t2t:75.53 pct2t:49.4 rapt:49.4 \\
        rapt:49.4:norec rapt:inf none:0

A cell is ``defense:eta[:variant,...]`` with variants ``norec`` (reconstruction=False),
``noplain`` (n_plain=0) and ``perdoc`` (plain_sequence="per-document"). About 7 minutes a
cell on two CPU cores. `privaudit run --config examples/configs/rapt-table2.yaml` runs the same
comparison as a grid (calibrating each defense's own η).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from privaudit.registry import CORPORA, DEFENSES, UTILITY

VARIANTS = {
    "norec": {"reconstruction": False},
    "noplain": {"n_plain": 0},
    "perdoc": {"plain_sequence": "per-document"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cells", nargs="+", help="defense:eta[:variant,...]")
    parser.add_argument("--seeds", default="0", help="comma-separated seeds")
    parser.add_argument("--threads", type=int, default=None, help="torch threads")
    parser.add_argument("--method", default="prompt-tuning", help="utility method")
    args = parser.parse_args()
    corpus = CORPORA.get("synthetic-reviews")()
    train, test = list(corpus.texts("train"))[:600], list(corpus.texts("test"))[:400]
    y_train, y_test = corpus.labels("train")[:600], corpus.labels("test")[:400]
    for seed in (int(s) for s in args.seeds.split(",")):
        for cell in args.cells:
            name, eta, *rest = cell.split(":")
            params: dict = {} if name == "none" else {"eta": float(eta)}
            for variant in rest[0].split(",") if rest else []:
                params |= VARIANTS[variant]
            defense = DEFENSES.get(name)(**params).fit(corpus.split("train"))
            rng = np.random.default_rng(seed)
            t0 = time.time()
            released = defense.privatize(train, rng=rng), defense.privatize(test, rng=rng)
            util = UTILITY.get(args.method)(progress=False, threads=args.threads)
            scores = util.evaluate_releases(
                released[0],
                y_train,
                released[1],
                y_test,
                rng=np.random.default_rng(seed),
                defense=defense,
            )
            info = util.last_info
            print(
                json.dumps(
                    {
                        "seed": seed,
                        "cell": cell,
                        **scores,
                        "objective": info["objective"],
                        "final_loss": info["final_loss"],
                        "seconds": round(time.time() - t0),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
