"""The peft utility evaluators (prompt/prefix tuning, LoRA, fine-tuning) on the tiny BERT."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privaudit.api import Release
from privaudit.audit.config import PRESETS, load_config
from privaudit.outputs import run_grid
from privaudit.registry import DEFENSES, UTILITY
from privaudit.utility.peft_tuning import METHODS, PeftUtility
from tests.conftest import TINY

_POS = ["great product love it works well", "excellent quality very happy", "good fast delivery"]
_NEG = ["terrible broke after a day", "awful quality very sad", "bad slow delivery poor"]
TEXTS = [(_POS if i % 2 else _NEG)[i % 3] + f" item {i}" for i in range(48)]
TEXTS[0] = ""  # an empty document trains and predicts like any other
TEXTS[2] = "terrible " * 2000  # a huge one is truncated to max_length
LABELS = [i % 2 for i in range(48)]
SMALL = {"backbone": TINY, "epochs": 3, "batch_size": 8, "progress": False}


def _split(release_train: Release, release_test: Release) -> tuple:
    return release_train, LABELS[:36], release_test, LABELS[36:]


def _text() -> tuple:
    return _split(Release("text", texts=TEXTS[:36]), Release("text", texts=TEXTS[36:]))


@pytest.mark.parametrize("method", METHODS)
def test_every_method_trains_and_is_deterministic(method) -> None:
    virtual = {"num_virtual_tokens": 4} if "tuning" in method and method != "fine-tuning" else {}
    util = UTILITY.get(method)(**SMALL, **virtual)
    assert util.method == method
    first = util.evaluate_releases(*_text(), rng=np.random.default_rng(3))
    info = dict(util.last_info)
    again = util.evaluate_releases(*_text(), rng=np.random.default_rng(3))
    assert first == again
    assert set(first) == {
        "balanced_accuracy",
        "accuracy",
        "macro_f1",
        "predictions",
        "test_indices",
        "objective",
    }
    assert 0.0 <= first["macro_f1"] <= first["accuracy"] + 1e-9 <= 1.0 + 1e-9
    assert 0.0 <= first["balanced_accuracy"] <= 1.0 and first["objective"] == "none"
    assert len(first["predictions"]) == len(first["test_indices"]) == 12
    assert info["method"] == method and info["examples_per_second"] > 0
    assert np.isfinite(info["final_loss"])


def test_prompt_tuning_learns_a_separable_task() -> None:
    util = UTILITY.get("prompt-tuning")(**{**SMALL, "epochs": 6}, num_virtual_tokens=4)
    result = util.evaluate_releases(*_text(), rng=np.random.default_rng(0))
    assert result["accuracy"] >= 0.75  # the two classes share no words


def test_trainable_parameters_follow_the_method() -> None:
    counts = {}
    for method in METHODS:
        util = PeftUtility(method=method, **{**SMALL, "epochs": 1}, num_virtual_tokens=4)
        util.evaluate_releases(*_text(), rng=np.random.default_rng(0))
        counts[method] = util.last_info["trainable_params"]
    assert counts["prompt-tuning"] < counts["lora"] < counts["fine-tuning"]
    assert counts["prefix-tuning"] < counts["fine-tuning"]


def test_the_shared_backbone_is_never_modified(tiny) -> None:
    before = {k: v.clone() for k, v in tiny.model.state_dict().items()}
    UTILITY.get("fine-tuning")(**SMALL).evaluate_releases(*_text(), rng=np.random.default_rng(0))
    after = tiny.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_rapt_trains_with_its_reconstruction_objective() -> None:
    defense = DEFENSES.get("rapt")(backbone=TINY, eta=100.0, n_plain=6)
    rng = np.random.default_rng(0)
    train, test = defense.privatize(TEXTS[:36], rng=rng), defense.privatize(TEXTS[36:], rng=rng)
    with_rec = UTILITY.get("prompt-tuning")(**SMALL, num_virtual_tokens=4)
    applied = with_rec.evaluate_releases(
        *_split(train, test), rng=np.random.default_rng(0), defense=defense
    )
    assert with_rec.last_info["objective"] == "PlainTokenReconstruction"
    assert applied["objective"] == "applied"
    without = UTILITY.get("prompt-tuning")(**SMALL, num_virtual_tokens=4, use_objective=False)
    off = without.evaluate_releases(
        *_split(train, test), rng=np.random.default_rng(0), defense=defense
    )
    assert without.last_info["objective"] is None
    assert off["objective"] == "not applied: use_objective=False"
    # The reconstruction term adds to the task loss (same seed, same batches).
    assert with_rec.last_info["final_loss"] > without.last_info["final_loss"]


def test_rapt_plain_prefix_is_outside_the_pool_and_the_length_budget(tiny) -> None:
    from privaudit.utility.peft_inputs import Inputs

    defense = DEFENSES.get("rapt")(backbone=TINY, eta=100.0, n_plain=6)
    release = defense.privatize(["good fast delivery " * 40, "bad"], rng=np.random.default_rng(0))
    inputs = Inputs.build(tiny, release, np.arange(2), 16)
    for r, text in enumerate(release.texts):
        prefix = " ".join(text.split()[:6])
        n_prefix = len(tiny.tokenizer(prefix, add_special_tokens=False)["input_ids"])
        mask, pool = inputs.mask[r], inputs.pool[r]
        # The prefix is masked out of the pool: [CLS] stays, then n_prefix zeros, then the text.
        assert pool[0] == 1 and pool[1 : 1 + n_prefix].sum() == 0
        assert int(pool.sum()) == int(mask.sum()) - n_prefix
        assert len(inputs.plain[r]) == 6 and inputs.plain[r][0] == 1
    # The long review keeps max_length (16) tokens of its own beside the prefix.
    assert int(inputs.pool[0].sum()) == 16  # [CLS] + 14 text pieces + [SEP]
    plain = Inputs.build(tiny, Release("text", texts=["a b c"]), np.arange(1), 16)
    assert plain.pool is None and plain.plain == [[]]
    assert "pool_mask" not in plain.batch(torch.arange(1))


def test_rapt_per_document_targets_reach_the_loss() -> None:
    defense = DEFENSES.get("rapt")(
        backbone=TINY, eta=100.0, n_plain=5, plain_sequence="per-document"
    )
    release = defense.privatize(TEXTS[:4], rng=np.random.default_rng(0))
    objective = defense.training_objective()
    own = release.meta["plain_words"]
    assert objective.targets(release, [1, 2, 3], {}) == [
        objective.row_targets(own[i]) for i in (1, 2, 3)
    ]
    util = UTILITY.get("prompt-tuning")(**SMALL, num_virtual_tokens=4)
    test = defense.privatize(TEXTS[36:], rng=np.random.default_rng(1))
    train = defense.privatize(TEXTS[:36], rng=np.random.default_rng(1))
    util.evaluate_releases(*_split(train, test), rng=np.random.default_rng(0), defense=defense)
    assert util.last_info["objective"] == "PlainTokenReconstruction"
    assert np.isfinite(util.last_info["final_loss"])


def test_other_defenses_add_no_objective() -> None:
    defense = DEFENSES.get("t2t")(backbone=TINY, eta=100.0)
    rng = np.random.default_rng(0)
    train, test = defense.privatize(TEXTS[:36], rng=rng), defense.privatize(TEXTS[36:], rng=rng)
    util = UTILITY.get("lora")(**SMALL)
    result = util.evaluate_releases(
        *_split(train, test), rng=np.random.default_rng(0), defense=defense
    )
    assert util.last_info["objective"] is None and result["objective"] == "none"


@pytest.mark.parametrize(("name", "params"), [("embedding-dx", {"eta": 50.0}), ("dpnr", {})])
def test_vector_releases(name, params) -> None:
    defense = DEFENSES.get(name)(backbone=TINY, **params)
    rng = np.random.default_rng(0)
    train, test = defense.privatize(TEXTS[:36], rng=rng), defense.privatize(TEXTS[36:], rng=rng)
    util = UTILITY.get("lora")(**SMALL)
    result = util.evaluate_releases(*_split(train, test), rng=np.random.default_rng(0))
    assert 0.0 <= result["accuracy"] <= 1.0


@pytest.mark.parametrize("layer", [1, 2])
def test_split_model_releases_train_the_top_model(layer) -> None:
    defense = DEFENSES.get("sap")(backbone=TINY, eta=float("inf"), split_layer=layer)
    rng = np.random.default_rng(0)
    train, test = defense.privatize(TEXTS[:36], rng=rng), defense.privatize(TEXTS[36:], rng=rng)
    lora = UTILITY.get("prompt-tuning")(**{**SMALL, "epochs": 6})
    result = lora.evaluate_releases(*_split(train, test), rng=np.random.default_rng(0))
    assert lora.last_info["top_model"] == (
        "lora on layers 1..1" if layer == 1 else "head only (the release is the last layer)"
    )
    assert 0.0 <= result["accuracy"] <= 1.0
    full = UTILITY.get("fine-tuning")(**SMALL)
    full.evaluate_releases(*_split(train, test), rng=np.random.default_rng(0))
    assert full.last_info["trainable_params"] >= lora.last_info["trainable_params"]
    mixed = defense.privatize(TEXTS[36:], rng=rng)
    mixed.layer = 3 - layer  # hidden states of another split layer
    with pytest.raises(ValueError, match="one split layer"):
        lora.evaluate_releases(*_split(train, mixed), rng=np.random.default_rng(0))


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"method": "p-tuning"}, ValueError, "method='p-tuning' is not allowed: Input should be"),
        ({"profile": "huge"}, ValueError, "profile='huge' is not allowed"),
        ({"epochs": "3"}, ValueError, "epochs='3' is not allowed"),
        ({"epochs": 0}, ValueError, "epochs=0 is not allowed"),
        ({"lr": -1.0}, ValueError, "lr=-1.0 is not allowed"),
        ({"lora_dropout": 1.5}, ValueError, "lora_dropout=1.5 is not allowed"),
        ({"use_objective": "yes"}, ValueError, "use_objective='yes' is not allowed"),
        ({"progress": "on"}, ValueError, "progress='on' is not allowed"),
    ],
)
def test_bad_parameters_fail_clearly(params, error, message) -> None:
    """On construction: before any data is read."""
    with pytest.raises(error, match=message):
        PeftUtility(**{**SMALL, **params})
    with pytest.raises(ValueError, match="prompt-tuning \\(PromptTuning\\) parameter"):
        UTILITY.get("prompt-tuning")(epochs=0)


def test_bad_inputs_fail_clearly() -> None:
    util = UTILITY.get("lora")(**SMALL)
    train, y, test, y_test = _text()
    with pytest.raises(ValueError, match="one label"):
        util.evaluate_releases(train, y[:-1], test, y_test, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="two classes"):
        util.evaluate_releases(train, [0] * len(y), test, y_test, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="Release"):
        util.evaluate_releases(TEXTS, y, test, y_test, rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="Generator"):
        util.evaluate_releases(train, y, test, y_test, rng=0)
    pooled = Release("pooled_vectors", vectors=[np.zeros(4, np.float32)] * len(y_test))
    with pytest.raises(ValueError, match="pooled_vectors"):
        util.evaluate_releases(train, y, pooled, y_test, rng=np.random.default_rng(0))


def test_profiles_set_defaults_and_explicit_values_win() -> None:
    quick = PeftUtility(method="lora").settings()
    paper = PeftUtility(method="lora", profile="paper").settings()
    assert quick["max_train"] is not None and paper["max_train"] is None
    assert quick["epochs"] < paper["epochs"]
    assert PeftUtility(method="lora", epochs=1).settings()["epochs"] == 1
    assert PeftUtility().settings()["num_virtual_tokens"] == 150  # RAPT's prompt length
    assert PeftUtility(method="prefix-tuning").settings()["num_virtual_tokens"] == 10


def test_progress_bar_shows_the_loss(capsys) -> None:
    util = UTILITY.get("lora")(**{**SMALL, "progress": True, "epochs": 1})
    util.evaluate_releases(*_text(), rng=np.random.default_rng(0))
    assert "loss=" in capsys.readouterr().err


def test_grid_chooses_the_utility_evaluator(tmp_path) -> None:
    data = {
        **PRESETS["smoke"],
        "defenses": [{"name": "none"}],
        "attacks": ["nn-inversion"],
        "utility": {"name": "lora", "params": {"epochs": 1, "max_train": 40, "max_test": 20}},
    }
    result = run_grid(load_config(data), run_dir=tmp_path / "lora", progress=False)
    assert set(result.frame["utility_evaluator"]) == {"lora"}
    assert result.frame["utility"].between(0, 1).all()
    generic = {**data, "utility": {"name": "peft", "params": {"method": "lora", "epochs": 0}}}
    with pytest.raises(ValueError, match="epochs"):  # checked before any work starts
        run_grid(load_config(generic), run_dir=tmp_path / "bad", progress=False)
    with pytest.raises(ValueError, match="bogus"):
        bad = {**data, "utility": {"name": "lora", "params": {"bogus": 1}}}
        run_grid(load_config(bad), run_dir=tmp_path / "bad2", progress=False)
    with pytest.raises(ValueError, match="Did you mean 'lora'"):
        load_config({**data, "utility": "lroa"}).check_names()


def test_interrupted_training_leaves_only_whole_results(tmp_path, monkeypatch) -> None:
    import pandas as pd

    import privaudit.utility.peft_training as peft_training

    real_loop, calls = peft_training._loop, []

    def interrupt_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the second cell's training
        return real_loop(*args, **kwargs)

    monkeypatch.setattr(peft_training, "_loop", interrupt_second)
    data = {
        **PRESETS["smoke"],
        "defenses": [{"name": "none"}, {"name": "t2t", "knob_values": [100]}],
        "attacks": ["nn-inversion"],
        "utility": {"name": "lora", "params": {"epochs": 1, "max_train": 40, "max_test": 20}},
    }
    run_dir = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        run_grid(load_config(data), run_dir=run_dir, progress=False)
    rows = pd.read_csv(run_dir / "results.csv", keep_default_na=False)
    assert list(rows["defense"]) == ["none"] and (rows["status"] == "ok").all()
    assert not list(run_dir.glob(".*.tmp"))


def test_cape_trains_with_its_adversary() -> None:
    defense = DEFENSES.get("cape")(backbone=TINY, epsilon=10.0)
    rng = np.random.default_rng(0)
    train, test = defense.privatize(TEXTS[:36], rng=rng), defense.privatize(TEXTS[36:], rng=rng)
    gender = ["F" if i % 3 else "M" for i in range(36)]
    util = UTILITY.get("lora")(**SMALL)
    args = (*_split(train, test),)
    result = util.evaluate_releases(
        *args, rng=np.random.default_rng(0), defense=defense, train_attributes={"gender": gender}
    )
    assert util.last_info["objective"] == "AdversarialObjective"
    assert result["objective"] == "applied"
    with pytest.raises(ValueError, match="'gender' labels"):
        util.evaluate_releases(*args, rng=np.random.default_rng(0), defense=defense)
    plain = UTILITY.get("lora")(**SMALL, use_objective=False)
    result = plain.evaluate_releases(*args, rng=np.random.default_rng(0), defense=defense)
    assert plain.last_info["objective"] is None
    assert result["objective"] == "not applied: use_objective=False"


class _CountingObjective:
    """Not RAPT's, not CAPE's: any class with the four methods trains beside the task."""

    def __init__(self, kind: str) -> None:
        self.kind, self.batches, self.heads = kind, [], []

    def applies_to(self, release: Release) -> str | None:
        return None if release.kind == self.kind else f"{self.kind} only"

    def targets(self, release: Release, rows, attributes) -> list:
        return [int(r) % 2 for r in rows]

    def head(self, hidden_size: int, targets) -> torch.nn.Module:
        head = torch.nn.Linear(hidden_size, 2)
        self.heads.append((head, head.weight.detach().clone()))
        return head

    def loss(self, batch, head):
        self.batches.append(batch)
        return torch.nn.functional.cross_entropy(head(batch.features), torch.tensor(batch.targets))


class _WithObjective:
    """A stand-in defense: the trainer needs only ``training_objective()``."""

    def __init__(self, objective) -> None:
        self.objective = objective

    def training_objective(self):
        return self.objective


def _trained(objective: _CountingObjective, util) -> torch.nn.Module:
    assert util.last_info["objective"] == type(objective).__name__
    assert len(objective.heads) == 1 and objective.batches
    head, before = objective.heads[0]
    assert not torch.equal(head.weight.detach(), before)  # its head was trained
    return head


def test_any_objective_trains_through_the_protocol_on_pooled_vectors() -> None:
    objective = _CountingObjective("pooled_vectors")
    vectors = [np.random.default_rng(i).normal(size=8).astype(np.float32) for i in range(40)]
    train = Release("pooled_vectors", vectors=vectors[:30])
    test = Release("pooled_vectors", vectors=vectors[30:])
    labels = [i % 2 for i in range(40)]
    util = UTILITY.get("lora")(**SMALL)
    util.evaluate_releases(
        train,
        labels[:30],
        test,
        labels[30:],
        rng=np.random.default_rng(0),
        defense=_WithObjective(objective),
    )
    assert _trained(objective, util).in_features == 256  # the trunk's width
    batch = objective.batches[0]
    assert batch.hidden is None and batch.features.shape == (8, 256)
    assert batch.prefix_positions == [[]] * 8 and len(batch.targets) == 8


def test_any_objective_trains_through_the_protocol_on_text(tiny) -> None:
    objective = _CountingObjective("text")
    util = UTILITY.get("prompt-tuning")(**{**SMALL, "epochs": 1}, num_virtual_tokens=4)
    util.evaluate_releases(
        *_text(), rng=np.random.default_rng(0), defense=_WithObjective(objective)
    )
    assert _trained(objective, util).in_features == tiny.dim
    batch = objective.batches[0]
    assert batch.hidden.shape[0] == 8 and batch.hidden.shape[2] == tiny.dim
    assert batch.features.shape == (8, tiny.dim) and batch.prefix_positions == [[]] * 8
    assert set(batch.targets) <= {0, 1}
    # Not applicable to the release, or use_objective=False: the task loss alone.
    cases = (
        (_CountingObjective("pooled_vectors"), True, "not applied: pooled_vectors only"),
        (objective, False, "not applied: use_objective=False"),
    )
    for other, flag, label in cases:
        calls = len(other.batches)
        off = UTILITY.get("prompt-tuning")(
            **{**SMALL, "epochs": 1}, num_virtual_tokens=4, use_objective=flag
        )
        result = off.evaluate_releases(
            *_text(), rng=np.random.default_rng(0), defense=_WithObjective(other)
        )
        assert off.last_info["objective"] is None and len(other.batches) == calls
        assert result["objective"] == label


def test_an_objective_must_give_one_target_per_row() -> None:
    objective = _CountingObjective("pooled_vectors")
    objective.targets = lambda release, rows, attributes: [0]
    pooled = Release("pooled_vectors", vectors=[np.zeros(4, np.float32)] * 12)
    with pytest.raises(ValueError, match="one per row"):
        UTILITY.get("lora")(**SMALL).evaluate_releases(
            pooled,
            [0, 1] * 6,
            pooled,
            [0, 1] * 6,
            rng=np.random.default_rng(0),
            defense=_WithObjective(objective),
        )
