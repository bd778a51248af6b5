"""What the word-level mechanisms share: words in and out, the k-nearest search, the preset."""

from __future__ import annotations

import numpy as np

from privaudit.audit.config import PRESETS, load_config
from privaudit.audit.presets import WORD_MECHANISMS
from privaudit.defenses.santext import SanText
from privaudit.mechanisms.nearest import NearestNeighbourIndex
from privaudit.mechanisms.word_sampling import WordBatch, WordVocabulary, match_case
from privaudit.models.backbone import backbone
from privaudit.registry import DEFENSES
from tests.conftest import TINY


def test_batch_keeps_everything_between_words() -> None:
    bb = backbone(TINY)
    ids = [int(p[0]) for p in bb.token_ids(["good", "food"])]
    vocab = WordVocabulary(("good", "food"), bb.embeddings[ids])
    text = "Good food, 42 times!  GOOD."
    batch = WordBatch.of([text], vocab, bb)
    assert batch.words == ["Good", "food", "times", "GOOD"]
    assert batch.row.tolist() == [0, 1, -1, 0]
    assert batch.embeddable.tolist() == [True, True, True, True]  # "times": mean of pieces
    times = bb.embeddings[bb.token_ids(["times"])[0]].mean(0)
    assert np.allclose(batch.vectors[2], times)
    out, masks = batch.render(["food", "food", "times", "food"])
    assert out == ["Food food, 42 times!  FOOD."]
    assert masks[0].tolist() == [True, False, False, True]
    assert match_case("Paris", "london") == "London" and match_case("a", "b") == "b"


def test_k_nearest_is_exact_and_sorted() -> None:
    rng = np.random.default_rng(0)
    points = rng.normal(size=(300, 5)).astype(np.float32)
    ids, dist = NearestNeighbourIndex(points, chunk_size=64, row_block=32).k_nearest(points[:20], 4)
    full = np.linalg.norm(points[:20, None] - points[None], axis=-1)
    assert np.array_equal(ids, np.argsort(full, axis=1, kind="stable")[:, :4])
    # float32 products: a distance near 0 comes out near sqrt(float32 rounding) ~ 1e-3
    assert np.allclose(dist, np.sort(full, axis=1)[:, :4], atol=2e-3)
    assert ids[:, 0].tolist() == list(range(20))  # each point is its own nearest


def test_every_mechanism_declares_the_word_kernel_and_its_likelihood() -> None:
    for name in WORD_MECHANISMS:
        defense = DEFENSES.get(name)(backbone=TINY)
        assert defense.guarantee.mechanism == "word_kernel" and defense.knob == "epsilon"
        assert defense.guarantee.unit.value == "word"
        assert len(DEFENSES.get(name).levels) == 3
    logp = SanText(epsilon=30, backbone=TINY).replacement_log_probs(["good"])
    assert logp.shape == (1, len(SanText(backbone=TINY).vocabulary()))
    assert np.isclose(np.exp(logp).sum(), 1.0)


def test_the_mechanisms_preset_and_not_the_quick_grid() -> None:
    quick = {d["name"] for d in PRESETS["quick"]["defenses"]}
    assert not quick & set(WORD_MECHANISMS)
    for preset, corpus in (("mechanisms", "synthetic-reviews"), ("mechanisms-real", "synthpai")):
        config = load_config(preset)
        names = [d.name for d in config.defenses]
        assert names == ["none", "t2t", "pct2t", *WORD_MECHANISMS]
        for spec in config.defenses[1:]:
            assert spec.knob_values == list(DEFENSES.get(spec.name).levels)
        assert config.corpus.name == corpus
        assert config.attack_specs() == load_config("quick").attack_specs()
