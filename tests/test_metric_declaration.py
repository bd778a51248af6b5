"""A metric is one declared object: a made-up metric in which *lower* means a stronger attack
(``tests/made_up/edit_distance.py``) and a made-up attack that uses it
(``tests/made_up/edit_reader.py``) are one module and one registration each. With no edit to
``privaudit/leaderboard`` or ``privaudit/metrics/stats.py``, they get the right direction in
empirical and normalised privacy, in the worst case per family, on the Pareto plot and in the
leaderboard.
"""

from __future__ import annotations

import numpy as np
import pytest

from privaudit.metrics import (
    family_of,
    find_metric,
    metric_spec,
    register_metric,
    unregister_metric,
)
from privaudit.registry import ATTACKS
from tests.made_up.edit_distance import TOKEN_EDIT_DISTANCE


@pytest.fixture
def made_up():
    register_metric(TOKEN_EDIT_DISTANCE)
    ATTACKS.add_builtin("edit-reader", "tests.made_up.edit_reader:EditReader")
    yield
    ATTACKS.remove("edit-reader")
    unregister_metric("token_edit_distance")


@pytest.fixture
def run(made_up, tmp_path_factory):
    from privaudit.audit.config import PRESETS, load_config
    from privaudit.outputs import run_grid

    # On the tiny random backbone, t2t replaces ~100 %, ~67 % and ~15 % of tokens here.
    smoke = dict(PRESETS["smoke"]) | {
        "defenses": [{"name": "none"}, {"name": "t2t", "knob_values": [1, 200, 300]}],
        "attacks": ["nn-inversion", "edit-reader"],
    }
    return run_grid(
        load_config(smoke), run_dir=tmp_path_factory.mktemp("r") / "run", progress=False
    )


def test_the_declaration_is_resolved_at_registration(made_up) -> None:
    spec = metric_spec("token_edit_distance")
    assert spec is TOKEN_EDIT_DISTANCE and not spec.higher_is_stronger
    assert spec.privacy(0.25) == 0.25 and spec.perfect == 0.0 and spec.null_score == 1.0
    assert family_of("token_edit_distance") == "text"
    assert ATTACKS.get("edit-reader").metric == "token_edit_distance"


def test_an_attack_with_an_unknown_metric_is_refused_when_registered() -> None:
    from tests.made_up.edit_reader import EditReader

    class Typo(EditReader):
        name = "typo"
        metric = "token_edit_distanse"

    with pytest.raises(ValueError, match=r"Unknown metric 'token_edit_distanse'.*token_recovery"):
        ATTACKS.register("typo")(Typo)
    assert "typo" not in ATTACKS


def test_a_duplicate_or_familyless_metric_is_refused(made_up) -> None:
    from dataclasses import replace

    with pytest.raises(ValueError, match="already registered"):
        register_metric(replace(TOKEN_EDIT_DISTANCE, higher_is_stronger=True))
    with pytest.raises(ValueError, match="unknown family 'style'"):
        register_metric(replace(TOKEN_EDIT_DISTANCE, name="x", family="style"))
    with pytest.raises(ValueError, match="unknown truth fields"):
        replace(TOKEN_EDIT_DISTANCE, name="y", needs=("labels",))
    assert find_metric("x") is None


def test_direction_reaches_privacy_normalisation_worst_case_plot_and_board(run) -> None:
    from privaudit.leaderboard.figures import pareto_figure

    frame = run.frame
    rows = frame[(frame["attack"] == "edit-reader") & (frame["status"] == "ok")]
    assert len(rows) == 4  # none and t2t at three levels
    # Empirical privacy is the score itself (an error), not 1 − score.
    assert np.allclose(rows["empirical_privacy"], rows["attack_score"])
    none = rows[rows["defense"] == "none"].iloc[0]
    assert none["attack_score"] == pytest.approx(0.0)  # reads the original text back
    t2t = rows[rows["defense"] == "t2t"].set_index("knob_value")
    assert t2t.loc[1.0, "empirical_privacy"] > t2t.loc[300.0, "empirical_privacy"]
    # Normalised privacy: 0 against the undefended text, more where more was replaced; had the
    # direction been read as higher-is-stronger, the attack would look uninformative (NaN).
    assert none["normalised_privacy"] == pytest.approx(0.0)
    norm = t2t["normalised_privacy"]
    assert norm.notna().all() and ((norm >= 0) & (norm <= 1)).all()
    assert norm.loc[1.0] > norm.loc[300.0]
    assert (t2t["normalised_privacy_ci_low"] <= t2t["normalised_privacy"] + 1e-12).all()

    # Worst case per family: the minimum over the family's attacks, this one included.
    points = run.board.points
    text = points[(points["family"] == "text") & (points["label"] == "t2t")]
    text = text.set_index("knob_value")
    ok = frame[
        (frame["family"] == "text") & (frame["defense"] == "t2t") & (frame["status"] == "ok")
    ]
    for knob, group in ok.groupby("knob_value"):
        assert text.loc[knob, "privacy"] == pytest.approx(group["normalised_privacy"].min())
        strongest = group.loc[group["normalised_privacy"].idxmin(), "attack"]
        assert text.loc[knob, "strongest"] == strongest
    # Both attacks entered each minimum (a misread direction would leave this one NaN).
    assert (text["n_attacks"] == 2).all()

    # The Pareto plot: the axis names the error, and the guess line sits at the baseline's
    # error (its privacy), not at 1 − it.
    fig = pareto_figure(rows, attack="edit-reader", chance=0.5)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "empirical privacy vs edit-reader (token edit distance)"
    guess = [ln for ln in ax.get_lines() if ln.get_label() == "frequent-token guess"]
    assert len(guess) == 1
    assert guess[0].get_xdata()[0] == pytest.approx(rows["attack_baseline"].mean())
    assert (run.run_dir / "pareto_edit-reader.png").is_file()

    # The leaderboard: none is the zero-privacy reference on this attack; t2t dominates more.
    per_attack = run.board.per_attack
    mine = per_attack[per_attack["attack"] == "edit-reader"].set_index("label")
    assert mine.loc["t2t", "hypervolume"] > mine.loc["none", "hypervolume"]
    assert "edit-reader" in (run.run_dir / "leaderboard.md").read_text()
