"""Per-run statistics over the outcomes: the run's bootstrap, intervals and normalised privacy.

Everything here is computed from the results table and the per-document outcomes the cells
stored (:mod:`privaudit.metrics.outcomes`), on the run's one set of bootstrap resamples over
test documents (:class:`Bootstrap`): B resamples of every row at once, so two defenses, two
attacks, a minimum over attacks or a rank are all compared on the same resampled documents
(paired intervals).

**Attacker randomness.** A learned attack's score also varies between fits (its ``rng``
seed): the attack class declares that spread as ``fit_sd`` (:class:`privaudit.api.Attack`,
measured). Each resample adds to each cell's resampled score an independent
N(0, ``fit_sd``²) fit effect (:meth:`Bootstrap.fit_effects`, drawn from a Generator seeded by
the bootstrap's seed and the cell's key), so every interval covers both sources of noise.
One cell's effect is the same wherever that cell is used within a resample (its score, its
empirical and normalised privacy, the reference of the defended cells' normalised privacy,
a worst case); two cells are separate fits and get independent effects, so a paired
comparison stays paired on documents and adds 2·``fit_sd``² from the fits. The baselines
(a frequency guess, the majority class) are not refitted and get none. This is the
documented-estimate route: no extra fits at run time. K refits per cell (a two-level
bootstrap) would measure the spread per cell, at K times the attack cost. The measured sds
are at most 0.35 of the document SE at n = 300, except vec2text's decoding (0.5–0.6); the
two-noise coverage test is in ``tests/metrics/test_outcomes.py``.

**Utility evaluator randomness.** Likewise the utility evaluator's headline varies between
its fits (the service's training seed): the evaluator class declares ``fit_sd``
(:class:`privaudit.api.UtilityEvaluator`, measured), and each resample adds to each defense
point's utility an independent N(0, ``fit_sd``²) effect (its own stream: the key
``utility|<point>``), the same on every row of that point; two points are separate fits, so
a paired utility difference stays paired on documents and adds 2·``fit_sd``².

**Normalised privacy** of an attack row, in [0, 1]::

    normalised = clip((s_ref − s) / (s_ref − s_base), 0, 1)

where ``s`` is the attack's score at this point, ``s_base`` its no-information baseline
(``attack_baseline``: the frequent-token guess, the majority class, the unconditioned decoder;
a row that has none takes the metric's declared null score, an attacker recovering nothing)
and ``s_ref`` its score against the undefended release (the ``none`` defense, same attack and
seed), or, when the run has no ``none`` or the attack cannot read the undefended release, the
metric's declared perfect score (1, or 0 for an error such as the reconstruction MSE).
1 = the attacker does no better than guessing without the release; 0 = as well as against
the original text. The formula is the same whichever way a metric points (for the MSE,
``s_ref`` is small and ``s_base`` large): every direction-dependent step reads the row's
:class:`~privaudit.metrics.spec.MetricSpec`, never its name. Where the attack is not
**informative** — ``s_ref`` beats ``s_base`` by less than :data:`MIN_SPAN` (0.02 on a
bounded score), or the paired bootstrap interval of ``s_ref − s_base`` reaches 0 — it learns
nothing measurable even from the original text: its normalised privacy is undefined (NaN)
and it sets no worst case (a tiny span would make one lucky document decide it).

**Families**: the ``family`` column the scorers write (declared by each metric,
:mod:`privaudit.metrics.spec`); worst-case privacy per family is the leaderboard's
(:mod:`privaudit.leaderboard.stats`).
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy.stats import chi2

from privaudit.api import NONE
from privaudit.metrics.outcomes import Outcome, bootstrap_weights, interval, quiet_nan
from privaudit.metrics.spec import MetricSpec, find_metric
from privaudit.metrics.units import Units

if TYPE_CHECKING:
    import pandas as pd

#: The least advantage (score points over the baseline, against the undefended release) for
#: a bounded metric's attack to count as informative (:func:`_informative`).
MIN_SPAN = 0.02


def legacy_family(attack: str, metric: str) -> str:
    """The family of a row written before the ``family`` column existed: the metric's, for
    the target its attack label names (``attribute-inference[gender]``, ``geia[entities]``);
    ``text`` for a metric no longer registered."""
    target = attack.split("[", 1)[1].rstrip("]") if "[" in attack else ""
    spec = find_metric(metric)
    if spec is None:
        return "text"
    if spec.family == "attribute" and not target:
        target = "?"
    return spec.family_of(target)


@dataclass(frozen=True)
class Bootstrap:
    """The run's resamples: ``resamples`` draws of the test documents' units, seeded by
    ``seed``. ``units`` (:class:`~privaudit.metrics.units.Units`): each test document's unit;
    with people, a resample draws people and keeps all of a drawn person's documents
    together (a cluster bootstrap); None resamples documents."""

    resamples: int = 1000
    level: float = 0.95
    seed: int = 0
    units: Units | None = None

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> Bootstrap:
        spec = meta.get("bootstrap") or {}
        kept = {k: spec[k] for k in ("resamples", "level", "seed") if k in spec}
        return cls(**kept, units=Units.from_meta(meta.get("unit")))

    def weights(self, n_docs: int) -> np.ndarray:
        """Multiplicities (B, ``n_docs``) of every test document on every resample."""
        if self.units is None:
            return _weights(n_docs, self.resamples, self.seed)
        if self.units.n_documents != n_docs:
            raise ValueError(
                f"The run's units cover {self.units.n_documents} test documents but the "
                f"outcomes cover {n_docs}: the run directory is inconsistent; re-run it."
            )
        return self.units.weights(self.resamples, self.seed)

    @property
    def unit_kind(self) -> str:
        """``person`` or ``document``: what a resample draws."""
        return "document" if self.units is None else self.units.kind

    def fit_effects(self, key: str, sd: float) -> np.ndarray:
        """One cell's fit effect on each resample, (B,) draws of N(0, ``sd``²): seeded by this
        bootstrap's seed and the cell's ``key``, so the cell gets the same effects whichever
        table holds it, and two cells independent ones."""
        seq = np.random.SeedSequence([self.seed, zlib.crc32(key.encode())])
        return np.random.default_rng(seq).normal(0.0, sd, self.resamples)


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
            record = {
                "reducer": reducer,
                "k": int(k),
                "stats": np.asarray(stats, np.float64),
                "docs": None if docs is None else np.asarray(docs, np.int64),
            }
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
    frame: pd.DataFrame,
    outcomes: Outcomes,
    bootstrap: Bootstrap,
    n_test: int | None = None,
    fit_sd: Mapping[str, float] | None = None,
    utility_fit_sd: float | Mapping[str, float] | None = None,
) -> RunStats:
    """Samples of every row of ``frame`` (reset to a 0..R-1 index) on the run's resamples.

    ``fit_sd``: the between-fit sd of each attack's score, by the ``attack`` column's label
    or the name before its ``[target]`` (:func:`privaudit.registry.attack_fit_sds` reads the
    attack classes' declarations); an attack it does not name is taken as deterministic.
    ``utility_fit_sd``: the utility evaluator's between-fit sd, one number for every row or
    by the ``utility_evaluator`` column's label or the name before its ``[method]``
    (:func:`privaudit.registry.utility_fit_sds`); an evaluator it does not name is taken as
    deterministic."""
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
    # A metric no longer registered (None) reads as a bounded success score, the common case.
    specs = [find_metric(m) for m in frame["attack_metric"]]
    if fit_sd:
        _add_fit_effects(frame, score, specs, bootstrap, fit_sd)
    if utility_fit_sd:
        _add_utility_effects(frame, util, bootstrap, utility_fit_sd)
    higher = np.array([s is None or s.higher_is_stronger for s in specs], dtype=bool)
    privacy = np.where(higher[:, None], 1.0 - score, score)
    norm_point, norm = _normalised(frame, score, base, specs, bootstrap.level)
    return RunStats(frame, bootstrap, score, base, util, privacy, norm, norm_point, found)


def _add_fit_effects(
    frame: pd.DataFrame,
    score: np.ndarray,
    specs: list[MetricSpec | None],
    bootstrap: Bootstrap,
    fit_sd: Mapping[str, float],
) -> None:
    """Add each measured cell's fit effects to its score samples, in place (module
    docstring); a bounded score stays in [0, 1]."""
    for r, (attack, key) in enumerate(zip(frame["attack"], frame["cell_key"], strict=True)):
        label = str(attack)
        sd = fit_sd.get(label, fit_sd.get(label.split("[", 1)[0], 0.0))
        if not sd > 0 or not np.isfinite(score[r]).any():
            continue
        if not isinstance(key, str):  # a row without a cell key: its identity instead
            cols = [c for c in ("attack", "label", "knob_value", "seed") if c in frame.columns]
            key = "|".join(str(frame.at[r, c]) for c in cols)
        score[r] += bootstrap.fit_effects(key, float(sd))
        spec = specs[r]
        if spec is None or spec.bounded:
            np.clip(score[r], 0.0, 1.0, out=score[r])


def _add_utility_effects(
    frame: pd.DataFrame,
    util: np.ndarray,
    bootstrap: Bootstrap,
    fit_sd: float | Mapping[str, float],
) -> None:
    """Add each point's evaluator fit effect to its utility samples, in place (module
    docstring): one draw per point, shared by its rows; utility stays in [0, 1]."""
    evaluators = frame["utility_evaluator"] if "utility_evaluator" in frame.columns else None
    for r, point in enumerate(frame["point"]):
        if isinstance(fit_sd, Mapping):
            label = "" if evaluators is None else str(evaluators.iat[r])
            sd = fit_sd.get(label, fit_sd.get(label.split("[", 1)[0], 0.0))
        else:
            sd = fit_sd
        if not sd > 0 or not np.isfinite(util[r]).any():
            continue
        if not isinstance(point, str):  # a row without a point key: its point's identity
            cols = [c for c in ("label", "knob_value", "target_rate", "seed") if c in frame]
            point = "|".join(str(frame.at[r, c]) for c in cols)
        util[r] += bootstrap.fit_effects(f"utility|{point}", float(sd))
        np.clip(util[r], 0.0, 1.0, out=util[r])


def with_labels(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy whose ``label`` column is filled from ``defense`` where missing (older runs)."""
    frame = frame.copy()
    fallback = frame["defense"] if "defense" in frame.columns else "?"
    if "label" not in frame.columns:
        frame["label"] = fallback
    else:
        frame["label"] = frame["label"].where(frame["label"].notna(), fallback)
    frame["label"] = frame["label"].astype(str)
    return frame


