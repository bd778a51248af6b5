"""bow-inversion and geia (sentence-embedding inversions) on the tiny backbone, and their scores."""

from __future__ import annotations

import functools
import math

import datasets
import numpy as np
import pytest

from privaudit.api import ALL_SPACES, Knowledge, Predictions, Release
from privaudit.attacks._adapter import fit_adapter
from privaudit.attacks._pooled_features import standardise_rows
from privaudit.attacks._sentence import PRETRAINED, AuxSplit
from privaudit.attacks.bow_inversion import BowInversion
from privaudit.attacks.geia import GEIA
from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.defenses.cape import CAPE
from privaudit.defenses.none import NoDefense
from privaudit.defenses.sap import SAP
from privaudit.defenses.t2t import T2T
from privaudit.mechanisms.words import entity_words, stop_words, words
from privaudit.metrics import Truth, generation_scores, metrics, score_predictions, word_set_scores
from privaudit.models.backbone import backbone
from privaudit.params import ParamError, validate_params
from privaudit.registry import ATTACKS
from tests.conftest import TINY

# Cheap settings: the tests pin behaviour, not the quick grid's budget.
FAST: dict[type, dict] = {
    BowInversion: {"hidden": 64, "pretrain_epochs": 30, "epochs": 3},
    GEIA: dict(GEIA.test_params) | {"epochs": 1},
}
CLASSES = [BowInversion, GEIA]


@functools.cache
def corpus():
    # About 60 aux (attacker) and 60 test (victim) documents, authors disjoint.
    return synthetic_reviews(n_docs=150, seed=0, split_fractions=(0.2, 0.4, 0.4))


def knowledge(defense, aux=None, **changes) -> Knowledge:
    fields = dict(
        white_box=False,
        backbone=TINY,
        query_mechanism=lambda texts: defense.privatize(texts, rng=np.random.default_rng(1)),
        aux=corpus().split("aux") if aux is None else aux,
    )
    return Knowledge(**(fields | changes))


def victims(defense) -> Release:
    texts = corpus().texts("test")
    return defense.privatize(texts, rng=np.random.default_rng(2)).public()


@functools.cache
def truth() -> Truth:
    from privaudit.models.backbone import backbone

    c = corpus()
    return Truth(
        tokens=backbone(TINY).token_ids(c.texts("test")),
        texts=c.texts("test"),
        entities=c.entities("test"),
    )


def run(cls, defense, seed: int = 0, **params) -> Predictions:
    attack = cls(backbone=TINY, **(FAST[cls] | params))
    return attack.fit(knowledge(defense), rng=np.random.default_rng(seed)).attack(victims(defense))


DEFENSES = {
    "none": lambda: NoDefense(),
    "t2t": lambda: T2T(eta=50.0, backbone=TINY),
    "sap": lambda: SAP(eta=60.0, backbone=TINY),
    "sap-k1": lambda: SAP(eta=60.0, split_layer=1, backbone=TINY),
    "cape": lambda: CAPE(epsilon=10.0, backbone=TINY),
}


def test_registered() -> None:
    assert ATTACKS.get("bow-inversion") is BowInversion
    assert ATTACKS.get("geia") is GEIA
    for cls in CLASSES:
        assert cls.metric in metrics()
        assert cls.accepts == ALL_SPACES
        assert cls.needs_query and cls.needs_aux and not cls.needs_white_box
        validate_params(cls, cls.quick_params)  # the quick grid's bounds are declared values
        assert "Threat model" in (cls.__doc__ or "")
        assert "Deviations" in (cls.__doc__ or "")


