"""Utility as the service gets it: the service trains what sits above the release, with the
defense's own training objective, fast enough for every point of the default grid.

What is trained depends on the release (the kind and space declared on :class:`Release`):

- **Text, token embeddings, hidden states after layer k** (t2t, pct2t, rapt, has, none,
  embedding-dx, sap, sap-cti): the service owns the encoder above the release. The frozen
  layers below the top one run once per point (their outputs are cached for the whole
  training); the **top layer** is trained with deep prompts (key/value prefixes, P-tuning v2)
  and LoRA on its query, attention-output and feed-forward projections, at the positions the
  service reads: the first ([CLS]) position, which the task head reads, and RAPT's public
  plain-word positions, which its reconstruction head reads.
- **Pooled vectors** (cape, dpnr): a residual two-layer MLP (the shared dense layers of CAPE's
  code), then the task head.

A defense's :class:`~privaudit.api.Objective` (RAPT's reconstruction, CAPE's adversary, a
plugin's) is trained beside the task head on the same trainable layers, so no row is the
release measured without its method.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import numpy as np
from annotated_types import Gt, Lt

from privaudit.api import Defense, Objective, Release, TrainingBatch, UtilityEvaluator
from privaudit.mechanisms.seeding import draw_seed
from privaudit.models.backbone import backbone
from privaudit.params import NonNegativeFloat, PositiveFloat, PositiveInt
from privaudit.runtime.devices import torch_threads
from privaudit.utility.probe import classification_result, objective_status
from privaudit.utility.service_features import Features

if TYPE_CHECKING:
    import torch


class Service(UtilityEvaluator):
    """The service's classifier, trained on the release above which it sits (the default).

    Paper: the service side of the seed methods — RAPT (Li et al., §III-B: prompt tuning on
    privatized text with the privatized-token reconstruction head), CAPE (Plant et al. 2021,
    §3.2: a classifier on the perturbed representation with an adversary through gradient
    reversal), SAP (split learning: the service fine-tunes the top model on the perturbed
    hidden states). One principle for all of them: the service trains what sits above the
    release, and a defense's declared objective is trained with it.

    What is trained (see the module docstring): for every release an encoder can read, the
    top encoder layer with ``n_prompts`` deep prompts and rank-``lora_r`` LoRA, evaluated at
    the [CLS] position (the task head) and at the first ``max_plain`` of RAPT's plain-word
    positions (its reconstruction head); the layers below it are frozen and run once per
    point. The task head reads z + lift([CLS] output), z the frozen top layer's mean-pooled
    output standardised (the probe's features; for RAPT, of the user's text alone, as the
    probe encodes it) and lift a linear map that starts at zero. For pooled vectors, a
    residual MLP ``z + MLP(z)`` of the standardised vectors (``mlp_hidden`` units), then the
    task head.

    Training: the task head starts as the frozen probe (a logistic regression, inverse
    regularisation ``probe_c``, fitted on the standardised pooled features of the training
    rows), so the service starts where the probe ends, and moves at ``head_lr_factor`` of
    the rate of what learns from scratch; AdamW (``lr``, ``weight_decay``), minibatches of
    ``batch_size``, up to
    ``epochs`` epochs, and the epoch (0 included: the probe itself) with the lowest
    cross-entropy on ``val_fraction`` of the training documents (stratified, held out) is
    kept. So on held-out training data the service is at least the probe, and the budget is
    chosen by stopping, not fixed. The result's ``details`` give the epoch kept, the frozen
    probe's test score (``probe_balanced_accuracy``, the lower bound) and, for an objective
    that targets a private attribute (CAPE's adversary), how well that attribute can be read
    from the trained representation with and without the objective (CAPE's own evaluation:
    balanced accuracy of a 3-fold cross-validated logistic regression on the training
    split's representation, ``attribute_readout`` and ``attribute_readout_no_objective``).

    Deviations and why: only the top layer is trained, and at the positions read, not at
    every position: every position of the top layer is an estimated ~5 s per epoch and
    point on two CPU cores (from its FLOPs; not measured), while this measured 0.8 s per
    epoch on 800 documents on a loaded machine (~9 s per point in the quick grid, encoding
    included), which is what lets the default grid train a service at every point.
    RAPT's head reads the top layer at
    the plain positions as in the paper; the classifier reads [CLS] plus the frozen mean (the
    backbone is a mean-pooling sentence encoder, whose [CLS] alone is a weak feature);
    RAPT's reconstruction is trained on the first ``max_plain`` (8) of its 40 plain words,
    a prefix of the same loss, which keeps its points as cheap as the others.
    SAP's top model is trained in its top layer only. See docs/usage.md for its distance to
    full prompt tuning (the ``prompt-tuning`` evaluator).
    """

    name: ClassVar[str] = "service"
    cost_prior: ClassVar[float] = 0.6  # s per 1,000 words (estimate)
    gpu: ClassVar[float] = 0.25  # encodes with the backbone, trains a small head (devices)
    metric: ClassVar[str] = "balanced_accuracy"
    # Between-fit sd of balanced accuracy, rng seeds 1000-1004 on the same releases (5 fits,
    # quick corpus, n_test 1000, 2026-11-26, /work/tools/utility_fit_sd.py): .0151 at none,
    # .0153 at t2t eta 100 (bootstrap SE over documents .0095, .011): larger than the
    # documents' share, from the init, dropout, minibatch order and the held-out split.
    fit_sd: ClassVar[float] = 0.015

    def __init__(
        self,
        backbone: str | None = None,
        max_length: PositiveInt = 128,
        epochs: PositiveInt = 20,
        patience: PositiveInt = 8,
        lr: PositiveFloat = 3e-3,
        weight_decay: NonNegativeFloat = 0.01,
        batch_size: PositiveInt = 64,
        n_prompts: PositiveInt = 8,
        lora_r: PositiveInt = 8,
        mlp_hidden: PositiveInt = 256,
        dropout: Annotated[float, Gt(-1e-12), Lt(1)] = 0.1,
        val_fraction: Annotated[float, Gt(0), Lt(0.5)] = 0.1,
        probe_c: PositiveFloat = 0.05,
        head_lr_factor: PositiveFloat = 0.1,
        max_plain: PositiveInt = 8,
        use_objective: bool = True,
        threads: PositiveInt | None = None,
    ) -> None:
        self.backbone = backbone
        self.max_length = max_length
        self.epochs = epochs
        self.patience = patience
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.n_prompts = n_prompts
        self.lora_r = lora_r
        self.mlp_hidden = mlp_hidden
        self.dropout = dropout
        self.val_fraction = val_fraction
        self.probe_c = probe_c
        self.head_lr_factor = head_lr_factor
        self.max_plain = max_plain
        self.use_objective = use_objective
        self.threads = threads

    # ---------------------------------------------------------------------------------------

    def evaluate_releases(
        self,
        train: Release,
        train_labels: Sequence[int],
        test: Release,
        test_labels: Sequence[int],
        *,
        rng: np.random.Generator,
        defense: Defense | None = None,
        train_attributes: Mapping[str, Sequence[Any]] | None = None,
    ) -> dict[str, Any]:
        """Train the service on ``train``, score it on ``test``: :func:`classification_result`
        plus ``details`` (see the class docstring)."""
        y_train, y_test = np.asarray(train_labels), np.asarray(test_labels)
        if len(y_train) != len(train) or len(y_test) != len(test):
            raise ValueError("Each released document needs exactly one label.")
        classes = np.unique(y_train)
        if len(classes) < 2:
            raise ValueError("The service needs at least two classes in the training labels.")
        seed = draw_seed(rng)
        objective = self._objective(defense, train)
        why_not = (lambda _: None) if objective is not None else self._not_trained
        status = (
            objective_status(defense, why_not)
            if self.use_objective
            else (objective_status(defense, lambda _: "use_objective=False"))
        )
        bb = backbone(self.backbone)
        with torch_threads(self.threads):
            feats_train = Features.of(bb, train, int(self.max_length), int(self.max_plain))
            index = {c: i for i, c in enumerate(classes.tolist())}
            y_idx = np.asarray([index[c] for c in y_train.tolist()], np.int64)
            targets: list[Any] | None = None
            if objective is not None:
                targets = objective.targets(train, range(len(train)), train_attributes or {})
            model, info = self._fit(feats_train, y_idx, len(classes), objective, targets, seed)
            readouts: dict[str, float] = {}
            attribute = getattr(objective, "attribute", None)
            if objective is not None and isinstance(attribute, str) and train_attributes:
                values = train_attributes.get(attribute)
                if values is not None:
                    plain, _ = self._fit(feats_train, y_idx, len(classes), None, None, seed)
                    readouts["attribute_readout"] = _readout(model, feats_train, values, seed)
                    readouts["attribute_readout_no_objective"] = _readout(
                        plain, feats_train, values, seed
                    )
            # The test split's frozen features are built once the training split's are gone:
            # both at once, with the training's activations, were the grid's peak (RAPT's
            # 40-piece prefix widens each document's keys and values). Nothing here draws
            # randomness, so the order changes no result.
            del feats_train
            feats_test = Features.of(bb, test, int(self.max_length), 0)
            pred_idx = _predict(model, feats_test)
            details: dict[str, Any] = (
                info
                | {"probe_balanced_accuracy": _probe_score(model, feats_test, y_test, classes)}
                | readouts
            )
        result = classification_result(y_test, classes[pred_idx], status)
        result["details"] = details
        return result

    def _objective(self, defense: Defense | None, train: Release) -> Objective | None:
        """The defense's objective when this evaluator trains it on ``train``, else None."""
        if defense is None or not self.use_objective:
            return None
        try:
            objective = defense.training_objective()
        except ValueError:
            return None  # objective_status reports why
        if objective is None or objective.applies_to(train) is not None:
            return None
        return objective

    @staticmethod
    def _not_trained(objective: Objective) -> str:
        return "its declared release kind is not the one this defense released"

    # ---------------------------------------------------------------------------------------

    def _fit(
        self,
        feats: Features,
        y: np.ndarray,
        n_classes: int,
        objective: Objective | None,
        targets: list[Any] | None,
        seed: int,
    ) -> tuple[_Model, dict[str, Any]]:
        import torch

        gen = np.random.default_rng(seed)
        torch.manual_seed(int(gen.integers(2**31)))
        fit_rows, val_rows = _stratified_split(y, float(self.val_fraction), gen)
        model = _Model.build(feats, y, fit_rows, n_classes, self, gen)
        extra = None
        if objective is not None and targets is not None:
            extra = objective.head(model.width, [targets[i] for i in fit_rows])
        head = {id(p) for p in model.head.parameters()}
        params = [p for p in model.parameters() if p.requires_grad and id(p) not in head]
        if extra is not None:
            params += [p for p in extra.parameters() if p.requires_grad]
        # The head starts fitted (the probe): it moves slower than what learns from scratch.
        groups = [
            {"params": params},
            {
                "params": list(model.head.parameters()),
                "lr": float(self.lr) * float(self.head_lr_factor),
            },
        ]
        opt = torch.optim.AdamW(groups, lr=float(self.lr), weight_decay=float(self.weight_decay))
        best = (_val_loss(model, feats, y, val_rows), 0)
        best_state = copy.deepcopy(model.state_dict())
        waited = 0
        bs = int(self.batch_size)
        for epoch in range(1, int(self.epochs) + 1):
            model.train()
            order = gen.permutation(fit_rows)
            for start in range(0, len(order), bs):
                rows = order[start : start + bs]
                out, features, hidden, prefix = model(feats, rows)
                loss = torch.nn.functional.cross_entropy(out, torch.from_numpy(y[rows]))
                if extra is not None and targets is not None:
                    batch = TrainingBatch(hidden, features, prefix, [targets[i] for i in rows])
                    term = objective.loss(batch, extra) if objective is not None else None
                    if term is not None:
                        loss = loss + term
                opt.zero_grad()
                loss.backward()
                opt.step()
            score = _val_loss(model, feats, y, val_rows)
            if score < best[0] - 1e-6:
                best, best_state, waited = (score, epoch), copy.deepcopy(model.state_dict()), 0
            else:
                waited += 1
                if waited >= int(self.patience):
                    break
        model.load_state_dict(best_state)
        model.eval()
        return model, {
            "epoch_kept": best[1],
            "epochs_run": epoch,
            "val_loss": round(float(best[0]), 4),
            "trained": model.kind,
        }


# -------------------------------------------------------------------------------------------
# The trainable part
# -------------------------------------------------------------------------------------------


#: LoRA's alpha / r (alpha = 2r, as peft's defaults here: lora_r 16, lora_alpha 32).
LORA_SCALE = 2.0


def _lora(base: Any, r: int) -> Any:
    """``base`` (frozen) plus a rank-``r`` update B·A, B zero at the start (LoRA)."""
    import torch

    class LoRA(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.base = copy.deepcopy(base).requires_grad_(False)
            self.a = torch.nn.Parameter(torch.randn(r, base.in_features) / math.sqrt(r * 16))
            self.b = torch.nn.Parameter(torch.zeros(base.out_features, r))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.base(x) + (x @ self.a.T) @ self.b.T * LORA_SCALE

    return LoRA()


def _model_class() -> type:
    import torch

    class Model(torch.nn.Module):
        """The trainable part (see :class:`Service`)."""

        def __init__(self, kind: str, width: int, dim: int) -> None:
            super().__init__()
            self.kind = kind
            self.width = width
            self.dim = dim

        def forward(self, feats: Features, rows: np.ndarray) -> tuple[Any, Any, Any, list[Any]]:
            z = (torch.from_numpy(feats.pooled[rows]) - self.mean) / self.std
            if self.kind == "mlp":
                rep = z + self.mlp(z)
                return self.head(self.drop(rep)), rep, None, [[] for _ in rows]
            top = self.top(feats, rows)
            rep = z + self.lift(top[:, 0])
            prefix = [list(range(1, 1 + int(feats.n_plain[r]))) for r in rows]
            return self.head(self.drop(rep)), rep, top, prefix

        def top(self, feats: Features, rows: np.ndarray) -> torch.Tensor:
            idx = torch.from_numpy(np.asarray(rows))
            mask = feats.mask[idx]
            width = int(mask.sum(1).max())
            hq, k, v, mask = (
                feats.queries[idx],
                feats.keys[idx, :width],
                feats.values[idx, :width],
                mask[:, :width],
            )
            b, q, h = hq.shape
            p = self.pk.shape[0]
            heads = self.heads
            k = torch.cat([self.pk.expand(b, p, h), k], 1).view(b, p + width, heads, -1)
            v = torch.cat([self.pv.expand(b, p, h), v], 1).view(b, p + width, heads, -1)
            attend = torch.cat([torch.ones(b, p, dtype=torch.bool), mask], 1)[:, None, None, :]
            qq = self.q(hq).view(b, q, heads, -1).transpose(1, 2)
            ctx = torch.nn.functional.scaled_dot_product_attention(
                qq, k.transpose(1, 2), v.transpose(1, 2), attn_mask=attend
            )
            ctx = ctx.transpose(1, 2).reshape(b, q, h)
            a = self.ln1(self.drop(self.o(ctx)) + hq)
            return self.ln2(self.drop(self.out(self.act(self.inter(a)))) + a)

    return Model


class _Model:
    """Builds the trainable part for one split's features (see :class:`Service`)."""

    @staticmethod
    def build(
        feats: Features,
        y: np.ndarray,
        fit_rows: np.ndarray,
        n_classes: int,
        cfg: Service,
        gen: np.random.Generator,
    ) -> Any:
        import torch

        bb = backbone(cfg.backbone)
        pooled = feats.pooled[fit_rows]
        mean = pooled.mean(0)
        std = pooled.std(0) + 1e-6
        dim = feats.pooled.shape[1]
        if feats.encoder:
            model = _model_class()("encoder", dim, dim)
            # rep = z + lift([CLS] of the trained top layer): z (the probe) at the start.
            model.lift = torch.nn.Linear(bb.dim, dim)
            torch.nn.init.zeros_(model.lift.weight)
            torch.nn.init.zeros_(model.lift.bias)
            top = bb.model.encoder.layer[-1]
            att = top.attention.self
            r = int(cfg.lora_r)
            model.heads = int(att.num_attention_heads)
            model.q = _lora(att.query, r)
            model.o = _lora(top.attention.output.dense, r)
            model.inter = _lora(top.intermediate.dense, r)
            model.out = _lora(top.output.dense, r)
            model.act = copy.deepcopy(top.intermediate.intermediate_act_fn)
            model.ln1 = copy.deepcopy(top.attention.output.LayerNorm).requires_grad_(False)
            model.ln2 = copy.deepcopy(top.output.LayerNorm).requires_grad_(False)
            # Prompts start at the mean key/value of the training tokens: a small re-weighting.
            m = feats.mask[torch.from_numpy(fit_rows)].unsqueeze(-1).float()
            k_mean = (feats.keys[fit_rows] * m).sum((0, 1)) / m.sum().clamp(min=1.0)
            v_mean = (feats.values[fit_rows] * m).sum((0, 1)) / m.sum().clamp(min=1.0)
            n_p = int(cfg.n_prompts)
            noise = torch.from_numpy(gen.normal(0, 0.02, (2, n_p, bb.dim)).astype(np.float32))
            model.pk = torch.nn.Parameter(k_mean[None].repeat(n_p, 1) + noise[0])
            model.pv = torch.nn.Parameter(v_mean[None].repeat(n_p, 1) + noise[1])
        else:
            model = _model_class()("mlp", dim, dim)
            hidden = int(cfg.mlp_hidden)
            model.mlp = torch.nn.Sequential(
                torch.nn.Linear(dim, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, dim)
            )
            torch.nn.init.zeros_(model.mlp[2].weight)  # z + MLP(z) = z at the start
            torch.nn.init.zeros_(model.mlp[2].bias)
        model.register_buffer("mean", torch.from_numpy(mean.astype(np.float32)))
        model.register_buffer("std", torch.from_numpy(std.astype(np.float32)))
        model.drop = torch.nn.Dropout(float(cfg.dropout))
        model.head = torch.nn.Linear(model.width, n_classes)
        z = (pooled - mean) / std
        _warm_start(model.head, z, y[fit_rows], n_classes, float(cfg.probe_c))
        # The probe as it was fitted (the head moves in training): the lower bound reported.
        model.register_buffer("probe_w", model.head.weight.detach().clone())
        model.register_buffer("probe_b", model.head.bias.detach().clone())
        return model


def _warm_start(head: Any, z: np.ndarray, y: np.ndarray, n_classes: int, c: float) -> None:
    """The task head starts as the frozen probe: a logistic regression (inverse
    regularisation ``c``) on the standardised pooled features ``z``."""
    import torch
    from sklearn.linear_model import LogisticRegression

    clf = LogisticRegression(C=c, max_iter=2000).fit(z, y)
    coef, bias = clf.coef_, clf.intercept_
    if coef.shape[0] == 1:  # binary: a two-logit softmax with the same decision
        coef, bias = np.vstack([-coef / 2, coef / 2]), np.r_[-bias / 2, bias / 2]
    full_w = np.zeros((n_classes, head.in_features), np.float32)
    full_b = np.zeros(n_classes, np.float32)
    seen = clf.classes_.astype(np.int64)
    full_w[seen] = coef
    full_b[seen] = bias
    with torch.no_grad():
        head.weight.copy_(torch.from_numpy(full_w))
        head.bias.copy_(torch.from_numpy(full_b))


def _stratified_split(
    y: np.ndarray, fraction: float, gen: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Held-out rows: ``fraction`` of each class (at least one where a class has two)."""
    val: list[int] = []
    for c in np.unique(y):
        rows = gen.permutation(np.flatnonzero(y == c))
        take = min(len(rows) - 1, max(1, round(fraction * len(rows)))) if len(rows) > 1 else 0
        val.extend(rows[:take].tolist())
    val_rows = np.sort(np.asarray(val, np.int64))
    return np.setdiff1d(np.arange(len(y)), val_rows), val_rows


def _val_loss(model: Any, feats: Features, y: np.ndarray, rows: np.ndarray) -> float:
    import torch

    if len(rows) == 0:
        return 0.0
    model.eval()
    with torch.no_grad():
        out = model(feats, rows)[0]
        return float(torch.nn.functional.cross_entropy(out, torch.from_numpy(y[rows])))


def _predict(model: Any, feats: Features) -> np.ndarray:
    return _forward(model, feats, 0).argmax(1)


def _forward(model: Any, feats: Features, part: int) -> np.ndarray:
    """Part ``part`` of the model's output (0 the logits, 1 the representation), all rows."""
    import torch

    model.eval()
    out = []
    with torch.no_grad():
        for start in range(0, len(feats.pooled), 256):
            rows = np.arange(start, min(len(feats.pooled), start + 256))
            out.append(model(feats, rows)[part].numpy())
    return np.concatenate(out)


def _probe_score(model: Any, feats: Features, y: np.ndarray, classes: np.ndarray) -> float:
    """The frozen probe's balanced accuracy on the test split: the warm-started head alone
    (its pooled-feature columns), the lower bound the service starts from."""
    import torch
    from sklearn.metrics import balanced_accuracy_score

    z = (torch.from_numpy(feats.pooled) - model.mean) / model.std
    logits = z @ model.probe_w.T + model.probe_b
    return float(balanced_accuracy_score(y, classes[logits.argmax(1).numpy()]))


def _readout(model: Any, feats: Features, values: Sequence[Any], seed: int) -> float:
    """How well the private attribute ``values`` can be read from the trained
    representation of the training split: balanced accuracy of a 3-fold cross-validated
    logistic regression (CAPE's evaluation of its adversarial training)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rep = _forward(model, feats, 1)
    target = np.asarray([str(v) for v in values])
    if len(np.unique(target)) < 2:
        return math.nan
    folds = StratifiedKFold(3, shuffle=True, random_state=seed % 2**31)
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    return float(cross_val_score(clf, rep, target, cv=folds, scoring="balanced_accuracy").mean())
