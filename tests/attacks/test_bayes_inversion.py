"""bayes-inversion: the posterior attack on d_X word replacement, on the tiny backbone."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from privaudit.api import Knowledge, Release
from privaudit.attacks.bayes_inversion import BayesInversion, Kernel, fit_kernel, replacement_logits
from privaudit.audit.presets import quick_preset
from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.defenses.has import HideAndSeek
from privaudit.defenses.none import NoDefense
from privaudit.defenses.pct2t import PCT2T
from privaudit.defenses.sap import SAPCTI
from privaudit.defenses.t2t import T2T
from privaudit.mechanisms.noise import sample_dx_noise
from privaudit.metrics import token_recovery
from privaudit.params import ParamError
from privaudit.registry import ATTACKS
from tests.conftest import TINY


@functools.cache
def corpus():
    # About 100 aux (attacker) and 100 test (victim) documents, authors disjoint.
    return synthetic_reviews(n_docs=250, seed=0, split_fractions=(0.2, 0.4, 0.4))


@functools.cache
def truth() -> list[np.ndarray]:
    from privaudit.models.backbone import backbone

    return backbone(TINY).token_ids(corpus().texts("test"))


def knowledge(defense, **changes) -> Knowledge:
    fields = dict(
        white_box=False,
        backbone=TINY,
        query_mechanism=lambda texts: defense.privatize(texts, rng=np.random.default_rng(1)),
        aux=corpus().split("aux"),
        guarantee=defense.guarantee,
    )
    return Knowledge(**(fields | changes))


def victims(defense) -> Release:
    return defense.privatize(corpus().texts("test"), rng=np.random.default_rng(2)).public()


def recovery(defense, seed: int = 0) -> tuple[float, float]:
    """(bayes-inversion, identity guess) token recovery against ``defense``."""
    attack = BayesInversion(backbone=TINY, **BayesInversion.test_params)
    release = victims(defense)
    pred = attack.fit(knowledge(defense), rng=np.random.default_rng(seed)).attack(release)
    # The identity guess: the released tokens themselves (nn-inversion's on text).
    shown = type(pred)("tokens", tokens=pred.meta["released_tokens"], meta=pred.meta)
    return token_recovery(truth(), pred), token_recovery(truth(), shown)


def test_registered_and_in_the_quick_grid() -> None:
    assert ATTACKS.get("bayes-inversion") is BayesInversion
    assert BayesInversion.metric == "token_recovery"
    names = [a if isinstance(a, str) else a["name"] for a in quick_preset()["attacks"]]
    assert "bayes-inversion" in names


def test_beats_the_identity_guess_at_moderate_eta() -> None:
    # eta 200 on the tiny backbone replaces about 70 % of the tokens.
    bayes, identity = recovery(T2T(eta=200.0, backbone=TINY))
    assert identity < 0.4
    assert bayes > identity + 0.15


def test_recovers_everything_when_nothing_is_replaced() -> None:
    bayes, identity = recovery(T2T(eta=1e7, backbone=TINY))
    assert identity == 1.0
    assert bayes == 1.0


def test_deterministic_for_a_seed() -> None:
    defense = T2T(eta=200.0, backbone=TINY)
    runs = [
        BayesInversion(backbone=TINY)
        .fit(knowledge(defense), rng=np.random.default_rng(3))
        .attack(victims(defense))
        .tokens
        for _ in range(2)
    ]
    assert runs[0] == runs[1]


def _mechanism(bb, words: np.ndarray, eta: float, rng: np.random.Generator) -> np.ndarray:
    """T2T's mechanism on bare token ids: d_X noise, nearest token of the same word class."""
    noisy = bb.embeddings[words] + sample_dx_noise(len(words), bb.dim, eta, rng)
    out = np.empty_like(words)
    classes = bb.subwords.classes[words]
    for c in np.unique(classes):
        rows = np.flatnonzero(classes == c)
        out[rows] = bb.class_index(int(c)).query(noisy[rows])
    return out


