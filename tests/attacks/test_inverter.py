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
from privaudit.attacks._inverter import decoding as inv_decoding
from privaudit.attacks._inverter import disk_cache as inv_cache
from privaudit.attacks._inverter import model as inv_model
from privaudit.attacks._inverter import progress as inv_progress
from privaudit.attacks.geia import GEIA
from privaudit.audit.cells import build_attacks
from privaudit.audit.config import GridConfig
from privaudit.audit.forecast import estimate_config
from privaudit.audit.store import RunDir
from privaudit.cli import app
from privaudit.models.backbone import backbone
from tests.conftest import TINY

cli = CliRunner()
PARAMS = dict(GEIA.test_params) | {"public_docs": 40, "public_seed": 11}


def grid(**attack: Any) -> dict[str, Any]:
    return {
        "name": "inv",
        "backbone": TINY,
        "corpus": {"name": "synthetic-reviews", "params": {"n_docs": 60, "seed": 0}},
        "defenses": [{"name": "none"}],
        "attacks": [
            {"name": "geia", "params": PARAMS | attack},
            {"name": "vec2text", "params": PARAMS | attack},
        ],
        "utility": "probe",
    }


@pytest.fixture()
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PRIVAUDIT_CACHE", str(tmp_path))
    geia._INVERTERS.__init__()
    return tmp_path


