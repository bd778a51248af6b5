"""Registries: names, lazy built-ins, module:Class specs, entry points, did-you-mean."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from privaudit import registry
from privaudit.registry import ATTACKS, DEFENSES, UTILITY, Registry, load_object


def test_builtins_are_listed_and_resolve() -> None:
    assert {"none", "t2t"} <= set(DEFENSES.names())
    assert "nn-inversion" in ATTACKS
    assert "probe" in UTILITY
    t2t = DEFENSES.get("t2t")
    assert t2t.name == "t2t" and t2t.knob == "eta"


def test_unknown_name_suggests_closest_and_the_list_command() -> None:
    with pytest.raises(ValueError) as err:
        DEFENSES.get("t2tt")
    message = str(err.value)
    assert "did you mean 't2t'" in message.lower()
    assert "privaudit list defenses" in message
    with pytest.raises(ValueError, match="privaudit list attacks"):
        ATTACKS.get("nn-invresion")


def test_non_string_name_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="must be a string"):
        DEFENSES.get(42)  # type: ignore[arg-type]


def test_module_colon_class_resolves() -> None:
    assert DEFENSES.get("privaudit.defenses.none:NoDefense").name == "none"
    with pytest.raises(ValueError, match="has no attribute"):
        load_object("privaudit.defenses.none:Missing")
    with pytest.raises(ValueError, match="Cannot import module"):
        load_object("no_such_module_xyz:Thing")
    with pytest.raises(ValueError, match="module:attribute"):
        load_object("no-colon")


def test_file_path_colon_class_resolves(tmp_path) -> None:
    plugin = tmp_path / "myplugin.py"
    plugin.write_text("class Mine:\n    name = 'mine'\n")
    assert load_object(f"{plugin}:Mine").name == "mine"
    with pytest.raises(ValueError, match="No such file"):
        load_object(f"{tmp_path / 'absent.py'}:Mine")


def test_decorator_registration_and_conflicts() -> None:
    reg: Registry[object] = Registry("widget", "widgets", "privaudit.test-widgets")

    @reg.register("a")
    class A:
        pass

    assert reg.get("a") is A
    reg.register("a")(A)  # idempotent for the same object
    with pytest.raises(ValueError, match="already registered"):

        @reg.register("a")
        class B:
            pass


def test_entry_point_plugins_appear(monkeypatch) -> None:
    reg: Registry[object] = Registry("defense", "defenses", "privaudit.defenses")
    ep = EntryPoint(name="plugged", value="privaudit.defenses.none:NoDefense", group="x")

    def fake_entry_points(group: str) -> list[EntryPoint]:
        return [ep] if group == "privaudit.defenses" else []

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)
    assert "plugged" in reg.names()
    assert reg.get("plugged").name == "none"


def test_each_builtin_key_is_its_class_name() -> None:
    """One registration list: the key in registry.BUILTINS and the class's ``name`` agree."""
    for reg in (DEFENSES, ATTACKS, UTILITY):
        for key in reg.builtins():
            assert reg.get(key).name == key, (reg.kind, key)


def test_builtins_ignore_plugins(monkeypatch) -> None:
    ep = EntryPoint(name="plugged", value="privaudit.defenses.none:NoDefense", group="x")
    monkeypatch.setattr(
        registry, "entry_points", lambda group: [ep] if group == "privaudit.defenses" else []
    )
    reg: Registry[object] = Registry("defense", "defenses", "privaudit.defenses")
    reg.add_builtin("none", "privaudit.defenses.none:NoDefense")
    assert "plugged" in reg.names() and reg.builtins() == ["none"]


def test_declarations_are_consistent() -> None:
    """Each defense's knob is one of its declared parameters and its levels are values the
    knob's declaration allows; each attack's quick_params are declared parameters."""
    from privaudit.params import declared, validate_params

    for key in DEFENSES.builtins():
        cls = DEFENSES.get(key)
        if cls.knob is None:
            assert not cls.levels, key
            continue
        assert cls.knob in declared(cls), key
        assert cls.levels, f"{key} declares no quick-grid levels"
        for level in cls.levels:
            validate_params(cls, {cls.knob: level})
        for variant in cls.variants:
            validate_params(cls, dict(variant))
    for key in ATTACKS.builtins():
        cls = ATTACKS.get(key)
        validate_params(cls, dict(cls.quick_params))
        assert cls.accepts, f"{key} declares no release space it reads"
