"""The unit of privacy: people are drawn with all their documents, a corpus without authors
keeps the document bootstrap draw for draw, and the stored ids are salted, never names."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privaudit.metrics.outcomes import Outcome, bootstrap_weights, interval
from privaudit.metrics.stats import Bootstrap
from privaudit.metrics.units import Units


def test_document_units_are_the_document_bootstrap() -> None:
    boot = Bootstrap(resamples=300, seed=4, units=Units.documents(57))
    assert np.array_equal(boot.weights(57), bootstrap_weights(57, 300, 4))
    # One document per author: the same draws too.
    singles = Units.of_authors([f"a{i}" for i in range(57)])
    assert np.array_equal(
        Bootstrap(resamples=300, seed=4, units=singles).weights(57), bootstrap_weights(57, 300, 4)
    )


def test_a_person_is_drawn_with_all_their_documents() -> None:
    units = Units.of_authors(["ann", "bob", "ann", None, "cy", "bob", "ann"])
    assert units.groups == (0, 1, 0, 2, 3, 1, 0)
    assert units.kind == "person" and units.n_units == 4 and units.clustered
    assert units.label() == "7 documents by 4 people"
    w = Bootstrap(resamples=500, seed=1, units=units).weights(7)
    assert np.array_equal(w[:, 0], w[:, 2]) and np.array_equal(w[:, 0], w[:, 6])
    assert np.array_equal(w[:, 1], w[:, 5])
    # Each resample draws 4 people: the multiplicities of the first documents sum to 4.
    assert np.all(w[:, units.first_documents()].sum(axis=1) == 4)


def test_the_ids_are_salted_and_round_trip() -> None:
    authors = ["alice.smith", "bob", "alice.smith"]
    units = Units.of_authors(authors)
    meta = units.to_meta(authors)
    text = json.dumps(meta)
    assert "alice" not in text and "bob" not in text
    assert meta["documents"] == 3 and meta["units"] == 2 and meta["kind"] == "person"
    assert Units.to_meta(units, authors)["ids"] != meta["ids"]  # a fresh salt per run
    back = Units.from_meta(meta)
    assert back == units
    boot = Bootstrap.from_meta({"bootstrap": {"resamples": 50, "seed": 2}, "unit": meta})
    assert boot.units == units and boot.unit_kind == "person"
    assert Bootstrap.from_meta({"bootstrap": {}}).units is None  # an older run: documents


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="unit is one of"):
        Units("household", (0, 1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-negative"):
        Units("person", (0, -1))
    with pytest.raises(ValueError, match="inconsistent"):
        Bootstrap(units=Units.documents(5)).weights(6)
    assert Units.of_authors(["a", "a"], kind="document") == Units.documents(2)
    assert Units.documents(0).label() == "0 documents"


def test_person_bootstrap_covers_where_the_document_bootstrap_does_not() -> None:
    """60 people x 16 documents with a strong person effect: the person bootstrap's 95 %
    interval of the mean covers the truth near 95 % of the time, the document one far less."""
    rng = np.random.default_rng(0)
    n_people, per = 60, 16
    groups = np.repeat(np.arange(n_people), per)
    units = Units("person", tuple(int(g) for g in groups))
    reps, covered = 120, {"document": 0, "person": 0}
    for rep in range(reps):
        p = rng.beta(1.0, 3.0, n_people)  # the person effect; the truth is E[p] = 0.25
        hits = rng.random(n_people * per) < p[groups]
        outcome = Outcome.ratio(hits.astype(float))
        for kind, u in (("document", None), ("person", units)):
            w = Bootstrap(resamples=400, seed=rep, units=u).weights(len(hits))
            lo, hi = interval(outcome.resample(w))
            covered[kind] += lo <= 0.25 <= hi
    assert covered["person"] / reps >= 0.88
    assert covered["document"] / reps <= 0.7


def test_merged_runs_keep_people_only_when_their_victims_agree(tmp_path) -> None:
    """Two runs of one corpus (ids salted apart, the same groups) keep the person bootstrap;
    runs whose victims differ fall back to documents, with a warning."""
    from privaudit.outputs.runs import load_runs
    from tests.leaderboard.test_leaderboard import make_run, ranked_rows

    authors = ["a", "b", "a", "c"]
    units = Units.of_authors(authors)
    rows = ranked_rows()
    one = make_run(tmp_path / "one", rows)
    two = make_run(tmp_path / "two", rows)
    for run, meta_unit in ((one, units.to_meta(authors)), (two, units.to_meta(authors))):
        meta = json.loads((run / "run.json").read_text())
        (run / "run.json").write_text(json.dumps(meta | {"unit": meta_unit}))
    assert load_runs([one, two]).bootstrap.units == units
    other = Units.of_authors(["a", "a", "b", "c"])
    meta = json.loads((two / "run.json").read_text())
    (two / "run.json").write_text(json.dumps(meta | {"unit": other.to_meta()}))
    with pytest.warns(UserWarning, match="resample documents, not people"):
        assert load_runs([one, two]).bootstrap.units is None