def test_estimate_names_the_one_time_pretraining_until_it_is_cached(
    own_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from privaudit.runtime import costs

    monkeypatch.setattr(costs, "measure_score", lambda: 0.2)  # each estimate: the same machine
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
    # The measured rate, filed per cost-weighted pair with the run's speed score, now
    # prices another pre-training by its own work: twice the public text, about twice the time.
    import json

    from privaudit.attacks._inverter.pretraining import work

    bb = backbone(TINY)
    timings = json.loads((own_cache / "inverters" / "timings.json").read_text())
    assert timings["pairs"] == round(work(bb, GEIA(**PARAMS).spec()))
    assert timings[costs.PRETRAIN_KEY] > 0 and timings["score"] > 0
    small = estimate_config(GridConfig.model_validate(grid(public_seed=12)))
    large = estimate_config(GridConfig.model_validate(grid(public_seed=12, public_docs=80)))
    (_, t_small), (_, t_large) = small.one_time[0], large.one_time[0]
    w_small = work(bb, GEIA(**PARAMS | {"public_seed": 12}).spec())
    w_large = work(bb, GEIA(**PARAMS | {"public_seed": 12, "public_docs": 80}).spec())
    assert 1.6 < w_large / w_small < 2.4
    assert t_large / t_small == pytest.approx(w_large / w_small, rel=0.05)


def test_a_run_on_the_public_text_itself_is_refused_before_any_work() -> None:
    config = GridConfig.model_validate(grid(public_seed=0))
    with pytest.raises(ValueError, match=r"attacks\.0 \(geia\): the public pre-training text"):
        estimate_config(config)


def test_the_public_corpus_can_be_a_file(tmp_path: Path) -> None:
    path = tmp_path / "public.txt"
    path.write_text("The room was clean.\n\nStaff were kind.\n", encoding="utf-8")
    assert inv.PublicText(str(path), n_docs=5, seed=0).texts() == [
        "The room was clean.",
        "Staff were kind.",
    ]
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
    sampling = inv.Sampling(samples=2, generator=torch.Generator().manual_seed(0))
    out = inv.generate(model, e, vocab, inv.Bounds(cls, sep, 6), sampling=sampling)
    assert [len(h) for h in out] == [3, 3, 3]
    greedy = inv.generate(model, e, vocab, inv.Bounds(cls, sep, 6))
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
    bounds = inv.Bounds(cls, sep, 8)
    together = [h[0] for h in inv.generate(model, e, vocab, bounds)]
    alone = [inv.generate(model, e[i : i + 1], vocab, bounds)[0][0] for i in range(len(e))]
    assert len({len(h) for h in together}) > 1  # some left the batch, the others went on
    assert all(np.array_equal(a, b) for a, b in zip(together, alone, strict=True))
    with pytest.raises(ValueError, match="greedy decoding or at least one sample"):
        inv.generate(model, e, vocab, bounds, sampling=inv.Sampling(with_greedy=False))


def test_sampling_draws_from_the_softmax_and_never_an_impossible_piece() -> None:
    """The decoder's sampler (inverse CDF) against the distribution it samples: frequencies of
    50,000 draws within 4 standard errors of softmax(logits), and a class of probability 0
    (logit −inf) never drawn; the same generator seed gives the same draws."""
    import torch

    logits = torch.tensor([[0.0, 1.0, 2.0, float("-inf"), 0.5]]).repeat(50_000, 1)
    p = torch.softmax(logits[0], dim=-1).numpy()
    draws = inv_decoding._draw(logits, torch.Generator().manual_seed(3)).numpy()
    freq = np.bincount(draws, minlength=5) / len(draws)
    assert freq[3] == 0
    se = np.sqrt(p * (1 - p) / len(draws))
    assert np.all(np.abs(freq - p) <= 4 * se + 1e-12)
    again = inv_decoding._draw(logits, torch.Generator().manual_seed(3)).numpy()
    np.testing.assert_array_equal(draws, again)


def test_the_strength_curve_over_public_documents_is_estimated_prebuilt_and_drawn(
    own_cache: Path, tmp_path: Path
) -> None:
    """``strength: {public_fractions: [0.5]}``: geia and vec2text rebuilt on half of their
    public documents — one more one-time pre-training in --estimate (shared by both, as
    their grid model is), built by ``privaudit pretrain``, then a curve over the public
    documents beside the aux one, ending on the grid's cell, with its own panel and
    sentence."""
    from privaudit.leaderboard.strength import saturation, strength_figure
    from privaudit.outputs import run_grid

    config = GridConfig.model_validate(
        grid() | {"strength": {"fractions": [0.5], "public_fractions": [0.5]}}
    )
    lines = [what for what, _ in estimate_config(config).one_time]
    assert len(lines) == 2, lines
    assert any("strength: 20 public documents" in w and "vec2text" in w for w in lines), lines
    out = tmp_path / "config.json"
    out.write_text(config.model_dump_json())
    result = cli.invoke(app, ["pretrain", "--config", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert result.output.count("built in") == 2 and estimate_config(config).one_time == []

    run = run_grid(config, run_dir=tmp_path / "run", progress=False)
    curve = RunDir(run.run_dir).read_strength()
    assert curve is not None
    public = curve[(curve["attack"] == "geia") & (curve["data"] == "public")]
    assert public["n_public"].tolist() == [20, 40] and public["reused"].tolist() == [False, True]
    assert (public["status"] == "ok").all(), public["reason"].tolist()
    assert (public["n_aux"] == curve[curve["data"] == "aux"]["n_aux"].max()).all()
    cell = run.frame[(run.frame["label"] == "none") & (run.frame["attack"] == "geia")]
    assert public["attack_score"].iloc[-1] == pytest.approx(float(cell["attack_score"].iloc[0]))
    said = [s for s in saturation(curve) if s.startswith("geia, over its public")]
    assert len(said) == 1 and "with 20 public pre-training documents" in said[0], said
    titles = [ax.get_title() for ax in strength_figure(curve).axes if ax.get_visible()]
    assert any(t.endswith("· public") for t in titles) and any(t.endswith("· aux") for t in titles)


def test_bad_public_fractions_are_refused_with_what_to_give() -> None:
    for bad, why in (([0], "not in"), (["half"], "not a number"), ([1.5], "not in")):
        with pytest.raises(ValueError, match=why) as info:
            GridConfig.model_validate(grid() | {"strength": {"public_fractions": bad}})
        assert "public_fractions: [0.25, 0.5, 1.0]" in str(info.value)


def test_a_run_forecasts_the_pretraining_it_is_about_to_do(
    own_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The banner a run prints before its first cell counts the one-time pre-training it
    will wait for (not only ``--estimate``); the second run, cached, has no such line."""
    from privaudit.outputs import run_grid

    config = GridConfig.model_validate(grid())
    run_grid(config, run_dir=tmp_path / "a", progress=False)
    first = capsys.readouterr().err
    assert "One-time, first run only: pre-training the inverter of geia, vec2text" in first
    run_grid(config, run_dir=tmp_path / "b", progress=False)
    assert "One-time" not in capsys.readouterr().err


def test_a_run_pretrains_before_its_first_cell_and_says_so(
    own_cache: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 38: the one-time pre-training is its own stage, between the estimate and the
    first cell (the cells' bar no longer stands still on ``none · geia``), logged with its
    stages when there is no progress bar; done once for geia and vec2text. Issue 50: in a
    child process (its heap is gone when it ends), so this process only loads the model."""
    from privaudit.outputs import run_grid

    calls: list[str] = []
    real = inv.pretrain

    def counted(*a: Any, **k: Any) -> Any:
        calls.append("pretrain")
        return real(*a, **k)

    monkeypatch.setattr(inv_cache, "pretrain", counted)  # where load_or_pretrain calls it
    config = GridConfig.model_validate(grid())
    run_grid(config, run_dir=tmp_path / "a", progress=False)
    err = capfd.readouterr().err  # the child's lines too: it writes to the same stderr
    assert calls == []  # not in this process
    estimate_at = err.index("One-time, first run only")
    encoding_at = err.index("pre-training the inverter (once; cached after): encoding")
    built_at = err.index("privaudit: pre-trained the inverter of geia in")
    assert estimate_at < encoding_at < built_at
    assert "decoding and re-encoding" in err
    assert err.count("privaudit: pre-trained the inverter of") == 1  # vec2text shares it
    attacks, plans = build_attacks(config)
    bb = backbone(config.backbone)
    assert all(a.cached(bb, plans[label]) for label, a in attacks.items())
    assert "failed" not in err


def test_a_read_only_cache_pretrains_in_the_run_itself(
    own_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    """A child's model could not be kept for the run to load from a read-only cache: there
    the run pre-trains in its own process, once, and its cells use that model."""
    from privaudit.audit import runner
    from privaudit.outputs import run_grid

    calls: list[str] = []
    real = inv.pretrain

    def counted(*a: Any, **k: Any) -> Any:
        calls.append("pretrain")
        return real(*a, **k)

    monkeypatch.setattr(inv_cache, "pretrain", counted)
    for module in (runner, inv_cache):
        monkeypatch.setattr(module, "cache_writable", lambda: False)
    run_grid(GridConfig.model_validate(grid()), run_dir=tmp_path / "a", progress=False)
    err = capsys.readouterr().err
    assert calls == ["pretrain"]
    assert "privaudit: pre-trained the inverter of geia in" in err and "failed" not in err
    frame = RunDir(tmp_path / "a").read_results()
    assert (frame["status"] == "ok").all(), frame["reason"].tolist()


def test_the_pretraining_progress_logs_its_stage_documents_and_time_left(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(inv_progress, "LOG_EVERY", 0.0)
    stages = [
        inv.Stage("encoding", 80, unit="texts"),
        inv.Stage("decoder", 100, 3),
        inv.Stage("corrector", 50, 2),
    ]
    report = inv.PretrainProgress(stages, False)
    report.stage("encoding")(80)
    assert "encoding 80/80 texts" in capsys.readouterr().err
    step = report.stage("decoder")
    step(60)
    step(60)
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "decoder epoch 2/3, 20/100 documents" in line and "left" in line
    report.stage("corrector")(50)
    assert "corrector epoch 1/2, 50/50 documents" in capsys.readouterr().err
    report.close()


def test_length_bucketed_batches_cover_every_row_once_with_little_padding() -> None:
    import torch

    from privaudit.attacks._pairs import epoch_batches

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 49, size=1000)
    gen = torch.Generator().manual_seed(0)
    batches = epoch_batches(1000, 32, gen, lengths)
    rows = torch.cat(batches).numpy()
    assert sorted(rows.tolist()) == list(range(1000))
    padded = sum(int(lengths[b.numpy()].max()) * len(b) for b in batches)
    plain = epoch_batches(1000, 32, torch.Generator().manual_seed(0))
    padded_plain = sum(int(lengths[b.numpy()].max()) * len(b) for b in plain)
    assert padded < 0.7 * padded_plain
    again = epoch_batches(1000, 32, torch.Generator().manual_seed(0), lengths)
    assert all(torch.equal(a, b) for a, b in zip(batches, again, strict=True))  # seeded


def test_bf16_can_be_turned_off_and_keys_the_pretrained_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from privaudit.runtime import devices

    bb = backbone(TINY)
    spec = GEIA(**PARAMS).spec()
    monkeypatch.setenv(devices.BF16_ENV, "0")
    assert not devices.bf16()
    off = spec.key(bb)
    monkeypatch.setattr(devices, "bf16", lambda: True)
    monkeypatch.setattr(inv_model, "bf16", lambda: True)  # InverterSpec.key reads it there
    assert spec.key(bb) != off  # a mixed-precision model is another cache entry


def test_a_piece_weighs_the_same_in_a_bucketed_batch_as_in_a_random_one() -> None:
    """``loss(per_row=...)``: the sum over pieces / (mean pieces per row x rows), so a batch
    of short sentences does not weigh its pieces more than a batch of long documents does;
    with rows of the mean length it is the plain mean."""
    import torch

    bb = backbone(TINY)
    cls, sep = inv.specials(bb)
    rows = [np.asarray(r, np.int64) for r in bb.token_ids(["a good long review", "bad"])]
    vocab = np.unique(np.concatenate([*rows, [sep]])).astype(np.int64)
    model = inv.build_model(bb, GEIA(**PARAMS).spec(), vocab).eval()
    look = torch.from_numpy(inv.output_lookup(vocab, bb.embeddings.shape[0]))
    seqs = torch.from_numpy(inv.sequences(rows, cls, sep, 16))
    e = torch.zeros(2, bb.dim)
    per_row = inv.pieces_per_row(seqs)
    assert per_row == sum(len(r) + 1 for r in rows) / 2  # pieces and [SEP], per row
    with torch.no_grad():
        mean = inv.loss(model, e, seqs, look)
        weighted = inv.loss(model, e, seqs, look, per_row=per_row)
        short = inv.loss(model, e[1:], inv.trim(seqs[1:]), look, per_row=per_row)
        short_mean = inv.loss(model, e[1:], inv.trim(seqs[1:]), look)
    assert torch.isclose(weighted, mean)  # the whole set: the plain mean
    # the short row alone: its pieces' sum over the set's mean length, below its own mean
    assert short < short_mean


def test_public_data_variants_keep_the_resolved_public_split_and_count_what_it_holds() -> None:
    """On SynthPAI (``public_corpus: auto`` → its public split of 1,159 comments), the
    strength curve's variants are shares of the 1,159 the attack really pre-trains on, not
    of ``public_docs`` (8,000), and they pre-train on that split, not on the generator."""
    from privaudit.attacks.geia import GEIA
    from privaudit.audit.strength import public_variants

    attack = GEIA()
    plan = attack.plan("synthpai", {"seed": 0})
    text = attack.public_text(plan)
    assert (text.corpus, text.split) == ("synthpai", "public")
    assert attack.public_available(plan) == text.count() < int(attack.public_docs)
    variants = public_variants(attack, [0.25, 0.5], plan)
    assert [n for _, n, _ in variants] == [round(text.count() / 4), round(text.count() / 2)]
    for _, n, variant in variants:
        shown = variant.public_text(plan)
        assert (shown.corpus, shown.split) == ("synthpai", "public")
        assert variant.public_docs == n and attack.public_docs != n  # the original is untouched
        assert variant.spec(plan) != attack.spec(plan)  # its own pre-trained inverter
    with pytest.raises(ValueError, match="public_docs"):
        attack.with_public_data(0)
