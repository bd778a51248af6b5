"""Speed of the pre-trained inverter of ``geia`` and ``vec2text`` (:mod:`privaudit.attacks.
_inverter`) on the default backbone (all-MiniLM-L6-v2), at the tests' model size
(``GEIA.test_params``: one decoder layer, 2 memory slots, 16 pieces, 60 public documents, one
epoch; the corrector one epoch too). Run with ``make bench``.

- ``test_decoding_victims_per_second``: victims decoded per second as the quick grid's
  ``vec2text`` decodes them (``hypotheses: 2, steps: 1``, what
  ``_inverter.hypotheses.invert`` does): the decoder's greedy decoding and one sample at the
  temperature, the first re-embedded by the public encoder, then one correction step (the
  corrector's greedy decoding and one sample, given that hypothesis), with the output layer
  widened to every piece of the backbone as a run widens it (``_inverter.widen`` to
  ``writable_ids``).
- ``test_pretraining_documents_per_second``: public documents per second of
  ``_inverter.pretrain`` (encoding, decoder and corrector, one epoch each).

Only the inverter's public functions are used (``pretrain``, ``widen``, ``writable_ids``,
``generate``, ``hypothesis``, ``specials``), so the pre-training's internals (its batching,
its progress reporter) can change under it. Every round computes (``benchmarks/conftest.py``):
a fresh seed picks the round's victims and draws its samples, and the pre-training rounds each
train on other public documents (``public_seed``), inside the memo bypass. And every round's
output is checked, so a broken inverter fails the benchmark rather than timing nothing: each
victim gets a non-empty decoding of at most ``max_tokens`` writable pieces at every stage, and
a pre-training reports finite validation losses for both of its models.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.honesty import bench_rounds, log_rounds
from privaudit.attacks import _inverter as inv
from privaudit.attacks._pooled_features import standardise_rows
from privaudit.attacks.geia import GEIA

#: The tests' inverter (``GEIA.test_params``), its corrector also trained for one epoch.
PARAMS = dict(GEIA.test_params) | {"correction_epochs": 1}
#: The quick grid's vec2text decoding (``Vec2Text.quick_params``): 2 hypotheses, 1 step.
HYPOTHESES, STEPS = 2, 1
VICTIMS = 64
ROUNDS = 3
#: Pre-training rounds: each is a whole (small) pre-training.
PRETRAIN_ROUNDS = 2


@pytest.fixture(scope="module")
def bb(bench_cache):
    from privaudit.models.backbone import backbone

    return backbone(None)


@pytest.fixture(scope="module")
def victims_pool(bb) -> list[str]:
    from privaudit.corpora.synthetic import synthetic_reviews

    return list(synthetic_reviews(n_docs=1000, seed=0).texts("test"))


@pytest.fixture(scope="module")
def widened(bb):
    """A freshly pre-trained inverter (untimed; the model a run loads from its disk cache),
    widened to every writable piece of the backbone as a run widens it."""
    inverter = inv.pretrain(bb, GEIA(**PARAMS).spec(), progress=False)
    _check_pretraining(inverter.info)
    ids = np.asarray(inverter.vocab_ids, np.int64)
    new = np.setdiff1d(inv.writable_ids(bb), ids)
    vocab = np.concatenate([ids, new])
    decoder = inv.widen(inverter.decoder, ids, new, bb.embeddings)
    corrector = inv.widen(inverter.corrector, ids, new, bb.embeddings)
    assert len(vocab) > 20_000  # the whole backbone vocabulary, not the public text's pieces
    return inverter, vocab, decoder, corrector


def _check_pretraining(info: dict) -> dict[str, float]:
    """The validation losses a pre-training reports: both models', every one finite."""
    losses = {k: float(v) for k, v in info.items() if k.endswith("val_loss")}
    assert {"pretrain_val_loss", "corrector_val_loss"} <= set(losses), sorted(info)
    assert all(math.isfinite(v) and v > 0 for v in losses.values()), losses
    return losses


