"""CAPE and DPNR: pooled releases bounded to [0, 1] plus Laplace noise; CAPE's adversary."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privaudit.defenses.cape import CAPE, AdversarialObjective, _reversal_classes
from privaudit.defenses.dpnr import DPNR
from privaudit.mechanisms.laplace import (
    check_epsilon,
    laplace_like,
    minmax_normalise,
    sample_laplace,
)
from privaudit.registry import DEFENSES
from privaudit.utility.probe import Probe
from tests.conftest import TINY

TEXTS = ["The pasta was perfect.", "Awful phone, broke in a week.", "A quiet hotel by the sea."]
ODD = ["", "   ", "😀", " ".join(["word"] * 10_000), "ok"]
POS = ["great", "excellent", "wonderful", "lovely", "perfect", "delightful", "superb", "fantastic"]
NEG = ["awful", "terrible", "horrible", "dreadful", "broken", "disgusting", "rude", "useless"]
NOUNS = ["food", "room", "phone", "book", "staff", "service", "shoes", "laptop", "chair", "hotel"]


def obvious_reviews(n: int, seed: int) -> tuple[list[str], np.ndarray]:
    """Two classes told apart by their opinion words (the tiny random BERT cannot read the
    subtler synthetic-reviews corpus: its clean probe accuracy there is near chance)."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for _ in range(n):
        y = int(rng.integers(2))
        words = POS if y else NEG
        parts = [
            f"the {rng.choice(NOUNS)} was {rng.choice(words)}" for _ in range(rng.integers(2, 5))
        ]
        texts.append(" and ".join(parts) + ".")
        labels.append(y)
    return texts, np.asarray(labels)


def manual_minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = x.min(axis=1, keepdims=True), x.max(axis=1, keepdims=True)
    return (x - lo) / (hi - lo)


def stacked(release) -> np.ndarray:
    return np.stack(release.vectors)


# --- the shared Laplace kernel ---------------------------------------------------------------


def test_laplace_kernel_scale_determinism_and_inf() -> None:
    noise = sample_laplace((200, 100), 0.5, np.random.default_rng(3))
    assert noise.dtype == np.float32 and noise.shape == (200, 100)
    assert abs(noise.std() / (math.sqrt(2) * 0.5) - 1) < 0.03
    assert abs(np.median(noise)) < 0.02
    again = sample_laplace((200, 100), 0.5, np.random.default_rng(3))
    assert noise.tobytes() == again.tobytes()
    rng = np.random.default_rng(7)
    state = rng.bit_generator.state
    assert not sample_laplace((4, 5), 0.0, rng).any()
    assert rng.bit_generator.state == state  # no noise, no randomness consumed
    with pytest.raises(ValueError, match=r"scale=-1.0 is not allowed"):
        sample_laplace(3, -1.0, rng)
    with pytest.raises(TypeError, match=r"numpy\.random\.Generator"):
        sample_laplace(3, 1.0, 0)  # type: ignore[arg-type]


