"""The declarative contracts: a new defense or attack is one class plus one registration.

The toy defense and toy attack below are each one class; the fixture adds one registration
line each (as a built-in would have in ``registry.BUILTINS``). With no other edit, the quick
preset, the attack matrix, ``privaudit list`` and a smoke grid pick them up.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Self

import numpy as np
import pytest
from typer.testing import CliRunner

from privaudit.api import Attack, Defense, Knowledge, Predictions, Release, Space
from privaudit.params import ParamError, Probability
from privaudit.registry import ATTACKS, DEFENSES
from tests.conftest import TINY


class ToyMask(Defense):
    """Masks each word with probability ``p`` (toy; no guarantee)."""

    name: ClassVar[str] = "toy-mask"
    knob: ClassVar[str | None] = "p"
    levels: ClassVar[tuple[float, ...]] = (0.8, 0.2)

    def __init__(self, p: Probability = 0.5) -> None:
        self.p = p

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        out = []
        for text in texts:
            words = text.split()
            hit = rng.random(len(words)) < self.p
            out.append(" ".join("xxx" if h else w for w, h in zip(words, hit, strict=True)))
        return Release("text", texts=out, meta={"defense": self.name})


class ToyReader(Attack):
    """Reads the released text's tokens as the guess of the original ones (toy)."""

    name: ClassVar[str] = "toy-reader"
    accepts: ClassVar[frozenset[Space]] = frozenset({Space.TEXT})
    metric: ClassVar[str] = "token_recovery"

    def __init__(self, backbone: str | None = None) -> None:
        self.backbone = backbone

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        return self

    def attack(self, release: Release) -> Predictions:
        from privaudit.models.backbone import backbone

        ids = backbone(self.backbone).token_ids(release.content_texts())
        return Predictions("tokens", tokens=[list(map(int, d)) for d in ids])


@pytest.fixture
def toys():
    DEFENSES.add_builtin("toy-mask", "tests.test_contracts:ToyMask")
    ATTACKS.add_builtin("toy-reader", "tests.test_contracts:ToyReader")
    yield
    DEFENSES.remove("toy-mask")
    ATTACKS.remove("toy-reader")


def test_toys_are_picked_up_everywhere(toys, tmp_path) -> None:
    from privaudit.audit.config import PRESETS, load_config
    from privaudit.cli import app
    from privaudit.outputs import run_grid
    from tests.test_attack_matrix import matrix_attacks, matrix_defenses

    quick = PRESETS["quick"]
    assert {"name": "toy-mask", "knob_values": [0.8, 0.2]} in quick["defenses"]
    assert "toy-reader" in quick["attacks"]
    assert "toy-mask" in {d["name"] for d in matrix_defenses()}
    assert "toy-reader" in {a["name"] for a in matrix_attacks()}
    listed = CliRunner().invoke(app, ["list"])
    assert listed.exit_code == 0 and "toy-mask" in listed.output and "toy-reader" in listed.output

    smoke = dict(PRESETS["smoke"])
    smoke["defenses"] = [*smoke["defenses"], {"name": "toy-mask", "knob_values": [0.9, 0.1]}]
    smoke["attacks"] = [*smoke["attacks"], "toy-reader"]
    frame = run_grid(load_config(smoke), run_dir=tmp_path / "run", progress=False).frame
    toy = frame[(frame["defense"] == "toy-mask") & (frame["attack"] == "toy-reader")]
    assert list(toy["status"]) == ["ok", "ok"]
    # masking 90 % of the words protects more than masking 10 %
    by_p = dict(zip(toy["knob_value"], toy["empirical_privacy"], strict=True))
    assert by_p[0.9] > by_p[0.1]
    assert set(frame[frame["defense"] == "none"]["attack"]) == {"nn-inversion", "toy-reader"}


def test_bad_values_fail_when_the_grid_is_planned(tmp_path) -> None:
    """A bad value never reaches a cell: the run stops before writing anything."""
    from privaudit.audit.config import PRESETS, load_config
    from privaudit.outputs import run_grid

    for defenses, match in (
        ([{"name": "t2t", "params": {"eta": "abc"}}], r"defenses\.0\.params: .*eta='abc'"),
        ([{"name": "t2t", "params": {"etaa": 3}}], "Did you mean 'eta'"),
        ([{"name": "t2t", "knob_values": [0.0]}], r"defenses\.0\.knob_values: .*eta=0\.0"),
        ([{"name": "has", "knob_values": [7]}], r"defenses\.0\.knob_values: .*level=7"),
    ):
        smoke = dict(PRESETS["smoke"]) | {"defenses": defenses}
        run_dir = tmp_path / f"r{len(list(tmp_path.iterdir()))}"
        with pytest.raises(ValueError, match=match):
            run_grid(load_config(smoke), run_dir=run_dir, progress=False)
        assert not (run_dir / "cells").exists()
    bad_attack = dict(PRESETS["smoke"]) | {
        "attacks": [{"name": "mlp-inversion", "params": {"epochs": 0}}]
    }
    with pytest.raises(ValueError, match=r"attacks\.0\.params: .*epochs=0"):
        run_grid(load_config(bad_attack), run_dir=tmp_path / "a", progress=False)


def test_parameters_are_declared_once() -> None:
    toy = ToyMask(p=0.3)
    assert toy.params() == {"p": 0.3}
    for bad in ({"p": 1.5}, {"p": True}, {"p": "x"}, {"q": 0.1}):
        with pytest.raises(ParamError):
            ToyMask(**bad)
    with pytest.raises(ParamError, match=r"p=2"):
        toy.with_knob(2)


def test_with_knob_keeps_fitted_state() -> None:
    class Fitted(ToyMask):
        def fit(self, train: Any) -> Self:
            self._vocab = sorted(set(" ".join(train).split()))
            return self

    base = Fitted(p=0.1).fit(["a b", "b c"])
    other = base.with_knob(0.9)
    assert other.p == 0.9 and base.p == 0.1 and other._vocab == ["a", "b", "c"]
    assert other.knob_value == 0.9


def test_release_is_typed() -> None:
    assert Release("text", texts=["a"]).space is Space.TEXT
    assert Release("token_vectors", vectors=[], layer=0).space is Space.TOKEN_EMBEDDINGS
    assert Release("token_vectors", vectors=[], layer=3).space is Space.HIDDEN_STATES
    assert Release("pooled_vectors", vectors=[]).space is Space.POOLED
    assert Release("text", texts=["p q a b"], plain_prefix=2).content_texts() == ["a b"]
    with pytest.raises(ValueError, match="needs `layer`"):
        Release("token_vectors", vectors=[])
    with pytest.raises(ValueError, match="has no layer"):
        Release("pooled_vectors", vectors=[], layer=1)
    with pytest.raises(ValueError, match="plain_prefix"):
        Release("text", texts=["a"], plain_prefix=-1)


def test_attacks_say_why_from_their_declaration() -> None:
    reader = ToyReader(backbone=TINY)
    pooled = Release("pooled_vectors", vectors=[np.zeros(4)])
    assert "reads text releases, not pooled" in (reader.applicable(pooled, Knowledge()) or "")
    assert reader.applicable(Release("text", texts=["a"]), Knowledge()) is None