@pytest.mark.parametrize("label", sorted(DEFENSES))
@pytest.mark.parametrize("cls", CLASSES)
def test_every_release_kind_is_attacked_and_scored(cls, label) -> None:
    defense = DEFENSES[label]()
    release = victims(defense)
    pred = run(cls, defense)
    rows = score_predictions(pred, truth(), cls.metric, release)
    assert [r["target"] for r in rows] == ["", "entities"]  # the synthetic corpus has entities
    row, entities = rows
    assert entities["family"] == "entity" and 0.0 <= entities["attack_score"] <= 1.0
    assert 0.0 <= row["attack_score"] <= 1.0
    assert math.isclose(row["empirical_privacy"], 1.0 - row["attack_score"])
    assert 0.0 <= row["attack_baseline"] <= 1.0
    assert pred.meta["settings"]["adaptive"] is True
    if cls is BowInversion:
        assert pred.kind == "tokens" and len(pred.tokens) == len(release)
        assert {"f1_all", "entity_word_recovery", "baseline_entity_word_recovery"} <= set(
            row["attack_details"]
        )
    else:
        assert pred.kind == "texts" and len(pred.texts) == len(release)
        assert all(isinstance(t, str) for t in pred.texts)
        assert {"rouge_l", "exact", "entity_recovery", "baseline_rouge_l"} <= set(
            row["attack_details"]
        )