def test_minmax_normalise_bounds_and_constant_rows() -> None:
    x = np.array([[1.0, 3.0, 2.0], [5.0, 5.0, 5.0], [-2.0, 0.0, 2.0]])
    out = minmax_normalise(x)
    np.testing.assert_allclose(out, [[0, 1, 0.5], [0, 0, 0], [0, 0.5, 1]])
    assert out.dtype == np.float32
    assert minmax_normalise(np.zeros((0, 4))).shape == (0, 4)


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (0, ValueError, "epsilon=0 is not allowed: Input should be greater than 0"),
        (-1.0, ValueError, "epsilon=-1.0 is not allowed: Input should be greater than 0"),
        (math.nan, ValueError, "epsilon=nan is not allowed"),
        ("1", ValueError, "epsilon='1' is not allowed: Input should be a valid number"),
        (True, ValueError, "epsilon=True is not allowed: Input should be a valid number"),
    ],
)
def test_check_epsilon_errors(value: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        check_epsilon(value)
    assert check_epsilon(math.inf) == math.inf and check_epsilon(2) == 2.0


# --- releases at epsilon = inf ---------------------------------------------------------------


def test_registered() -> None:
    assert DEFENSES.get("cape") is CAPE and DEFENSES.get("dpnr") is DPNR


def test_cape_at_infinity_is_the_normalised_clean_representation(tiny) -> None:
    release = CAPE(epsilon=math.inf, backbone=TINY).privatize(TEXTS, rng=np.random.default_rng(0))
    assert release.kind == "pooled_vectors" and len(release) == len(TEXTS)
    assert all(v.shape == (tiny.dim,) and v.dtype == np.float32 for v in release.vectors or [])
    clean = tiny.pooled(TEXTS)
    np.testing.assert_array_equal(stacked(release), minmax_normalise(clean))
    np.testing.assert_allclose(stacked(release), manual_minmax(clean.astype(np.float64)), atol=1e-6)
    assert release.space == "pooled" and release.meta["defense"] == "cape"
    assert release.meta["epsilon"] == math.inf and release.meta["backbone"] == TINY


def test_dpnr_without_dropout_at_infinity_is_the_normalised_clean_representation(tiny) -> None:
    release = DPNR(epsilon=math.inf, dropout=0.0, backbone=TINY).privatize(
        TEXTS, rng=np.random.default_rng(0)
    )
    np.testing.assert_array_equal(stacked(release), minmax_normalise(tiny.pooled(TEXTS)))
    values = stacked(release)
    assert values.min() == 0.0 and values.max() == 1.0
    assert release.meta["dropout"] == 0.0 and release.meta["sensitivity"] == 1.0


# --- noise scale, determinism, dropout -------------------------------------------------------


@pytest.mark.parametrize(
    ("defense", "delta"),
    [
        (CAPE(epsilon=2.0, backbone=TINY), 1.0),
        (DPNR(epsilon=2.0, dropout=0.0, backbone=TINY), 1.0),
        (DPNR(epsilon=4.0, dropout=0.0, backbone=TINY, sensitivity=3.0), 3.0),
    ],
)
def test_noise_std_matches_laplace_scale(tiny, defense, delta: float) -> None:
    texts, _ = obvious_reviews(300, seed=5)
    clean = minmax_normalise(tiny.pooled(texts))
    noise = stacked(defense.privatize(texts, rng=np.random.default_rng(1))) - clean
    expected = math.sqrt(2) * delta / defense.epsilon  # std of Laplace(Δ/ε)
    assert noise.size == 300 * tiny.dim
    assert abs(noise.std() / expected - 1) < 0.05
    assert defense.privatize(texts[:2], rng=np.random.default_rng(1)).meta[
        "vector_epsilon"
    ] == pytest.approx(tiny.dim * defense.epsilon / delta)


@pytest.mark.parametrize("cls", [CAPE, DPNR])
def test_same_seed_same_bytes(cls) -> None:
    defense = cls(epsilon=1.0, backbone=TINY)
    a = defense.privatize(TEXTS, rng=np.random.default_rng(11))
    b = defense.privatize(TEXTS, rng=np.random.default_rng(11))
    c = defense.privatize(TEXTS, rng=np.random.default_rng(12))
    assert stacked(a).tobytes() == stacked(b).tobytes()
    assert stacked(a).tobytes() != stacked(c).tobytes()


def test_word_dropout_rate() -> None:
    texts = [" ".join(f"w{i}" for i in range(50))] * 200
    kept = DPNR(dropout=0.5).drop_words(texts, np.random.default_rng(0))
    n_kept = sum(len(t.split()) for t in kept)
    assert abs(n_kept / (50 * 200) - 0.5) < 0.02
    # kept words stay in their order; different documents drop different words
    assert all(t.split() == sorted(t.split(), key=lambda w: int(w[1:])) for t in kept)
    assert len(set(kept)) > 190
    rng = np.random.default_rng(0)
    state = rng.bit_generator.state
    messy = ["  spaced   out text ", "", "😀 ok"]
    assert DPNR(dropout=0.0).drop_words(messy, rng) == messy
    assert rng.bit_generator.state == state  # μ = 0 draws nothing
    drop_all_but = DPNR(dropout=0.999).drop_words(
        ["a b c d e f g h"] * 20, np.random.default_rng(0)
    )
    assert sum(len(t.split()) for t in drop_all_but) < 5


def test_dropout_changes_the_release_and_is_audited(tiny) -> None:
    texts = [" ".join(["great"] * 5 + ["awful"] * 5)] * 4
    release = DPNR(epsilon=math.inf, dropout=0.5, backbone=TINY).privatize(
        texts, rng=np.random.default_rng(2)
    )
    assert [m.shape for m in release.audit["dropped"]] == [(10,)] * 4
    assert 0 < sum(int(m.sum()) for m in release.audit["dropped"]) < 40
    assert not np.allclose(stacked(release), minmax_normalise(tiny.pooled(texts)))
    assert release.public().audit == {}


# --- utility under the probe -----------------------------------------------------------------


@pytest.mark.parametrize("cls", [CAPE, DPNR])
def test_probe_utility_falls_with_epsilon(cls) -> None:
    train, y_train = obvious_reviews(200, seed=0)
    test, y_test = obvious_reviews(200, seed=1)
    probe = Probe(backbone=TINY)
    acc = {
        eps: probe.evaluate(
            cls(epsilon=eps, backbone=TINY),
            train,
            y_train,
            test,
            y_test,
            rng=np.random.default_rng(0),
        )["accuracy"]
        for eps in (math.inf, 10.0, 0.01)
    }
    # measured: inf 1.0 / 0.965 (CAPE / DPNR with μ=0.1), 10: ~0.70, 0.01: ~0.53
    assert acc[math.inf] >= 0.9
    assert acc[math.inf] > acc[10.0] > acc[0.01]
    assert abs(acc[0.01] - 0.5) < 0.1  # chance


# --- CAPE's adversarial objective ------------------------------------------------------------


def test_gradient_reversal_flips_and_scales_the_gradient() -> None:
    import torch

    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = _reversal_classes()[1](0.5)(x)  # the layer the adversary's head sits behind
    assert torch.equal(y, x)
    (y * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert torch.equal(x.grad, torch.tensor([-0.5, -1.0, -1.5]))


def test_objective_head_loss_and_perturbation(tiny) -> None:
    import torch

    cape = CAPE(epsilon=2.0, adversary_weight=0.7, attribute="age_bin", adversary_hidden=16)
    objective = cape.training_objective()
    assert isinstance(objective, AdversarialObjective)
    assert (objective.attribute, objective.weight, objective.hidden) == ("age_bin", 0.7, 16)
    assert objective.epsilon == 2.0 and objective.sensitivity == 1.0

    head = objective.adversary(tiny.dim, 3)
    pooled = torch.randn(8, tiny.dim, requires_grad=True)
    assert head(pooled).shape == (8, 3)
    # the reversal is the head's first layer: the input's gradient is −λ times the plain one
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    loss = objective.adversary_loss(pooled, labels, head)
    assert torch.isfinite(loss)
    loss.backward()
    reversed_grad = pooled.grad.clone()
    pooled.grad = None
    torch.nn.functional.cross_entropy(head[1:](pooled), labels).backward()
    torch.testing.assert_close(reversed_grad, -0.7 * pooled.grad)
    assert all(p.grad is not None for p in head.parameters())

    # perturb: the same normalisation as the release, noise of std √2·Δ/ε, differentiable
    x = torch.randn(400, tiny.dim, requires_grad=True)
    g = torch.Generator().manual_seed(0)
    z = objective.perturb(x, g)
    clean = torch.from_numpy(minmax_normalise(x.detach().numpy()))
    noise = (z.detach() - clean).numpy()
    assert abs(noise.std() / (math.sqrt(2) * 0.5) - 1) < 0.05
    z.sum().backward()
    assert torch.isfinite(x.grad).all()
    again = objective.perturb(x.detach(), torch.Generator().manual_seed(0))
    assert torch.equal(again, z.detach())
    loss2 = objective.adversary_loss(
        x, labels.repeat(50), head, generator=torch.Generator().manual_seed(1)
    )
    assert torch.isfinite(loss2)
    silent = AdversarialObjective("gender", 1.0, 4, math.inf)
    torch.testing.assert_close(silent.perturb(x.detach(), g), clean)
    assert not laplace_like(x, 0.0, g).any()


def test_objective_validation() -> None:
    import datasets

    train = datasets.Dataset.from_dict(
        {"text": ["a", "b"], "label": [0, 1], "attributes": [{"gender": "F"}, {"gender": "M"}]}
    )
    assert CAPE().fit(train).training_objective().attribute == "gender"
    with pytest.raises(ValueError, match="does not carry"):
        CAPE(attribute="religion").fit(train).training_objective()
    with pytest.raises(ValueError, match="adversary_weight=-1 is not allowed"):
        CAPE(adversary_weight=-1)
    with pytest.raises(ValueError, match="adversary_hidden=0 is not allowed"):
        CAPE(adversary_hidden=0)
    with pytest.raises(ValueError, match="at least 2"):
        CAPE().training_objective().adversary(8, 1)
    with pytest.raises(ValueError, match="attribute labels"):
        import torch

        objective = CAPE().training_objective()
        objective.adversary_loss(torch.zeros(4, 8), [0, 1], objective.adversary(8, 2))


# --- bad and odd input -----------------------------------------------------------------------


@pytest.mark.parametrize("cls", [CAPE, DPNR])
def test_odd_documents_do_not_crash(tiny, cls) -> None:
    rng = np.random.default_rng(0)
    empty = cls(backbone=TINY).privatize([], rng=rng)
    assert empty.kind == "pooled_vectors" and empty.vectors == []
    release = cls(epsilon=5.0, backbone=TINY).privatize(ODD, rng=rng)
    assert len(release) == len(ODD)
    for v in release.vectors or []:
        assert v.shape == (tiny.dim,) and np.isfinite(v).all()


@pytest.mark.parametrize("cls", [CAPE, DPNR])
def test_bad_input_errors(cls) -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(TypeError, match="single string"):
        cls(backbone=TINY).privatize("one text", rng=rng)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not a string"):
        cls(backbone=TINY).privatize(["ok", 3], rng=rng)  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"numpy\.random\.Generator"):
        cls(backbone=TINY).privatize(TEXTS, rng=0)  # type: ignore[arg-type]
    for eps in (0, -1.0, math.nan, "1"):
        with pytest.raises(ValueError, match=r"parameter epsilon=.* is not allowed"):
            cls(epsilon=eps, backbone=TINY)
    for bad in (0.0, math.inf):
        with pytest.raises(ValueError, match=r"sensitivity=.* is not allowed"):
            cls(sensitivity=bad, backbone=TINY)
    with pytest.raises(
        ValueError, match=r"max_length=1 is not allowed: .*greater than or equal to 3"
    ):
        cls(max_length=1, backbone=TINY)


@pytest.mark.parametrize("mu", [-0.1, 1.0, 1.5, math.nan])
def test_dropout_outside_unit_interval(mu: float) -> None:
    with pytest.raises(
        ValueError, match=r"dropout=.* is not allowed: .*declared: float >= 0 and < 1"
    ):
        DPNR(dropout=mu, backbone=TINY)


def test_knob_sweep_keeps_parameters() -> None:
    for base in (CAPE(epsilon=1.0, attribute="age_bin", backbone=TINY), DPNR(dropout=0.3)):
        swept = base.with_knob(0.5)
        assert swept.epsilon == 0.5
        assert {k: v for k, v in swept.params().items() if k != "epsilon"} == {
            k: v for k, v in base.params().items() if k != "epsilon"
        }


def test_adversary_through_the_objective_protocol(tiny) -> None:
    """What a trainer calls: applies_to, targets, head, loss — no CAPE-specific method."""
    import torch

    from privaudit.api import Objective, Release, TrainingBatch

    objective = CAPE(adversary_hidden=8).training_objective()
    assert isinstance(objective, Objective)
    pooled = Release("pooled_vectors", vectors=[np.zeros(4)] * 3)
    assert objective.applies_to(pooled) is None
    assert "pooled" in (objective.applies_to(Release("text", texts=["a"])) or "")
    targets = objective.targets(pooled, [0, 2], {"gender": ["M", "F", "F"]})
    assert targets == [1, 0]  # classes sorted by value: F=0, M=1
    with pytest.raises(ValueError, match="needs the train split's 'gender' labels"):
        objective.targets(pooled, [0], {})
    with pytest.raises(ValueError, match="one value per released train document"):
        objective.targets(pooled, [0, 2], {"gender": ["M", "F"]})
    head = objective.head(tiny.dim, targets)
    features = torch.randn(2, tiny.dim)
    assert head(features).shape == (2, 2)
    assert objective.head(tiny.dim, [0, 0])(features).shape == (2, 2)  # at least two classes
    assert objective.head(tiny.dim, [0, 3])(features).shape == (2, 4)
    batch = TrainingBatch(
        hidden=None, features=features, prefix_positions=[[], []], targets=targets
    )
    loss = objective.loss(batch, head)
    torch.testing.assert_close(loss, objective.adversary_loss(features, targets, head))
    # by hand: the head behind the reversal is the identity forward, so plain cross-entropy
    log_p = head[1:](features).log_softmax(-1)
    torch.testing.assert_close(loss, -(log_p[0, targets[0]] + log_p[1, targets[1]]) / 2)
