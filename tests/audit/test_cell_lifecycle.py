"""A cell's fitted state lives as long as the cell (issue 50's memory): each cell fits its own
copy of the grid's attack, and a point's own memoised models are dropped when its cells end."""

from __future__ import annotations

from typing import Any, ClassVar, Self

import numpy as np
import pytest

from privaudit.api import Attack, Knowledge, Predictions, Release, Space
from privaudit.registry import ATTACKS
from privaudit.runtime.memo import ObjectMemo, end_point

#: A point's model, as geia's fine-tuned decoder is (filled by the toy attack's fit).
POINT_MODELS = ObjectMemo(size=4, per_point=True)


class StatefulReader(Attack):
    """Reads the released tokens as its guess (toy); records, at each fit, whether its instance
    was fitted before and how many point models the per-point memo still held."""

    name: ClassVar[str] = "stateful-reader"
    accepts: ClassVar[frozenset[Space]] = frozenset({Space.TEXT})
    metric: ClassVar[str] = "token_recovery"
    fits: ClassVar[list[dict[str, Any]]] = []

    def __init__(self) -> None:
        self._fitted_on: int | None = None

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        seen = len(POINT_MODELS._entries)
        StatefulReader.fits.append({"was_fitted": self._fitted_on is not None, "held": seen})
        self._fitted_on = int(rng.integers(2**31))
        POINT_MODELS.get(str(self._fitted_on), lambda: np.zeros(4))
        return self

    def attack(self, release: Release) -> Predictions:
        from privaudit.models.backbone import backbone

        ids = backbone(None).token_ids(release.content_texts())
        return Predictions("tokens", tokens=[list(map(int, d)) for d in ids])


@pytest.fixture
def stateful():
    ATTACKS.add_builtin("stateful-reader", "tests.audit.test_cell_lifecycle:StatefulReader")
    StatefulReader.fits.clear()
    POINT_MODELS.clear()
    yield
    ATTACKS.remove("stateful-reader")


def test_every_cell_fits_a_fresh_copy_and_the_point_models_go(stateful, tmp_path) -> None:
    from privaudit.audit.cells import _CONTEXTS
    from privaudit.audit.config import PRESETS, load_config
    from privaudit.outputs import run_grid

    smoke: dict[str, Any] = dict(PRESETS["smoke"])
    smoke["attacks"] = ["stateful-reader"]
    result = run_grid(load_config(smoke), run_dir=tmp_path / "run", progress=False)
    assert set(result.frame["status"]) == {"ok"}
    assert len(StatefulReader.fits) == 4  # none and t2t at three levels
    # No cell found a fitted attack or the previous point's model still held.
    assert StatefulReader.fits == [{"was_fitted": False, "held": 0}] * 4
    prototypes = [c.attacks["stateful-reader"] for c in _CONTEXTS.values()]
    assert prototypes and all(p._fitted_on is None for p in prototypes)
    assert not POINT_MODELS._entries


def test_end_point_drops_only_the_per_point_memos() -> None:
    point, run = ObjectMemo(size=2, per_point=True), ObjectMemo(size=2)
    for memo in (point, run):
        memo.get("a", lambda: [1, 2])
        assert memo.get("a", lambda: [0]) == [1, 2] and memo.hits == 1
    end_point()
    assert point.get("a", lambda: [3]) == [3]  # computed again
    assert run.get("a", lambda: [3]) == [1, 2]  # a run-long memo keeps its entry
    assert (point.hits, point.misses) == (1, 2)
