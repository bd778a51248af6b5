"""Intervals, normalised privacy and worst-case privacy per attack family.

Everything here is computed from the results table and the per-document outcomes the cells
stored (:mod:`privaudit.audit.outcomes`), on the run's one set of bootstrap resamples over
test documents (:class:`Bootstrap`): B resamples of every row at once, so two defenses, two
attacks, a minimum over attacks or a rank are all compared on the same resampled documents
(paired intervals).

**Normalised privacy** of an attack row, in [0, 1]::

    normalised = clip((s_ref − s) / (s_ref − s_base), 0, 1)

where ``s`` is the attack's score at this point, ``s_base`` its no-information baseline
(``attack_baseline``: the frequent-token guess, the majority class, the unconditioned decoder;
an attack that declares none is taken to recover nothing, score 0) and ``s_ref`` its score
against the undefended release (the ``none`` defense, same attack and seed), or, when the run
has no ``none`` or the attack cannot read the undefended release, the metric's perfect score
(1, or 0 for the reconstruction MSE). 1 = the attacker does no better than guessing without
the release; 0 = as well as against the original text. The formula is the same whichever way
a metric points (for the MSE, ``s_ref`` is small and ``s_base`` large). Where the attack is
not **informative** — ``s_ref`` beats ``s_base`` by less than :data:`MIN_SPAN` (0.02 on a
bounded score), or the paired bootstrap interval of ``s_ref − s_base`` reaches 0 — it learns
nothing measurable even from the original text: its normalised privacy is undefined (NaN)
and it sets no worst case (a tiny span would make one lucky document decide it).

**Families** (the ``family`` column the scorers write): ``text`` (token and text recovery:
nn-, mlp-, ae-, optimization-, bow-inversion, geia), ``entity`` (ner, has-deanonymization and
the entity rows of the inversion attacks), ``attribute[<name>]`` (one per private attribute).
A defense point's **worst-case privacy** in a family is the minimum normalised privacy over
that family's attacks that read its release (status ok): privacy is set by the strongest
adversary. On each resample the minimum is taken again, so its interval is the interval of the
minimum, not the minimum of intervals.

Several seeds: a point's privacy and utility are the mean over seeds (on each resample too, so
the interval is that of the seed mean over document resampling) and ``*_sd`` their standard
deviation across seeds.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.audit.outcomes import Outcome, bootstrap_weights, interval, quiet_nan

if TYPE_CHECKING:
    import pandas as pd

NONE = "none"
#: Metrics whose privacy is the score itself (an error); every other metric's is 1 − score.
ERROR_METRICS = frozenset({"embedding_mse"})
#: The least advantage (score points over the baseline, against the undefended release) for
#: a bounded metric's attack to count as informative (:func:`_informative`).
MIN_SPAN = 0.02
#: The normalised-privacy levels of the utility-at-matched-privacy table.
MATCHED_LEVELS = (0.5, 0.75, 0.9)


def family_of(attack: str, metric: str) -> str:
    """The family of a row written before the ``family`` column existed."""
    if attack.startswith("attribute-inference[") or metric == "attribute_accuracy":
        target = attack.split("[", 1)[1].rstrip("]") if "[" in attack else "?"
        return f"attribute[{target}]"
    if metric in ("entity_f1", "text_similarity") or attack.endswith("[entities]"):
        return "entity"
    return "text"


@dataclass(frozen=True)
class Bootstrap:
    """The run's resamples: ``resamples`` draws of the test documents, seeded by ``seed``."""

    resamples: int = 1000
    level: float = 0.95
    seed: int = 0

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> Bootstrap:
        spec = meta.get("bootstrap") or {}
        return cls(**{k: spec[k] for k in ("resamples", "level", "seed") if k in spec})

    def weights(self, n_docs: int) -> np.ndarray:
        return _weights(n_docs, self.resamples, self.seed)


@functools.lru_cache(maxsize=4)
def _weights(n_docs: int, resamples: int, seed: int) -> np.ndarray:
    w = bootstrap_weights(n_docs, resamples, seed).astype(np.float64)
    w.setflags(write=False)
    return w