def _prepared(frame: pd.DataFrame) -> pd.DataFrame:
    frame = with_labels(frame).reset_index(drop=True)
    for col in ("cell_key", "point", "attack_baseline", "family", "seed"):
        if col not in frame.columns:
            frame[col] = None if col != "attack_baseline" else np.nan
    missing = frame["family"].isna()
    if missing.any():
        frame.loc[missing, "family"] = [
            legacy_family(str(a), str(m))
            for a, m in zip(
                frame.loc[missing, "attack"], frame.loc[missing, "attack_metric"], strict=True
            )
        ]
    return frame


def _n_test(frame: pd.DataFrame, outcomes: Outcomes) -> int:
    if "n_test" in frame.columns:
        n = frame["n_test"].dropna()
        if len(n):
            return int(n.max())
    top = max((int(o.docs.max()) + 1 for o in outcomes.entries.values() if o.docs.size), default=0)
    return top


def _normalised(
    frame: pd.DataFrame,
    score: np.ndarray,
    base: np.ndarray,
    specs: list[MetricSpec | None],
    level: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Point estimates (rows,) and samples (rows, B) of normalised privacy; each row's
    direction, perfect score and null score come from its metric's declaration."""
    s_point = frame["attack_score"].astype(float).to_numpy()
    b_point = frame["attack_baseline"].astype(float).to_numpy()
    perfect = np.array([1.0 if s is None else s.perfect for s in specs], dtype=float)
    null = np.array([0.0 if s is None else s.null_score for s in specs], dtype=float)
    unbounded = np.array([s is not None and not s.bounded for s in specs], dtype=bool)
    # No declared baseline: an attacker that recovers nothing (the metric's null score).
    no_base = ~np.isfinite(b_point)
    b_point = np.where(no_base, null, b_point)
    base = np.where(no_base[:, None] & np.isnan(base), b_point[:, None], base)
    ref_point, ref = perfect.copy(), np.repeat(perfect[:, None], score.shape[1], axis=1)
    ok = (frame["status"] == "ok").to_numpy()
    is_none = (frame["defense"] == NONE).to_numpy() & ok
    # Each corpus's rows refer to its own undefended row (merged runs, --mixed-corpora);
    # one corpus (or none recorded) keeps the plain (attack, seed) match.
    digests = frame.get("corpus_fingerprint")
    corpus = [d if isinstance(d, str) else None for d in digests] if digests is not None else []
    if len(set(corpus) - {None}) < 2:
        corpus = [None] * len(frame)
    keys = list(zip(frame["attack"], frame["seed"], corpus, strict=True))
    lookup = {k: r for r, k in enumerate(keys) if is_none[r]}
    has_ref = np.zeros(len(frame), dtype=bool)
    for r, k in enumerate(keys):
        hit = lookup.get(k)
        if hit is not None:
            ref_point[r], ref[r], has_ref[r] = s_point[hit], score[hit], True
    sign = np.array([1.0 if s is None else s.sign for s in specs], dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        span_p = ref_point - b_point
        point = np.where(np.abs(span_p) > 1e-12, (ref_point - s_point) / span_p, np.nan)
        span = ref - base
        samples = np.where(np.abs(span) > 1e-12, (ref - score) / span, np.nan)
    # Informativeness is a property of the attack on the undefended release; an attack that
    # cannot read it (referred to its perfect score) only needs a positive span.
    informative = np.where(
        has_ref,
        _informative(span_p * sign, span * sign[:, None], unbounded, level),
        span_p * sign > 0,
    )
    point = np.where(informative, point, np.nan)
    samples = np.where(informative[:, None] & (span * sign[:, None] > 0), samples, np.nan)
    point = np.where(ok, np.clip(point, 0.0, 1.0), np.nan)
    samples = np.where(ok[:, None], np.clip(samples, 0.0, 1.0), np.nan)
    return point, samples


def _informative(
    span: np.ndarray, samples: np.ndarray, unbounded: np.ndarray, level: float
) -> np.ndarray:
    """Whether an attack learns anything from the undefended release: its success there beats
    its baseline by at least :data:`MIN_SPAN` (bounded metrics) and the paired bootstrap
    interval of that difference excludes 0. Otherwise a tiny span turns one lucky document
    into a normalised privacy of 0 (GEIA recovering 1 % of entity strings undefended, 0 % by
    its baseline), and that noise would set the worst case."""
    ok = np.isfinite(span) & (span > np.where(unbounded, 1e-12, MIN_SPAN))
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


#: The confidence of the upper bound a measured fit spread enters the intervals as
#: (:func:`sd_upper_bound`).
FIT_SD_CONFIDENCE = 0.8


def sd_upper_bound(sd: float, fits: int, confidence: float = FIT_SD_CONFIDENCE) -> float:
    """The one-sided upper ``confidence`` bound on a normal spread whose sample sd over
    ``fits`` values is ``sd`` (chi-square with ``fits - 1`` degrees of freedom). A spread
    read off three fits is often far below the truth: used as measured, 9 % of null boards
    with a real but undeclared spread (attack .01, service .015) made a family-wise false
    claim; as this 80 % bound, see ``benchmarks/null_boards_47.py fw10meas``."""
    df = int(fits) - 1
    if df < 1 or not math.isfinite(sd):
        return math.nan
    return float(sd) * math.sqrt(df / chi2.ppf(1.0 - confidence, df))


def measured_sds(table: pd.DataFrame | None) -> tuple[dict[str, float], float | None]:
    """From a run's fit_noise.csv (:mod:`privaudit.audit.fit_noise`): the spread per attack
    row label (the largest over seeds) and the service's (None when not measured), each the
    :func:`sd_upper_bound` of the measured sd over its fits."""
    if table is None or table.empty:
        return {}, None
    ok = table[(table["status"] == "ok") & table["measured_sd"].notna()].copy()
    ok["measured_sd"] = [
        sd_upper_bound(sd, k) for sd, k in zip(ok["measured_sd"], ok["fits"], strict=True)
    ]
    attacks = ok[ok["what"] == "attack"].groupby("label")["measured_sd"].max()
    utility = ok[ok["what"] == "utility"]["measured_sd"]
    return {str(k): float(v) for k, v in attacks.items()}, (
        float(utility.max()) if len(utility) else None
    )
