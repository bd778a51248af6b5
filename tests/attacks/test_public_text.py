"""What the inverter may be pre-trained on (``public_corpus``: any corpus a run can take, never
the run's own documents) and what it can write (``vocabulary``; the reach in the details)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from privaudit.attacks import _inverter as inv
from privaudit.attacks.geia import GEIA
from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.metrics.words import reach, reach_details
from privaudit.models.backbone import backbone
from privaudit.registry import CORPORA
from tests.conftest import TINY


def _write_jsonl(path: Path, texts: list[str], column: str = "text") -> Path:
    rows = [{column: t, "label": i % 2} for i, t in enumerate(texts)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def held_out_corpus() -> Iterator[str]:
    """A made-up registered corpus that declares a held-out public split."""
    name = "toy-with-public"
    base = synthetic_reviews(n_docs=40, seed=3)

    def toy(seed: int = 0) -> Any:
        other = synthetic_reviews(n_docs=30, seed=99 + seed)
        base.splits["public"] = other.splits["train"]
        return base

    toy.public_split = "public"  # type: ignore[attr-defined]
    CORPORA.register(name)(toy)
    yield name
    CORPORA.remove(name)


def test_a_file_with_a_column_mapping_is_public_text(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "pub.jsonl", ["The room was clean and bright."] * 3, "body")
    attack = GEIA(public_corpus={"name": "file", "params": {"path": str(path), "text": "body"}})
    public = attack.public_text()
    assert public.corpus == "file" and json.loads(public.params)["text"] == "body"
    assert public.texts() == ["The room was clean and bright."] * 3


def test_auto_uses_the_runs_held_out_public_split(held_out_corpus: str) -> None:
    attack = GEIA(public_docs=1000)
    assert attack.public_text().corpus == "synthetic-reviews"  # with no plan
    plan = attack.plan(held_out_corpus, {"seed": 0})
    public = attack.public_text(plan)
    assert (public.corpus, public.split) == (held_out_corpus, "public")
    # The plan is handed over, never kept: the attack is as it was built, and one object
    # stands for each public text.
    assert attack.public_text().corpus == "synthetic-reviews"
    assert attack.public_text(plan) is public
    corpus = CORPORA.get(held_out_corpus)(seed=0)
    assert public.texts() == [t for t in corpus.texts("public") if t.strip()]
    # The default inverter's cache key is unchanged by the new fields.
    plain = inv.PublicText("synthetic-reviews", 8000, 104729)
    spec = GEIA().spec()
    assert spec.public == plain


def test_the_runs_own_corpus_is_refused_by_path_and_by_content(tmp_path: Path) -> None:
    texts = [f"Review number {i}: the staff at the hotel were very kind to us." for i in range(30)]
    run_file = _write_jsonl(tmp_path / "run.jsonl", texts)
    params = {"path": str(run_file)}
    with pytest.raises(ValueError, match="is the run's own corpus"):
        GEIA(public_corpus=str(run_file)).plan("file", params)
    with pytest.raises(ValueError, match="is the run's own corpus"):
        GEIA(public_corpus={"name": "file", "params": params}).plan("file", params)
    # A copy elsewhere, partly: the overlap is counted and refused.
    copy = _write_jsonl(tmp_path / "copy.jsonl", [*texts[:7], "Something else entirely here."])
    with pytest.raises(ValueError, match=r"^[1-7] of the public pre-training documents"):
        GEIA(public_corpus=str(copy)).plan("file", params)
    # Short stock phrases shared with the run are no one's document.
    stock = _write_jsonl(tmp_path / "stock.jsonl", ["Totally agree!", "A public review of a cafe."])
    GEIA(public_corpus=str(stock)).plan("file", params)


def test_a_held_out_split_of_the_runs_corpus_is_allowed(held_out_corpus: str) -> None:
    spec = {"name": held_out_corpus, "params": {"seed": 0}}
    GEIA(public_corpus=spec | {"split": "public"}).plan(held_out_corpus, {"seed": 0})
    with pytest.raises(ValueError, match=r"own train or test split|is the run.s own corpus"):
        GEIA(public_corpus=spec | {"split": "test"}).plan(held_out_corpus, {"seed": 0})


@pytest.mark.parametrize(
    "bad", ["", 3, {"params": {}}, {"name": "file", "colour": "red"}, {"name": "x", "params": 2}]
)
def test_a_public_corpus_that_is_no_corpus_is_one_line(bad: Any) -> None:
    with pytest.raises(ValueError) as exc:
        GEIA(public_corpus=bad)
    assert "\n" not in str(exc.value)


def test_the_widened_inverter_writes_every_piece_and_keeps_the_trained_rows() -> None:
    import torch

    bb = backbone(TINY)
    spec = GEIA(**GEIA.test_params).spec()
    cls, sep = inv.specials(bb)
    vocab = np.unique(np.r_[np.arange(1000, 1060), sep]).astype(np.int64)
    torch.manual_seed(0)
    model = inv.build_model(bb, spec, vocab)
    every = inv.writable_ids(bb)
    tok = bb.tokenizer
    assert sep in every and tok.cls_token_id not in every and tok.pad_token_id not in every
    assert not any(tok.convert_ids_to_tokens(int(i)).startswith("[unused") for i in every)
    new = np.setdiff1d(every, vocab)
    wide = inv.widen(model, vocab, new, bb.embeddings)
    assert wide["out"].out_features == len(vocab) + len(new)
    # The trained rows are kept; the new ones start as rare as the rarest trained piece.
    assert torch.equal(wide["out"].weight[: len(vocab)], model["out"].weight)
    bias, trained = wide["out"].bias.detach(), model["out"].bias.detach()
    assert float(bias[len(vocab) :].max()) <= float(trained.min())
    assert model["out"].out_features == len(vocab)  # the original is untouched
    e = np.random.default_rng(0).standard_normal((2, bb.dim)).astype(np.float32)
    ids = np.concatenate([vocab, new])
    out = inv.generate(wide, e, ids, inv.Bounds(cls, sep, 5))
    assert all(np.isin(h[0], every).all() for h in out)


def test_reach_counts_tokens_and_distinct_pieces() -> None:
    tokens = [np.array([1, 2, 2, 3]), np.array([3, 4])]
    assert reach([1, 2, 3], tokens) == (pytest.approx(5 / 6), pytest.approx(3 / 4))
    details = reach_details({"writable_ids": (1, 2, 3, 4), "public_ids": (2,)}, tokens)
    assert details == {
        "reach_tokens": 1.0,
        "reach_pieces": 1.0,
        "public_reach_tokens": pytest.approx(2 / 6),
        "public_reach_pieces": 0.25,
    }
    assert reach_details({}, tokens) == {}
    assert np.isnan(reach([1], [])[0])


def test_low_reach_is_said_first_and_shown_beside_the_attacks_strength() -> None:
    from privaudit.leaderboard.board import leaderboard
    from privaudit.leaderboard.strength import undefended_table
    from privaudit.leaderboard.verdict_words import headline
    from tests.leaderboard.test_leaderboard import cell, ranked_rows, table

    def with_reach(rows: list[dict[str, Any]], writes: float) -> Any:
        details = {
            "reach_tokens": writes,
            "reach_pieces": writes - 0.1,
            "public_reach_tokens": 0.49,
            "public_reach_pieces": 0.13,
        }
        extra = [
            cell(
                r["label"],
                r["knob_value"] if r["label"] != "none" else 0,
                "geia",
                r["empirical_privacy"],
                r["utility"],
                metric="generation_f1",
            )
            for r in rows
            if r["attack"] == "a1"
        ]
        frame = table(rows + extra)
        frame["attack_details"] = [
            json.dumps(details) if a == "geia" else "{}" for a in frame["attack"]
        ]
        return frame

    low = leaderboard(with_reach(ranked_rows(), 0.688), chance=0.5)
    assert low.verdict is not None
    first, lines = headline(low.verdict)[0]
    assert first == "read first" and "over-credited" in lines[0] and "geia 68.8 %" in lines[0]
    assert "public_corpus" in lines[0]
    assert any(n.startswith("Reach of the generative inversions") for n in low.notes)
    strength = undefended_table(with_reach(ranked_rows(), 0.688))
    geia_row = next(r for r in strength.rows if r[0] == "geia")
    assert geia_row[-1] == "68.8 % (58.8 % of pieces); public text 49.0 % (13.0 % of pieces)"
    high = leaderboard(with_reach(ranked_rows(), 0.999), chance=0.5)
    assert high.verdict is not None and headline(high.verdict)[0][0] != "read first"


def test_the_real_preset_is_the_quick_grid_on_synthpai_pretrained_on_its_public_split() -> None:
    from privaudit.audit.cells import build_components
    from privaudit.audit.config import PRESETS, load_config

    real, quick = load_config("real"), load_config("quick")
    assert "real" in PRESETS and real.corpus.name == "synthpai"
    assert [d.display for d in real.defenses] == [d.display for d in quick.defenses]
    assert [a.display() for a in real.attack_specs()] == [a.display() for a in quick.attack_specs()]
    _, attacks, _, plans = build_components(real)
    public = attacks["geia"].public_text(plans["geia"])
    assert (public.corpus, public.split) == ("synthpai", "public")
    # one shared inverter
    assert attacks["vec2text"].spec(plans["vec2text"]) == attacks["geia"].spec(plans["geia"])


def test_the_row_shows_the_public_corpus_the_plan_resolved() -> None:
    """``auto`` is resolved once, at plan time; the row's ``attack_params`` and the
    pre-training note (``meta["settings"]``) both read that resolution, while the cell key
    keeps the configured parameters."""
    from types import SimpleNamespace

    from privaudit.audit.cells import attack_params

    attack = GEIA()
    plan = attack.plan("synthpai", {"seed": 0})
    ctx = SimpleNamespace(attacks={"geia": attack}, plans={"geia": plan})
    shown = json.loads(attack_params(ctx, "geia"))  # type: ignore[arg-type]
    used = {"name": "synthpai", "params": {"seed": 0}, "split": "public"}
    assert shown["public_corpus"] == used
    assert attack.params()["public_corpus"] == "auto"  # as configured: the cell key's
    assert attack.spec(plan).public.describe().startswith("synthpai")