@pytest.mark.parametrize("eta", [150.0, 300.0])
def test_likelihood_matches_monte_carlo(tiny, eta) -> None:
    """The fitted kernel against fresh draws of the mechanism: per test word, the total
    variation between the kernel's and the draws' distributions over ten bins of replacement
    tokens (the kernel's own deciles of mass: calibration); and the draws are more likely
    under it than under a distance-blind kernel (uniform over the class: sharpness)."""
    rng = np.random.default_rng(0)
    words = np.unique(np.concatenate(tiny.token_ids(corpus().texts("aux"))))[:150]
    fit_w = np.repeat(words, 40)
    kernel = fit_kernel(tiny, fit_w, _mechanism(tiny, fit_w, eta, rng), max_words=150)
    blind = Kernel(a=0.0, b=0.0, mu=kernel.mu)
    cand, classes = tiny.candidate_ids, tiny.subwords.classes
    tvs, gain = [], []
    for w in words[::30]:
        vocab = cand[classes[cand] == classes[w]]
        draws = _mechanism(tiny, np.full(4000, w), eta, rng)
        keep = float(np.mean(draws == w))
        observed = np.bincount(np.searchsorted(vocab, draws[draws != w]), minlength=len(vocab))
        log_p = replacement_logits(kernel, tiny, np.array([w]), vocab)[0]
        p = np.exp(log_p) * (1 - keep)
        order = np.argsort(-p)
        edges = np.searchsorted(np.cumsum(p[order]), np.linspace(0, 1 - keep, 11)[1:-1])
        bins = np.zeros(len(vocab), dtype=np.int64)
        bins[order] = np.searchsorted(edges, np.arange(len(vocab)), side="right")
        pred = np.bincount(bins, weights=p, minlength=10)
        seen = np.bincount(bins, weights=observed, minlength=10) / len(draws)
        tvs.append(0.5 * np.abs(pred - seen).sum())
        log_blind = replacement_logits(blind, tiny, np.array([w]), vocab)[0]
        hit = observed > 0
        gain.append(((log_p[hit] - log_blind[hit]) * observed[hit]).sum() / observed.sum())
    assert max(tvs) < 0.15, tvs
    assert min(gain) > 0.1, gain  # nats per replaced draw over the distance-blind kernel


def test_applicability_is_declared() -> None:
    attack = BayesInversion(backbone=TINY)
    text = Release("text", texts=["a b"])
    assert attack.applicable(text, knowledge(T2T(eta=50.0, backbone=TINY))) is None
    assert attack.applicable(text, knowledge(PCT2T(eta=50.0, backbone=TINY))) is None
    for defense in (NoDefense(), HideAndSeek()):
        reason = attack.applicable(text, knowledge(defense))
        assert reason is not None and "declares" in reason
    reason = attack.applicable(text, knowledge(SAPCTI(backbone=TINY)))
    assert reason is not None
    pooled = Release("pooled_vectors", vectors=[np.zeros(4)])
    assert "reads text" in attack.applicable(pooled, knowledge(T2T(backbone=TINY)))
    assert "guarantee" not in attack.applicable(text, knowledge(T2T(), guarantee=None))


