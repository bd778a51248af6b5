"""The identity family: the re-identification metric on hand-made rankings, the TRI attack on
hand-made background and end to end on synthpai through the CLI, and ``n/a`` (a truth cause)
on a corpus without a background split."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privaudit.api import Knowledge, Predictions, Release
from privaudit.metrics import NotScorable, Truth, family_of, metric_spec, score_predictions
from privaudit.registry import ATTACKS
from tests.conftest import TINY, write_grid

METRIC = "reidentification_accuracy"
PRIOR = {"ann": 3, "bob": 2, "cat": 1, "dan": 1}  # most background documents first


def _truth(authors: list[Any]) -> Truth:
    return Truth.of({"author": authors, "candidates": PRIOR})


def test_top1_top5_mrr_and_the_prior_baseline() -> None:
    truth = _truth(["bob", "cat", "ann", "eve", None])
    rankings = [
        ["bob", "ann", "cat", "dan"],  # rank 1
        ["ann", "bob", "dan", "cat"],  # rank 4
        ["bob", "ann"],  # rank 2
        ["ann"],  # eve is no candidate: left out
        ["ann"],  # unknown author: left out
    ]
    variant = [["cat"], ["cat"], ["ann"], [], []]
    p = Predictions.of("ranking", rankings, meta={"variants": {"nn": variant}})
    (row,) = score_predictions(p, truth, METRIC)
    d = row["attack_details"]
    assert row["attack_score"] == pytest.approx(1 / 3)
    assert row["family"] == "identity" == family_of(METRIC)
    assert d["top5"] == pytest.approx(1.0)
    assert d["mrr"] == pytest.approx((1 + 1 / 4 + 1 / 2) / 3)
    # The prior ranking (ann, bob, cat, dan) for everyone: ann first -> 1 of 3.
    assert row["attack_baseline"] == pytest.approx(1 / 3)
    assert d["baseline_mrr"] == pytest.approx((1 / 2 + 1 / 3 + 1) / 3)
    assert (d["n_scored"], d["n_not_candidates"], d["n_candidates"]) == (3, 2, 4)
    assert d["nn_top1"] == pytest.approx(2 / 3)
    # Per-document outcomes on the scored victims' test indices, as every other row.
    assert list(row["outcome"].docs) == [0, 1, 2]
    assert row["empirical_privacy"] == pytest.approx(1 - 1 / 3)
    assert metric_spec(METRIC).higher_is_stronger


def test_a_subset_of_victims_is_scored_against_its_own_authors() -> None:
    truth = _truth(["ann", "bob", "cat"])
    p = Predictions.of("ranking", [["cat"], ["bob"]], meta={"doc_indices": [2, 0]})
    (row,) = score_predictions(p, truth, METRIC)
    assert row["attack_score"] == pytest.approx(0.5)  # cat right, ann wrong
    assert list(row["outcome"].docs) == [2, 0]


def test_no_background_or_no_candidate_author_is_not_scorable() -> None:
    p = Predictions.of("ranking", [["ann"]])
    with pytest.raises(NotScorable, match="no background split"):
        score_predictions(p, Truth.of({"author": ["ann"]}), METRIC)
    with pytest.raises(NotScorable, match="no victim's author is a candidate"):
        score_predictions(p, _truth(["eve"]), METRIC)
    with pytest.raises(ValueError, match="1 rankings for 2 victims"):
        score_predictions(p, _truth(["ann", "bob"]), METRIC)


def _background() -> Any:
    import datasets

    topics = {
        "ann": "my garden tomatoes roses compost soil",
        "bob": "the engine gearbox oil garage car",
        "cat": "violin concert orchestra rehearsal music",
    }
    rows = [(f"{w} {i}", a) for a, w in topics.items() for i in range(4)]
    return datasets.Dataset.from_dict(
        {"text": [t for t, _ in rows], "author": [a for _, a in rows]}
    )


def _knowledge(background: Any) -> Knowledge:
    # The undefended mechanism: the attacker's queries come back as they went in.
    return Knowledge(
        white_box=False,
        backbone=TINY,
        query_mechanism=lambda t: Release("text", texts=list(t)),
        extra={"background": background},
    )


def test_the_attack_ranks_the_author_of_a_released_text_first() -> None:
    attack = ATTACKS.get("reidentification")(**ATTACKS.get("reidentification").test_params)
    victims = Release("text", texts=["roses and compost", "the gearbox", "a violin concert"])
    fitted = attack.fit(_knowledge(_background()), rng=np.random.default_rng(0))
    p = fitted.attack(victims)
    assert p.kind == "ranking" and [r[0] for r in p.ranking] == ["ann", "bob", "cat"]
    assert sorted(p.ranking[0]) == ["ann", "bob", "cat"]  # every candidate, best first
    assert len(p.meta["variants"]["nearest_neighbour"]) == 3
    # Two candidates: one margin per document, still a full ranking.
    two = _background().filter(lambda r: r["author"] != "cat")
    p2 = attack.fit(_knowledge(two), rng=np.random.default_rng(0)).attack(victims)
    assert [r[0] for r in p2.ranking[:2]] == ["ann", "bob"]


def test_without_background_the_attack_says_why() -> None:
    attack = ATTACKS.get("reidentification")()
    release = Release("text", texts=["x"])
    reason = attack.applicable(release, _knowledge(None))
    assert reason is not None and "no background split" in reason
    assert attack.missing_knowledge(_knowledge(None))[1] == "truth"  # the corpus lacks it
    with pytest.raises(ValueError, match="background split"):
        attack.fit(_knowledge(None), rng=np.random.default_rng(0))


def test_a_corpus_without_background_is_n_a_with_a_truth_cause(tmp_path) -> None:
    from privaudit.audit.config import load_config
    from privaudit.outputs import run_grid

    config = load_config(
        {
            "name": "no-background",
            "backbone": TINY,
            "corpus": {
                "name": "synthetic-reviews",
                "params": {"n_docs": 60, "seed": 0},
                "limits": {"train": 20, "test": 8, "aux": 16},
            },
            "defenses": [{"name": "none"}],
            "attacks": ["reidentification"],
        }
    )
    frame = run_grid(config, run_dir=tmp_path / "run", progress=False).frame
    (row,) = frame[frame["attack"] == "reidentification"].to_dict("records")
    assert row["status"] == "n/a" and row["na_cause"] == "truth"
    assert "no background split" in row["reason"] and row["family"] == "identity"


@pytest.fixture(scope="module")
def synthpai_run(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    from privaudit.cli import app

    tmp = tmp_path_factory.mktemp("reid")
    grid = {
        "name": "reid",
        "backbone": TINY,
        "utility": "probe",
        "corpus": {
            "name": "synthpai",
            "limits": {"train": 150, "test": 120, "aux": 40, "public": 10},
        },
        "defenses": [{"name": "none"}, {"name": "t2t", "knob_values": [100]}],
        "attacks": ["reidentification"],
    }
    path = write_grid(tmp, grid)
    result = CliRunner().invoke(
        app, ["run", "--config", str(path), "--run-dir", str(tmp / "run"), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    return pd.read_csv(tmp / "run" / "results.csv")


def test_end_to_end_on_synthpai_beats_the_prior_at_none(synthpai_run: pd.DataFrame) -> None:
    rows = synthpai_run[synthpai_run["attack"] == "reidentification"]
    assert set(rows["status"]) == {"ok"} and set(rows["family"]) == {"identity"}
    none = rows[rows["defense"] == "none"].iloc[0]
    details = json.loads(none["attack_details"])
    # TF-IDF on the undefended text re-identifies well above the prior guess.
    assert none["attack_score"] > none["attack_baseline"] + 0.05
    assert details["mrr"] > details["baseline_mrr"]
    assert details["n_scored"] > 50 and details["n_candidates"] > 50
    t2t = rows[rows["defense"] == "t2t"].iloc[0]
    assert t2t["attack_score"] <= none["attack_score"]


def test_two_fits_give_the_same_rankings() -> None:
    # What the conformance suite checks of every attack (it skips this one: its matrix
    # corpus has no background): fit_sd 0 holds.
    cls = ATTACKS.get("reidentification")
    victims = Release("text", texts=["roses", "the engine oil", "music rehearsal"])
    runs = [
        cls(**cls.test_params).fit(_knowledge(_background()), rng=np.random.default_rng(s))
        for s in (0, 1)
    ]
    a, b = (r.attack(victims) for r in runs)
    assert a.ranking == b.ranking and a.meta == b.meta and cls.fit_sd == 0.0


def test_a_text_fit_does_not_depend_on_numpy_s_global_random_state() -> None:
    # liblinear shuffles its coordinate descent: its seed is fixed, not drawn from the
    # process's global state (which whatever ran before would have moved).
    import datasets

    words = [f"w{i}" for i in range(300)]
    draw = np.random.default_rng(5)
    rows = [(" ".join(draw.choice(words, 12)), f"a{k % 40}") for k in range(200)]
    background = datasets.Dataset.from_dict(
        {"text": [t for t, _ in rows], "author": [a for _, a in rows]}
    )
    victims = Release("text", texts=[" ".join(draw.choice(words, 12)) for _ in range(30)])
    cls = ATTACKS.get("reidentification")
    scores = []
    for state in (0, 1):
        np.random.seed(state)  # the global state is what this test moves
        fitted = cls(**cls.test_params).fit(_knowledge(background), rng=np.random.default_rng(0))
        scores.append(fitted._model.decision_function(fitted._vectorizer.transform(victims.texts)))
    np.testing.assert_array_equal(scores[0], scores[1])


def test_a_vector_release_is_ranked_by_the_linear_head_and_nearest_neighbour() -> None:
    # A made-up pooled mechanism: one coordinate per topic word, so authors stay separable.
    words = sorted({w for t in _background()["text"] for w in t.split() if not w.isdigit()})

    def pooled(texts: list[str]) -> Release:
        vecs = [np.asarray([t.split().count(w) for w in words], np.float32) for t in texts]
        return Release("pooled_vectors", vectors=vecs)

    knowledge = Knowledge(
        backbone=TINY, query_mechanism=pooled, extra={"background": _background()}
    )
    cls = ATTACKS.get("reidentification")
    attack = cls(**cls.test_params).fit(knowledge, rng=np.random.default_rng(0))
    p = attack.attack(pooled(["roses compost soil", "engine oil garage", "violin music"]))
    assert [r[0] for r in p.ranking] == ["ann", "bob", "cat"]
    assert [r[0] for r in p.meta["variants"]["nearest_neighbour"]] == ["ann", "bob", "cat"]
    with pytest.raises(ValueError, match="fitted on a 'pooled_vectors'"):
        attack.attack(Release("text", texts=["x"]))


def test_a_file_corpus_holds_out_its_victims_other_documents_as_background(tmp_path) -> None:
    from privaudit.corpora.files import load_file
    from privaudit.records import Source, build_knowledge, truth_fields

    rows = [
        (f"{a} writes about topic {i} {'good' if i % 2 else 'bad'}", i % 2, a)
        for a in "abcdefghijkl"
        for i in range(4)
    ]
    rows += [(f"a lone post by {a}", 1, a) for a in ("solo1", "solo2", "solo3", "solo4")]
    path = tmp_path / "c.csv"
    pd.DataFrame(rows, columns=["text", "label", "author"]).to_csv(path, index=False)
    plain = load_file(path, author="author")
    assert "background" not in plain.splits  # off by default: the corpus is unchanged
    corpus = load_file(path, author="author", background_share=0.5)
    test, background = corpus.split("test"), corpus.split("background")
    assert not set(test["text"]) & set(background["text"])  # never a victim document
    assert set(background["author"]) <= set(test["author"])
    for author in set(background["author"]):  # each candidate keeps a victim document
        assert author in test["author"]
    info = corpus.info["background"]
    assert info["candidates"] == len(set(background["author"]))
    for split in ("train", "aux"):
        assert plain.split(split)["text"] == corpus.split(split)["text"]
    candidates = truth_fields()["candidates"].build(Source(corpus))  # type: ignore[misc]
    assert set(candidates) == set(background["author"])
    assert len(build_knowledge(Source(corpus), ["background"])["background"]) == len(background)
    with pytest.raises(ValueError, match="map an author column"):
        load_file(path, background_share=0.5)


def test_synthetic_personas_make_authors_re_identifiable_and_default_stays_off() -> None:
    from privaudit.corpora.synthetic import synthetic_reviews
    from privaudit.records import Source, build_knowledge, truth_fields

    plain = synthetic_reviews(200, seed=0)
    assert "background" not in plain.splits and "persona" not in plain.info
    corpus = synthetic_reviews(600, seed=0, persona=0.9, background_share=0.5)
    source = Source(corpus)
    background = build_knowledge(source, ["background"])["background"]
    fields = truth_fields()
    truth = Truth.of({n: fields[n].build(source) for n in ("author", "candidates")})  # type: ignore[misc]
    cls = ATTACKS.get("reidentification")
    attack = cls(**cls.test_params).fit(_knowledge(background), rng=np.random.default_rng(0))
    release = Release("text", texts=corpus.texts("test"))
    (row,) = score_predictions(attack.attack(release), truth, METRIC)
    # The habits give authors away; without the release the prior guesses almost no one.
    assert row["attack_score"] > row["attack_baseline"] + 0.2
    assert row["attack_details"]["n_not_candidates"] > 0  # single-review authors, left out


def test_a_file_corpus_with_an_author_column_is_re_identified_from_the_cli(tmp_path) -> None:
    """Issue 36: a user's own file (made here from the generator with personas: each author
    writes several reviews with a constant habit) with an ``author`` column and
    ``background_share``: ``privaudit run`` scores re-identification end to end, well above
    the prior at the undefended point."""
    from privaudit.cli import app
    from privaudit.corpora.synthetic import synthetic_reviews

    corpus = synthetic_reviews(400, seed=3, persona=1.0)
    rows = [r for split in ("train", "test", "aux") for r in corpus.split(split)]
    frame = pd.DataFrame(
        {
            "text": [r["text"] for r in rows],
            "label": [r["label"] for r in rows],
            "author": [r["author"] for r in rows],
        }
    )
    frame.to_csv(tmp_path / "reviews.csv", index=False)
    grid = {
        "name": "reid-file",
        "backbone": TINY,
        "utility": "probe",
        "corpus": {
            "name": "file",
            "params": {
                "path": str(tmp_path / "reviews.csv"),
                "author": "author",
                "background_share": 0.5,
            },
        },
        "defenses": [{"name": "none"}],
        "attacks": ["reidentification"],
    }
    path = write_grid(tmp_path, grid)
    result = CliRunner().invoke(
        app, ["run", "--config", str(path), "--run-dir", str(tmp_path / "run"), "--no-progress"]
    )
    assert result.exit_code == 0, result.output
    out = pd.read_csv(tmp_path / "run" / "results.csv")
    (row,) = out[out["attack"] == "reidentification"].to_dict("records")
    assert row["status"] == "ok" and row["family"] == "identity"
    assert row["attack_score"] > 3 * row["attack_baseline"] and row["attack_score"] > 0.2


def test_a_grid_with_the_default_backbone_reads_vector_releases() -> None:
    """A grid hands ``Knowledge.backbone`` None for the default backbone (the quick grid's
    embedding-dx point failed with 'name the backbone'): None is the default, as everywhere."""
    words = sorted({w for t in _background()["text"] for w in t.split() if not w.isdigit()})

    def pooled(texts: list[str]) -> Release:
        vecs = [np.asarray([t.split().count(w) for w in words], np.float32) for t in texts]
        return Release("pooled_vectors", vectors=vecs)

    knowledge = Knowledge(
        backbone=None, query_mechanism=pooled, extra={"background": _background()}
    )
    cls = ATTACKS.get("reidentification")
    attack = cls(**cls.test_params).fit(knowledge, rng=np.random.default_rng(0))
    p = attack.attack(pooled(["roses compost soil", "engine oil garage", "violin music"]))
    assert [r[0] for r in p.ranking] == ["ann", "bob", "cat"]


def test_linked_releases_are_ranked_as_one_person() -> None:
    """A person whose own document says little ("the weather") is found through the other
    document the service links to the same account; unlinked, each document stands alone."""
    victims = Release("text", texts=["nice weather today", "compost and roses", "the violin"])
    links = [0, 0, 1]  # the first two documents are one person's
    base = dict(ATTACKS.get("reidentification").test_params)
    knowledge = Knowledge(
        white_box=False,
        backbone=TINY,
        query_mechanism=lambda t: Release("text", texts=list(t)),
        extra={"background": _background(), "links": links},
    )
    rng = np.random.default_rng(0)
    linked = ATTACKS.get("reidentification")(**base).fit(knowledge, rng=rng).attack(victims)
    assert linked.ranking[0] == linked.ranking[1] and linked.ranking[0][0] == "ann"
    assert linked.ranking[2][0] == "cat" and linked.meta["n_people"] == 2
    alone = ATTACKS.get("reidentification")(**base, linked=False).fit(knowledge, rng=rng)
    assert "n_people" not in alone.attack(victims).meta
    with pytest.raises(ValueError, match="links for 3 victims"):
        ATTACKS.get("reidentification")(**base).fit(knowledge, rng=rng).attack(
            Release("text", texts=["a", "b"])
        )