class Outcomes:
    """The run's per-document outcomes by (key, what): ``what`` is ``attack`` or ``baseline``
    for a result row (key ``cell_key``), ``utility`` for a defense point (key ``point``)."""

    def __init__(self, entries: Mapping[tuple[str, str], Outcome] | None = None) -> None:
        self.entries: dict[tuple[str, str], Outcome] = dict(entries or {})

    def get(self, key: Any, what: str) -> Outcome | None:
        if not isinstance(key, str):
            return None
        return self.entries.get((key, what))

    def __len__(self) -> int:
        return len(self.entries)

    @classmethod
    def from_frame(cls, frame: pd.DataFrame | None) -> Outcomes:
        """From the ``outcomes.parquet`` table (columns key, what, reducer, k, docs, stats)."""
        if frame is None or frame.empty:
            return cls()
        entries = {}
        for key, what, reducer, k, docs, stats in frame[
            ["key", "what", "reducer", "k", "docs", "stats"]
        ].itertuples(index=False):
            record = {"reducer": reducer, "k": int(k), "stats": np.asarray(stats, np.float64),
                      "docs": None if docs is None else np.asarray(docs, np.int64)}  # fmt: skip
            entries[(str(key), str(what))] = Outcome.from_record(record)
        return cls(entries)

    def to_frame(self) -> pd.DataFrame:
        import pandas as pd

        rows = [
            {
                "key": key,
                "what": what,
                "reducer": o.reducer,
                "k": int(o.stats.shape[1]),
                "docs": o.docs.tolist(),
                "stats": o.stats.reshape(-1).tolist(),
            }
            for (key, what), o in self.entries.items()
        ]
        return pd.DataFrame(rows, columns=["key", "what", "reducer", "k", "docs", "stats"])


