"""White-box optimization-based inversion of split-model hidden states (relaxed word selection)."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Self

import numpy as np
from annotated_types import Ge, MinLen

from privaudit.api import MIN_VICTIMS, Attack, Knowledge, Predictions, Release, Space
from privaudit.mechanisms.seeding import draw_seed, seeded_torch
from privaudit.models.backbone import DEFAULT_BACKBONE, backbone
from privaudit.params import NonNegativeInt, PositiveFloat, PositiveInt
from privaudit.runtime.devices import bf16, torch_device

if TYPE_CHECKING:
    from privaudit.models.backbone import Backbone


class OptimizationInversion(Attack):
    """Gradient-based inversion of token representations through the known bottom model.

    Paper: Song & Raghunathan, "Information Leakage in Embedding Models", CCS 2020, §4
    (white-box inversion with a continuous relaxation of word selection); used against split
    learning in SAP (Shen et al., Figure 4: token F1 falls as the split layer deepens).

    Threat model: white box. The attacker knows the backbone's weights and the split layer k
    (``release.layer``) and sees the released token representations. Releases in the input
    word-embedding space (``Space.TOKEN_EMBEDDINGS``, k = 0: SAP/SAP-CTI at k = 0,
    embedding-dx) are content tokens only; hidden states (``Space.HIDDEN_STATES``, k >= 1) are
    the states after encoder layer k over ``[CLS] tokens [SEP]``, as
    ``Backbone.hidden_at_layer`` computes them. A release whose public meta names another
    backbone than the attacker's is ``n/a``.

    Method: for each attacked document and each content position i, a logit vector z_i over a
    candidate vocabulary C. The relaxed word selection softmax(z_i / T) @ E_C is a soft input
    word embedding. For k = 0 it is compared with the released vector directly; for k >= 1 the
    soft embeddings are placed between the fixed [CLS] and [SEP] word embeddings and run
    through the bottom model exactly as the defense did (position + token-type embeddings and
    LayerNorm of the embeddings module, then encoder layers 1..k with an additive attention
    mask), and compared with the released states at every position, specials included. The
    loss (``"cosine"``, 1 - cosine similarity per position, the default, or ``"mse"``, mean
    squared error per coordinate) is minimised over z with Adam (``lr``) for ``steps`` steps
    while the temperature is annealed geometrically from ``temperature`` to
    ``final_temperature``; the prediction is argmax_C z_i, one id per content position. The
    backbone is never updated: gradients are taken with respect to z only. Cosine is the
    default because MiniLM's deeper hidden states have a few large-magnitude coordinates
    that dominate a squared error: against SAP without noise at k = 6, cosine recovered about
    0.7 token F1 where MSE recovered about 0.4 (8 victims, same budget); at k <= 4 both
    recover above 0.93.

    Candidate vocabulary (the cost bound; ``candidates``):
    - ``"aux"`` (default): every WordPiece id in the attacker's aux texts (``knowledge.aux``)
      plus the ``n_common`` most common wordpieces; without an aux split, ``"common"`` alone
      (``meta["settings"]["candidate_source"]`` says which was used);
    - ``"common"``: the ``n_common`` most common wordpieces. BERT's WordPiece vocabulary
      lists its single characters and then its words roughly by corpus frequency, so these are
      the first ``n_common`` ids of ``Backbone.candidate_ids`` (no special or [unused] ids);
    - ``"full"``: the whole candidate vocabulary (30k ids for MiniLM: slow);
    - a sequence of token ids.
    Tokens outside C cannot be recovered; with the default, C covers about 98% of the test
    tokens of the synthetic corpus.

    Victims: the optimisation costs per victim what fitting does not, so the row scores
    ``max_victims`` test documents (300 by default, :data:`~privaudit.api.MIN_VICTIMS`; the
    runner draws them with the run's seed, the same at every point and the same documents as
    ``geia`` and ``vec2text``; ``n_attacked`` in the details); ``max_victims: null`` scores
    every victim. The attack itself inverts every victim it is given. (It used to attack the
    first ``max_docs`` = 32; a config still naming ``max_docs`` fails before any work with a
    one-line error pointing to ``max_victims``: the first N documents are not a drawn subset,
    and a cap under 300 is refused, so there is nothing to map it to.)

    Cost bounds: ``max_victims``, ``steps``, ``batch_size`` (documents optimised together),
    the candidate vocabulary. The initial logits (N(0, ``init_scale``²)) come from a private
    torch generator seeded from the ``rng`` given to ``fit``, drawn batch by batch, so results
    are deterministic for that generator's seed (bit-identical at a fixed torch thread count)
    and the process-wide torch RNG is untouched. Documents are optimised in batches sorted by
    length (little padding: at k >= 1 ``batch_size=8`` was 1.4x faster than 32 at k = 6). At
    k = 0 every position is optimised on its own, so consecutive batches run together,
    unpadded, up to 4M logits (each batch's loss still divided by its own number of
    positions: each position follows the trajectory it would follow in its batch alone). A
    step is two (positions x C x d) matrix products (the relaxed selection and its gradient),
    which run at the machine's matrix-multiply rate; the selection's backward is written out
    (p ⊙ (g Eᵀ − ⟨g, out⟩) / T, Eᵀ stored row-major) and Adam is fused, so the rest of a step
    is a few passes over the logits. Measured at the quick grid's parameters (the defaults; k =
    0, SAP η 100, 2,793 candidates, 42 tokens a victim) on two shared, loaded CPU cores: about
    0.4-0.5 s a victim on one torch thread, before and after that rewrite (the products
    dominate), and 0.9-1.4 s on two threads where the old loop took 2.1-4.1 s (fewer, larger
    operations suffer less from a loaded machine); 300 victims are therefore minutes of CPU
    per defense point (about 5.4 TFLOP: 68 s at 80 GFLOP/s), seconds on a GPU. At k = 6 the
    bottom model's six layers add about ten times the k = 0 cost per step.

    Metric: token F1 (per-document multiset overlap of predicted and original ids,
    micro-averaged) → empirical privacy 1 - F1.

    Deviations: Song & Raghunathan optimise against a sentence embedding; here, as in SAP's
    use of the attack, the target is the per-token release of a split model. Positions the
    defense's tokenizer mapped to [UNK] are predicted like any other position (their truth is
    dropped by ``Backbone.token_ids``), which costs a little precision.
    """

    name: ClassVar[str] = "optimization-inversion"
    cost_prior: ClassVar[float] = 0.56  # s per 1,000 words (estimate)
    gpu: ClassVar[float] = 0.25  # runs the bottom model (privaudit.runtime.devices)
    accepts: ClassVar[frozenset[Space]] = frozenset({Space.TOKEN_EMBEDDINGS, Space.HIDDEN_STATES})
    metric: ClassVar[str] = "token_f1"
    # Its start is random (N(0, init_scale²) logits from the fit's rng). 5 fits at sap eta
    # 100 on the quick corpus gave sd 0 at 100 steps (2026-11-26), but the start shows where
    # the optimisation has not converged (two rngs differ on the tiny test backbone), so a
    # floor is declared rather than a deterministic fit; it is n/a at the undefended point,
    # where a run measures the others (privaudit.audit.fit_noise).
    fit_sd: ClassVar[float] = 0.003
    needs_white_box: ClassVar[bool] = True
    test_params: ClassVar[Mapping[str, Any]] = {"steps": 5}

    def __init__(
        self,
        candidates: Literal["aux", "common", "full"]
        | Annotated[Sequence[NonNegativeInt], MinLen(1)] = "aux",
        n_common: PositiveInt = 2000,
        steps: PositiveInt = 100,
        lr: PositiveFloat = 0.1,
        temperature: PositiveFloat = 1.0,
        final_temperature: PositiveFloat = 0.1,
        loss: Literal["mse", "cosine"] = "cosine",
        init_scale: PositiveFloat = 0.01,
        max_victims: Annotated[int, Ge(MIN_VICTIMS)] | None = MIN_VICTIMS,
        batch_size: PositiveInt = 8,
        backbone: str | None = None,
    ) -> None:
        self.candidates = candidates
        self.n_common = n_common
        self.steps = steps
        self.lr = lr
        self.temperature = temperature
        self.final_temperature = final_temperature
        self.loss = loss
        self.init_scale = init_scale
        self.max_victims = max_victims
        self.batch_size = batch_size
        self.backbone = backbone
        self._backbone: str | None = backbone  # resolved by fit: declared, else knowledge's
        self._candidate_ids: np.ndarray | None = None
        self._candidate_source: str | None = None
        self._seed: int | None = None  # drawn by fit: the initial logits' torch seed

    # ---------------------------------------------------------------------------------------
    # Applicability
    # ---------------------------------------------------------------------------------------

    def applicable(self, release: Release, knowledge: Knowledge) -> str | None:
        reason = super().applicable(release, knowledge)
        if reason is not None:
            return reason
        # White box: it inverts through the backbone it knows, so that must be the defense's.
        ours = self.backbone or knowledge.backbone
        theirs = release.meta.get("backbone")
        if theirs is not None and _canonical(theirs) != _canonical(ours):
            return (
                f"{self.name} inverts through the backbone it knows ({_canonical(ours)!r}), but "
                f"the release was made with {theirs!r}; give the attacker that backbone"
            )
        return None

    # ---------------------------------------------------------------------------------------
    # Fitting: the candidate vocabulary
    # ---------------------------------------------------------------------------------------

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        self._seed = draw_seed(rng)
        self._backbone = self.backbone if self.backbone is not None else knowledge.backbone
        bb = self._load_backbone()
        spec = self.candidates
        common = bb.candidate_ids[: int(self.n_common)]
        if isinstance(spec, str) and spec == "full":
            ids, source = bb.candidate_ids, "full"
        elif isinstance(spec, str) and spec == "aux" and knowledge.aux is not None:
            texts = [str(t) for t in knowledge.aux["text"]]
            seen = [row for row in bb.token_ids(texts) if len(row)]
            ids = np.union1d(common, np.concatenate(seen) if seen else [])
            source = "aux+common"
        elif isinstance(spec, str):  # "common", or "aux" without an aux split
            ids, source = common, "common"
        else:
            ids, source = np.asarray(list(spec), dtype=np.int64), "explicit"
            vocab = bb.embeddings.shape[0]
            if ids.min() < 0 or ids.max() >= vocab:
                raise ValueError(
                    f"Candidate token ids must lie in 0..{vocab - 1} for backbone {bb.name!r}."
                )
        self._candidate_ids = np.unique(np.asarray(ids, dtype=np.int64))
        self._candidate_source = source
        return self

    # ---------------------------------------------------------------------------------------
    # Attacking
    # ---------------------------------------------------------------------------------------

    def attack(self, release: Release) -> Predictions:
        if self._candidate_ids is None or self._seed is None:
            raise ValueError(f"{self.name} is not fitted: call fit(knowledge) before attack().")
        if release.space not in self.accepts:
            raise ValueError(
                f"{self.name} reads token_vectors releases (input word embeddings or a split "
                f"model's hidden states), not {release.space} releases."
            )
        k = int(release.layer or 0)
        bb = self._load_backbone()
        vectors = _released_vectors(bb, release, k)
        doc_indices = list(range(len(vectors)))  # every victim given (the runner subsets)
        n_special = 0 if k == 0 else 2
        inner = [max(0, len(v) - n_special) for v in vectors]

        t0 = time.perf_counter()
        tokens = self._invert(bb, vectors, inner, k)
        settings = {
            "candidates": self.candidates if isinstance(self.candidates, str) else "explicit",
            "candidate_source": self._candidate_source,
            "n_candidates": len(self._candidate_ids),
            "n_common": int(self.n_common),
            "steps": int(self.steps),
            "lr": float(self.lr),
            "temperature": float(self.temperature),
            "final_temperature": float(self.final_temperature),
            "loss": self.loss,
            "max_victims": self.max_victims,
            "batch_size": int(self.batch_size),
            "layer": k,
            "space": str(release.space),
            "attack_seconds": round(time.perf_counter() - t0, 3),
        }
        return Predictions(
            "tokens",
            tokens=tokens,
            meta={"tokenizer": bb.name, "doc_indices": doc_indices, "settings": settings},
        )

    def _invert(
        self, bb: Backbone, vectors: list[np.ndarray], inner: list[int], k: int
    ) -> list[list[int]]:
        """Every document's candidate tokens: its ``inner`` content positions inverted from its
        released ``vectors`` (layer ``k``), in length-sorted batches from the private seed."""
        import torch

        assert self._candidate_ids is not None and self._seed is not None  # fitted (attack)
        tokens: list[list[int]] = [[] for _ in vectors]
        device = torch_device()  # the current device: the bottom model runs there
        cand = torch.from_numpy(bb.embeddings[self._candidate_ids]).to(device)  # (C, d)
        if bf16():  # the selection's two products in bfloat16 where the device runs it natively
            cand = cand.to(torch.bfloat16)
        cand_t = cand.t().contiguous()  # (d, C): the backward product reads it row-major
        todo = [i for i in range(len(vectors)) if inner[i] > 0]
        todo.sort(key=lambda i: inner[i])  # stable: less padding per batch
        bs = int(self.batch_size)
        groups = [todo[start : start + bs] for start in range(0, len(todo), bs)]
        model = bb.model.to(device)
        was_training = model.training
        model.eval()  # no dropout: the bottom model exactly as the defense ran it
        try:
            with seeded_torch(self._seed) as generator:  # the initial logits' generator
                if k == 0:  # positions are independent: batches run together, unpadded
                    for chunk in _chunks(groups, inner, len(cand)):
                        rows = self._invert_tokens(
                            [[vectors[i] for i in g] for g in chunk], cand, cand_t, generator
                        )
                        for i, row in zip([i for g in chunk for i in g], rows, strict=True):
                            tokens[i] = self._candidate_ids[row].tolist()
                else:
                    for batch in groups:
                        best = self._invert_batch(
                            bb,
                            [vectors[i] for i in batch],
                            [inner[i] for i in batch],
                            k,
                            cand,
                            cand_t,
                            generator,
                        )
                        for i, row in zip(batch, best, strict=True):
                            tokens[i] = self._candidate_ids[row].tolist()
        finally:
            model.train(was_training)
        return tokens

    def _temperatures(self) -> list[float]:
        """The annealing schedule: ``temperature`` to ``final_temperature``, geometrically."""
        steps = int(self.steps)
        t_start, t_end = float(self.temperature), float(self.final_temperature)
        fracs = [step / (steps - 1) if steps > 1 else 1.0 for step in range(steps)]
        return [t_start * (t_end / t_start) ** frac for frac in fracs]

    def _per_position(self, out: Any, target: Any) -> Any:
        """The loss at each position (last axis: the vector)."""
        import torch

        if self.loss == "mse":
            return ((out - target) ** 2).mean(-1)
        return 1.0 - torch.nn.functional.cosine_similarity(out, target, dim=-1)

    def _optimizer(self, z: Any) -> Any:
        import torch

        fused = z.device.type in ("cpu", "cuda")  # one pass over z per step, not ten
        return torch.optim.Adam([z], lr=float(self.lr), fused=fused or None)

    def _initial(self, n_docs: int, n_max: int, n_cand: int, generator: Any) -> Any:
        """One batch's initial logits, (n_docs, n_max, C), from the private generator (drawn
        batch by batch in the same order whatever runs them, so the start is the same)."""
        import torch

        init = torch.randn((n_docs, n_max, n_cand), generator=generator)
        return init * float(self.init_scale)

    def _invert_tokens(
        self, batches: list[list[np.ndarray]], cand: Any, cand_t: Any, generator: Any
    ) -> list[np.ndarray]:
        """Layer 0: optimise the relaxed word selection of every content position of several
        batches at once, flattened (no padding); argmax candidate rows per document.

        Each position's loss depends on its own logits only, and each batch's sum is divided
        by its own number of positions as :meth:`_invert_batch` does, so every position
        follows the same trajectory as in its batch alone (Adam is per coordinate)."""
        import torch

        starts, targets, weights = [], [], []
        for docs in batches:
            lengths = [len(v) for v in docs]
            init = self._initial(len(docs), max(lengths), len(cand), generator)
            n_valid = max(1, sum(lengths))
            for row, (v, n) in enumerate(zip(docs, lengths, strict=True)):
                starts.append(init[row, :n])
                targets.append(torch.from_numpy(np.ascontiguousarray(v)))
                weights.append(torch.full((n,), 1.0 / n_valid))
        device = cand.device
        z = torch.cat(starts).to(device).requires_grad_(True)  # (N, C)
        target = torch.cat(targets).to(device)
        weight = torch.cat(weights).to(device)
        optimizer = self._optimizer(z)
        for temp in self._temperatures():
            out = _soft_selection().apply(z, temp, cand, cand_t)  # (N, d)
            loss = (self._per_position(out, target) * weight).sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward(inputs=[z])  # gradients for z only
            optimizer.step()
        best = z.detach().argmax(-1).cpu().numpy()
        return np.split(best, np.cumsum([len(v) for docs in batches for v in docs])[:-1])

    def _invert_batch(
        self,
        bb: Backbone,
        targets: list[np.ndarray],
        inner: list[int],
        k: int,
        cand: Any,
        cand_t: Any,
        generator: Any,
    ) -> list[np.ndarray]:
        """Layer k >= 1: optimise the relaxed word selection for one batch through the bottom
        model; argmax candidate rows per doc."""
        import torch

        n_docs, n_max, dim = len(targets), max(inner), bb.dim
        width = n_max + 2
        target = torch.zeros((n_docs, width, dim))
        valid = torch.zeros((n_docs, width))  # positions with a released vector
        for row, t in enumerate(targets):
            target[row, : len(t)] = torch.tensor(t[:width])
            valid[row, : len(t)] = 1.0
        content = torch.zeros((n_docs, n_max, 1))  # positions that hold a content token
        for row, n in enumerate(inner):
            content[row, :n] = 1.0
        cls = torch.tensor(bb.embeddings[bb.tokenizer.cls_token_id])
        sep = torch.tensor(bb.embeddings[bb.tokenizer.sep_token_id])
        fixed = torch.zeros((n_docs, width, dim))  # the known special-token embeddings
        fixed[:, 0] = cls
        for row, n in enumerate(inner):
            fixed[row, n + 1] = sep
        additive = (1.0 - valid)[:, None, None, :] * torch.finfo(torch.float32).min
        embeddings = bb.model.embeddings
        blocks = list(bb.model.encoder.layer[:k])
        # Built on the CPU (the initial logits from the CPU generator), run on cand's device.
        fixed, additive, target, valid, content = (
            t.to(cand.device) for t in (fixed, additive, target, valid, content)
        )
        z = self._initial(n_docs, n_max, len(cand), generator).to(cand.device)
        z.requires_grad_(True)
        optimizer = self._optimizer(z)
        n_valid = valid.sum().clamp(min=1.0)
        for temp in self._temperatures():
            soft = _soft_selection().apply(z, temp, cand, cand_t)  # (B, n_max, d)
            placed = torch.nn.functional.pad(soft * content, (0, 0, 1, 1))
            hidden = embeddings(inputs_embeds=fixed + placed)
            for block in blocks:
                hidden = block(hidden, attention_mask=additive)
                hidden = hidden[0] if isinstance(hidden, tuple) else hidden
            loss = (self._per_position(hidden, target) * valid).sum() / n_valid
            optimizer.zero_grad(set_to_none=True)
            loss.backward(inputs=[z])  # gradients for z only: the backbone is never touched
            optimizer.step()
        best = z.detach().argmax(-1).cpu().numpy()
        return [best[row, :n] for row, n in enumerate(inner)]

    def _load_backbone(self) -> Backbone:
        return backbone(self._backbone)


def _released_vectors(bb: Backbone, release: Release, k: int) -> list[np.ndarray]:
    """The release's vectors as float32 (positions, dim) arrays, checked against ``bb``: its
    layers (``k`` at most) and its dimension."""
    if k > bb.n_layers:
        raise ValueError(
            f"The release is from layer {k}, but backbone {bb.name!r} has only "
            f"{bb.n_layers} layers: attack with the backbone the defense used."
        )
    vectors = [np.asarray(v, dtype=np.float32) for v in release.vectors or []]
    vectors = [v.reshape(0, bb.dim) if v.size == 0 else np.atleast_2d(v) for v in vectors]
    dims = {v.shape[1] for v in vectors}
    if dims - {bb.dim}:
        raise ValueError(
            f"Released vectors have dimension {sorted(dims)}, but backbone {bb.name!r} "
            f"embeds in {bb.dim}: attack with the backbone the defense used."
        )
    return vectors


def _canonical(name: str | None) -> str:
    if name in (None, f"sentence-transformers/{DEFAULT_BACKBONE}"):
        return DEFAULT_BACKBONE
    return str(name)


#: The most logits (positions x candidates) optimised together at layer 0: ~16 MB a tensor.
_CHUNK_LOGITS = 1 << 22


def _chunks(groups: list[list[int]], inner: list[int], n_cand: int) -> list[list[list[int]]]:
    """Consecutive batches run together at layer 0, up to :data:`_CHUNK_LOGITS` logits (at
    least one batch): fewer, larger products, the same result (positions are independent)."""
    budget = max(1, _CHUNK_LOGITS // max(1, n_cand))
    out: list[list[list[int]]] = []
    size = 0
    for group in groups:
        n = sum(inner[i] for i in group)
        if out and size + n <= budget:
            out[-1].append(group)
            size += n
        else:
            out.append([group])
            size = n
    return out


@functools.cache
def _soft_selection() -> Any:
    """The relaxed word selection as an autograd function (torch is imported lazily)."""
    import torch

    class SoftSelection(torch.autograd.Function):
        """softmax(z / T) @ E, with a backward that reads E transposed row-major and forms the
        softmax's gradient in place: p * (g @ E^T - <g, out>) / T, since <p, g @ E^T> is
        <g, p @ E>, the output. The same function as autograd's, in fewer passes over z."""

        @staticmethod
        def forward(ctx: Any, z: Any, temp: float, cand: Any, cand_t: Any) -> Any:
            p = torch.softmax(z / temp, dim=-1)
            out = (p.to(cand.dtype) @ cand).float()  # float32 out, whatever E's precision
            ctx.save_for_backward(p, out, cand_t)
            ctx.temp = temp
            return out

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            p, out, cand_t = ctx.saved_tensors
            g = (grad.to(cand_t.dtype) @ cand_t).float()
            g -= (grad * out).sum(-1, keepdim=True)
            g *= p
            g /= ctx.temp
            return g, None, None, None

    return SoftSelection
