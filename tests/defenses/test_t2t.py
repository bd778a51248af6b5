"""T2T on the tiny random BERT: behaviour and bad input."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from privaudit.api import Release
from privaudit.defenses.none import NoDefense
from privaudit.defenses.t2t import T2T
from privaudit.metrics import replacement_rate
from tests.conftest import TINY

TEXTS = [
    "The food was great, said Sarah Jones in Paris last March.",
    "Terrible service; the hotel in Leeds lost our booking twice.",
    "I bought these shoes for my grandchildren and they love them.",
]


def t2t(eta: float) -> T2T:
    return T2T(eta=eta, backbone=TINY)


def test_none_releases_the_text_unchanged(rng) -> None:
    release = NoDefense().privatize(TEXTS, rng=rng)
    assert release.kind == "text" and release.texts == TEXTS


def test_same_seed_same_output() -> None:
    a = t2t(300).privatize(TEXTS, rng=np.random.default_rng(7))
    b = t2t(300).privatize(TEXTS, rng=np.random.default_rng(7))
    c = t2t(300).privatize(TEXTS, rng=np.random.default_rng(8))
    assert a.texts == b.texts
    assert a.texts != c.texts


def test_replacement_falls_with_eta_and_vanishes(tiny) -> None:
    rates = [
        replacement_rate([t2t(eta).privatize(TEXTS * 5, rng=np.random.default_rng(0)).audit])
        for eta in (10, 200, 300, 400, 1e6)
    ]
    assert all(a > b for a, b in itertools.pairwise(rates[:-1])), rates
    assert rates[0] > 0.9 and rates[-1] == 0.0


def test_eta_infinite_returns_the_tokens(tiny, rng) -> None:
    release = t2t(math.inf).privatize(TEXTS, rng=rng)
    assert release.texts == [t.lower() for t in TEXTS]  # the original's layout, uncased
    assert [r.tolist() for r in release.audit["released_ids"]] == [
        r.tolist() for r in tiny.token_ids(TEXTS)
    ]


@pytest.mark.parametrize("eta", [1.0, 50.0])
def test_a_release_keeps_every_word_and_each_pieces_class(tiny, eta: float) -> None:
    """Word-aligned releases: a continuation piece (##x) is replaced only by a continuation
    piece and any other piece by another, so the release has the original's words."""
    texts = [*TEXTS, "Unbelievably, the grandchildren's playground re-opened!", "x  y\tz"]
    release = t2t(eta).privatize(texts * 10, rng=np.random.default_rng(3))
    assert [len(t.split()) for t in release.texts] == [len(t.split()) for t in texts * 10]
    before, after = (
        np.concatenate(tiny.token_ids(texts * 10)),
        np.concatenate(release.audit["released_ids"]),
    )
    classes = tiny.subwords.classes
    assert (before != after).mean() > 0.5  # most pieces were replaced ...
    assert np.array_equal(classes[before], classes[after])  # ... each within its class


def test_render_follows_the_original_layout(tiny) -> None:
    pieces = tiny.subwords.encode(["Don't  stop-playing, Zoë 😀 Hollieshire"])
    ids = pieces[0].ids
    assert tiny.subwords.render([ids], pieces) == ["don't stop-playing, zoe hollieshire"]
    swapped = ids.copy()
    continuation = np.flatnonzero(tiny.subwords.classes[ids] == 1)
    assert continuation.size  # "hollieshire" has ##-pieces
    swapped[continuation[0]] = tiny.subwords.raw.token_to_id("##ed")
    out = tiny.subwords.render([swapped], pieces)[0]
    assert len(out.split()) == 4 and "##" not in out
    with pytest.raises(ValueError, match="one id per token"):
        tiny.subwords.render([ids[:-1]], pieces)


def test_special_tokens_never_emitted(tiny, rng) -> None:
    release = t2t(1.0).privatize(TEXTS * 20, rng=rng)
    emitted = np.concatenate(release.audit["released_ids"])
    assert np.isin(emitted, tiny.candidate_ids).all()
    joined = " ".join(release.texts or [])
    for token in ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "[unused"):
        assert token not in joined


def test_audit_is_for_the_runner_only(rng) -> None:
    release = t2t(50).privatize(TEXTS, rng=rng)
    assert "replaced" in release.audit
    public = release.public()
    assert public.audit == {} and public.texts == release.texts


@pytest.mark.parametrize(
    "texts",
    [[], [""], ["   \t "], ["Grüße aus Zürich, 東京 and Ελλάδα 😀"], ["😀😀"], ["word " * 10_000]],
    ids=["no-docs", "empty", "whitespace", "non-ascii", "only-unk", "10k-words"],
)
def test_awkward_input_gives_one_output_per_document(texts, rng) -> None:
    release = t2t(200).privatize(texts, rng=rng)
    assert isinstance(release, Release)
    assert len(release.texts or []) == len(texts)
    for out in release.texts or []:
        assert isinstance(out, str)


def test_huge_document_is_fully_privatized(rng) -> None:
    release = t2t(1.0).privatize(["word " * 10_000], rng=rng)
    assert len(release.audit["replaced"][0]) == 10_000
    assert release.audit["replaced"][0].mean() > 0.9


@pytest.mark.parametrize("eta", [-1.0, 0.0, float("nan")])
def test_bad_eta_is_a_value_error(eta: float, rng) -> None:
    with pytest.raises(ValueError, match=r"parameter eta=.* is not allowed: Input should be"):
        t2t(eta).privatize(TEXTS, rng=rng)


def test_wrong_types_are_type_errors(rng) -> None:
    with pytest.raises(TypeError, match="single string"):
        t2t(10).privatize("just one string", rng=rng)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Document 1 is a int"):
        t2t(10).privatize(["ok", 3], rng=rng)  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"numpy\.random\.Generator"):
        t2t(10).privatize(TEXTS, rng=0)  # type: ignore[arg-type]
    with pytest.raises(
        ValueError, match="eta='high' is not allowed: Input should be a valid number"
    ):
        t2t("high")  # type: ignore[arg-type]


def test_with_knob_and_params() -> None:
    d = t2t(10).with_knob(99.0)
    assert d.eta == 99.0 and d.backbone == TINY
    assert d.params() == {"eta": 99.0, "backbone": TINY}
    with pytest.raises(ValueError, match="no privacy knob"):
        NoDefense().with_knob(1.0)


def test_unknown_backbone_is_a_clear_error(rng) -> None:
    with pytest.raises(ValueError, match="Cannot load backbone"):
        T2T(eta=10, backbone="/no/such/model/dir").privatize(TEXTS, rng=rng)
