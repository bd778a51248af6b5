"""Device plumbing (privaudit.runtime.devices), exercised on the CPU.

No GPU here: the plumbing is checked on the CPU and on torch's ``meta`` device, which holds
no data and refuses to mix with CPU tensors, so a component that runs there has every tensor
of its computation on the device it was given."""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from privaudit.api import Knowledge
from privaudit.attacks.attribute_inference import AttributeInference
from privaudit.attacks.mlp_inversion import MLPInversion
from privaudit.audit.config import GridConfig, load_config
from privaudit.audit.executors import ray_placement
from privaudit.cli import app
from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.defenses.t2t import T2T
from privaudit.mechanisms.laplace import laplace_like
from privaudit.mechanisms.nearest import NearestNeighbourIndex
from privaudit.registry import ATTACKS, DEFENSES, UTILITY
from privaudit.runtime import devices
from privaudit.runtime.devices import check_device, current_device, resolve_device, use_device
from tests.conftest import TINY

runner = CliRunner()


@contextmanager
def forced(device: str):
    """Torch code inside runs on ``device`` as :func:`use_device` would set it, unchecked
    (``meta`` is no user-facing device)."""
    token = devices._CURRENT.set(device)
    try:
        yield
    finally:
        devices._CURRENT.reset(token)


# -- resolving ------------------------------------------------------------------------------


def test_auto_and_cpu_resolve_here() -> None:
    assert not torch.cuda.is_available()  # this suite runs on a CPU machine
    assert resolve_device("auto") == "cpu"
    assert resolve_device(None) == "cpu"
    assert resolve_device(" CPU ") == "cpu"
    assert current_device() == "cpu"


@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "CUDA:3", "mps"])
def test_a_missing_gpu_is_one_clear_line(spec: str) -> None:
    with pytest.raises(ValueError, match="not available") as info:
        resolve_device(spec)
    message = str(info.value)
    assert "\n" not in message and "--device cpu" in message


@pytest.mark.parametrize("spec", ["gpu", "cuda:x", "cuda:", "cuda:-1", "tpu", ""])
def test_unknown_devices_are_refused(spec: str) -> None:
    with pytest.raises(ValueError, match="Unknown device") as info:
        check_device(spec)
    assert "auto" in str(info.value) and "cuda:N" in str(info.value)


def test_a_device_is_a_string() -> None:
    with pytest.raises(TypeError, match="A device is a string"):
        check_device(0)


def test_use_device_nests_and_restores() -> None:
    with use_device("cpu") as outer:
        assert outer == "cpu" and current_device() == "cpu"
        with forced("meta"):
            assert current_device() == "meta"
            assert devices.offload_device() == "meta"
        assert current_device() == "cpu"
        assert devices.offload_device() is None  # the CPU keeps numpy paths
    with pytest.raises(ValueError, match="not available"), use_device("cuda"):
        pass  # pragma: no cover