def test_bad_input(tiny) -> None:
    defense = T2T(eta=200.0, backbone=TINY)
    attack = BayesInversion(backbone=TINY)
    with pytest.raises(ValueError, match="not fitted"):
        attack.attack(Release("text", texts=["the film"]))
    with pytest.raises(TypeError, match="Knowledge"):
        attack.fit({"aux": None}, rng=np.random.default_rng(0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Generator"):
        attack.fit(knowledge(defense), rng=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="aux"):
        BayesInversion(backbone=TINY).fit(
            knowledge(defense, aux=corpus().split("aux").select([])), rng=np.random.default_rng(0)
        )
    attack.fit(knowledge(defense), rng=np.random.default_rng(0))
    with pytest.raises(TypeError, match="Release"):
        attack.attack(["the film"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no documents"):
        attack.attack(Release("text", texts=[]))
    with pytest.raises(ValueError, match="text releases"):
        attack.attack(Release("pooled_vectors", vectors=[np.zeros(tiny.dim)]))
    pred = attack.attack(Release("text", texts=["", "the film was good", "   "]))
    assert [len(t) for t in pred.tokens] == [0, len(tiny.token_ids(["the film was good"])[0]), 0]
    with pytest.raises(ParamError):
        BayesInversion(max_fit_words=0)


# -- the word path: a mechanism's declared likelihood (issue 51) ---------------------------


def test_a_declared_exact_likelihood_is_decoded_word_by_word() -> None:
    """Against SanText and TEM the attack decodes with the mechanism's own likelihood (no
    kernel is fitted) and recovers more than the released words themselves."""
    from privaudit.defenses.santext import SanText
    from privaudit.defenses.tem import TEM

    for defense in (SanText(epsilon=12.0, backbone=TINY), TEM(epsilon=12.0, backbone=TINY)):
        declared = defense.likelihood()
        assert declared is not None and declared.exact
        k = knowledge(defense, likelihood=declared)
        attack = BayesInversion(backbone=TINY).fit(k, rng=np.random.default_rng(0))
        pred = attack.attack(victims(defense))
        settings = pred.meta["settings"]
        assert settings["likelihood"] == "declared (exact, word level)"
        assert settings["epsilon"] == 12.0 and settings["n_states"] > 100
        shown = type(pred)("tokens", tokens=pred.meta["released_tokens"], meta=pred.meta)
        bayes, identity = token_recovery(truth(), pred), token_recovery(truth(), shown)
        assert identity < 0.9, (defense.name, identity)
        assert bayes > identity + 0.03, (defense.name, bayes, identity)


def test_the_word_posterior_weighs_likelihood_against_the_aux_prior() -> None:
    """A three-word mechanism: ``a`` always becomes ``b``; ``b`` stays or becomes ``c``; ``c``
    stays. The aux shows ``a`` often, ``b`` once, ``c`` never."""
    from privaudit.api import WordLikelihood
    from privaudit.attacks._bayes_words import decode_words, fit_words

    table = np.log(np.array([[1e-12, 1.0, 1e-12], [1e-12, 0.5, 0.5], [1e-12, 1e-12, 1.0]]))
    words = ("a", "b", "c")
    declared = WordLikelihood(words, lambda originals: table[[words.index(w) for w in originals]])
    model = fit_words(declared, ["a a a a b", "a a"], max_states=10)
    assert list(model.states) == [0, 1] and model.coverage == 1.0
    # "B" is a's or b's release; the prior favours a. "c": b's (a state) or an unseen word's.
    # "zz" is outside the vocabulary: the mechanism never writes one, so it is shown as is.
    assert decode_words(model, ["B", "c", "zz B"]) == ["A", "b", "zz A"]
    assert decode_words(model, []) == []
    assert decode_words(model, ["", "  "]) == ["", "  "]
    # Kept units (numbers, punctuation) are states and context, and never change.
    model = fit_words(declared, ["a , b", "a , b", "a a"], max_states=10)
    assert decode_words(model, ["B , B", "7 c!"]) == ["A , B", "7 b!"]


def test_a_monte_carlo_likelihood_keeps_the_fitted_kernel() -> None:
    """Mahalanobis declares only a Monte Carlo likelihood (2,000 draws per word): the attack
    fits its kernel from queries, as against t2t."""
    from privaudit.defenses.mahalanobis import MahalanobisMechanism

    defense = MahalanobisMechanism(epsilon=12.0, backbone=TINY)
    declared = defense.likelihood()
    assert declared is not None and not declared.exact
    k = knowledge(defense, likelihood=declared)
    attack = BayesInversion(backbone=TINY, max_aux=40, max_fit_words=20)
    text = Release("text", texts=["the film"])
    assert attack.applicable(text, k) is None  # d_X in the input-embedding space: the kernel
    settings = attack.fit(k, rng=np.random.default_rng(0)).attack(text).meta["settings"]
    assert "likelihood" not in settings and "kernel_a" in settings


def test_an_exact_likelihood_makes_any_declared_kind_decodable() -> None:
    """CusText declares ε-LDP within output sets, a kind the kernel does not model; its exact
    likelihood makes it decodable. Without the likelihood it stays n/a."""
    from privaudit.defenses.custext import CusText

    defense = CusText(epsilon=3.0, backbone=TINY)
    text = Release("text", texts=["a b"])
    attack = BayesInversion(backbone=TINY)
    assert attack.applicable(text, knowledge(defense, likelihood=defense.likelihood())) is None
    assert "declares" in (attack.applicable(text, knowledge(defense)) or "")