NOUNS = ["food", "room", "phone", "book", "staff", "service", "shoes", "laptop", "chair", "hotel"]
ADJS = ["great", "awful", "lovely", "broken", "perfect", "dreadful", "superb", "useless", "noisy"]
NAMES = ["Anna", "Brian", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hamish"]


def obvious_reviews(n: int, seed: int) -> tuple[list[str], list[list[dict]]]:
    """Short reviews whose content words (and the named reviewer) the tiny random BERT's
    pooled vector can carry: its 32 dimensions cannot hold the synthetic corpus's vocabulary."""
    rng = np.random.default_rng(seed)
    texts, entities = [], []
    for _ in range(n):
        name = str(rng.choice(NAMES))
        parts = [
            f"the {rng.choice(NOUNS)} was {rng.choice(ADJS)}" for _ in range(rng.integers(1, 3))
        ]
        texts.append(f"{name} said " + " and ".join(parts) + ".")
        entities.append([{"text": name, "type": "PERSON"}])
    return texts, entities


def test_bow_beats_its_baseline_on_undefended_text() -> None:
    aux_texts, _ = obvious_reviews(200, seed=0)
    texts, entities = obvious_reviews(100, seed=1)
    defense = NoDefense()
    k = knowledge(defense, aux=datasets.Dataset.from_dict({"text": aux_texts}))
    attack = BowInversion(backbone=TINY, **FAST[BowInversion])
    pred = attack.fit(k, rng=np.random.default_rng(0)).attack(
        defense.privatize(texts, rng=np.random.default_rng(2))
    )
    row = score_predictions(pred, Truth(tokens=[], texts=texts, entities=entities), "word_set_f1")[
        0
    ]
    details = row["attack_details"]
    # Measured: F1 0.73 against 0.28 for the aux's most frequent words; names 0.4 vs 0.
    assert row["attack_score"] > row["attack_baseline"] + 0.25
    assert details["f1_all"] > details["baseline_f1_all"] + 0.2
    assert details["entity_word_recovery"] > details["baseline_entity_word_recovery"] + 0.1


class _PureNoise:
    """A mechanism whose release carries nothing about the text: random pooled vectors."""

    def privatize(self, texts, rng):
        return Release("pooled_vectors", vectors=list(rng.normal(size=(len(texts), 32))))


def test_bow_falls_back_to_its_baseline_when_the_release_says_nothing() -> None:
    pred = run(BowInversion, _PureNoise())
    row = score_predictions(pred, truth(), BowInversion.metric)[0]
    if pred.meta["settings"]["fallback_to_baseline"]:
        assert all(sorted(t) == sorted(pred.meta["baseline_tokens"]) for t in pred.tokens)
        assert math.isclose(row["attack_score"], row["attack_baseline"])
    assert row["attack_score"] >= row["attack_baseline"] - 0.03


@pytest.mark.parametrize("cls", CLASSES)
def test_same_seed_same_output(cls) -> None:
    defense = T2T(eta=50.0, backbone=TINY)
    a, b = run(cls, defense, seed=3), run(cls, defense, seed=3)
    if cls is BowInversion:
        assert a.tokens == b.tokens
    else:
        assert a.texts == b.texts
    assert a.meta == b.meta


@pytest.mark.parametrize("cls", CLASSES)
def test_non_adaptive_needs_no_queries(cls) -> None:
    for label in ("cape", "sap"):
        defense = DEFENSES[label]()
        attack = cls(backbone=TINY, adaptive=False, **FAST[cls])
        attack.fit(knowledge(defense, query_mechanism=None), rng=np.random.default_rng(0))
        pred = attack.attack(victims(defense))
        assert pred.meta["settings"]["adaptive"] is False
        assert len(score_predictions(pred, truth(), cls.metric)) == 2  # headline, entities


def test_pretraining_is_cached_by_content() -> None:
    cls = BowInversion
    PRETRAINED.clear()
    run(cls, NoDefense())
    assert (PRETRAINED.hits, PRETRAINED.misses) == (0, 1)
    run(cls, T2T(eta=50.0, backbone=TINY), seed=1)  # another point, another seed: a hit
    assert (PRETRAINED.hits, PRETRAINED.misses) == (1, 1)
    run(cls, NoDefense(), adaptive=False)  # the non-adaptive attacker shares it too
    assert PRETRAINED.hits == 2
    run(cls, NoDefense(), pretrain_epochs=FAST[cls]["pretrain_epochs"] + 1)  # a new model
    assert PRETRAINED.misses == 2
    aux = corpus().split("aux").select(range(40))  # other aux texts: a miss
    cls(backbone=TINY, **FAST[cls]).fit(
        knowledge(NoDefense(), aux=aux), rng=np.random.default_rng(0)
    )
    assert PRETRAINED.misses == 3


@pytest.mark.parametrize("cls", CLASSES)
def test_bad_inputs_say_what_is_wrong(cls) -> None:
    with pytest.raises(ParamError, match="Did you mean 'epochs'"):
        cls(epochz=3)
    with pytest.raises(ParamError):
        cls(adaptive="yes")
    with pytest.raises(ParamError):
        cls(epochs=-1)
    attack = cls(backbone=TINY, **FAST[cls])
    with pytest.raises(ValueError, match="not fitted"):
        attack.attack(victims(NoDefense()))
    with pytest.raises(TypeError, match="Knowledge"):
        attack.fit("aux", rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="Generator"):
        attack.fit(knowledge(NoDefense()), rng=0)
    with pytest.raises(ValueError, match="query access"):
        attack.fit(knowledge(NoDefense(), query_mechanism=None), rng=np.random.default_rng(0))
    few = datasets.Dataset.from_dict({"text": ["a b", "c d"]})
    with pytest.raises(ValueError, match="aux documents"):
        attack.fit(knowledge(NoDefense(), aux=few), rng=np.random.default_rng(0))
    attack.fit(knowledge(NoDefense()), rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="no documents"):
        attack.attack(Release("text", texts=[]))
    with pytest.raises(TypeError, match="Release"):
        attack.attack(["some text"])
    with pytest.raises(TypeError, match="not a string"):
        attack.attack(Release("text", texts=["fine", 3]))
    with pytest.raises(ValueError, match="fitted on a 'text' aux release"):
        attack.attack(victims(CAPE(epsilon=10.0, backbone=TINY)))
    with pytest.raises(ValueError, match="mix dimensions"):
        attack.attack(Release("pooled_vectors", vectors=[np.zeros(4), np.zeros(5)]))


def test_geia_pretrains_on_public_text_once_and_caches_it_on_disk() -> None:
    from privaudit.attacks import geia

    attack = GEIA(backbone=TINY, **FAST[GEIA])
    path = attack.spec().path(backbone(TINY))
    path.unlink(missing_ok=True)
    geia._INVERTERS.__init__()
    assert attack.prepare()["cache"] == "miss"
    assert path.is_file()
    assert attack.prepare()["cache"] == "hit"  # in this process
    geia._INVERTERS.__init__()
    assert attack.prepare()["cache"] == "hit"  # from disk, as a new process would
    # Fine-tuning parameters share it; a pre-training parameter is another model.
    assert GEIA(backbone=TINY, **(FAST[GEIA] | {"epochs": 3})).spec().path(backbone(TINY)) == path
    other = GEIA(backbone=TINY, **(FAST[GEIA] | {"public_seed": 5}))
    assert other.spec().path(backbone(TINY)) != path
    # The corpus of the run is never the public text.
    with pytest.raises(ValueError, match="public_seed"):
        GEIA(public_seed=0).plan("synthetic-reviews", {"seed": 0})
    assert GEIA().plan("synthetic-reviews", {"seed": 0}) == {"public_corpus": "synthetic-reviews"}


def test_vec2text_declares_geias_parameters_with_its_defaults() -> None:
    from privaudit.attacks.vec2text import Vec2Text
    from privaudit.params import declared

    params = declared(Vec2Text)
    assert set(params) == set(declared(GEIA))
    assert params["steps"].default == 2 and params["hypotheses"].default == 4
    with pytest.raises(ParamError):
        Vec2Text(steps=-1)
    with pytest.raises(ParamError, match="Did you mean 'steps'"):
        Vec2Text(stepz=3)


def test_vec2text_reports_the_score_before_correction_with_a_paired_interval() -> None:
    from privaudit.attacks.vec2text import Vec2Text

    attack = Vec2Text(backbone=TINY, **Vec2Text.test_params)
    attack.fit(knowledge(NoDefense()), rng=np.random.default_rng(0))
    pred = attack.attack(victims(NoDefense()))
    assert set(pred.meta["variants"]) == {"steps_0"}  # non_adaptive: on geia's row
    row = score_predictions(pred, truth(), Vec2Text.metric)[0]
    details = row["attack_details"]
    lo, hi = details["gain_over_steps_0_ci"]
    assert lo <= details["gain_over_steps_0"] <= hi
    assert math.isclose(details["gain_over_steps_0"], row["attack_score"] - details["steps_0_f1"])
    assert pred.meta["settings"]["steps"] == 1


def test_empty_documents_are_attacked() -> None:
    attack = BowInversion(backbone=TINY, **FAST[BowInversion])
    attack.fit(knowledge(NoDefense()), rng=np.random.default_rng(0))
    pred = attack.attack(Release("text", texts=["", "The hotel was lovely."]))
    assert len(pred.tokens) == 2


# -------------------------------------------------------------------------------------------
# Words, adapter and scores
# -------------------------------------------------------------------------------------------


def test_words_are_case_and_accent_free() -> None:
    assert words("Zoë's CAFÉ, in 2019!") == ["zoe", "s", "cafe", "in", "2019"]
    assert {"the", "and", "s", "ve"} <= stop_words()
    assert entity_words([{"text": "The Red Oak"}, {"text": "Hungary"}]) == {"red", "oak", "hungary"}


def test_adapter_is_the_identity_on_clean_features_and_shrinks_noise() -> None:
    rng = np.random.default_rng(0)
    clean = standardise_rows(rng.normal(size=(80, 16)))
    aux = AuxSplit(texts=[""] * 80, fit=np.arange(60), val=np.arange(60, 80))
    same = fit_adapter(clean, clean, aux, identity_prior=True)
    np.testing.assert_allclose(same(clean), clean, atol=1e-5)
    noise = standardise_rows(rng.normal(size=(80, 16)))  # unrelated to the target
    mapped = fit_adapter(noise, clean, aux, identity_prior=True)(noise)
    assert np.abs(mapped).mean() < 0.5 * np.abs(clean).mean()  # towards the aux mean


def test_word_set_scores() -> None:
    texts = ["Anna loved the Red Oak.", "The soup was cold."]
    entities = [[{"text": "Anna"}, {"text": "the Red Oak"}], []]
    s = word_set_scores(texts, [{"anna", "oak", "the", "pizza"}, {"soup", "was"}], entities)
    # content words: {anna, loved, red, oak} and {soup, cold}; guessed anna, oak, pizza, soup
    assert math.isclose(s["precision"], 3 / 4)
    assert math.isclose(s["recall"], 3 / 6)
    assert math.isclose(s["entity_word_recovery"], 2 / 3)  # anna, oak of {anna, red, oak}
    assert math.isclose(s["precision_all"], 5 / 6)
    with pytest.raises(ValueError, match="1 documents for 2 victims"):
        word_set_scores(texts, [set()])


def test_generation_scores() -> None:
    texts = ["I ate at Stephenson's in Leeds.", "Great phone."]
    entities = [[{"text": "Stephenson's"}, {"text": "Leeds"}], []]
    s = generation_scores(texts, ["i ate at stephenson ' s in york", "great phone"], entities)
    assert math.isclose(s["exact"], 0.5)
    assert math.isclose(s["entity_recovery"], 0.5)
    assert 0.5 < s["rouge_l"] < 1.0
    assert 0.5 < s["f1"] < 1.0
    perfect = generation_scores(texts, texts, entities)
    assert perfect["f1"] == perfect["rouge_l"] == perfect["exact"] == 1.0


def test_vec2text_ranks_hypotheses_under_a_laplace_release_s_noise_model() -> None:
    from privaudit.attacks._inverter.hypotheses import closest
    from privaudit.attacks.vec2text import Vec2Text
    from privaudit.mechanisms.laplace import minmax_normalise

    defense = CAPE(epsilon=10.0, backbone=TINY)
    attack = Vec2Text(backbone=TINY, **Vec2Text.test_params)
    attack.fit(knowledge(defense, guarantee=defense.guarantee), rng=np.random.default_rng(0))
    assert attack._laplace  # CAPE declares epsilon-LDP Laplace noise
    bb = backbone(TINY)
    texts = ["the room was clean and quiet", "the staff were rude to us"]
    ids = [list(bb.token_ids(texts))] * 2  # two victims, the same two hypotheses
    noise = np.random.default_rng(0).laplace(0, 0.01, (2, bb.dim))
    release = (minmax_normalise(bb.pooled(texts)) + noise).astype(np.float32)
    base = attack.fitted.pretrained(bb).state
    seen: dict[str, np.ndarray] = {}
    e = np.zeros((2, bb.dim), np.float32)
    chosen, _, dist = closest(bb, base, e, ids, seen, release)
    assert sorted(seen) == sorted(bb.detokenize(ids[0]))  # each distinct text encoded once
    # Each victim's release was made from its own text: that hypothesis is the likelier.
    assert [list(c) for c in chosen] == [list(i) for i in ids[0]]
    assert np.all(dist < 0.01 * bb.dim * 3)
    # Attacking CAPE end to end with the noise model.
    pred = attack.attack(victims(defense))
    assert len(score_predictions(pred, truth(), Vec2Text.metric)) == 2


def test_geia_and_vec2text_at_one_point_decode_the_greedy_guess_once() -> None:
    from privaudit.attacks._inverter.hypotheses import GREEDY
    from privaudit.attacks.vec2text import Vec2Text

    defense = NoDefense()
    GREEDY.clear()
    first = run(GEIA, defense)
    assert GREEDY.misses >= 1 and GREEDY.hits == 0
    # vec2text's first hypothesis is that guess: taken from the memo, not decoded again.
    attack = Vec2Text(backbone=TINY, **(FAST[GEIA] | {"hypotheses": 2, "steps": 0}))
    later = attack.fit(knowledge(defense), rng=np.random.default_rng(1)).attack(victims(defense))
    assert GREEDY.hits == 1
    assert len(later.texts) == len(first.texts)
