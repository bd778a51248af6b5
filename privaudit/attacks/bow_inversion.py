"""Bag-of-words inversion of sentence embeddings: multi-label classification of the words."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import numpy as np
from annotated_types import Gt, Lt

from privaudit.api import Predictions
from privaudit.attacks._pooled_features import Scaler
from privaudit.attacks._sentence import (
    AuxPretraining,
    AuxSplit,
    EmbeddingInversion,
    Objective,
    SentenceInversion,
    Trained,
)
from privaudit.mechanisms.words import stop_words, words
from privaudit.params import Fraction, NonNegativeFloat, NonNegativeInt, PositiveInt
from privaudit.runtime.devices import module_device, tensor

if TYPE_CHECKING:
    import torch

    from privaudit.models.backbone import Backbone

#: Decision thresholds tried on the held-out aux documents.
THRESHOLDS = np.unique(
    np.round(np.r_[np.geomspace(0.002, 0.02, 8), np.arange(0.02, 0.99, 0.02)], 4)
)


@dataclass
class _State:
    """A trained word classifier and everything tuned with it on the held-out aux."""

    vocabulary: list[str]
    is_stop: np.ndarray  # (V,) bool
    scaler: Scaler
    model: Any  # torch.nn.Sequential
    threshold: float = 0.5  # for content (non-stop) words
    stop_threshold: float = 0.5  # for stop words
    baseline: list[int] = field(default_factory=list)  # the no-information guess (indices)
    baseline_val_f1: float = 0.0  # its held-out F1 (content words)
    fallback: bool = False  # the held-out aux says: the baseline guess does better
    info: dict[str, Any] = field(default_factory=dict)


class BowInversion(EmbeddingInversion):
    """Which words were in the text? A multi-label MLP on the released sentence embedding.

    Paper: Song & Raghunathan, "Information Leakage in Embedding Models", CCS 2020, §4
    (embedding inversion as multi-label classification: an MLP maps a sentence embedding to
    the *set* of words of its input, trained with a multi-label loss on the attacker's own
    text); it is also the MLC baseline of GEIA (Li et al., Findings of ACL 2023).

    Threat model: black box. The attacker holds an auxiliary split of its own texts (never the
    victims'), may query the public privatizer on them at the victims' mechanism and privacy
    level (``Knowledge.query``), and owns the *public* backbone, with which it re-encodes
    released text and computes clean embeddings of its aux texts. It sees only the victims'
    public release. Every release kind is read as the public backbone's pooled embedding
    (:mod:`privaudit.attacks._pooled_features`): text re-encoded, token-vector and hidden-state
    releases run through the rest of the encoder and mean-pooled, pooled vectors as released;
    so no built-in defense is ``n/a``.

    Words (a choice, documented): whole words, not WordPieces —
    :func:`privaudit.mechanisms.words.words` (case-folded, accents dropped, runs of letters and
    digits), the unit of the paper and of the stop-word list the score sets aside; a WordPiece
    target would split names into pieces that are not themselves private. The output
    vocabulary is the words of the aux training documents (at most ``max_words``, the most
    frequent by document count); a victim word outside it can only be missed.

    Training (:mod:`privaudit.attacks._sentence`): the MLP Linear(d, ``hidden``) → ReLU →
    Dropout(``dropout``) → Linear(``hidden``, V), BCE-with-logits on the multi-hot word sets,
    AdamW (``lr``, ``weight_decay``), minibatches of ``batch_size`` texts, is

    1. pre-trained for ``pretrain_epochs`` on the *clean* pooled embeddings of the aux
       training documents (and, with ``sentences``, of each of their sentences), once per run,
       cached by content (:data:`privaudit.attacks._sentence.PRETRAINED`);
    2. adaptive (the default): the release's features are mapped into that clean space by a
       ridge map learnt on the aux release queried through the mechanism at the victims'
       privacy level, and the MLP is fine-tuned for ``epochs`` on that mapped aux release (the
       per-cell ``rng`` seeds dropout and shuffling).

    ``adaptive=False`` is the non-adaptive attacker: the clean pre-trained model alone (no
    queries). Both keep the weights of the epoch with the best held-out F1 (a
    ``val_fraction`` of the aux documents, never trained on), on which the decision thresholds
    are then tuned: one for content words (best F1 without stop words), then one for stop words
    (best F1 with them). When the baseline guess below scores a higher held-out F1 than the
    model (a release so noisy that the MLP fits only noise), the attacker predicts that guess
    (``fallback_to_baseline`` in the settings): an attacker never does worse, by its own aux,
    than ignoring the release. Victims are never used for a choice.

    Metric (``word_set_f1``, :func:`privaudit.metrics.words.word_set_scores`): per victim the
    predicted word set against the set of its words, micro-averaged; the headline F1 excludes
    stop words (scikit-learn's English list), ``f1_all`` counts them; ``entity_word_recovery``
    is the fraction of the victims' named-entity content words recovered. Empirical privacy
    1 − F1. No-information baseline (``attack_baseline``): predicting for every victim the
    aux's most frequent words, as many as do best on the held-out aux (top-k content words by
    document frequency, k tuned for the headline F1, then top-k stop words), which is the best
    fixed set of words an attacker can guess without the release.

    Deviations: the paper's MLC reads the full vocabulary of a large training corpus; ours is
    the aux vocabulary (a few hundred documents on the quick grid), so we add the aux
    sentences as training pairs. Pre-training on clean embeddings, then a ridge map and a brief
    fine-tuning through the mechanism, is our affordable form of the adaptive attacker (one
    pre-training per run instead of one full training per defense point); thresholds tuned on
    held-out aux rather than fixed at 0.5; a small MLP and few epochs for a CPU budget (seconds
    per cell).
    """

    name: ClassVar[str] = "bow-inversion"
    cost_prior: ClassVar[float] = 0.23  # s per 1,000 words (estimate)
    gpu: ClassVar[float] = 0.25  # encodes text, trains an MLP (privaudit.runtime.devices)
    metric: ClassVar[str] = "word_set_f1"
    # Measured 0 (5 fits at none and at t2t eta 100, quick corpus, 2026-11-26): pre-training
    # is seeded by content and the per-cell fine-tune kept epoch 0 (no held-out gain) there.
    fit_sd: ClassVar[float] = 0.0
    # The defaults are the quick grid's budget (one torch thread: a small model gains little
    # from more, and loses a lot when the cores are shared); the pre-training is paid once.
    quick_params: ClassVar[Mapping[str, Any]] = {}
    test_params: ClassVar[Mapping[str, Any]] = {"hidden": 32, "pretrain_epochs": 3, "epochs": 2}

    def __init__(
        self,
        adaptive: bool = True,
        hidden: PositiveInt = 512,
        pretrain_epochs: PositiveInt = 60,
        epochs: NonNegativeInt = 15,
        lr: NonNegativeFloat = 2e-3,
        weight_decay: NonNegativeFloat = 1e-4,
        batch_size: PositiveInt = 32,
        dropout: Fraction = 0.2,
        sentences: bool = True,
        max_words: PositiveInt | None = 5000,
        max_aux: PositiveInt | None = 1000,
        val_fraction: Annotated[float, Gt(0), Lt(0.5)] = 0.2,
        backbone: str | None = None,
        threads: PositiveInt | None = 1,
        progress: bool | None = None,
    ) -> None:
        self.adaptive = adaptive
        self.hidden = hidden
        self.pretrain_epochs = pretrain_epochs
        self.epochs = epochs
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.dropout = dropout
        self.sentences = sentences
        self.max_words = max_words
        self.max_aux = max_aux
        self.val_fraction = val_fraction
        self.backbone = backbone
        self.threads = threads
        self.progress = progress

    def frame(self) -> SentenceInversion:
        """The word-set head, pre-trained in process on the clean aux; fine-tuned at the
        pre-training's learning rate."""
        head = WordSetHead(self.name, int(self.hidden), float(self.dropout), self.max_words)
        identity = self.pretraining_identity()
        source = AuxPretraining(identity, head.new_state, head.new_model, self.sentences)
        return self.compose(head, source, finetune_lr=self.lr)


@dataclass(frozen=True)
class WordSetHead:
    """The multi-label word classifier of ``bow-inversion`` (a
    :class:`~privaudit.attacks._sentence.Head`): Linear(d, ``hidden``) → ReLU →
    Dropout(``dropout``) → Linear(``hidden``, V) over the aux training words (at most
    ``max_words``), with thresholds and the baseline guess tuned on the held-out aux."""

    name: str
    hidden: int
    dropout: float
    max_words: int | None

    def new_state(self, bb: Backbone, aux: AuxSplit, dim: int) -> _State:
        """Vocabulary (aux training words, most frequent first when capped) and the
        no-information baseline, tuned on the held-out aux."""
        stop = stop_words()
        df = Counter(w for i in aux.fit_docs for w in set(words(aux.texts[i])))
        if not df:
            raise ValueError(f"{self.name}: the aux training texts contain no words.")
        ranked = sorted(df, key=lambda w: (-df[w], w))
        if self.max_words is not None:
            ranked = ranked[: int(self.max_words)]
        vocab = sorted(ranked)
        is_stop = np.asarray([w in stop for w in vocab], dtype=bool)
        val_bags = [set(words(aux.texts[i])) for i in aux.val]
        baseline, baseline_f1 = _baseline(ranked, val_bags, stop)
        index = {w: i for i, w in enumerate(vocab)}
        return _State(
            vocabulary=vocab,
            is_stop=is_stop,
            scaler=Scaler(np.zeros(dim, np.float32), np.ones(dim, np.float32)),
            model=None,
            baseline=sorted(index[w] for w in baseline),
            baseline_val_f1=baseline_f1,
            info={"vocabulary": len(vocab), "baseline_size": len(baseline)},
        )

    def new_model(self, state: _State, dim: int) -> torch.nn.Module:
        import torch

        return torch.nn.Sequential(
            torch.nn.Linear(dim, int(self.hidden)),
            torch.nn.ReLU(),
            torch.nn.Dropout(float(self.dropout)),
            torch.nn.Linear(int(self.hidden), len(state.vocabulary)),
        )

    def lengths(self, bb: Backbone, aux: AuxSplit) -> np.ndarray | None:
        return None  # one vector per document: plain shuffled batches

    def objective(self, bb: Backbone, aux: AuxSplit, xs: np.ndarray, state: _State) -> Objective:
        """Multi-hot word sets, BCE-with-logits; held out: the tuned content-word F1."""
        import torch

        vocab = state.vocabulary
        index = {w: i for i, w in enumerate(vocab)}
        bags = [set(words(t)) for t in aux.texts]
        y = np.zeros((len(bags), len(vocab)), dtype=np.float32)
        for d, bag in enumerate(bags):
            for w in bag:
                i = index.get(w)
                if i is not None:
                    y[d, i] = 1.0
        x_fit = tensor(xs[aux.fit])  # on the current device, as the model train() builds
        y_fit = tensor(y[aux.fit])
        val_bags = [bags[i] for i in aux.val]
        x_val = xs[aux.val]
        bce = torch.nn.BCEWithLogitsLoss()

        def validate(model: torch.nn.Module) -> float:
            return _tune(_probabilities(model, x_val), val_bags, vocab, state.is_stop)[2]

        return lambda model, idx: bce(model(x_fit[idx]), y_fit[idx]), validate

    def trained(self, bb: Backbone, aux: AuxSplit, xs: np.ndarray, done: Trained) -> _State:
        """The thresholds tuned on the held-out aux, and the fallback to the baseline."""
        state, model, stage = done.state, done.model, done.stage
        val_bags = [set(words(aux.texts[i])) for i in aux.val]
        threshold, stop_threshold, val_f1 = _tune(
            _probabilities(model, xs[aux.val]), val_bags, state.vocabulary, state.is_stop
        )
        return _State(
            vocabulary=state.vocabulary,
            is_stop=state.is_stop,
            scaler=done.scaler,
            model=model,
            threshold=threshold,
            stop_threshold=stop_threshold,
            baseline=state.baseline,
            baseline_val_f1=state.baseline_val_f1,
            fallback=val_f1 < state.baseline_val_f1,
            info=state.info
            | {
                f"{stage}_best_epoch": done.info["best_epoch"],
                f"{stage}_val_f1": round(val_f1, 4),
            },
        )

    def predict(self, bb: Backbone, state: _State, x: np.ndarray) -> Predictions:
        prob = _probabilities(state.model, state.scaler(x))
        cut = np.where(state.is_stop, state.stop_threshold, state.threshold)
        chosen = prob >= cut[None, :]
        if state.fallback:  # the attacker's best guess, by its own held-out aux
            chosen[:] = False
            chosen[:, state.baseline] = True
        tokens = [np.flatnonzero(row).tolist() for row in chosen]
        return Predictions(
            "tokens",
            tokens=tokens,
            meta={
                "tokenizer": "words",
                "vocabulary": list(state.vocabulary),
                "baseline_tokens": list(state.baseline),
                "settings": state.info
                | {
                    "threshold": state.threshold,
                    "stop_threshold": state.stop_threshold,
                    "fallback_to_baseline": state.fallback,
                    "mean_predicted": round(float(chosen.sum(axis=1).mean()), 2),
                },
            },
        )


def _probabilities(model: Any, x: np.ndarray) -> np.ndarray:
    import torch

    model.eval()
    xt = torch.from_numpy(np.ascontiguousarray(x)).to(module_device(model))
    with torch.inference_mode():
        return torch.sigmoid(model(xt)).cpu().numpy()


def _f1(hit: np.ndarray, n_pred: np.ndarray, n_true: float) -> np.ndarray:
    precision = np.divide(hit, n_pred, out=np.zeros_like(hit, dtype=float), where=n_pred > 0)
    recall = hit / n_true if n_true else np.zeros_like(hit, dtype=float)
    total = precision + recall
    return np.divide(2 * precision * recall, total, out=np.zeros_like(total), where=total > 0)


def _tune(
    prob: np.ndarray, bags: Sequence[set[str]], vocab: Sequence[str], is_stop: np.ndarray
) -> tuple[float, float, float]:
    """Thresholds on held-out probabilities: content words for the best F1 without stop
    words, then stop words for the best F1 with them. Returns (content, stop, content F1)."""
    stop = stop_words()
    index = {w: i for i, w in enumerate(vocab)}
    truth = np.zeros(prob.shape, dtype=bool)
    n_content = n_stop = 0
    for d, bag in enumerate(bags):
        for w in bag:
            n_stop += w in stop
            n_content += w not in stop
            i = index.get(w)
            if i is not None:
                truth[d, i] = True
    counts = np.zeros((2, 2, len(THRESHOLDS)))  # (content|stop, hit|predicted, threshold)
    for part, cols in enumerate((~is_stop, is_stop)):
        p_part, t_part = prob[:, cols], truth[:, cols]
        for j, tau in enumerate(THRESHOLDS):
            chosen = p_part >= tau
            counts[part, 0, j] = np.count_nonzero(chosen & t_part)
            counts[part, 1, j] = np.count_nonzero(chosen)
    (hit_c, pred_c), (hit_s, pred_s) = counts
    f1_c = _f1(hit_c, pred_c, n_content)
    best_c = int(np.argmax(f1_c))
    f1_all = _f1(hit_c[best_c] + hit_s, pred_c[best_c] + pred_s, n_content + n_stop)
    best_s = int(np.argmax(f1_all))
    return float(THRESHOLDS[best_c]), float(THRESHOLDS[best_s]), float(f1_c[best_c])


def _baseline(
    ranked: Sequence[str], bags: Sequence[set[str]], stop: frozenset[str]
) -> tuple[list[str], float]:
    """The best fixed guess on the held-out bags: the top-k content words by aux document
    frequency (k for the best F1 without stop words), then the top-k stop words (k for the
    best F1 with them). Returns the words and their held-out F1 without stop words."""
    content = [w for w in ranked if w not in stop]
    stops = [w for w in ranked if w in stop]
    n_docs = len(bags)
    n_content = sum(1 for b in bags for w in b if w not in stop)
    n_stop = sum(1 for b in bags for w in b if w in stop)

    def gains(ws: list[str]) -> tuple[np.ndarray, np.ndarray]:
        hits = np.asarray([sum(w in b for b in bags) for w in ws], dtype=float)
        k = np.arange(len(ws) + 1, dtype=float)
        return np.concatenate([[0.0], np.cumsum(hits)]), k * n_docs

    hit_c, pred_c = gains(content)
    f1_c = _f1(hit_c, pred_c, n_content)
    k_c = int(np.argmax(f1_c))
    hit_s, pred_s = gains(stops)
    f1_all = _f1(hit_c[k_c] + hit_s, pred_c[k_c] + pred_s, n_content + n_stop)
    k_s = int(np.argmax(f1_all))
    return content[:k_c] + stops[:k_s], float(f1_c[k_c])
