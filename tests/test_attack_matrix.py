"""Every built-in defense × every built-in attack either runs and is scored, or is ``n/a``
with a reason — walked through the real runner on a tiny corpus and the tiny backbone."""

from __future__ import annotations

import json

import pytest

from privaudit.audit.config import load_config
from privaudit.audit.runner import run_grid
from privaudit.registry import ATTACKS, DEFENSES
from tests.conftest import TINY

# Cheap settings so the whole matrix runs in seconds; the defaults are the papers'.
ATTACK_PARAMS: dict[str, dict] = {
    "attribute-inference": {"epochs": 2, "hidden": 32},
    "mlp-inversion": {"epochs": 2},
    "ae-inversion": {"epochs": 2},
    "optimization-inversion": {"steps": 5, "max_docs": 3},
}

DEFENSES_UNDER_TEST = [
    {"name": "none"},
    {"name": "t2t", "label": "t2t", "params": {"eta": 10}},
    {"name": "pct2t", "label": "pct2t", "params": {"eta": 10}},
    {"name": "rapt", "label": "rapt", "params": {"eta": 10, "n_plain": 4}},
    {"name": "embedding-dx", "label": "embedding-dx", "params": {"eta": 10}},
    {"name": "has", "label": "has-label", "params": {"mode": "label"}},
    {"name": "has", "label": "has-generative", "params": {"mode": "generative"}},
    {"name": "sap", "label": "sap-k0", "params": {"eta": 10, "split_layer": 0}},
    {"name": "sap", "label": "sap-k1", "params": {"eta": 10, "split_layer": 1}},
    {"name": "sap-cti", "label": "sap-cti", "params": {"eta": 10, "split_layer": 0}},
    {"name": "cape", "label": "cape", "params": {"epsilon": 10}},
    {"name": "dpnr", "label": "dpnr", "params": {"epsilon": 10}},
]

# Pairs that must run (a sample of the matrix that pins the applicability rules).
MUST_RUN = {
    ("none", "nn-inversion"), ("none", "mlp-inversion"), ("none", "ae-inversion"),
    ("none", "ner"), ("none", "attribute-inference"), ("t2t", "ner"),
    ("has-label", "has-deanonymization"), ("has-generative", "has-deanonymization"),
    ("sap-k0", "optimization-inversion"), ("sap-k1", "optimization-inversion"),
    ("embedding-dx", "mlp-inversion"), ("cape", "attribute-inference"),
    ("dpnr", "attribute-inference"),
}  # fmt: skip
MUST_BE_NA = {
    ("t2t", "has-deanonymization"), ("sap-k1", "nn-inversion"), ("sap-k1", "mlp-inversion"),
    ("cape", "nn-inversion"), ("dpnr", "ner"), ("none", "optimization-inversion"),
    ("sap-k0", "ner"),
}  # fmt: skip


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory):
    attacks = [{"name": a, "params": ATTACK_PARAMS.get(a, {})} for a in ATTACKS.names()]
    config = load_config(
        {
            "name": "matrix",
            "backbone": TINY,
            "corpus": {
                "name": "synthetic-reviews",
                "params": {"n_docs": 60, "seed": 0},
                "limits": {"train": 20, "test": 8, "aux": 16},
            },
            "defenses": DEFENSES_UNDER_TEST,
            "attacks": attacks,
        }
    )
    result = run_grid(config, run_dir=tmp_path_factory.mktemp("matrix"), progress=False)
    return result.frame


def test_every_builtin_is_in_the_matrix() -> None:
    covered = {d["name"] for d in DEFENSES_UNDER_TEST}
    assert set(DEFENSES.names()) <= covered


def test_every_pair_runs_or_says_why_not(matrix) -> None:
    failed = matrix[matrix["status"] == "failed"]
    assert failed.empty, failed[["label", "attack", "reason"]].to_string()
    assert set(matrix["status"]) <= {"ok", "n/a"}
    na = matrix[matrix["status"] == "n/a"]
    assert (na["reason"].str.len() > 10).all()
    ok = matrix[matrix["status"] == "ok"]
    assert ok["attack_score"].notna().all()
    assert ok["empirical_privacy"].notna().all()
    for details in ok["attack_details"]:
        json.loads(details)


def _status(matrix, label: str, attack: str) -> set[str]:
    rows = matrix[(matrix["label"] == label) & matrix["attack"].str.startswith(attack)]
    return set(rows["status"])


def test_applicability_rules(matrix) -> None:
    for label, attack in MUST_RUN:
        assert _status(matrix, label, attack) == {"ok"}, (label, attack)
    for label, attack in MUST_BE_NA:
        assert _status(matrix, label, attack) == {"n/a"}, (label, attack)
    # one row per (defense point, attack), attribute inference one per attribute
    pairs = matrix[~matrix["attack"].str.startswith("attribute-inference")]
    assert len(pairs) == len(DEFENSES_UNDER_TEST) * (len(ATTACKS.names()) - 1)
