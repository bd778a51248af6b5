"""Per-document outcomes: every scorer's outcome is its score, the reducers agree with
scikit-learn, records round-trip, and the bootstrap's 95 % interval covers a known truth at
close to the nominal rate."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import balanced_accuracy_score, f1_score

from privaudit.api import Predictions, Release
from privaudit.metrics import Truth, families, metrics, score_predictions
from privaudit.metrics.outcomes import Outcome, bootstrap_weights, interval, reduce
from privaudit.metrics.stats import Bootstrap, Outcomes, run_stats

# -------------------------------------------------------------------------------------------
# (a) Every metric: outcome.value() is attack_score, baseline_outcome.value() attack_baseline
# -------------------------------------------------------------------------------------------


def _truth() -> Truth:
    emb = np.arange(40, dtype=np.float32).reshape(20, 2) / 10
    return Truth(
        tokens=[np.array([1, 2, 3, 2]), np.array([4, 5]), np.array([2, 7, 8])],
        attributes={"gender": ["F", "M", "F"], "age_bin": ["a", None, "b"]},
        texts=["Alice lives in Paris.", "Bob works at Acme.", "Carol likes Rome a lot."],
        entities=[
            [{"text": "Alice", "type": "PERSON"}, {"text": "Paris", "type": "GPE"}],
            [{"text": "Bob", "type": "PERSON"}, {"text": "Acme", "type": "ORG"}],
            [{"text": "Carol", "type": "PERSON"}, {"text": "Rome", "type": "GPE"}],
        ],
        embeddings=emb,
        frequent_token=2,
        extra={
            "author": ["ann", "bob", "eve"],
            "candidates": {"bob": 3, "ann": 2, "cat": 1},
            "person": [0, 1, 0],
        },
    )


def _cases(t: Truth) -> dict[str, list[tuple[Predictions, Release | None]]]:
    """Hand-made predictions for every metric: one on every victim, one on a subset."""
    vocab = ["alice", "lives", "paris", "bob", "works", "acme", "carol", "rome"]
    vecs = [t.embeddings[np.asarray(x)] + 0.3 for x in t.tokens]
    return {
        "token_recovery": [
            (Predictions("tokens", tokens=[[1, 2, 9, 2], [4], [2, 7, 8]]), None),
            (Predictions("tokens", tokens=[[4, 5]], meta={"doc_indices": [1]}), None),
        ],
        "token_f1": [
            (Predictions("tokens", tokens=[[3, 2, 1], [5, 5, 9], []]), None),
            (Predictions("tokens", tokens=[[7, 2], [1]], meta={"doc_indices": [2, 0]}), None),
        ],
        "embedding_mse": [
            (Predictions("tokens", tokens=[list(x) for x in t.tokens], vectors=vecs), None),
            (
                Predictions(
                    "tokens",
                    tokens=[[4, 6]],
                    vectors=[vecs[1]],
                    meta={"doc_indices": [1], "released_tokens": [[4, 6]]},
                ),
                None,
            ),
        ],
        "entity_f1": [
            (
                Predictions(
                    "entities",
                    entities=[
                        [{"text": "alice", "type": "PERSON"}],
                        [{"text": "Acme", "type": "GPE"}],
                        [],
                    ],
                ),
                None,
            ),
            (Predictions("entities", entities=[t.entities[2]], meta={"doc_indices": [2]}), None),
        ],
        "text_similarity": [
            (
                Predictions("texts", texts=["Alice lives in Paris.", "Bob works.", "x"]),
                Release("text", texts=["<P> lives in <G>.", "<P> works at <O>.", "<P> likes."]),
            ),
            (Predictions("texts", texts=["Carol"], meta={"doc_indices": [2]}), None),
        ],
        "attribute_accuracy": [
            (
                Predictions(
                    "attributes",
                    attributes={"gender": ["F", "F", "M"], "age_bin": ["a"] * 3},
                    meta={"majority": {"gender": "F", "age_bin": "b"}},
                ),
                None,
            ),
            (
                Predictions(
                    "attributes",
                    attributes={"gender": ["M", "F"]},
                    meta={"majority": {"gender": "M"}, "doc_indices": [1, 2]},
                ),
                None,
            ),
        ],
        "word_set_f1": [
            (
                Predictions(
                    "tokens",
                    tokens=[[0, 1], [3, 4, 5], [7]],
                    meta={"vocabulary": vocab, "baseline_tokens": [1, 4]},
                ),
                None,
            ),
            (
                Predictions(
                    "tokens",
                    tokens=[[6]],
                    meta={"vocabulary": vocab, "baseline_tokens": [6], "doc_indices": [2]},
                ),
                None,
            ),
        ],
        "generation_f1": [
            (
                Predictions(
                    "texts",
                    texts=["Alice lives in Rome.", "Bob works.", "Carol likes it."],
                    meta={"baseline_text": "Bob likes it."},
                ),
                None,
            ),
            (
                Predictions(
                    "texts",
                    texts=["Carol likes Rome."],
                    meta={"baseline_text": "Rome.", "doc_indices": [2]},
                ),
                None,
            ),
        ],
        # Victims 0 and 2 are one person: scored once, at victim 0.
        "person_attribute_accuracy": [
            (
                Predictions(
                    "attributes",
                    attributes={"gender": ["F", "M", "F"], "age_bin": ["a", "b", "a"]},
                    meta={"majority": {"gender": "M", "age_bin": "b"}},
                ),
                None,
            ),
            (
                Predictions(
                    "attributes",
                    attributes={"gender": ["M", "F"]},
                    meta={"majority": {"gender": "M"}, "doc_indices": [1, 2]},
                ),
                None,
            ),
        ],
        # eve is no candidate: scored on ann and bob only.
        "reidentification_accuracy": [
            (Predictions.of("ranking", [["ann", "bob"], ["ann", "bob"], ["cat"]]), None),
            (
                Predictions.of("ranking", [["bob"], ["cat", "ann"]], meta={"doc_indices": [1, 0]}),
                None,
            ),
        ],
    }


def test_every_metric_is_covered() -> None:
    assert set(_cases(_truth())) == set(metrics())


@pytest.mark.parametrize("metric", sorted(metrics()))
def test_outcome_value_is_the_score(metric: str) -> None:
    t = _truth()
    for predictions, release in _cases(t)[metric]:
        rows = score_predictions(predictions, t, metric, release)
        assert rows
        indices = predictions.meta.get("doc_indices")
        for row in rows:
            if row.get("status") == "n/a":
                continue
            outcome = row["outcome"]
            assert isinstance(outcome, Outcome)
            assert np.isfinite(row["attack_score"])
            assert outcome.value() == pytest.approx(row["attack_score"], abs=1e-12, rel=0)
            baseline = row["baseline_outcome"]
            if "attack_baseline" in row:
                assert baseline.value() == pytest.approx(row["attack_baseline"], abs=1e-12, rel=0)
                assert baseline.docs.tolist() == outcome.docs.tolist()  # the same victims
            else:
                assert baseline is None
            # The outcome's documents are the victims' test indices.
            allowed = set(range(3)) if indices is None else set(indices)
            assert set(outcome.docs.tolist()) <= allowed
            assert row["family"] in families() or row["family"].startswith("attribute[")
            # Records survive JSON and give the same value back.
            back = Outcome.from_record(json.loads(json.dumps(outcome.to_record())))
            assert back.value() == pytest.approx(outcome.value(), abs=1e-6)


def test_baselines_exist_where_the_metric_has_one() -> None:
    t = _truth()
    cases = _cases(t)
    with_baseline = {"token_recovery", "token_f1", "embedding_mse", "text_similarity",
                     "attribute_accuracy", "word_set_f1", "generation_f1"}  # fmt: skip
    for metric in with_baseline:
        predictions, release = cases[metric][0]
        row = score_predictions(predictions, t, metric, release)[0]
        assert isinstance(row["baseline_outcome"], Outcome), metric


# -------------------------------------------------------------------------------------------
# (b) The reducers, records and resampling
# -------------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::UserWarning")  # sklearn on classes absent from y_true
def test_class_reducers_agree_with_sklearn() -> None:
    rng = np.random.default_rng(0)
    for trial in range(30):
        n = int(rng.integers(1, 60))
        k = int(rng.integers(2, 5))
        y_true = rng.integers(0, k, n)
        y_pred = np.where(rng.random(n) < 0.6, y_true, rng.integers(0, k + 1, n))
        ba = Outcome.classes(y_true, y_pred, "balanced_accuracy")
        mf = Outcome.classes(y_true, y_pred, "macro_f1")
        expected = balanced_accuracy_score(y_true, y_pred)
        assert ba.value() == pytest.approx(expected, abs=1e-12), trial
        assert mf.value() == pytest.approx(
            f1_score(y_true, y_pred, average="macro", zero_division=0), abs=1e-12
        )
        # A resample is the score of the repeated documents.
        w = bootstrap_weights(n, 5, seed=trial)
        for b in range(5):
            rep = np.repeat(np.arange(n), w[b])
            f1 = f1_score(y_true[rep], y_pred[rep], average="macro", zero_division=0)
            assert mf.resample(w)[b] == pytest.approx(f1, abs=1e-12)
            if len(set(y_pred[rep]) - set(y_true[rep])) == 0:
                expected = balanced_accuracy_score(y_true[rep], y_pred[rep])
                assert ba.resample(w)[b] == pytest.approx(expected, abs=1e-12)


def test_ratio_and_f1_reducers() -> None:
    r = Outcome.ratio([1, 2, 3], [2, 2, 4])
    assert r.value() == pytest.approx(6 / 8)
    assert Outcome.ratio([0.5, 1.0]).value() == pytest.approx(0.75)  # a mean
    f = Outcome.f1([1, 2], [2, 3], [3, 2])
    assert f.value() == pytest.approx(2 * 3 / (5 + 5))
    assert Outcome.f1([0], [0], [4]).value() == 0.0  # nothing predicted
    assert np.isnan(Outcome.f1([0], [3], [0]).value())  # nothing to find
    assert np.isnan(Outcome.ratio([], []).value())  # no documents: undefined, not an error


def test_records_round_trip() -> None:
    outcomes = [
        Outcome.ratio([1, 2, 3], [2, 2, 4], docs=[5, 1, 9]),
        Outcome.ratio([0.25, 0.123456789]),
        Outcome.f1([1, 0], [2, 1], [1, 1]),
        Outcome.classes(["a", "b", "a"], ["a", "a", "a"], "balanced_accuracy"),
        Outcome.classes([0, 1, 2, 1], [0, 2, 2, 1], "macro_f1", docs=[3, 2, 1, 0]),
    ]
    for o in outcomes:
        record = json.loads(json.dumps(o.to_record()))
        back = Outcome.from_record(record)
        assert back.reducer == o.reducer
        assert back.docs.tolist() == o.docs.tolist()
        np.testing.assert_allclose(back.stats, o.stats, atol=1e-7)
        assert back.value() == pytest.approx(o.value(), abs=1e-7)
    assert outcomes[0].to_record()["docs"] == [5, 1, 9]
    assert outcomes[2].to_record()["docs"] is None  # contiguous documents are implied
    assert isinstance(outcomes[2].to_record()["stats"][0][0], int)  # integers stay integers


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="Unknown reducer"):
        Outcome("median", np.zeros((2, 2)), np.arange(2))
    with pytest.raises(ValueError, match="Unknown reducer"):
        reduce("median", np.zeros(2))
    with pytest.raises(ValueError, match="3 document indices for 2 rows"):
        Outcome.ratio([1, 2], [1, 1], docs=[0, 1, 2])
    with pytest.raises(ValueError, match="2-D"):
        Outcome("ratio", np.zeros(4), np.arange(4))
    with pytest.raises(ValueError, match="3 predictions for 2 true values"):
        Outcome.classes([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="balanced_accuracy or macro_f1"):
        Outcome.classes([0, 1], [0, 1], "accuracy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one document"):
        bootstrap_weights(0)
    with pytest.raises(ValueError, match="at least 1"):
        bootstrap_weights(3, 0)
    with pytest.raises(ValueError, match="resamples cover 3"):
        Outcome.ratio([1], docs=[5]).resample(bootstrap_weights(3, 4))
    with pytest.raises(ValueError, match="level"):
        interval(np.zeros(4), level=1.0)


def test_resample_picks_its_documents_columns() -> None:
    w = bootstrap_weights(10, 200, seed=3)
    assert w.shape == (200, 10) and (w.sum(axis=1) == 10).all()
    assert (bootstrap_weights(10, 200, seed=3) == w).all()  # one set per run seed
    o = Outcome.ratio([1.0, 3.0], [2.0, 4.0], docs=[3, 7])
    expected = [
        (w[b, 3] * 1 + w[b, 7] * 3) / (w[b, 3] * 2 + w[b, 7] * 4) if w[b, 3] + w[b, 7] else np.nan
        for b in range(200)
    ]
    np.testing.assert_allclose(o.resample(w), expected, equal_nan=True)
    assert np.isnan(o.resample(w)).any()  # resamples without its documents are undefined
    lo, hi = interval(o.resample(w))
    assert 0.5 <= lo <= hi <= 0.75
    lo, hi = interval(np.full((5, 2), np.nan))
    assert np.isnan(lo).all() and np.isnan(hi).all()


# -------------------------------------------------------------------------------------------
# (c) Coverage: the 95 % percentile interval covers a known truth at close to 95 %
# -------------------------------------------------------------------------------------------

N_DOCS = 300
N_SIMULATIONS = 1000
N_BOOTSTRAP = 1000


def _coverage(
    simulate: Callable[[np.random.Generator], np.ndarray], reducer: str, truth: float, seed: int
) -> float:
    """The share of simulated test sets whose 95 % bootstrap interval covers ``truth``:
    the per-document statistics of every simulation at once (S, n, k) are resampled with
    one (B, n) weight matrix in one matrix product, (B, n) @ (n, S·k)."""
    rng = np.random.default_rng(seed)
    stats = simulate(rng)  # (S, n, k)
    n_sim, n_docs, k = stats.shape
    weights = bootstrap_weights(n_docs, N_BOOTSTRAP, seed=seed).astype(np.float64)
    sums = weights @ stats.transpose(1, 0, 2).reshape(n_docs, n_sim * k)
    samples = reduce(reducer, sums.reshape(N_BOOTSTRAP, n_sim, k))  # (B, S)
    lo, hi = interval(samples, 0.95, axis=0)
    return float(np.mean((lo <= truth) & (truth <= hi)))


def _bernoulli(rng: np.random.Generator) -> np.ndarray:
    hits = (rng.random((N_SIMULATIONS, N_DOCS)) < 0.3).astype(np.float64)
    return np.stack([hits, np.ones_like(hits)], axis=-1)


def _unequal_lengths(rng: np.random.Generator) -> np.ndarray:
    """Token recovery: each document has its own length (1 + Poisson(20)) and its own
    recovery rate (Beta(2, 3), independent of the length), so the pooled ratio estimates
    E[hits] / E[length] = E[rate] = 0.4."""
    lengths = 1 + rng.poisson(20, (N_SIMULATIONS, N_DOCS))
    rates = rng.beta(2, 3, (N_SIMULATIONS, N_DOCS))
    hits = rng.binomial(lengths, rates)
    return np.stack([hits, lengths], axis=-1).astype(np.float64)


def _imbalanced_classes(rng: np.random.Generator) -> np.ndarray:
    """Balanced accuracy under imbalance: 80 % class 0 recalled at 0.9, 20 % class 1 at 0.6;
    the truth is (0.9 + 0.6) / 2 = 0.75. Per document (correct, count) for each class."""
    y = (rng.random((N_SIMULATIONS, N_DOCS)) < 0.2).astype(np.int64)
    correct = rng.random((N_SIMULATIONS, N_DOCS)) < np.where(y == 1, 0.6, 0.9)
    stats = np.zeros((N_SIMULATIONS, N_DOCS, 2, 2))
    for c in (0, 1):
        stats[..., c, 0] = (y == c) & correct
        stats[..., c, 1] = y == c
    return stats.reshape(N_SIMULATIONS, N_DOCS, 4)


@pytest.mark.parametrize(
    ("name", "simulate", "reducer", "truth"),
    [
        ("bernoulli p=0.3", _bernoulli, "ratio", 0.3),
        ("ratio, unequal lengths", _unequal_lengths, "ratio", 0.4),
        ("balanced accuracy, 80/20", _imbalanced_classes, "balanced_accuracy", 0.75),
    ],
)
def test_bootstrap_interval_covers_the_truth(
    name: str, simulate: Callable[[np.random.Generator], np.ndarray], reducer: str, truth: float
) -> None:
    t0 = time.perf_counter()
    coverage = _coverage(simulate, reducer, truth, seed=17)
    seconds = time.perf_counter() - t0
    setting = f"{N_SIMULATIONS} simulations, n={N_DOCS}, B={N_BOOTSTRAP}"
    print(f"\ncoverage of the 95% interval, {name}: {coverage:.3f} ({setting}, {seconds:.2f} s)")
    assert 0.93 <= coverage <= 0.97  # its cost: benchmarks/test_statistics.py


# -------------------------------------------------------------------------------------------
# (d) Coverage with attacker randomness: documents and fits both vary
# -------------------------------------------------------------------------------------------

FIT_SD = 0.025  # about the documents' SE at n = 300 (0.028), so leaving it out shows


def _two_noise_runs(seed: int) -> tuple[pd.DataFrame, Outcomes, float, float]:
    """N_SIMULATIONS simulated runs, two attack cells each (a, b) scored on the same test set:
    each cell is one attacker fit, whose success rate is its attack's (0.6, 0.55) plus a
    N(0, FIT_SD²) fit effect, and each document is hit when its own difficulty u ~ U(0, 1)
    falls below that rate (so a and b are strongly paired on documents). The truths are the
    expected scores over documents and fits: 0.6 and 0.6 − 0.55."""
    rng = np.random.default_rng(seed)
    rows, entries = [], {}
    for s in range(N_SIMULATIONS):
        u = rng.random(N_DOCS)
        for attack, rate in (("a", 0.6), ("b", 0.55)):
            hits = (u < rate + rng.normal(0.0, FIT_SD)).astype(np.float64)
            key = f"{s}|{attack}"
            rows.append(
                {
                    "defense": "t2t",
                    "label": "t2t",
                    "knob_value": float(s),
                    "attack": f"sim[{attack}]",
                    "seed": 0,
                    "status": "ok",
                    "attack_metric": "token_recovery",
                    "attack_score": hits.mean(),
                    "attack_baseline": 0.0,
                    "cell_key": key,
                    "point": str(s),
                    "n_test": N_DOCS,
                    "family": "text",
                }
            )
            entries[(key, "attack")] = Outcome.ratio(hits)
    return pd.DataFrame(rows), Outcomes(entries), 0.6, 0.6 - 0.55


def test_bootstrap_with_fit_effects_covers_the_truth_over_documents_and_fits() -> None:
    """With the attack's declared ``fit_sd`` the 95 % intervals of a score and of a paired
    difference of two cells cover the truth at close to 95 %; without it they under-cover
    (the documents' variance alone), the paired difference badly (documents cancel there,
    the two fits' effects do not)."""
    t0 = time.perf_counter()
    frame, outcomes, truth_a, truth_diff = _two_noise_runs(seed=5)
    boot = Bootstrap(resamples=N_BOOTSTRAP, level=0.95, seed=11)
    a = (frame["attack"] == "sim[a]").to_numpy()
    covered = {}
    for name, fit_sd in (("declared", {"sim": FIT_SD}), ("left out", None)):
        stats = run_stats(frame, outcomes, boot, fit_sd=fit_sd)
        covered[name] = _two_noise_coverage(stats, stats.score, a, truth_a, truth_diff)
    seconds = time.perf_counter() - t0
    print(
        f"\ncoverage of the 95% interval (score, paired difference): {covered} "
        f"({N_SIMULATIONS} simulations, n={N_DOCS}, B={N_BOOTSTRAP}, fit sd {FIT_SD}, "
        f"{seconds:.2f} s)"
    )
    score, diff = covered["declared"]
    assert 0.93 <= score <= 0.97 and 0.93 <= diff <= 0.97
    score, diff = covered["left out"]
    assert score < 0.90 and diff < 0.70


def _two_noise_coverage(
    stats: Any, samples: np.ndarray, first: np.ndarray, truth: float, truth_diff: float
) -> tuple[float, float]:
    """Shares of the simulations whose interval covers the truth: for the ``first`` rows'
    value, and for the paired difference first − the others (row for row)."""
    lo, hi = stats.ci(samples[first])
    diff_lo, diff_hi = stats.ci(samples[first] - samples[~first])
    return (
        float(np.mean((lo <= truth) & (truth <= hi))),
        float(np.mean((diff_lo <= truth_diff) & (truth_diff <= diff_hi))),
    )


UTILITY_FIT_SD = 0.03  # about the documents' SE of the balanced accuracy below (0.032)


def _two_noise_utilities(seed: int) -> tuple[pd.DataFrame, Outcomes, float, float]:
    """N_SIMULATIONS simulated runs, two defense points each (p, q) scored on the same test
    set of N_DOCS documents, 20 % of them class 1: each point is one evaluator fit, whose
    per-class recalls are its point's ((0.85, 0.7) and (0.8, 0.65)) plus one N(0,
    UTILITY_FIT_SD²) fit effect, and a document is predicted right when its own difficulty
    u ~ U(0, 1) falls below its class's recall (so p and q are paired on documents). The
    truths are the expected balanced accuracies over documents and fits: 0.775 and 0.05."""
    rng = np.random.default_rng(seed)
    rows, entries = [], {}
    for s in range(N_SIMULATIONS):
        y = (rng.random(N_DOCS) < 0.2).astype(np.int64)
        u = rng.random(N_DOCS)
        for point, recalls in (("p", (0.85, 0.7)), ("q", (0.8, 0.65))):
            right = u < np.asarray(recalls)[y] + rng.normal(0.0, UTILITY_FIT_SD)
            pred = np.where(right, y, 1 - y)
            key = f"{s}|{point}"
            rows.append(
                {
                    "defense": "t2t",
                    "label": "t2t",
                    "knob_value": float(s),
                    "attack": "a",
                    "seed": 0,
                    "status": "ok",
                    "attack_metric": "token_recovery",
                    "attack_score": np.nan,
                    "attack_baseline": 0.0,
                    "cell_key": key,
                    "point": key,
                    "n_test": N_DOCS,
                    "family": "text",
                    "utility_evaluator": "sim[x]",
                }
            )
            entries[(key, "utility")] = Outcome.classes(y, pred)
    return pd.DataFrame(rows), Outcomes(entries), 0.775, 0.05


def test_utility_intervals_with_evaluator_fit_effects_cover_the_truth() -> None:
    """With the evaluator's declared ``fit_sd`` the 95 % intervals of a point's utility and
    of a paired utility difference between two points cover the truth at close to 95 %;
    without it they under-cover (the documents' variance alone)."""
    t0 = time.perf_counter()
    frame, outcomes, truth_p, truth_diff = _two_noise_utilities(seed=7)
    boot = Bootstrap(resamples=N_BOOTSTRAP, level=0.95, seed=13)
    p = frame["point"].str.endswith("|p").to_numpy()
    stats = run_stats(frame, outcomes, boot, utility_fit_sd={"sim": UTILITY_FIT_SD})
    # Left out: the same resamples less each point's fit effects (one run_stats call, for
    # time; test_board_stats checks that these are exactly what run_stats adds).
    effects = np.stack([boot.fit_effects(f"utility|{k}", UTILITY_FIT_SD) for k in frame["point"]])
    covered = {}
    for name, utility in (("declared", stats.utility), ("left out", stats.utility - effects)):
        covered[name] = _two_noise_coverage(stats, utility, p, truth_p, truth_diff)
    seconds = time.perf_counter() - t0
    print(
        f"\ncoverage of the 95% utility interval (point, paired difference): {covered} "
        f"({N_SIMULATIONS} simulations, n={N_DOCS}, B={N_BOOTSTRAP}, fit sd "
        f"{UTILITY_FIT_SD}, {seconds:.2f} s)"
    )
    point, diff = covered["declared"]
    assert 0.93 <= point <= 0.97 and 0.93 <= diff <= 0.97
    point, diff = covered["left out"]
    assert point < 0.90 and diff < 0.70
