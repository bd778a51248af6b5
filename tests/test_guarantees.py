"""Guarantees are typed objects computed from a defense's parameters (privaudit.guarantees).

The symbolic text of every built-in is pinned here: it is the results' ``guarantee`` column,
which must not change when the object behind it does.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pytest
from typer.testing import CliRunner

from privaudit.api import Defense, Release
from privaudit.audit.plugin import UserDefense
from privaudit.guarantees import (
    Guarantee,
    Kind,
    PerUnit,
    Sensitivity,
    Unit,
    as_guarantee,
    guarantee_property,
)
from privaudit.registry import DEFENSES

#: The text each built-in has always shown in the results (before guarantees were typed).
TEXTS = {
    "none": "none",
    "clean": "none",  # the format reference: the clean release, no mechanism
    "t2t": "eta·d_X-privacy per token, within its word class (Feyisetan et al. 2020)",
    "pct2t": "eta·d_X-privacy per selected word, within its POS category",
    "rapt": "eta·d_X-privacy per selected word, within its POS category",
    "embedding-dx": "eta·d_X-privacy per token embedding (Qu et al. 2021)",
    "has": "none (empirical anonymization)",
    "presidio": "none (empirical anonymization)",
    "sap": "eta0·d_X-privacy per token representation (Shen et al.)",
    "sap-cti": "eta_m·d_X-privacy per token, eta_m in (0, 2·eta0) (SAP-CTI)",
    "cape": (
        "Laplace noise: epsilon-LDP per coordinate of the [0,1]-normalised pooled "
        "representation (Δ=1, as in CAPE's code); d·epsilon for the whole d-dim vector unless "
        "sensitivity=d. The adversarial training adds no formal guarantee"
    ),
    "dpnr": (
        "epsilon-LDP per coordinate of the [0,1]-normalised pooled representation "
        "(Lyu et al. 2020, Δ=1); d·epsilon for the whole d-dim vector unless sensitivity=d"
    ),
    "santext": "epsilon·d_X-privacy per word (Yue et al. 2021)",
    "santext-plus": (
        "epsilon·d_X-privacy per selected word, within the sensitive words (Yue et al. 2021)"
    ),
    "custext": "epsilon-LDP per word, within its output set (Chen et al. 2023)",
    "custext-plus": "epsilon-LDP per selected word, within its output set (Chen et al. 2023)",
    "tem": "epsilon·d_X-privacy per word (Carvalho et al. 2023)",
    "mahalanobis": "epsilon·d_X-privacy per word (Xu et al. 2020)",
    "vickrey": "epsilon·d_X-privacy per word (Xu et al. 2021)",
    "diffractor": "epsilon·d_X-privacy per word (Meisenbacher et al. 2024)",
}
KINDS = {
    "none": Kind.NONE,
    "clean": Kind.NONE,
    "has": Kind.NONE,
    "presidio": Kind.NONE,
    "cape": Kind.LDP,
    "dpnr": Kind.LDP,
    "custext": Kind.LDP,
    "custext-plus": Kind.LDP,
}


def test_every_builtin_is_pinned() -> None:
    assert sorted(DEFENSES.builtins()) == sorted(TEXTS)


@pytest.mark.parametrize("name", DEFENSES.builtins())
def test_builtin_renders_the_text_the_results_always_showed(name: str) -> None:
    cls = DEFENSES.get(name)
    guarantee = cls.guarantee
    assert isinstance(guarantee, Guarantee)
    assert str(guarantee) == TEXTS[name]
    assert guarantee.kind is KINDS.get(name, Kind.DX)
    assert cls().guarantee == guarantee  # the class's is the one at default parameters
    assert hash(cls().guarantee) == hash(guarantee)
    if cls.knob is not None:  # the text is symbolic: it does not move with the knob
        other = cls().with_knob(cls.levels[0])
        assert str(other.guarantee) == TEXTS[name]


@pytest.mark.parametrize("name", DEFENSES.builtins())
def test_builtin_carries_its_knob_value(name: str) -> None:
    cls = DEFENSES.get(name)
    if not cls.guarantee.formal:
        assert cls.guarantee.value is None and math.isinf(cls.guarantee.loss())
        return
    for level in cls.levels:
        defense = cls().with_knob(level)
        guarantee = defense.guarantee
        assert guarantee.value == defense.knob_value == level
        assert guarantee.unit is not None and guarantee.metric
        assert guarantee.describe().startswith(
            f"{'ε' if cls.knob == 'epsilon' else 'η0' if 'sap' in name else 'η'}={level:g} · "
        )


def test_values_are_computed_from_the_parameters() -> None:
    t2t = DEFENSES.get("t2t")
    described = t2t(eta=50.0).guarantee.describe()
    assert described.startswith(
        "η=50 · d_X-privacy per token, within its word class; d_X: Euclidean distance in the "
        "input-embedding space of the default backbone"
    )
    assert "of tiny" in t2t(backbone="tiny").guarantee.metric
    sap = DEFENSES.get("sap")
    assert "after encoder layer 2" in sap(split_layer=2).guarantee.metric
    cti = DEFENSES.get("sap-cti")(eta=60.0).guarantee
    assert cti.parameter == "eta0" and cti.per_unit == PerUnit("eta_m", 0.0, 2.0)
    assert cti.largest == 120.0 and "η_m in (0, 120)" in cti.describe()
    dpnr = DEFENSES.get("dpnr")
    per_coordinate = dpnr(epsilon=10.0).guarantee
    assert per_coordinate.sensitivity == Sensitivity(1.0, "L1", per_coordinate.sensitivity.of)
    assert per_coordinate.loss() == 10.0  # one coordinate of [0, 1]
    assert per_coordinate.composed(384).loss() == 3840.0  # the whole vector: d·ε/Δ
    assert per_coordinate.composed(384).unit is Unit.VECTOR
    whole = dpnr(epsilon=10.0, sensitivity=384.0).guarantee
    assert whole.sensitivity.value == 384.0 and whole.loss(384) == pytest.approx(10.0)
    assert "the whole 384-dim vector: 10" in whole.with_dimension(384).describe()
    rapt = DEFENSES.get("rapt")().guarantee
    assert "plain tokens are public" in rapt.notes and rapt.selected
    cape = DEFENSES.get("cape")().guarantee
    assert "no formal guarantee" in cape.describe()


def test_smaller_parameter_is_the_stronger_guarantee() -> None:
    t2t = DEFENSES.get("t2t")
    strong, weak = t2t(eta=50.0).guarantee, t2t(eta=100.0).guarantee
    assert strong < weak and weak > strong and strong <= weak and not weak <= strong
    assert strong.stronger_than(weak) and not weak.stronger_than(strong)
    assert min([weak, strong]) == strong
    assert strong != weak and t2t(eta=50.0).guarantee == strong
    assert len({strong, weak, t2t(eta=50.0).guarantee}) == 2
    dpnr = DEFENSES.get("dpnr")  # Δ scales the claim: ε = 10 at Δ = 384 is the stronger
    assert dpnr(epsilon=10.0, sensitivity=384.0).guarantee < dpnr(epsilon=3.0).guarantee


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("t2t", "pct2t"),  # a token within its class vs a selected word within its POS
        ("t2t", "dpnr"),  # d_X vs LDP
        ("t2t", "embedding-dx"),  # token vs token embedding
        ("sap", "sap-cti"),
        ("t2t", "none"),  # none has no parameter
    ],
)
def test_different_kinds_units_or_metrics_refuse_to_compare(a: str, b: str) -> None:
    ga, gb = DEFENSES.get(a).guarantee, DEFENSES.get(b).guarantee
    with pytest.raises(TypeError) as info:
        _ = ga < gb
    assert "\n" not in str(info.value)
    assert ga != gb


def test_metric_and_backbone_are_part_of_what_compares() -> None:
    t2t, sap = DEFENSES.get("t2t"), DEFENSES.get("sap")
    with pytest.raises(TypeError, match="compare only within one kind, unit and metric"):
        _ = t2t(backbone="tiny").guarantee < t2t().guarantee
    with pytest.raises(TypeError):
        _ = sap(split_layer=2).guarantee < sap().guarantee
    assert sap(split_layer=2, eta=10.0).guarantee < sap(split_layer=2).guarantee
    with pytest.raises(TypeError):
        _ = t2t().guarantee < "eta=100"


def test_none_stated_and_unknown() -> None:
    assert str(Guarantee.none()) == "none"
    assert str(Guarantee.none("empirical anonymization")) == "none (empirical anonymization)"
    assert str(Guarantee.unknown("user privatizer")) == "unknown (user privatizer)"
    stated = as_guarantee("ε = 3 per document, I promise")
    assert stated.kind is Kind.STATED and str(stated) == stated.describe()
    assert str(stated) == "ε = 3 per document, I promise" and not stated.formal
    assert as_guarantee(None).kind is Kind.UNKNOWN
    with pytest.raises(TypeError, match=r"declare a privaudit\.guarantees\.Guarantee"):
        as_guarantee(3.0, where="Mine.guarantee")
    with pytest.raises(ValueError, match="needs its parameter"):
        Guarantee(Kind.DX, "eta")
    with pytest.raises(ValueError, match="Unknown guarantee kind"):
        Guarantee("d_x", "eta", 1.0, Unit.TOKEN)
    assert Guarantee("d_X-privacy", "eta", 1.0, "token").kind is Kind.DX  # strings convert


def test_to_dict_has_what_the_guarantee_audit_reads() -> None:
    out = DEFENSES.get("sap-cti")().guarantee.to_dict()
    assert out["kind"] == "d_X-privacy" and out["unit"] == "token" and out["value"] == 100.0
    assert out["per_unit"] == {"name": "eta_m", "low": 0.0, "high": 2.0}
    assert out["loss_per_unit"] == 200.0 and out["text"] == TEXTS["sap-cti"]
    ldp = DEFENSES.get("cape")().guarantee.to_dict()
    assert ldp["sensitivity"]["value"] == 1.0 and ldp["sensitivity"]["norm"] == "L1"


# ---- a defense class declaring its guarantee -----------------------------------------------
class _Echo(Defense):
    name: ClassVar[str] = "echo"
    knob: ClassVar[str | None] = "eps"

    def __init__(self, eps: float = 2.0) -> None:
        self.eps = eps

    def privatize(self, texts: Any, *, rng: np.random.Generator) -> Release:
        return Release("text", texts=list(texts))


def test_a_defense_subclass_may_declare_a_string_a_property_or_nothing() -> None:
    assert str(_Echo.guarantee) == "none" and _Echo().guarantee.kind is Kind.NONE

    class Worded(_Echo):
        guarantee = "ε-LDP, trust me"

    assert Worded.guarantee == Worded().guarantee == Guarantee.stated("ε-LDP, trust me")

    class Computed(_Echo):
        @property
        def guarantee(self) -> Guarantee:
            return Guarantee.ldp(
                "epsilon", self.eps, unit=Unit.DOCUMENT, sensitivity=Sensitivity(1.0)
            )

    assert Computed.guarantee.value == 2.0 and Computed(eps=0.5).guarantee.value == 0.5
    assert str(Computed.guarantee) == "epsilon-LDP per document"

    class NeedsArgs(_Echo):
        def __init__(self, eps: float) -> None:
            self.eps = eps

        @guarantee_property
        def guarantee(self) -> Guarantee:
            return Guarantee.dx("eta", self.eps, unit=Unit.WORD, metric="d")

    assert str(NeedsArgs.guarantee) == "unknown (set by its parameters)"
    assert NeedsArgs(eps=4.0).guarantee.value == 4.0

    with pytest.raises(TypeError, match=r"Wrong\.guarantee has type int"):

        class Wrong(_Echo):
            guarantee = 3


# ---- a user's plugin (privaudit audit) ------------------------------------------------------
class PluginNothing:
    def privatize(self, texts: list[str], rng: np.random.Generator) -> list[str]:
        return ["x " + t for t in texts]


class PluginString(PluginNothing):
    guarantee = "none (each word is hidden with probability p)"


class PluginObject(PluginNothing):
    def __init__(self, p: float = 1.0) -> None:
        self.p = p

    @property
    def guarantee(self) -> Guarantee:
        return Guarantee.dx("eta", self.p, unit=Unit.WORD, metric="Hamming distance")


class PluginWrong(PluginNothing):
    guarantee = 0.5


def _user(cls: str, **options: Any) -> UserDefense:
    return UserDefense(f"tests.test_guarantees:{cls}", **options).fit([])


def test_plugin_declares_nothing_a_string_or_an_object() -> None:
    assert str(UserDefense.guarantee) == "unknown (user privatizer)"
    assert str(_user("PluginNothing").guarantee) == "unknown (user privatizer)"
    stated = _user("PluginString").guarantee
    assert stated.kind is Kind.STATED
    assert str(stated) == "none (each word is hidden with probability p)"
    typed = _user("PluginObject", knob="p", p=3.0)
    assert typed.guarantee.value == 3.0 and str(typed.guarantee) == "eta·d_X-privacy per word"
    moved = typed.with_knob(1.5)
    moved.privatize(["a b"], rng=np.random.default_rng(0))  # rebuilds the user's object
    assert moved.guarantee.value == 1.5 and moved.guarantee < typed.guarantee


def test_plugin_with_a_wrong_type_is_one_line() -> None:
    with pytest.raises(TypeError) as info:
        _user("PluginWrong")
    message = str(info.value)
    assert "\n" not in message
    assert "PluginWrong.guarantee has type float" in message
    assert "Guarantee, a string, or nothing" in message


def test_list_shows_each_guarantee_with_its_values() -> None:
    from privaudit.cli import app

    result = CliRunner().invoke(app, ["list", "defenses"])
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line for line in result.output.splitlines()[1:]}
    for name in DEFENSES.builtins():
        assert DEFENSES.get(name).guarantee.describe() in lines[name]
    assert "η=100 · d_X-privacy per token, within its word class" in lines["t2t"]
    assert "ε=1 · ε-LDP per coordinate" in lines["dpnr"]
    assert "guarantee: none (empirical anonymization)]" in lines["has"]
