"""The peft trainers' models and training loop (torch is imported inside each function).

:func:`train_encoder` trains a copy of the backbone (peft-wrapped for prompt/prefix tuning and
LoRA, every weight for fine-tuning) with a linear head on the mean of the input tokens;
:func:`train_top` trains the top model of a split encoder on released hidden states (SAP);
:func:`train_head` trains a one-hidden-layer classifier on pooled release vectors. All three
add a defense's objective through the :class:`~privaudit.api.Objective` protocol and share one
seeded minibatch AdamW loop; :func:`predict_encoder` and :func:`predict_head` classify the test
split. The settings (``cfg``, carried with the seed, the bar and the objective in a
:class:`Run`) and the peft configurations come from
:class:`privaudit.utility.peft_tuning.PeftUtility`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.api import Objective, TrainingBatch
from privaudit.mechanisms.seeding import seeded_torch
from privaudit.models.backbone import mean_pool, top_model_forward
from privaudit.runtime.devices import module_device, to_device, torch_device
from privaudit.utility.peft_inputs import Inputs


@dataclass(frozen=True)
class Run:
    """What the evaluator hands each trainer besides the model and the data: its settings
    (``cfg``), the training seed, whether to show the bar, and a defense's objective with
    its per-training-row ``targets`` (None and empty without one)."""

    cfg: dict[str, Any]
    seed: int
    progress: bool | None
    objective: Objective | None = None
    targets: Sequence[Any] = ()


def _classifier(encoder: Any, dim: int, n_classes: int, n_virtual: int) -> Any:
    import torch

    class Classifier(torch.nn.Module):
        """Encoder (peft-wrapped or not) + mean pooling over the input tokens + linear head."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder
            self.head = torch.nn.Linear(dim, n_classes)

        def forward(self, batch: dict[str, Any]) -> tuple[Any, Any, Any]:
            batch = dict(batch)
            pool = batch.pop("pool_mask", batch["attention_mask"])
            hidden = self.encoder(**batch).last_hidden_state
            if n_virtual and hidden.shape[1] > batch["attention_mask"].shape[1]:
                hidden = hidden[:, n_virtual:]  # prompt tuning prepends the soft tokens
            pooled = mean_pool(hidden, pool)
            return self.head(pooled), hidden, pooled

    return Classifier()


