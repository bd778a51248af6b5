"""The reference comparison's table: our replacement distribution against each package's
(run with privaudit's Python after ``ours.py`` and ``theirs.py``; README.md).

Per (mechanism, package, ε, input word): a chi-square test of homogeneity on the two samples'
output counts (categories with an expected count under 5 pooled into one), the total
variation distance between the two empirical distributions with a 95 % bootstrap interval,
and the TV the same sample sizes show when both sides draw from one distribution (the 95th
percentile under the pooled null: below it, a difference is not resolved at these n). Then
the speed table: seconds per 10,000 words, and the ratio.

    python benchmarks/reference_mechanisms/compare.py --out /tmp/refmech > table.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy.stats import chi2_contingency

REPS = 200


def tv(a: np.ndarray, b: np.ndarray) -> float:
    return 0.5 * float(np.abs(a / a.sum() - b / b.sum()).sum())


def chi_square(a: np.ndarray, b: np.ndarray) -> tuple[float, int, float]:
    table = np.stack([a, b]).astype(float)
    table = table[:, table.sum(0) > 0]
    expected = table.sum(1, keepdims=True) * table.sum(0) / table.sum()
    small = (expected < 5).any(0)
    if small.any():
        table = np.concatenate([table[:, ~small], table[:, small].sum(1, keepdims=True)], 1)
    if table.shape[1] < 2:
        return 0.0, 0, 1.0
    stat, p, dof, _ = chi2_contingency(table)
    return float(stat), int(dof), float(p)


def compare(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> dict[str, float]:
    n_a, n_b = int(a.sum()), int(b.sum())
    pa, pb = a / n_a, b / n_b
    boot = [tv(rng.multinomial(n_a, pa), rng.multinomial(n_b, pb)) for _ in range(REPS)]
    pooled = (a + b) / (n_a + n_b)
    null = [tv(rng.multinomial(n_a, pooled), rng.multinomial(n_b, pooled)) for _ in range(REPS)]
    stat, dof, p = chi_square(a, b)
    observed = tv(a, b)
    # basic bootstrap interval, floored at 0
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return {
        "n_ours": n_a,
        "n_theirs": n_b,
        "chi2": stat,
        "dof": dof,
        "p": p,
        "tv": observed,
        "tv_lo": max(0.0, 2 * observed - hi),
        "tv_hi": 2 * observed - lo,
        "null95": float(np.percentile(null, 95)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    ours = dict(np.load(args.out / "ours.npz"))
    rng = np.random.default_rng(0)
    print(
        "| mechanism | package | ε | word | n ours / theirs | χ² (df) | p | TV [95 % CI] | "
        "TV under H0 (95th pct) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for path in sorted(args.out.glob("theirs_*.npz")):
        package = path.stem.removeprefix("theirs_")
        theirs = dict(np.load(path))
        for key in sorted(theirs, key=lambda k: (k.split("|")[0], float(k.split("|")[1]))):
            if key not in ours:
                continue
            b = theirs[key]
            a = np.append(ours[key], 0)  # the extra slot: an output outside the vocabulary
            r = compare(a, b, rng)
            name, eps, word = key.split("|")
            print(
                f"| {name} | {package} | {eps} | {word} | {r['n_ours']:,} / {r['n_theirs']:,} "
                f"| {r['chi2']:.1f} ({r['dof']}) | {r['p']:.2g} | {r['tv']:.3f} "
                f"[{r['tv_lo']:.3f}, {r['tv_hi']:.3f}] | {r['null95']:.3f} |"
            )
    ours_t = json.loads((args.out / "ours_times.json").read_text())
    theirs_t = json.loads((args.out / "theirs_times.json").read_text())
    print("\n| mechanism | package | ours (s / 10k words) | theirs (s / 10k words) | ratio |")
    print("|---|---|---|---|---|")
    for key, seconds in sorted(theirs_t.items()):
        package, name = key.split("|")
        print(
            f"| {name} | {package} | {ours_t[name]:.2f} | {seconds:.1f} | "
            f"{seconds / ours_t[name]:.2g}× |"
        )


if __name__ == "__main__":
    main()