def test_auto_without_torch_stays_numpy() -> None:
    """``auto`` imports no torch until torch code asks, and numpy paths stay numpy."""
    code = (
        "import sys; from privaudit.runtime.devices import use_device, offload_device\n"
        "with use_device('auto'), use_device('cpu'):\n"
        "    assert offload_device() is None\n"
        "with use_device('auto'):\n"
        "    assert offload_device() is None\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_to_device_and_numpy_helpers() -> None:
    batch = {"a": torch.ones(2), "b": [torch.zeros(1)], "n": 3}
    with forced("meta"):
        moved = devices.to_device(batch)
        assert moved["a"].is_meta and moved["b"][0].is_meta and moved["n"] == 3
        assert devices.tensor(np.arange(3)).is_meta
    assert devices.numpy(torch.ones(2, requires_grad=True)).tolist() == [1.0, 1.0]
    assert devices.describe_device("cpu") == "cpu"


# -- components keep their tensors on the device ----------------------------------------------


def _on_cpu(func, *args, **kwargs):
    """The mechanism is the victims' (their device), not the attacker's."""
    with use_device("cpu"):
        return func(*args, **kwargs)


def _knowledge(n_docs: int = 60) -> Knowledge:
    corpus = synthetic_reviews(n_docs=n_docs, seed=0, split_fractions=(0.2, 0.4, 0.4))
    t2t = T2T(eta=100.0, backbone=TINY)
    return Knowledge(
        white_box=False,
        backbone=TINY,
        query_mechanism=lambda texts: _on_cpu(t2t.privatize, texts, rng=np.random.default_rng(1)),
        aux=corpus.split("aux"),
    )


def test_mlp_inversion_trains_on_the_device_it_is_given() -> None:
    attack = MLPInversion(backbone=TINY, epochs=1, hidden=16, val_fraction=0.0)
    with forced("meta"):  # any tensor left on the CPU would fail to mix with meta ones
        attack.fit(_knowledge(), rng=np.random.default_rng(0))
    tensors = [*attack._model.parameters(), *attack._model.buffers()]
    assert tensors and all(t.is_meta for t in tensors)


def test_attribute_heads_train_on_the_device_they_are_given() -> None:
    attack = AttributeInference(epochs=1, hidden=8)
    x = np.random.default_rng(0).normal(size=(20, 6)).astype(np.float32)
    with forced("meta"):
        head = attack._train_head(x, ["a", "b"] * 10, rng=np.random.default_rng(0))
    assert all(p.is_meta for p in head.model.parameters())


def test_laplace_noise_follows_its_tensor() -> None:
    x = torch.zeros(3, 4, device="meta")
    noise = laplace_like(x, 1.0, torch.Generator().manual_seed(0))
    assert noise.is_meta and noise.shape == x.shape


def test_nearest_neighbour_torch_search_equals_numpy() -> None:
    rng = np.random.default_rng(0)
    index = NearestNeighbourIndex(
        rng.normal(size=(300, 8)).astype(np.float32), chunk_size=64, row_block=40
    )
    queries = rng.normal(size=(100, 8)).astype(np.float32)
    for k in (1, 2, 5):
        d_np, i_np = index._search(queries, k)
        d_t, i_t = index._search_torch(queries, k, "cpu")
        assert np.array_equal(i_np, i_t)
        np.testing.assert_allclose(d_np, d_t, atol=1e-4)


def test_backbone_forward_on_cpu_keeps_model_and_outputs_there() -> None:
    from privaudit.models.backbone import backbone

    bb = backbone(TINY)
    with use_device("cpu"):
        pooled = bb.pooled(["a short text", "another one"])
        hidden = bb.hidden_at_layer(["a short text"], 1)
        top = bb.pooled_from_layer(hidden, 1)
    assert pooled.shape == (2, bb.dim) and top.shape == (1, bb.dim)
    assert all(p.device.type == "cpu" for p in bb.model.parameters())


def test_same_seed_same_output_on_the_cpu() -> None:
    knowledge = _knowledge()
    release = T2T(eta=100.0, backbone=TINY).privatize(
        ["the food was great", "service was slow"], rng=np.random.default_rng(5)
    )

    def once() -> list[list[int]]:
        attack = MLPInversion(backbone=TINY, epochs=1, hidden=16)
        with use_device("cpu"):
            attack.fit(knowledge, rng=np.random.default_rng(3))
            state = [p.detach().clone() for p in attack._model.parameters()]
            return attack.attack(release.public()).tokens, state

    (tokens_a, state_a), (tokens_b, state_b) = once(), once()
    assert tokens_a == tokens_b
    assert all(torch.equal(a, b) for a, b in zip(state_a, state_b, strict=True))


# -- declarations, grid, executors ----------------------------------------------------------

TORCH_COMPONENTS = {
    (ATTACKS, "mlp-inversion"),
    (ATTACKS, "ae-inversion"),
    (ATTACKS, "optimization-inversion"),
    (ATTACKS, "attribute-inference"),
    (ATTACKS, "bow-inversion"),
    (ATTACKS, "geia"),
    (ATTACKS, "ner"),
    (DEFENSES, "cape"),
    (DEFENSES, "dpnr"),
    (DEFENSES, "sap"),
    (DEFENSES, "sap-cti"),
    (UTILITY, "probe"),
    (UTILITY, "peft"),
    (UTILITY, "lora"),
}


@pytest.mark.parametrize(("registry", "name"), sorted(TORCH_COMPONENTS, key=str))
def test_torch_components_declare_a_gpu_share(registry, name: str) -> None:
    assert 0 < registry.get(name).gpu <= 1


def test_the_grid_device_is_checked_when_the_config_loads() -> None:
    base = {"defenses": [{"name": "none"}], "attacks": ["ner"]}
    assert GridConfig.model_validate(base).device == "auto"
    cfg = load_config(base | {"device": "CPU"})
    assert cfg.device == "cpu"
    assert GridConfig.model_validate_json(cfg.model_dump_json()).device == "cpu"
    with pytest.raises(ValueError, match="device: Unknown device 'gpu'") as info:
        load_config(base | {"device": "gpu"})
    assert "\n" not in str(info.value)


def test_a_missing_gpu_stops_a_run_before_anything_is_written(tmp_path) -> None:
    from privaudit.outputs import run_grid

    cfg = load_config({"defenses": [{"name": "none"}], "attacks": ["ner"], "device": "cuda"})
    with pytest.raises(ValueError, match="'cuda' is not available"):
        run_grid(cfg, run_dir=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def _placement(device: str, gpus: float, cached: bool = False):
    class Light:
        gpu = 0.0

    class Heavy:
        gpu = 0.5

    class Util:
        gpu = 0.25

    config = SimpleNamespace(device=device)
    ctx = SimpleNamespace(_specs=[Light()], attacks={"a": Light(), "b": Heavy()}, evaluator=Util())
    task = SimpleNamespace(
        point=SimpleNamespace(spec=0), attack_keys={"a": "k"}, cached_utility={} if cached else None
    )
    heavy = SimpleNamespace(
        point=task.point, attack_keys={"a": "k", "b": "k2"}, cached_utility=None
    )
    return ray_placement(config, ctx, task, gpus), ray_placement(config, ctx, heavy, gpus)


def test_ray_requests_gpus_for_the_points_that_use_them() -> None:
    assert _placement("cuda", 2) == ((0.25, "cuda"), (0.5, "cuda"))
    assert _placement("auto", 1) == ((0.25, "cuda"), (0.5, "cuda"))
    assert _placement("cuda:1", 1, cached=True) == ((0.0, "cpu"), (0.5, "cuda"))
    assert _placement("auto", 0) == ((0.0, "auto"), (0.0, "auto"))  # no GPU on the cluster
    assert _placement("cpu", 4) == ((0.0, "cpu"), (0.0, "cpu"))
    with pytest.raises(ValueError, match="the Ray cluster has no GPU"):
        _placement("cuda", 0)


def test_provenance_records_the_device() -> None:
    from privaudit.runtime.provenance import provenance

    with use_device("cpu"):
        assert provenance()["device"] == "cpu"


# -- command line ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "audit", "privatize", "calibrate"])
def test_the_device_option_is_on_every_torch_command(command: str) -> None:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0 and "--device" in result.output


def test_privatize_on_a_device() -> None:
    ok = runner.invoke(
        app,
        ["privatize", "--defense", "t2t", "--knob", "1000", "--device", "cpu"],
        input="hello world\n",
    )
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.count("\n") == 1
    for device, message in (("cuda", "not available"), ("gpu", "Unknown device")):
        bad = runner.invoke(
            app, ["privatize", "--defense", "t2t", "--device", device], input="hello\n"
        )
        assert bad.exit_code == 2
        assert message in bad.output and bad.output.strip().count("\n") == 0


def test_run_refuses_an_unknown_device_before_any_work(tmp_path) -> None:
    result = runner.invoke(
        app, ["run", "--preset", "smoke", "--run-dir", str(tmp_path / "r"), "--device", "gpu"]
    )
    assert result.exit_code == 2 and "Unknown device 'gpu'" in result.output
    assert not (tmp_path / "r").exists()