def train_encoder(
    bb: Any,
    inputs: Inputs,
    y: np.ndarray,
    classes: np.ndarray,
    run: Run,
    peft_config: Any,
) -> tuple[Any, dict[str, Any]]:
    """The backbone's copy (peft-wrapped by ``peft_config``, every weight trained without
    one) with a linear head on the mean of the input tokens, trained as ``run`` says."""
    import torch

    cfg = run.cfg
    target = torch.from_numpy(np.searchsorted(classes, y).astype(np.int64))
    with seeded_torch(run.seed) as generator:
        encoder = copy.deepcopy(bb.model)
        if peft_config is not None:
            import warnings

            from peft import get_peft_model

            with warnings.catch_warnings():  # peft reads a property transformers deprecated
                warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
                encoder = get_peft_model(encoder, peft_config)
        else:
            for p in encoder.parameters():
                p.requires_grad_(True)
        n_virtual = cfg["num_virtual_tokens"] if cfg["method"] == "prompt-tuning" else 0
        model = _classifier(encoder, bb.dim, len(classes), n_virtual).to(torch_device())
        params = [p for p in model.parameters() if p.requires_grad]
        trainable = sum(p.numel() for p in params)
        # The objective's head right after the classifier: the seeded draws keep their order.
        extra = _objective_term(run.objective, run.targets, inputs.plain, bb.dim, params)
        opt = torch.optim.AdamW(params, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
        info = _loop(model, inputs, target, cfg, generator, run.progress, opt, extra=extra)
    model.eval()
    return model, info | {"trainable_params": int(trainable)}


def train_top(
    bb: Any,
    layer: int,
    inputs: Inputs,
    y: np.ndarray,
    classes: np.ndarray,
    run: Run,
    lora: Any,
) -> tuple[Any, dict[str, Any]]:
    """SAP's service side: the top model (encoder layers ``layer``..n-1) continues from the
    released hidden states; LoRA on those layers (every weight of them for fine-tuning; only
    the head when ``layer`` is the last), a linear head on the mean of the outputs. A
    defense's objective reads the top model's output states and that mean."""
    import warnings

    import torch

    cfg = run.cfg
    target = torch.from_numpy(np.searchsorted(classes, y).astype(np.int64))
    with seeded_torch(run.seed) as generator:
        bert = copy.deepcopy(bb.model)
        for p in bert.parameters():
            p.requires_grad_(False)
        if lora is not None:
            from peft import get_peft_model

            with warnings.catch_warnings():  # peft reads a property transformers deprecated
                warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
                get_peft_model(bert, lora)  # injects the adapters into ``bert`` in place
        elif cfg["method"] == "fine-tuning":
            for p in bert.encoder.layer[layer:].parameters():
                p.requires_grad_(True)
        blocks = torch.nn.ModuleList(bert.encoder.layer[layer:])

        class Top(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.blocks = blocks
                self.head = torch.nn.Linear(bb.dim, len(classes))

            def forward(self, batch: dict[str, Any]) -> tuple[Any, Any, Any]:
                mask = batch["attention_mask"]
                hidden = top_model_forward(self.blocks, batch["inputs_embeds"], mask)
                pooled = mean_pool(hidden, mask)
                return self.head(pooled), hidden, pooled

        model = Top().to(torch_device())
        params = [p for p in model.parameters() if p.requires_grad]
        trainable = sum(p.numel() for p in params)
        extra = _objective_term(run.objective, run.targets, inputs.plain, bb.dim, params)
        opt = torch.optim.AdamW(params, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
        info = _loop(model, inputs, target, cfg, generator, run.progress, opt, extra=extra)
    model.eval()
    trained = "lora" if lora is not None else cfg["method"]
    return model, info | {
        "trainable_params": int(trainable),
        "top_model": f"{trained} on layers {layer}..{bb.n_layers - 1}"
        if layer < bb.n_layers
        else "head only (the release is the last layer)",
    }


def _objective_term(
    objective: Objective | None,
    targets: Sequence[Any],
    positions: Sequence[list[int]],
    hidden_size: int,
    params: list[Any],
) -> Callable[[Any, Any, Any], Any] | None:
    """The defense objective's term for :func:`_loop` (None without an objective): builds its
    head for features of ``hidden_size`` (call it where the seeded draws expect it), adds the
    head's parameters to ``params``, and per minibatch hands the objective a TrainingBatch of
    the rows' token states, features, plain-prefix positions and targets."""
    if objective is None:
        return None
    head = objective.head(hidden_size, targets).to(torch_device())  # beside the model
    params += list(head.parameters())

    def term(hidden: Any, features: Any, rows: Any) -> Any:
        picked = [int(r) for r in rows]
        batch = TrainingBatch(
            hidden=hidden,
            features=features,
            prefix_positions=[list(positions[r]) for r in picked],
            targets=[targets[r] for r in picked],
        )
        return objective.loss(batch, head)

    return term


def _loop(
    model: Any,
    inputs: Any,
    target: Any,
    cfg: dict[str, Any],
    generator: Any,
    progress: bool | None,
    opt: Any,
    extra: Any = None,
) -> dict[str, Any]:
    """Minibatch AdamW epochs with a tqdm bar that shows the running loss; ``extra(hidden,
    features, rows)`` is an objective's term added to the task loss (or None)."""
    import time

    import torch
    from tqdm.auto import tqdm

    n, bs = len(target), cfg["batch_size"]
    device = module_device(model)  # the data stays on the CPU; each batch moves there
    steps = cfg["epochs"] * math.ceil(n / bs)
    bar = tqdm(
        total=steps,
        desc=f"train {cfg['method']}",
        leave=False,
        disable=None if progress is None else not progress,
    )
    t0, seen, running = time.perf_counter(), 0, None
    model.train()
    for _ in range(cfg["epochs"]):
        order = torch.randperm(n, generator=generator)
        for start in range(0, n, bs):
            rows = order[start : start + bs]
            batch = inputs.batch(rows) if hasattr(inputs, "batch") else inputs[rows]
            logits, hidden, features = model(to_device(batch, device))
            loss = torch.nn.functional.cross_entropy(logits, target[rows].to(device))
            if extra is not None:
                term = extra(hidden, features, rows)
                if term is not None:
                    loss = loss + term
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            seen += len(rows)
            value = float(loss.detach())
            running = value if running is None else 0.9 * running + 0.1 * value
            bar.set_postfix(loss=f"{running:.3f}")
            bar.update()
    bar.close()
    seconds = time.perf_counter() - t0
    return {
        "train_seconds": seconds,
        "examples_per_second": seen / seconds if seconds else 0.0,
        "final_loss": running,
    }


def predict_encoder(model: Any, inputs: Inputs, batch_size: int) -> np.ndarray:
    import torch

    out = []
    with torch.inference_mode():
        for start in range(0, len(inputs), batch_size):
            rows = torch.arange(start, min(start + batch_size, len(inputs)))
            logits, _, _ = model(to_device(inputs.batch(rows), module_device(model)))
            out.append(logits.argmax(1).cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def train_head(
    x: np.ndarray,
    y: np.ndarray,
    classes: np.ndarray,
    run: Run,
) -> tuple[Any, dict[str, Any]]:
    """A one-hidden-layer classifier on pooled release vectors (standardised on train).

    With a defense's objective in ``run`` (and its per-row targets) — CAPE's adversary behind
    gradient reversal — the objective's head reads the hidden layer as well, so the layer is
    pushed to drop the attribute while the task head uses it (loss = L_task + L_adv)."""
    import torch

    cfg = run.cfg
    mean, std = x.mean(0), x.std(0) + 1e-6
    xs = torch.from_numpy(((x - mean) / std).astype(np.float32))
    target = torch.from_numpy(np.searchsorted(classes, y).astype(np.int64))
    with seeded_torch(run.seed) as generator:
        trunk = torch.nn.Sequential(
            torch.nn.Linear(x.shape[1], 256), torch.nn.ReLU(), torch.nn.Dropout(0.1)
        )
        task = torch.nn.Linear(256, len(classes))

        class Head(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.trunk, self.task = trunk, task
                self.mean, self.std = mean, std

            def forward(self, z: Any) -> tuple[Any, Any, Any]:
                h = self.trunk(z)
                return self.task(h), None, h

        model = Head().to(torch_device())
        params = list(model.parameters())
        trainable = sum(p.numel() for p in params)
        # The objective reads the trunk's output (256 wide), what the task head reads.
        no_prefix = [[] for _ in range(len(xs))]
        extra = _objective_term(run.objective, run.targets, no_prefix, 256, params)
        opt = torch.optim.AdamW(params, lr=1e-3, weight_decay=cfg["weight_decay"])
        info = _loop(
            model,
            xs,
            target,
            cfg | {"epochs": max(cfg["epochs"], 10)},
            generator,
            run.progress,
            opt,
            extra=extra,
        )
    model.eval()
    return model, info | {"trainable_params": int(trainable)}


def predict_head(model: Any, x: np.ndarray) -> np.ndarray:
    import torch

    xs = torch.from_numpy(((x - model.mean) / model.std).astype(np.float32))
    with torch.inference_mode():
        return model(xs.to(module_device(model)))[0].argmax(1).cpu().numpy()
