"""A new attack family extends the records without touching the core: the made-up *length*
family (``tests/made_up/length_family.py``: its own truth field, knowledge field, prediction
kind, family, metric and attack, in one module) runs through the real runner and reaches the
leaderboard, with no edit to ``privaudit/api/``, ``privaudit/metrics/spec.py``,
``privaudit/metrics/truth.py`` or ``privaudit/leaderboard``."""

from __future__ import annotations

import pytest

from privaudit.registry import ATTACKS
from tests.conftest import TINY
from tests.made_up import length_family as made_up


def _grid(attacks: list[str]) -> dict:
    return {
        "name": "length",
        "backbone": TINY,
        "utility": "probe",
        "corpus": {
            "name": "synthetic-reviews",
            "params": {"n_docs": 60, "seed": 0},
            "limits": {"train": 20, "test": 8, "aux": 16},
        },
        "defenses": [{"name": "none"}, {"name": "t2t", "knob_values": [1]}],
        "attacks": attacks,
    }


@pytest.fixture(scope="module")
def family():
    from privaudit.metrics import spec, unregister_metric
    from privaudit.records import unregister

    made_up.register()
    ATTACKS.add_builtin("length-reader", "tests.made_up.length_family:LengthReader")
    yield
    ATTACKS.remove("length-reader")
    unregister_metric("length_error")
    spec._FAMILIES.pop("length", None)  # no public way back: tests only
    for name in ("n_words", "aux_lengths", "lengths"):
        unregister(name)


@pytest.fixture(scope="module")
def run(family, tmp_path_factory):
    from privaudit.audit.config import load_config
    from privaudit.outputs import run_grid

    config = load_config(_grid(["length-reader"]))
    return run_grid(config, run_dir=tmp_path_factory.mktemp("len") / "run", progress=False)


def test_the_family_runs_is_scored_and_ranked(run) -> None:
    frame = run.frame
    rows = frame[frame["attack"] == "length-reader"].set_index("defense")
    assert set(rows["status"]) == {"ok"} and set(rows["family"]) == {"length"}
    # The undefended text has every word: no error, and privacy is the error itself.
    assert rows.loc["none", "attack_score"] == pytest.approx(0.0)
    assert rows.loc["none", "empirical_privacy"] == pytest.approx(0.0)
    assert rows["attack_score_ci_low"].notna().all()  # per-document outcomes: intervals
    points = run.board.points
    assert set(points.loc[points["family"] == "length", "label"]) >= {"t2t"}
    assert "length" in set(run.board.families["family"])


def test_records_are_built_only_when_asked_for_and_cut_with_the_victims(family) -> None:
    from privaudit.audit.cells import Context
    from privaudit.audit.config import load_config

    asked = Context(load_config(_grid(["length-reader"])))
    assert len(asked.truth.n_words) == len(asked.test_texts)
    assert asked.knowledge_extra["aux_lengths"]
    sub = asked.truth.subset([3, 1])
    assert sub.n_words == [asked.truth.n_words[3], asked.truth.n_words[1]]
    assert sub.n_victims() == 2 and list(sub.doc_indices()) == [3, 1]

    other = Context(load_config(_grid(["nn-inversion"])))
    assert "n_words" not in other.truth.extra and other.knowledge_extra == {}
    assert other.truth.frequent_token is not None  # nn-inversion's metric needs it


def test_undeclared_records_are_refused_in_one_line(family) -> None:
    from privaudit.api import Knowledge, Predictions
    from privaudit.metrics import Truth

    with pytest.raises(ValueError, match=r"kind 'widths' is not declared.*register_pred"):
        Predictions.of("widths", [1])
    with pytest.raises(ValueError, match=r"Unknown truth fields \['widths'\]"):
        Truth.of({"widths": [1]})
    with pytest.raises(ValueError, match=r"Knowledge fields \['widths'\] are not declared"):
        Knowledge(extra={"widths": [1]})