def _check_decodings(hyps: list[list[np.ndarray]], vocab: np.ndarray, n: int, k: int) -> None:
    """Each of ``n`` victims got ``k`` decodings, each non-empty, of at most ``max_tokens``
    pieces the model may write ([SEP] ends a decoding and is not part of it)."""
    max_tokens = int(PARAMS["max_tokens"])
    assert len(hyps) == n and all(len(h) == k for h in hyps)
    lengths = np.asarray([len(d) for h in hyps for d in h])
    assert lengths.min() >= 1, f"{int((lengths == 0).sum())} empty decodings"
    assert lengths.max() <= max_tokens
    pieces = np.concatenate([d for h in hyps for d in h])
    assert np.isin(pieces, vocab).all()


def test_decoding_victims_per_second(benchmark, bb, victims_pool, widened) -> None:
    import torch

    inverter, vocab, decoder, corrector = widened
    cls, sep = inv.specials(bb)
    max_tokens = int(PARAMS["max_tokens"])
    pieces = vocab[vocab != sep]  # what a decoding may hold ([SEP] ends it)

    def victims(seed: int) -> tuple:
        """The round's victims (untimed): other test documents' scaled clean embeddings."""
        rng = np.random.default_rng(seed)
        texts = [victims_pool[i] for i in rng.choice(len(victims_pool), VICTIMS, replace=False)]
        return (inverter.scale(standardise_rows(bb.pooled(texts))), seed)

    outputs: list[tuple] = []

    def decode(e: np.ndarray, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        bounds = inv.Bounds(cls, sep, max_tokens)
        sampling = inv.Sampling(HYPOTHESES - 1, generator=gen)
        first = inv.generate(decoder, e, vocab, bounds, sampling=sampling)
        hyps = [first]
        for _ in range(STEPS):  # a correction step, given the current guess re-embedded
            guess = [h[0] for h in hyps[-1]]
            emb = inverter.scale(standardise_rows(bb.pooled(bb.detokenize(guess))))
            hyp = inv.hypothesis(guess, emb, max_tokens)
            hyps.append(inv.generate(corrector, e, vocab, bounds, hyp=hyp, sampling=sampling))
        outputs.append(tuple(hyps))

    times = bench_rounds(benchmark, decode, rounds=ROUNDS, label="inverter decoding", setup=victims)
    for hyps in outputs:  # every round decoded every victim at every stage
        for stage in hyps:
            _check_decodings(stage, pieces, VICTIMS, HYPOTHESES)
    rate = VICTIMS / float(np.median(times))
    benchmark.extra_info |= {
        "victims_per_second": rate,
        "victims": VICTIMS,
        "hypotheses": HYPOTHESES,
        "steps": STEPS,
        "vocabulary": len(vocab),
        "max_tokens": max_tokens,
    }
    log_rounds(
        "inverter decoding",
        times,
        f"{VICTIMS} victims, {HYPOTHESES} hypotheses, {STEPS} correction step, "
        f"{len(vocab):,} writable pieces: {rate:,.1f} victims/s (median round)",
    )


def test_pretraining_documents_per_second(benchmark, bb) -> None:
    def spec(seed: int) -> tuple:
        """The round's pre-training: other public documents (untimed)."""
        return (GEIA(**PARAMS, public_seed=seed).spec(),)

    infos: list[dict] = []

    def run(s: inv.InverterSpec) -> None:
        infos.append(inv.pretrain(bb, s, progress=False).info)

    times = bench_rounds(
        benchmark, run, rounds=PRETRAIN_ROUNDS, label="inverter pre-training", setup=spec
    )
    losses = [_check_pretraining(info) for info in infos]
    assert len(losses) == len(times)
    n_docs = int(PARAMS["public_docs"])
    rate = n_docs / float(np.median(times))
    benchmark.extra_info |= {
        "documents_per_second": rate,
        "public_docs": n_docs,
        "epochs": [int(PARAMS["pretrain_epochs"]), int(PARAMS["correction_epochs"])],
        "val_losses": losses,
    }
    log_rounds(
        "inverter pre-training",
        times,
        f"{n_docs} public documents, one epoch each for decoder and corrector: "
        f"{rate:,.1f} documents/s (median round)",
    )
