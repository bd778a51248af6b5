"""The pre-trained inverter of geia and vec2text: its disk cache seen from the grid (the
one-time line of --estimate, `privaudit pretrain`, the plan-time corpus check)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from privaudit.attacks import _inverter as inv
from privaudit.attacks import geia
from privaudit.attacks.geia import GEIA
from privaudit.audit.config import GridConfig
from privaudit.audit.estimate import estimate_config
from privaudit.cli import app
from privaudit.resources import backbone
from tests.conftest import TINY

cli = CliRunner()
PARAMS = dict(GEIA.test_params) | {"public_docs": 40, "public_seed": 11}


def grid(**attack: Any) -> dict[str, Any]:
    return {
        "name": "inv",
        "backbone": TINY,
        "corpus": {"name": "synthetic-reviews", "params": {"n_docs": 60, "seed": 0}},
        "defenses": [{"name": "none"}],
        "attacks": [{"name": "geia", "params": PARAMS | attack},
                    {"name": "vec2text", "params": PARAMS | attack}],
        "utility": "probe",
    }  # fmt: skip


@pytest.fixture()
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PRIVAUDIT_CACHE", str(tmp_path))
    geia._INVERTERS.__init__()
    return tmp_path


def test_estimate_names_the_one_time_pretraining_until_it_is_cached(
    own_cache: Path, tmp_path: Path
) -> None:
    config = GridConfig.model_validate(grid())
    first = estimate_config(config)
    # geia and vec2text share one inverter: one line, both named.
    assert len(first.one_time) == 1 and "geia, vec2text" in first.one_time[0][0]
    assert any(line.startswith("One-time, first run only") for line in first.lines())
    out = tmp_path / "config.json"
    out.write_text(config.model_dump_json())
    result = cli.invoke(app, ["pretrain", "--config", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "built in" in result.output and "found in the cache" in result.output
    assert GEIA(**PARAMS).spec().path(backbone(TINY)).is_file()
    assert estimate_config(config).one_time == []
    # The measured rate now prices another pre-training.
    again = estimate_config(GridConfig.model_validate(grid(public_seed=12)))
    assert again.one_time and again.one_time[0][1] > 0


def test_a_run_on_the_public_text_itself_is_refused_before_any_work() -> None:
    config = GridConfig.model_validate(grid(public_seed=0))
    with pytest.raises(ValueError, match=r"attacks\.0 \(geia\): the public pre-training text"):
        estimate_config(config)


def test_the_public_corpus_can_be_a_file(tmp_path: Path) -> None:
    path = tmp_path / "public.txt"
    path.write_text("The room was clean.\n\nStaff were kind.\n", encoding="utf-8")
    assert inv.PublicText(str(path), n_docs=5, seed=0).texts() == ["The room was clean.",
                                                          "Staff were kind."]  # fmt: skip
    with pytest.raises(ValueError, match="does not exist"):
        inv.PublicText(str(tmp_path / "missing.txt"), n_docs=5, seed=0).texts()
    (tmp_path / "p.csv").write_text("body\nx\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no 'text' column"):
        inv.PublicText(str(tmp_path / "p.csv"), n_docs=5, seed=0).texts()


def test_generation_keeps_each_victims_hypotheses_together() -> None:
    import torch

    bb = backbone(TINY)
    spec = GEIA(**PARAMS).spec()
    cls, sep = inv.specials(bb)
    vocab = np.unique(np.r_[np.arange(5, 60), sep]).astype(np.int64)
    model = inv.build_model(bb, spec, vocab)
    e = np.random.default_rng(0).standard_normal((3, bb.dim)).astype(np.float32)
    out = inv.generate(model, e, vocab, cls=cls, sep=sep, max_tokens=6, samples=2,
                       generator=torch.Generator().manual_seed(0))  # fmt: skip
    assert [len(h) for h in out] == [3, 3, 3]
    greedy = inv.generate(model, e, vocab, cls=cls, sep=sep, max_tokens=6)
    # The first hypothesis of each victim is its greedy decoding.
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(out, greedy, strict=True))
    assert all(len(h) <= 6 and sep not in h for hs in out for h in hs)


def test_a_finished_hypothesis_leaves_the_batch_without_changing_the_others() -> None:
    import torch

    bb = backbone(TINY)
    spec = GEIA(**PARAMS).spec()
    cls, sep = inv.specials(bb)
    vocab = np.unique(np.r_[np.arange(5, 60), sep]).astype(np.int64)
    torch.manual_seed(0)
    model = inv.build_model(bb, spec, vocab)
    e = np.random.default_rng(1).standard_normal((12, bb.dim)).astype(np.float32)
    model.eval()
    with torch.no_grad():  # [SEP] about as likely as the best word: rows end at different steps
        mem, mask = inv.memory(model, torch.from_numpy(e))
        first = model["bert"](
            input_ids=torch.full((len(e), 1), cls),
            encoder_hidden_states=mem,
            encoder_attention_mask=mask,
        )
        logits = model["out"](model["head"](first.last_hidden_state[:, -1]))
        at = int(np.flatnonzero(vocab == sep)[0])
        gap = logits.max(dim=1).values - logits[:, at]
        model["out"].bias[at] += float(gap.quantile(0.3))
    together = [h[0] for h in inv.generate(model, e, vocab, cls=cls, sep=sep, max_tokens=8)]
    alone = [inv.generate(model, e[i : i + 1], vocab, cls=cls, sep=sep, max_tokens=8)[0][0]
             for i in range(len(e))]  # fmt: skip
    assert len({len(h) for h in together}) > 1  # some left the batch, the others went on
    assert all(np.array_equal(a, b) for a, b in zip(together, alone, strict=True))
    with pytest.raises(ValueError, match="greedy decoding or at least one sample"):
        inv.generate(model, e, vocab, cls=cls, sep=sep, max_tokens=8, with_greedy=False)


def test_sampling_draws_from_the_softmax_and_never_an_impossible_piece() -> None:
    """The decoder's sampler (inverse CDF) against the distribution it samples: frequencies of
    50,000 draws within 4 standard errors of softmax(logits), and a class of probability 0
    (logit −inf) never drawn; the same generator seed gives the same draws."""
    import torch

    logits = torch.tensor([[0.0, 1.0, 2.0, float("-inf"), 0.5]]).repeat(50_000, 1)
    p = torch.softmax(logits[0], dim=-1).numpy()
    draws = inv._draw(logits, torch.Generator().manual_seed(3)).numpy()
    freq = np.bincount(draws, minlength=5) / len(draws)
    assert freq[3] == 0
    se = np.sqrt(p * (1 - p) / len(draws))
    assert np.all(np.abs(freq - p) <= 4 * se + 1e-12)
    again = inv._draw(logits, torch.Generator().manual_seed(3)).numpy()
    np.testing.assert_array_equal(draws, again)
