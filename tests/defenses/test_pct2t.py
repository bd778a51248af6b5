"""PCT2T and RAPT's client side on the tiny random BERT with the real spaCy pipeline."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from privaudit.api import Knowledge, TrainingBatch
from privaudit.attacks.nn_inversion import NNInversion
from privaudit.defenses.pct2t import CATEGORIES, PCT2T, match_case, resolve_categories
from privaudit.defenses.rapt import RAPT
from privaudit.metrics import replacement_rate, token_recovery
from privaudit.models.pipelines import spacy_pipeline
from tests.conftest import TINY

TEXTS = [
    "Our waiter Sarah Jones in Paris was kind to me and I don't regret it.",
    "The hotel lost our booking twice, so we stayed with friends near the station.",
    "She bought sturdy boots from a shop in Leeds for her long walks.",
] * 3


def pct2t(eta: float, **kw) -> PCT2T:
    return PCT2T(eta=eta, backbone=TINY, **kw)


def test_only_selected_categories_change_and_word_count_is_kept() -> None:
    release = pct2t(1.0).privatize(TEXTS, rng=np.random.default_rng(0))
    selected = {t for c in ("noun", "verb", "pronoun", "preposition") for t in CATEGORIES[c]}
    nlp = spacy_pipeline()
    changed = 0
    for original, out, replacements in zip(
        TEXTS, release.texts or [], release.audit["replacements"], strict=True
    ):
        assert len(out.split()) == len(original.split())
        tagged = nlp(original)  # re-tag the original independently
        for index, old, new in replacements:
            assert tagged[index].text == old and tagged[index].pos_ in selected, (old, new)
            changed += 1
    assert changed > 10
    # Words outside the categories survive verbatim.
    assert all(w in release.texts[0] for w in ("kind", "and"))


def test_categories_select_what_changes() -> None:
    only_nouns = pct2t(1.0, categories=["noun"]).privatize(TEXTS[:1], rng=np.random.default_rng(0))
    out = only_nouns.texts[0]
    for kept in ("in", "was", "to", "me", "I", "regret"):
        assert f" {kept} " in f" {out} "
    everything = pct2t(1.0, categories="all").privatize(TEXTS[:1], rng=np.random.default_rng(0))
    assert replacement_rate([everything.audit]) > replacement_rate([only_nouns.audit])


def test_rate_falls_with_eta_and_infinity_is_identity() -> None:
    rates = [
        replacement_rate([pct2t(eta).privatize(TEXTS, rng=np.random.default_rng(0)).audit])
        for eta in (1, 200, 400, 1e9)
    ]
    assert all(a > b for a, b in itertools.pairwise(rates[:-1])), rates
    assert rates[-1] == 0.0
    release = pct2t(math.inf).privatize(TEXTS, rng=np.random.default_rng(0))
    assert release.texts == TEXTS


def test_same_seed_same_output() -> None:
    a = pct2t(100).privatize(TEXTS, rng=np.random.default_rng(3))
    b = pct2t(100).privatize(TEXTS, rng=np.random.default_rng(3))
    assert a.texts == b.texts


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "!!! ??? ...",
        "Sarah Jones, Paris, Google.",
        "😀😀 🎉",
        "a" * 3000,
        "Grüße aus Zürich, we ate 寿司 in Tōkyō and it was très bon.",
    ],
    ids=["empty", "blank", "no-taggable", "only-entities", "emoji", "long-word", "mixed"],
)
def test_awkward_text(text: str) -> None:
    release = pct2t(50).privatize([text], rng=np.random.default_rng(0))
    (out,) = release.texts or []
    assert len(out.split()) == len(text.split())


def test_unknown_category_is_explained() -> None:
    with pytest.raises(ValueError, match="Did you mean 'noun'"):
        resolve_categories(["nouns"])
    with pytest.raises(ValueError, match="Unknown POS category 'adjectiv'"):
        pct2t(10, categories="adjectiv")  # at construction, before any resource loads
    with pytest.raises(ValueError, match="Unknown POS category 'nouns'"):
        RAPT(categories=["nouns"])
    with pytest.raises(ValueError, match="at least one"):
        resolve_categories([])
    with pytest.raises(TypeError, match="names"):
        resolve_categories([3])  # type: ignore[list-item]
    assert resolve_categories("noun, verb") == ("noun", "verb")
    assert resolve_categories(["ALL"]) == tuple(CATEGORIES)


def test_case_is_matched() -> None:
    assert match_case("Sarah", "london") == "London"
    assert match_case("NASA", "bbc") == "BBC"
    assert match_case("tea", "cake") == "cake"


def test_nn_inversion_on_pct2t_is_one_minus_rate_roughly(tiny) -> None:
    release = pct2t(300).privatize(TEXTS, rng=np.random.default_rng(0))
    attack = NNInversion(backbone=TINY).fit(Knowledge(backbone=TINY), rng=np.random.default_rng(0))
    recovery = token_recovery(tiny.token_ids(TEXTS), attack.attack(release.public()))
    rate = replacement_rate([release.audit])
    assert 0 < rate < 0.6
    assert recovery == pytest.approx(1 - rate, abs=0.15)  # tokens vs words: close, not equal


# -- RAPT -------------------------------------------------------------------------------------


def rapt(eta: float = 100, **kw) -> RAPT:
    return RAPT(eta=eta, backbone=TINY, **kw)


def test_rapt_prepends_a_fixed_plain_sequence() -> None:
    d = rapt(math.inf, n_plain=12)
    plain, cats = d.plain_tokens()
    assert len(plain) == 12 and set(cats) <= {"noun", "verb", "pronoun", "preposition"}
    assert d.plain_tokens() == (plain, cats)  # fixed
    assert rapt(n_plain=12, plain_seed=1).plain_tokens()[0] != plain
    release = d.privatize(TEXTS[:2], rng=np.random.default_rng(0))
    for text, original in zip(release.texts or [], TEXTS, strict=False):
        assert text == " ".join(plain) + " " + original
    assert release.plain_prefix == 12 and release.content_texts() == TEXTS[:2]
    noisy = rapt(1.0, n_plain=12).privatize(TEXTS[:2], rng=np.random.default_rng(0))
    prefixes = [t.split()[:12] for t in noisy.texts or []]
    assert prefixes[0] != plain and prefixes[0] != prefixes[1]  # fresh noise per document
    assert noisy.audit["plain_replaced"][0].mean() > 0.5


def test_rapt_per_document_plain_sequences() -> None:
    d = rapt(math.inf, n_plain=6, plain_sequence="per-document")
    release = d.privatize(TEXTS[:3], rng=np.random.default_rng(0))
    own = release.meta["plain_words"]
    assert len(own) == 3 and all(len(words) == 6 for words in own)
    assert own[0] != own[1]  # fresh public words per document
    for text, words, original in zip(release.texts, own, TEXTS, strict=False):
        assert text == " ".join(words) + " " + original
    assert release.public().meta["plain_words"] == own  # the service needs them: public
    again = d.privatize(TEXTS[:3], rng=np.random.default_rng(0))
    assert again.texts == release.texts  # same seed, same output
    objective = d.training_objective()
    assert [objective.vocabulary[t] for t in objective.row_targets(own[1])] == own[1]
    # targets(): each row's own public words, in the order of the rows asked for
    picked = objective.targets(release, [2, 0], {})
    assert [[objective.vocabulary[t] for t in row] for row in picked] == [own[2], own[0]]
    assert objective.row_targets(None) == objective.plain_targets
    with pytest.raises(ValueError, match="not in the objective"):
        objective.row_targets(["qqqzzz"])
    with pytest.raises(ValueError, match="plain_sequence='random' is not allowed"):
        rapt(plain_sequence="random")
    fixed = rapt(math.inf, n_plain=6).privatize(TEXTS[:3], rng=np.random.default_rng(0))
    assert "plain_words" not in fixed.meta


def test_rapt_empty_document_gets_only_the_prefix() -> None:
    release = rapt(n_plain=5).privatize(["", "hi"], rng=np.random.default_rng(0))
    assert len(release.texts[0].split()) == 5 and len(release.texts[1].split()) == 6


def test_nn_inversion_skips_the_public_plain_prefix(tiny) -> None:
    release = rapt(math.inf, n_plain=8).privatize(TEXTS, rng=np.random.default_rng(0))
    attack = NNInversion(backbone=TINY).fit(Knowledge(backbone=TINY), rng=np.random.default_rng(0))
    assert token_recovery(tiny.token_ids(TEXTS), attack.attack(release.public())) >= 0.99


def test_reconstruction_objective_trains(tiny) -> None:
    import torch

    d = rapt(n_plain=6)
    objective = d.training_objective()
    assert len(objective.plain_targets) == 6 and objective.hidden == 96
    assert [objective.vocabulary[t] for t in objective.plain_targets] == d.plain_tokens()[0]
    release = d.privatize(["fine", "good"], rng=np.random.default_rng(0))
    assert objective.applies_to(release) is None
    assert "plain-token prefix" in objective.applies_to(
        pct2t(100).privatize(["x"], rng=np.random.default_rng(0))
    )
    targets = objective.targets(release, [0, 1], {})
    assert targets == [objective.plain_targets] * 2
    head = objective.head(tiny.dim, targets)
    hidden = torch.randn(2, 9, tiny.dim, requires_grad=True)
    positions = [[1, 2, 3, 4, 5, 6], [1, 2, 3, 5, 6, 7]]
    batch = TrainingBatch(hidden=hidden, features=None, prefix_positions=positions, targets=targets)
    loss = objective.loss(batch, head)
    loss.backward()
    assert loss.item() > 0 and hidden.grad is not None
    # by hand: mean −log softmax of the head at each row's plain positions, at its targets
    at = torch.stack([hidden[r, positions[r]] for r in range(2)])
    log_p = head(at).log_softmax(-1)
    expected = -torch.stack([log_p[r, k, targets[r][k]] for r in range(2) for k in range(6)]).mean()
    torch.testing.assert_close(loss, expected)
    halved = dataclasses.replace(objective, weight=0.5).loss(batch, head)
    torch.testing.assert_close(halved, 0.5 * expected)
    # rows cut to different lengths: the first n = 2 positions of every row
    cut = TrainingBatch(
        hidden=hidden, features=None, prefix_positions=[[1, 2, 3], [4, 5]], targets=targets
    )
    log_p = head(torch.stack([hidden[0, [1, 2]], hidden[1, [4, 5]]])).log_softmax(-1)
    expected = -torch.stack([log_p[r, k, targets[r][k]] for r in range(2) for k in range(2)])
    torch.testing.assert_close(objective.loss(cut, head), expected.mean())
    short = TrainingBatch(
        hidden=hidden, features=None, prefix_positions=[[1, 2], []], targets=targets
    )
    assert objective.loss(short, head) is None  # a row whose prefix was truncated away


def test_rapt_bad_parameters() -> None:
    with pytest.raises(ValueError, match="n_plain=-1 is not allowed"):
        rapt(n_plain=-1)
    with pytest.raises(ValueError, match=r"reconstruction='no' is not allowed: .*valid boolean"):
        rapt(reconstruction="no")


def test_rapt_ablations() -> None:
    rng = np.random.default_rng(0)
    no_plain = rapt(n_plain=0)
    release = no_plain.privatize(TEXTS, rng=rng)
    assert release.plain_prefix == 0 and no_plain.training_objective() is None
    pct = pct2t(100).privatize(TEXTS, rng=np.random.default_rng(0))
    assert release.texts == pct.texts  # no plain tokens: the release is PCT2T's
    assert rapt(n_plain=4, reconstruction=False).training_objective() is None
    assert rapt(n_plain=4).training_objective() is not None
    with pytest.raises(ValueError, match="sampler='zipf' is not allowed"):
        rapt(sampler="zipf")
    with pytest.raises(ValueError, match="needs fit"):
        rapt(sampler="frequency").plain_tokens()
    fitted = rapt(sampler="frequency", n_plain=5).fit(TEXTS)
    assert set(fitted.plain_tokens()[0]) <= {
        w.lower().strip(".,") for t in TEXTS for w in t.split()
    }