@dataclass
class RunStats:
    """Bootstrap samples of every row of a results table (row order = ``frame``'s).

    ``score``, ``baseline``, ``utility``, ``privacy`` (empirical privacy), ``normalised``:
    arrays (rows, B), NaN where a row has no outcome (an older run, a plugin evaluator that
    returned no predictions, a failed or n/a cell). ``available`` says whether any outcome was
    found; without them intervals are NaN and ranks are point estimates.
    """

    frame: pd.DataFrame
    bootstrap: Bootstrap
    score: np.ndarray
    baseline: np.ndarray
    utility: np.ndarray
    privacy: np.ndarray
    normalised: np.ndarray
    normalised_point: np.ndarray
    available: bool

    @property
    def level(self) -> float:
        return self.bootstrap.level

    def ci(self, samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = interval(samples, self.level, axis=-1)
        return np.asarray(lo, float), np.asarray(hi, float)


def run_stats(
    frame: pd.DataFrame, outcomes: Outcomes, bootstrap: Bootstrap, n_test: int | None = None
) -> RunStats:
    """Samples of every row of ``frame`` (reset to a 0..R-1 index) on the run's resamples."""
    frame = _prepared(frame)
    n_rows, b = len(frame), bootstrap.resamples
    if n_test is None:
        n_test = _n_test(frame, outcomes)
    nan = np.full((n_rows, b), np.nan)
    score, base, util = nan.copy(), nan.copy(), nan.copy()
    found = False
    if n_test:
        w = bootstrap.weights(n_test)
        memo: dict[int, np.ndarray] = {}

        def sample(o: Outcome | None) -> np.ndarray | None:
            if o is None:
                return None
            if id(o) not in memo:
                memo[id(o)] = o.resample(w)
            return memo[id(o)]

        for r, (ok, key, point) in enumerate(
            zip(frame["status"] == "ok", frame["cell_key"], frame["point"], strict=True)
        ):
            u = sample(outcomes.get(point, "utility"))
            if u is not None:
                util[r], found = u, True
            if not ok:
                continue
            s = sample(outcomes.get(key, "attack"))
            if s is not None:
                score[r], found = s, True
            bb = sample(outcomes.get(key, "baseline"))
            if bb is not None:
                base[r] = bb
    error = frame["attack_metric"].isin(ERROR_METRICS).to_numpy()
    privacy = np.where(error[:, None], score, 1.0 - score)
    norm_point, norm = _normalised(frame, score, base, error, bootstrap.level)
    return RunStats(frame, bootstrap, score, base, util, privacy, norm, norm_point, found)


def _prepared(frame: pd.DataFrame) -> pd.DataFrame:
    from privaudit.leaderboard.pareto import with_labels

    frame = with_labels(frame).reset_index(drop=True)
    for col in ("cell_key", "point", "attack_baseline", "family", "seed"):
        if col not in frame.columns:
            frame[col] = None if col != "attack_baseline" else np.nan
    missing = frame["family"].isna()
    if missing.any():
        frame.loc[missing, "family"] = [
            family_of(str(a), str(m))
            for a, m in zip(frame.loc[missing, "attack"], frame.loc[missing, "attack_metric"],
                            strict=True)
        ]  # fmt: skip
    return frame


def _n_test(frame: pd.DataFrame, outcomes: Outcomes) -> int:
    if "n_test" in frame.columns:
        n = frame["n_test"].dropna()
        if len(n):
            return int(n.max())
    top = max((int(o.docs.max()) + 1 for o in outcomes.entries.values() if o.docs.size), default=0)
    return top


def _normalised(
    frame: pd.DataFrame, score: np.ndarray, base: np.ndarray, error: np.ndarray, level: float
) -> tuple[np.ndarray, np.ndarray]:
    """Point estimates (rows,) and samples (rows, B) of normalised privacy."""
    s_point = frame["attack_score"].astype(float).to_numpy()
    b_point = frame["attack_baseline"].astype(float).to_numpy()
    perfect = np.where(error, 0.0, 1.0)
    # No declared baseline: an attacker that recovers nothing (success 0); none for an error.
    no_base = ~np.isfinite(b_point)
    b_point = np.where(no_base, np.where(error, np.nan, 0.0), b_point)
    base = np.where(no_base[:, None] & np.isnan(base), b_point[:, None], base)
    ref_point, ref = perfect.copy(), np.repeat(perfect[:, None], score.shape[1], axis=1)
    ok = (frame["status"] == "ok").to_numpy()
    is_none = (frame["defense"] == NONE).to_numpy() & ok
    lookup = {
        (a, s): r
        for r, (a, s) in enumerate(zip(frame["attack"], frame["seed"], strict=True))
        if is_none[r]
    }
    has_ref = np.zeros(len(frame), dtype=bool)
    for r, (a, s) in enumerate(zip(frame["attack"], frame["seed"], strict=True)):
        hit = lookup.get((a, s))
        if hit is not None:
            ref_point[r], ref[r], has_ref[r] = s_point[hit], score[hit], True
    sign = np.where(error, -1.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        span_p = ref_point - b_point
        point = np.where(np.abs(span_p) > 1e-12, (ref_point - s_point) / span_p, np.nan)
        span = ref - base
        samples = np.where(np.abs(span) > 1e-12, (ref - score) / span, np.nan)
    # Informativeness is a property of the attack on the undefended release; an attack that
    # cannot read it (referred to its perfect score) only needs a positive span.
    informative = np.where(
        has_ref, _informative(span_p * sign, span * sign[:, None], error, level), span_p * sign > 0
    )
    point = np.where(informative, point, np.nan)
    samples = np.where(informative[:, None] & (span * sign[:, None] > 0), samples, np.nan)
    point = np.where(ok, np.clip(point, 0.0, 1.0), np.nan)
    samples = np.where(ok[:, None], np.clip(samples, 0.0, 1.0), np.nan)
    return point, samples


def _informative(
    span: np.ndarray, samples: np.ndarray, error: np.ndarray, level: float
) -> np.ndarray:
    """Whether an attack learns anything from the undefended release: its success there beats
    its baseline by at least :data:`MIN_SPAN` (bounded metrics) and the paired bootstrap
    interval of that difference excludes 0. Otherwise a tiny span turns one lucky document
    into a normalised privacy of 0 (GEIA recovering 1 % of entity strings undefended, 0 % by
    its baseline), and that noise would set the worst case."""
    ok = np.isfinite(span) & (span > np.where(error, 1e-12, MIN_SPAN))
    measured = np.isfinite(samples).any(axis=1)
    with np.errstate(invalid="ignore"), quiet_nan():
        tail = 100 * (1 - level) / 2  # the lower bound of the run's interval
        low = np.nanpercentile(np.where(measured[:, None], samples, 0.0), tail, axis=1)
    return ok & np.where(measured, low > 0, True)


def annotate(stats: RunStats) -> pd.DataFrame:
    """The results table with interval columns (``utility_ci_low``/``_high``,
    ``attack_score_ci_*``, ``empirical_privacy_ci_*``), ``normalised_privacy`` and its
    interval, and ``family``."""
    frame = stats.frame.copy()
    for name, samples in (
        ("utility", stats.utility),
        ("attack_score", stats.score),
        ("empirical_privacy", stats.privacy),
        ("normalised_privacy", stats.normalised),
    ):
        lo, hi = stats.ci(samples)
        frame[f"{name}_ci_low"], frame[f"{name}_ci_high"] = lo, hi
    frame["normalised_privacy"] = stats.normalised_point
    return frame


# ---- points per family -----------------------------------------------------------------


@dataclass
class FamilyPoints:
    """Worst-case privacy and utility per (family, label, knob value), seeds averaged.

    ``table`` columns: family, label, defense, knob, knob_value, privacy, privacy_ci_low,
    privacy_ci_high, privacy_sd, utility, utility_ci_low, utility_ci_high, utility_sd,
    n_seeds, n_attacks, strongest (the attack that set the worst case), on_frontier.
    ``privacy``/``utility``: samples (rows of ``table``, B).
    """

    table: pd.DataFrame
    privacy: np.ndarray
    utility: np.ndarray


def family_points(stats: RunStats) -> FamilyPoints:
    import pandas as pd

    from privaudit.leaderboard.pareto import pareto_mask

    f = stats.frame
    ok = (f["status"] == "ok").to_numpy() & np.isfinite(stats.normalised_point)
    util_point = f["utility"].astype(float).to_numpy()
    ok &= np.isfinite(util_point)
    knob = f["knob_value"].astype(float).fillna(np.inf)  # NaN knobs (none) group together
    rows, priv_s, util_s = [], [], []
    seeds = f.assign(_knob=knob)[ok].groupby(["family", "label", "_knob", "seed"], sort=True)
    per_seed: dict[tuple[Any, Any, Any], list[tuple[float, float, np.ndarray, np.ndarray]]] = {}
    meta: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for (family, label, k, _seed), idx in seeds.groups.items():
        idx = np.asarray(idx)
        worst = int(idx[np.argmin(stats.normalised_point[idx])])
        with np.errstate(all="ignore"), quiet_nan():
            p_s = np.nanmin(stats.normalised[idx], axis=0)
        key = (family, label, k)
        per_seed.setdefault(key, []).append(
            (float(stats.normalised_point[worst]), float(util_point[idx[0]]), p_s,
             stats.utility[idx[0]])
        )  # fmt: skip
        meta.setdefault(key, {
            "defense": f.at[idx[0], "defense"], "knob": f.at[idx[0], "knob"],
            "knob_value": f.at[idx[0], "knob_value"], "n_attacks": len(idx),
            "strongest": f.at[worst, "attack"],
        })  # fmt: skip
    for key, runs in per_seed.items():
        family, label, _ = key
        p = np.array([r[0] for r in runs])
        u = np.array([r[1] for r in runs])
        with np.errstate(all="ignore"), quiet_nan():
            ps = np.nanmean(np.stack([r[2] for r in runs]), axis=0)
            us = np.nanmean(np.stack([r[3] for r in runs]), axis=0)
        p_lo, p_hi = interval(ps, stats.level)
        u_lo, u_hi = interval(us, stats.level)
        rows.append(meta[key] | {
            "family": family, "label": label,
            "privacy": float(p.mean()), "privacy_ci_low": p_lo, "privacy_ci_high": p_hi,
            "privacy_sd": float(p.std(ddof=1)) if len(p) > 1 else np.nan,
            "utility": float(u.mean()), "utility_ci_low": u_lo, "utility_ci_high": u_hi,
            "utility_sd": float(u.std(ddof=1)) if len(u) > 1 else np.nan,
            "n_seeds": len(runs),
        })  # fmt: skip
        priv_s.append(ps)
        util_s.append(us)
    table = pd.DataFrame(rows)
    b = stats.bootstrap.resamples
    if table.empty:
        return FamilyPoints(table, np.zeros((0, b)), np.zeros((0, b)))
    table["on_frontier"] = False
    for _, idx in table.groupby(["family", "label"]).groups.items():
        sub = table.loc[idx]
        table.loc[idx, "on_frontier"] = pareto_mask(sub["privacy"].to_numpy(),
                                                    sub["utility"].to_numpy())  # fmt: skip
    return FamilyPoints(table, np.stack(priv_s), np.stack(util_s))


# ---- hypervolume on resamples ---------------------------------------------------------


def hypervolume_samples(privacy: np.ndarray, utility: np.ndarray, chance: float) -> np.ndarray:
    """Hypervolume (see :func:`privaudit.leaderboard.board.hypervolume`) of each column of
    ``privacy`` and ``utility`` (points × B): the area of the box [0, 1] × [chance, 1] the
    points dominate, on every resample at once. NaN coordinates add nothing."""
    x = np.clip(np.asarray(privacy, float), 0.0, 1.0)
    y = np.clip((np.asarray(utility, float) - chance) / (1.0 - chance), 0.0, 1.0)
    bad = ~(np.isfinite(x) & np.isfinite(y))
    x, y = np.where(bad, 0.0, x), np.where(bad, 0.0, y)
    order = np.argsort(-x, axis=0, kind="stable")
    xs = np.take_along_axis(x, order, axis=0)
    ys = np.maximum.accumulate(np.take_along_axis(y, order, axis=0), axis=0)
    nxt = np.vstack([xs[1:], np.zeros((1, xs.shape[1]))])
    return np.sum((xs - nxt) * ys, axis=0)


def sample_ranks(scores: np.ndarray, identity: np.ndarray) -> np.ndarray:
    """Ranks (labels × B) of ``scores`` (higher is better) on every resample: 1 + the number
    of labels that beat it, an identity label also below a real one it ties with."""
    s = np.round(np.asarray(scores, float), 12)
    beats = s[None, :, :] > s[:, None, :]  # [l, m, b]: m beats l
    ties = (s[None, :, :] == s[:, None, :]) & (~identity)[None, :, None] & identity[:, None, None]
    return 1 + np.sum(beats | ties, axis=1)
