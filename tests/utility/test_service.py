"""The default utility evaluator: the service trains what sits above the release."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit.api import Release
from privaudit.audit.config import PRESETS, GridConfig
from privaudit.models.backbone import backbone
from privaudit.registry import DEFENSES, UTILITY
from privaudit.utility import service as svc
from privaudit.utility.service import Service
from privaudit.utility.service_features import Features
from tests.conftest import TINY

_POS = ["great product love it works well", "excellent quality very happy", "good fast delivery"]
_NEG = ["terrible broke after a day", "awful quality very sad", "bad slow delivery poor"]
TEXTS = [(_POS if i % 2 else _NEG)[i % 3] + f" item {i}" for i in range(60)]
TEXTS[0] = ""  # an empty document trains and predicts like any other
TEXTS[2] = "terrible " * 2000  # a huge one is truncated to max_length
LABELS = [i % 2 for i in range(60)]
GENDER = ["F" if i % 3 else "M" for i in range(44)]
SMALL = {"backbone": TINY, "epochs": 4, "batch_size": 16}


def releases(name: str, **params: object) -> tuple[object, Release, Release]:
    defense = (
        DEFENSES.get(name)(backbone=TINY, **params) if name != "none" else (DEFENSES.get("none")())
    )
    rng = np.random.default_rng(0)
    return defense, defense.privatize(TEXTS[:44], rng=rng), defense.privatize(TEXTS[44:], rng=rng)


def evaluate(ev: Service, name: str, seed: int = 0, **params: object) -> dict:
    defense, train, test = releases(name, **params)
    return ev.evaluate_releases(
        train,
        LABELS[:44],
        test,
        LABELS[44:],
        rng=np.random.default_rng(seed),
        defense=defense,
        train_attributes={"gender": GENDER},
    )


def test_it_is_the_default_and_the_probe_stays_under_its_own_name() -> None:
    assert PRESETS["quick"]["utility"] == "service"
    config = GridConfig.model_validate({"defenses": [{"name": "none"}], "attacks": ["ner"]})
    assert config.utility_spec().name == "service"
    assert UTILITY.get("probe").name == "probe"


def test_text_trains_the_top_layer_and_is_deterministic() -> None:
    ev = Service(**SMALL)
    a, b = evaluate(ev, "none"), evaluate(ev, "none")
    assert a["predictions"] == b["predictions"] and a["details"] == b["details"]
    assert a["details"]["trained"] == "encoder" and a["objective"] == "none"
    assert 0 <= a["details"]["epoch_kept"] <= a["details"]["epochs_run"] <= 4
    assert 0.0 <= a["details"]["probe_balanced_accuracy"] <= 1.0


def test_the_frozen_part_is_the_backbone_and_training_starts_at_the_probe() -> None:
    bb = backbone(TINY)
    texts = TEXTS[:12]
    feats = Features.of(bb, Release("text", texts=texts), 128)
    # The frozen top layer's mean is the backbone's pooled output.
    np.testing.assert_allclose(feats.pooled, bb.pooled(texts), atol=1e-4)
    ev = Service(**SMALL)
    y = np.asarray(LABELS[:12])
    model = svc._Model.build(feats, y, np.arange(12), 2, ev, np.random.default_rng(0))
    model.eval()
    with torch.no_grad():
        logits = model(feats, np.arange(12))[0]
        z = (torch.from_numpy(feats.pooled) - model.mean) / model.std
        np.testing.assert_allclose(logits, z @ model.probe_w.T + model.probe_b, atol=1e-5)
    # Only prompts, LoRA, the lift and the head train; the backbone's weights do not.
    names = {n.split(".")[0] for n, p in model.named_parameters() if p.requires_grad}
    assert names == {"q", "o", "inter", "out", "pk", "pv", "lift", "head"}
    trainable = [n for n, p in model.named_parameters() if p.requires_grad and ".base." in n]
    assert trainable == []


def test_rapt_trains_its_reconstruction_and_cape_its_adversary() -> None:
    ev = Service(**SMALL)
    rapt = evaluate(ev, "rapt", eta=100.0, n_plain=6)
    assert rapt["objective"] == "applied" and rapt["details"]["trained"] == "encoder"
    off = evaluate(Service(**SMALL, use_objective=False), "rapt", eta=100.0, n_plain=6)
    assert off["objective"] == "not applied: use_objective=False"
    cape = evaluate(ev, "cape", epsilon=10.0)
    assert cape["objective"] == "applied" and cape["details"]["trained"] == "mlp"
    # CAPE's own evaluation: the attribute read from the trained representation, with and
    # without the adversary.
    for key in ("attribute_readout", "attribute_readout_no_objective"):
        assert 0.0 <= cape["details"][key] <= 1.0
    defense, train, test = releases("cape", epsilon=10.0)
    with pytest.raises(ValueError, match="'gender' labels"):
        ev.evaluate_releases(
            train, LABELS[:44], test, LABELS[44:], rng=np.random.default_rng(0), defense=defense
        )


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("embedding-dx", {"eta": 50.0}),
        ("sap", {"eta": 100.0}),
        ("sap", {"eta": 100.0, "split_layer": 1}),
        ("dpnr", {}),
    ],
)
def test_every_release_kind_trains_what_sits_above_it(name: str, params: dict) -> None:
    result = evaluate(Service(**SMALL), name, **params)
    assert 0.0 <= result["balanced_accuracy"] <= 1.0
    expected = "mlp" if name == "dpnr" else "encoder"
    assert result["details"]["trained"] == expected


def test_bad_input_fails_clearly() -> None:
    ev = Service(**SMALL)
    text = Release("text", texts=TEXTS[:4])
    with pytest.raises(ValueError, match="two classes"):
        ev.evaluate_releases(text, [1, 1, 1, 1], text, [1, 0, 1, 0], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="exactly one label"):
        ev.evaluate_releases(text, [1, 0], text, [1, 0, 1, 0], rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match=r"numpy\.random\.Generator"):
        ev.evaluate_releases(text, [1, 0, 1, 0], text, [1, 0, 1, 0], rng=0)  # type: ignore[arg-type]
    from privaudit.params import ParamError, validate_params

    with pytest.raises(ParamError):
        validate_params(Service, {"epochs": 0})
    with pytest.raises(ParamError):
        validate_params(Service, {"val_fraction": 0.7})
