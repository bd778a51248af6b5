"""Every built-in defense × every built-in attack either runs and is scored, or is ``n/a``
with a reason — walked through the real runner on a tiny corpus and the tiny backbone."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privaudit.api import Attack, Knowledge, Predictions
from privaudit.audit.cells import Context
from privaudit.audit.config import GridConfig, load_config
from privaudit.outputs import run_grid
from privaudit.registry import ATTACKS, DEFENSES
from tests.conftest import TINY

# Attacks run with their declared cheap ``test_params`` so the whole matrix runs in seconds
# (speed only: coverage comes from the registry's built-ins, below); the defaults are the
# papers'.
DEFENSE_PARAMS: dict[str, dict] = {"rapt": {"n_plain": 4}}


def builtin_defenses() -> list[dict]:
    """Every built-in defense, each of its variants, at the first of its declared levels."""
    out = []
    for name in DEFENSES.builtins():
        cls = DEFENSES.get(name)
        for variant in cls.variants:
            params = dict(variant) | DEFENSE_PARAMS.get(name, {})
            if cls.knob is not None and cls.levels:
                params[cls.knob] = cls.levels[0]
            label = "-".join([name, *(str(v) for v in variant.values())])
            out.append({"name": name, "label": label, "params": params})
    return out


def matrix_defenses() -> list[dict]:
    """The built-in defenses, plus SAP split after layer 1 (hidden states), which pins the
    hidden-state rules."""
    return [
        *builtin_defenses(),
        {"name": "sap", "label": "sap-k1", "params": {"eta": 60, "split_layer": 1}},
    ]


def matrix_attacks() -> list[dict]:
    return [{"name": a, "params": dict(ATTACKS.get(a).test_params)} for a in ATTACKS.builtins()]


# Pairs that must run (a sample of the matrix that pins the applicability rules).
MUST_RUN = {
    ("none", "nn-inversion"), ("none", "mlp-inversion"), ("none", "ae-inversion"),
    ("none", "ner"), ("none", "attribute-inference"), ("t2t", "ner"),
    ("has-label", "has-deanonymization"), ("has-generative", "has-deanonymization"),
    ("sap", "optimization-inversion"), ("sap-k1", "optimization-inversion"),
    ("embedding-dx", "mlp-inversion"), ("cape", "attribute-inference"),
    ("dpnr", "attribute-inference"), ("cape", "bow-inversion"), ("dpnr", "geia"),
    ("sap-k1", "bow-inversion"), ("sap-k1", "geia"), ("embedding-dx", "geia"),
    ("has-label", "bow-inversion"), ("t2t", "geia"), ("t2t", "bayes-inversion"),
    ("none", "vec2text"), ("cape", "vec2text"), ("sap-k1", "vec2text"),
    ("clean-token_embeddings", "nn-inversion"), ("clean-pooled", "attribute-inference"),
}  # fmt: skip
MUST_BE_NA = {
    ("t2t", "has-deanonymization"), ("sap-k1", "nn-inversion"), ("sap-k1", "mlp-inversion"),
    ("cape", "nn-inversion"), ("dpnr", "ner"), ("none", "optimization-inversion"),
    ("sap", "ner"), ("none", "bayes-inversion"), ("sap", "bayes-inversion"),
    ("clean-token_embeddings", "bayes-inversion"), ("clean-pooled", "nn-inversion"),
}  # fmt: skip


def matrix_config() -> GridConfig:
    """The matrix's grid: every defense and attack above, a tiny corpus, the tiny backbone."""
    return load_config(
        {
            "name": "matrix",
            "backbone": TINY,
            "corpus": {
                "name": "synthetic-reviews",
                "params": {"n_docs": 60, "seed": 0},
                "limits": {"train": 20, "test": 8, "aux": 16},
            },
            "defenses": matrix_defenses(),
            "attacks": matrix_attacks(),
        }
    )


def matrix_context() -> Context:
    """The matrix's corpus, truth, attacks and (lazily fitted) defenses, as a worker has them."""
    return Context(matrix_config())


def runs_on(attack: str) -> str:
    """A defense label of the matrix on which ``attack`` must run (``none`` where it may)."""
    labels = sorted(label for label, a in MUST_RUN if a == attack)
    return "none" if "none" in labels else labels[0]


def attack_cell(
    ctx: Context, label: str, attack: Attack, seed: int, fit_seed: int | None = None
) -> Predictions:
    """One cell as the runner runs it: the matrix defense ``label`` privatizes the victims;
    ``attack`` is fitted on the Knowledge the runner grants (white box, query access to the
    mechanism, the aux split) with ``rng`` seeded by ``fit_seed`` (default ``seed``), then
    attacks the public release."""
    spec = [d["label"] for d in matrix_defenses()].index(label)
    defense = ctx.base(spec)
    release = defense.privatize(ctx.test_texts, rng=np.random.default_rng(seed)).public()
    knowledge = Knowledge(
        white_box=True,
        backbone=ctx.config.backbone,
        query_mechanism=lambda texts: defense.privatize(texts, rng=np.random.default_rng(seed)),
        aux=ctx.aux,
        guarantee=defense.guarantee,
    )
    assert attack.applicable(release, knowledge) is None, (label, attack.name)
    fit_rng = np.random.default_rng(seed if fit_seed is None else fit_seed)
    return attack.fit(knowledge, rng=fit_rng).attack(release)


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory):
    result = run_grid(matrix_config(), run_dir=tmp_path_factory.mktemp("matrix"), progress=False)
    return result.frame


def test_every_builtin_is_in_the_matrix() -> None:
    assert {d["name"] for d in matrix_defenses()} == set(DEFENSES.builtins())
    assert {a["name"] for a in matrix_attacks()} == set(ATTACKS.builtins())


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
    # The probe trains no service-side objective (CAPE's, RAPT's): those labels say so.
    named = matrix["label"].str.removesuffix(" (objective not applied)") == label
    rows = matrix[named & matrix["attack"].str.startswith(attack)]
    return set(rows["status"])


def test_applicability_rules(matrix) -> None:
    for label, attack in MUST_RUN:
        assert _status(matrix, label, attack) == {"ok"}, (label, attack)
    for label, attack in MUST_BE_NA:
        assert _status(matrix, label, attack) == {"n/a"}, (label, attack)
    # one cell per (defense point, attack); attribute inference has a row per attribute and
    # the sentence inversions an [entities] row beside the headline
    pairs = matrix[~matrix["attack"].str.startswith("attribute-inference")]
    assert pairs["cell"].nunique() == len(matrix_defenses()) * (len(ATTACKS.builtins()) - 1)
    entities = pairs[pairs["attack"].str.endswith("[entities]")]
    assert set(entities["attack"]) == {
        "bow-inversion[entities]",
        "geia[entities]",
        "vec2text[entities]",
    }
    assert len(entities) == 3 * len(matrix_defenses())
    assert set(entities["family"]) == {"entity"}
