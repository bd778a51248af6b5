"""Victims an expensive attack scores: a declared subset, the same at every point, scored and
resampled on those documents only, and said so on the board."""

from __future__ import annotations

import json
from typing import Any, ClassVar, Self

import numpy as np
import pytest

from privaudit.api import MIN_VICTIMS, Attack, Knowledge, Predictions, Release, Space
from privaudit.audit.plan import victim_subset
from privaudit.params import ParamError, validate_params
from privaudit.registry import ATTACKS


class CappedReader(Attack):
    """Reads the released text's tokens as its guess of the originals, for ``max_victims``
    victims only (toy)."""

    name: ClassVar[str] = "capped-reader"
    accepts: ClassVar[frozenset[Space]] = frozenset({Space.TEXT})
    metric: ClassVar[str] = "token_recovery"
    seen: ClassVar[list[int]] = []

    def __init__(self, max_victims: int | None = 7) -> None:
        self.max_victims = max_victims

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        return self

    def attack(self, release: Release) -> Predictions:
        from privaudit.models.backbone import backbone

        CappedReader.seen.append(len(release))
        ids = backbone(None).token_ids(release.content_texts())
        return Predictions("tokens", tokens=[list(map(int, d)) for d in ids])


@pytest.fixture
def capped():
    ATTACKS.add_builtin("capped-reader", "tests.audit.test_victim_subset:CappedReader")
    CappedReader.seen.clear()
    yield
    ATTACKS.remove("capped-reader")


def test_subset_is_drawn_by_the_run_seed_alone() -> None:
    a = victim_subset(1000, 300, seed=0)
    assert a is not None and len(a) == 300 and len(set(a.tolist())) == 300
    assert np.all(np.diff(a) > 0) and a.max() < 1000
    assert np.array_equal(a, victim_subset(1000, 300, seed=0))  # every point, every attack
    assert not np.array_equal(a, victim_subset(1000, 300, seed=1))
    assert victim_subset(300, 300, seed=0) is None  # nothing to cut: every victim
    assert victim_subset(1000, None, seed=0) is None


def test_release_subset_keeps_the_order_and_refuses_bad_indices() -> None:
    rel = Release("text", texts=["a", "b", "c"], audit={"replaced": [1, 2, 3]})
    sub = rel.subset([2, 0])
    assert sub.texts == ["c", "a"] and sub.audit == {}
    vec = Release("pooled_vectors", vectors=[np.zeros(2), np.ones(2)]).subset([1])
    assert vec.vectors is not None and len(vec.vectors) == 1 and vec.vectors[0][0] == 1
    with pytest.raises(ValueError, match="outside"):
        rel.subset([3])


def test_generative_inversions_declare_at_least_the_minimum() -> None:
    for name in ("geia", "vec2text"):
        cls = ATTACKS.get(name)
        assert cls().max_victims == MIN_VICTIMS
        assert cls(max_victims=None).max_victims is None  # every victim, when asked
        with pytest.raises(ParamError, match="greater than or equal to 300"):
            validate_params(cls, {"max_victims": 50}, where=name)


def test_grid_scores_the_subset_and_the_board_says_so(capped, tmp_path) -> None:
    from privaudit.audit.config import PRESETS, load_config
    from privaudit.leaderboard.board import leaderboard
    from privaudit.outputs import run_grid
    from privaudit.outputs.runs import load_runs

    smoke: dict[str, Any] = dict(PRESETS["smoke"])
    smoke["attacks"] = ["nn-inversion", "capped-reader"]
    result = run_grid(load_config(smoke), run_dir=tmp_path / "run", progress=False)
    frame = result.frame
    capped_rows = frame[frame["attack"] == "capped-reader"]
    assert set(capped_rows["status"]) == {"ok"}
    assert set(CappedReader.seen) == {7}  # the attack read 7 victims' release, not 30
    n_test = int(frame["n_test"].iloc[0])
    assert n_test > 7
    details = [json.loads(d) for d in capped_rows["attack_details"]]
    assert {d["n_attacked"] for d in details} == {7}
    runs = load_runs([result.run_dir])
    docs = {
        tuple(runs.outcomes.get(key, "attack").docs.tolist()) for key in capped_rows["cell_key"]
    }
    assert len(docs) == 1 and len(next(iter(docs))) == 7  # the same 7 at every point: paired
    board = leaderboard(runs.frame, runs.chance, outcomes=runs.outcomes)
    note = next(n for n in board.notes if "subset of the victims" in n)
    assert f"capped-reader: 7 of {n_test}" in note
    assert result.board is not None and note in result.board.notes


class CappedAuxReader(CappedReader):
    """:class:`CappedReader` declaring that it learns from the aux (so it has a strength
    curve)."""

    name: ClassVar[str] = "capped-aux-reader"
    needs_aux: ClassVar[bool] = True


def test_the_strength_curve_refits_on_the_cells_own_victims(tmp_path) -> None:
    """A refit on a share of the aux scores the same declared subset as the grid's cell, so
    the curve's points are paired and its last step compares like with like."""
    from privaudit.audit.config import PRESETS, load_config
    from privaudit.audit.store import RunDir
    from privaudit.outputs import run_grid

    ATTACKS.add_builtin("capped-aux-reader", "tests.audit.test_victim_subset:CappedAuxReader")
    CappedReader.seen.clear()
    try:
        smoke: dict[str, Any] = dict(PRESETS["smoke"]) | {
            "defenses": [{"name": "none"}],
            "attacks": ["capped-aux-reader"],
            "strength": {"fractions": [0.5]},
        }
        result = run_grid(load_config(smoke), run_dir=tmp_path / "run", progress=False)
    finally:
        ATTACKS.remove("capped-aux-reader")
    assert CappedReader.seen == [7, 7]  # the cell, then the refit on half the aux
    curve = RunDir(result.run_dir).read_strength()
    assert curve is not None and curve["status"].tolist() == ["ok", "ok"]
    assert curve["fraction"].tolist() == [0.5, 1.0]
