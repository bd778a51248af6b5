"""The cost of a grid known before it starts (privaudit.audit.estimate): priors, measured
costs kept per machine, resumed cells free, the progress callback, `run --estimate`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

from privaudit.audit.config import load_config
from privaudit.audit.estimate import (
    CONTENDED,
    COSTS_FILE,
    STARTUP,
    STARTUP_PRIOR,
    CostBook,
    Pricing,
    Sizes,
    Work,
    estimate,
    machine_tag,
)
from privaudit.audit.forecast import estimate_config
from privaudit.runtime.cell_store import fresh_cells

cli = CliRunner()


@pytest.fixture(scope="module", autouse=True)
def _priors_only() -> Any:
    """No shipped reference costs in this module (tests/runtime/test_reference_costs.py has them):
    a component its books have not measured is priced by its prior."""
    import privaudit.audit.estimate as estimate_module

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(estimate_module, "scaled_reference", lambda **kwargs: None)
        # one speed for every run here: the books' rescaling by speed has its own test
        mp.setattr("privaudit.runtime.costs.measure_score", lambda: 0.2)
        yield


@pytest.fixture(scope="module")
def fresh_cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A cache directory of this module's own: no costs measured by another test."""
    with pytest.MonkeyPatch.context() as mp:
        cache = tmp_path_factory.mktemp("estimate-cache")
        mp.setenv("PRIVAUDIT_CACHE", str(cache))
        yield cache


@pytest.fixture(scope="module")
def prior_and_run(fresh_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The smoke grid's estimate from priors (nn-inversion's made absurd, so a measured
    estimate must beat it), then the smoke run itself."""
    from privaudit.attacks.nn_inversion import NNInversion
    from privaudit.outputs import run_grid

    config = load_config("smoke")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(NNInversion, "cost_prior", 100.0)
        prior = estimate_config(config)
    run = run_grid(config, run_dir=tmp_path_factory.mktemp("runs") / "smoke", progress=False)
    return config, prior, run


def test_priors_before_any_measurement(fresh_cache: Path, prior_and_run: Any) -> None:
    _, prior, _ = prior_and_run
    assert (prior.points, prior.cells, prior.done) == (4, 4, 0)
    assert prior.measured == 0 and prior.components == 4
    assert prior.priors == ["defense none", "defense t2t", "nn-inversion", "utility probe"]
    # 4 cells x 100 s per 1,000 words of the smoke corpus's test + aux words
    assert prior.wall > 4 * 100 * 0.5
    assert "priors for 4" in "\n".join(prior.lines())


def test_a_run_keeps_measured_costs_and_the_next_estimate_uses_them(
    fresh_cache: Path, prior_and_run: Any
) -> None:
    config, prior, run = prior_and_run
    data = json.loads((fresh_cache / COSTS_FILE).read_text())
    entries = data["machines"][machine_tag()]
    for key in ("privatize:t2t", "utility:probe|t2t", "attack:nn-inversion|none", "outputs"):
        assert entries[key]["units"] > 0 and entries[key]["seconds"] >= 0, key
    meta = json.loads((run.run_dir / "run.json").read_text())
    assert meta["estimate"]["cells_done"] == 0 and meta["estimate"]["seconds"] > 0
    elapsed = meta["elapsed_seconds"]
    with fresh_cells():  # priced as if computed: the cell store would make it free
        again = estimate_config(config)
    assert again.measured == again.components == 4 and not again.priors
    assert abs(again.wall - elapsed) < abs(prior.wall - elapsed)
    assert elapsed / 4 < again.wall < elapsed * 4


@fresh_cells()  # the run directory's cells alone (the cell store's: test_cell_store.py)
def test_resumed_cells_are_free(prior_and_run: Any) -> None:
    config, _, run = prior_and_run
    whole = estimate_config(config, run_dir=run.run_dir)
    assert (whole.done, whole.cells) == (4, 4)
    assert "nothing to compute" in whole.lines()[0]
    store = run.run_dir / "cells"
    cells = [p for p in store.iterdir() if json.loads(p.read_text())["kind"] == "cell"]
    fresh = estimate_config(config)
    gone = cells[0]
    saved = gone.read_text()
    gone.unlink()
    try:
        part = estimate_config(config, run_dir=run.run_dir)
    finally:
        gone.write_text(saved)
    assert (part.done, part.cells) == (3, 4)
    assert "(3 done, 1 to compute)" in part.lines()[0]
    assert 0 < part.wall < fresh.wall


class _Fake:
    """A component as the estimate reads it: a name, parameters and a prior."""

    knob: ClassVar[str | None] = None

    def __init__(self, name: str, prior: float) -> None:
        self.name, self.cost_prior = name, prior

    def params(self) -> dict[str, Any]:
        return {}


def test_workers_share_the_points_but_not_the_costliest_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 16)  # cores for 2 and 8 workers
    book = CostBook(tmp_path / COSTS_FILE)
    sizes = Sizes(point_kwords=10.0, attack_kwords=10.0)
    attacks = {"a": _Fake("a", 1.0)}
    evaluator = _Fake("probe", 0.0)
    work = [Work(_Fake(f"d{i}", 0.0), True, ["a"]) for i in range(4)]  # 10 s each

    def wall(jobs: int, items: list[Work]) -> float:
        pricing = Pricing(attacks, evaluator, sizes, book)
        return estimate(items, pricing, points=len(items), cells=0, done=0, jobs=jobs).wall

    assert wall(1, work) == pytest.approx(40.0)
    # a pool: the points shared out, plus the workers' start-up (a prior before measured)
    assert wall(2, work) == pytest.approx(20.0 + STARTUP_PRIOR)
    heavy = [*work, Work(_Fake("big", 0.0), True, ["a"] * 10)]  # one point of 100 s
    assert wall(8, heavy) == pytest.approx(100.0 + STARTUP_PRIOR)
    book.add([STARTUP], 5.0, 1.0)
    book.save()
    assert wall(2, work) == pytest.approx(25.0)
    pricing = Pricing(attacks, evaluator, sizes, book)
    lines = estimate(work, pricing, points=4, cells=4, done=0, jobs=2).lines()
    assert "with 2 workers" in lines[0] and "of work" in lines[0]
    assert "slower than one worker" not in lines[0]
    monkeypatch.setattr("os.cpu_count", lambda: 2)  # one process keeps 1.6 of them busy
    # two workers contend for two cores: measured slower than one (0.63×), and said so
    assert wall(2, work) == pytest.approx(40.0 / (1.25 * CONTENDED) + 5.0)
    assert wall(2, work) > wall(1, work)
    lines = estimate(work, pricing, points=4, cells=4, done=0, jobs=2).lines()
    assert "slower than one worker on 2 cores (--jobs 1)" in lines[0]


def test_an_unreadable_cost_file_is_ignored_and_rewritten(tmp_path: Path) -> None:
    path = tmp_path / COSTS_FILE
    for garbage in ("{not json", json.dumps({"format": 1, "machines": {"m": {"k": 3}}}), "[]"):
        path.write_text(garbage)
        with pytest.warns(UserWarning, match="unreadable cost file"):
            book = CostBook(path)
        assert book.entries == {} and book.rate(["k"]) is None
        book.add(["privatize:x"], 2.0, 4.0)
        book.save()
        data = json.loads(path.read_text())
        assert data["machines"][machine_tag()]["privatize:x"]["seconds"] == 2.0
        assert CostBook(path).rate(["privatize:x"]) == 0.5


def test_concurrent_books_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / COSTS_FILE
    first, second, other = CostBook(path), CostBook(path), CostBook(path, machine="cluster")
    first.add(["a", "shared"], 1.0, 1.0)
    second.add(["b", "shared"], 3.0, 1.0)
    other.add(["shared"], 100.0, 1.0)
    for book in (first, second, other):
        book.save()
    here = CostBook(path)
    assert here.rate(["a"]) == 1.0 and here.rate(["b"]) == 3.0
    assert here.rate(["shared"]) == 2.0  # both runs' samples, not the cluster's
    assert CostBook(path, machine="cluster").rate(["shared"]) == 100.0


def test_a_running_average_weighs_at_most_max_weight_samples(tmp_path: Path) -> None:
    from privaudit.audit.estimate import MAX_WEIGHT

    book = CostBook(tmp_path / COSTS_FILE)
    for _ in range(int(MAX_WEIGHT) * 3):
        book.add(["k"], 1.0, 1.0)
    book.save()
    book.add(["k"], 2.0 * MAX_WEIGHT, MAX_WEIGHT)  # as many samples again, twice as slow
    book.save()
    assert book.entries["k"]["n"] == MAX_WEIGHT
    assert book.rate(["k"]) == pytest.approx(1.5)


def test_progress_reports_each_component_as_it_starts(fresh_cache: Path) -> None:
    from privaudit.audit.cells import Task, context_for
    from privaudit.audit.executors import LocalExecutor
    from privaudit.audit.plan import plan

    config = load_config("smoke")
    ctx = context_for(config)
    point = plan(config, ctx)[1]
    point_key, cells = ctx.keys(point)
    seen: list[tuple[str, str]] = []
    records = list(
        LocalExecutor(1).run(
            config,
            ctx,
            [Task(point, point_key, cells)],
            lambda k, r: None,
            on_start=lambda task, what: seen.append((task.point.label, what)),
        )
    )
    assert seen == [("t2t", "privatize"), ("t2t", "probe"), ("t2t", "nn-inversion")]
    ((_, done),) = records
    point_record = dict(done)[point_key]
    assert 0 <= point_record["privatize_wall_seconds"] <= point_record["privatize_seconds"]
    cached = Task(point, point_key, cells, cached_utility=point_record)
    names: list[str] = []
    from privaudit.audit.cells import compute

    compute(ctx, cached, on_start=names.append)
    assert names == ["privatize", "nn-inversion"]


def test_cli_estimate_prints_and_writes_nothing(fresh_cache: Path, tmp_path: Path) -> None:
    from privaudit.cli import app

    out, run_dir = tmp_path / "reports", tmp_path / "run"
    # --fresh: what the cell store holds (the module's smoke run) is not free
    result = cli.invoke(
        app, ["run", "--preset", "smoke", "--estimate", "--fresh", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "Grid: 4 points, 4 cells (0 done, 4 to compute); estimated wall time" in result.output
    listed = cli.invoke(app, ["run", "--preset", "smoke", "--estimate", "--run-dir", str(run_dir)])
    assert listed.exit_code == 0, listed.output
    assert not out.exists() and not run_dir.exists()
    assert "Grid: 4 points" in listed.output


def test_cli_estimate_bad_input_is_one_line(tmp_path: Path) -> None:
    from privaudit.cli import app

    missing = cli.invoke(app, ["run", "--estimate", "--resume", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "has no config.json" in missing.output
    bad = tmp_path / "grid.yaml"
    bad.write_text("defenses: [{name: t2t, knob_values: [-1]}]\nattacks: [nn-inversion]\n")
    wrong = cli.invoke(app, ["run", "--estimate", "--config", str(bad)])
    assert wrong.exit_code == 2 and "eta=-1.0 is not allowed" in wrong.output
    typo = tmp_path / "typo.yaml"
    typo.write_text("defenses: [{name: t2t}]\nattacks: [nn-inversionn]\n")
    named = cli.invoke(app, ["run", "--estimate", "--config", str(typo)])
    assert named.exit_code == 2 and "Did you mean 'nn-inversion'" in named.output


def test_measurements_of_older_code_stop_counting(tmp_path: Path) -> None:
    """A section measured beside another shipped reference (older code) prices nothing, and
    the next save starts it anew under the current reference's stamp."""
    path = tmp_path / COSTS_FILE
    old = {"k": {"seconds": 90.0, "units": 1.0, "n": 5.0}}
    path.write_text(
        json.dumps(
            {
                "format": 1,
                "machines": {machine_tag(): old, "other": old},
                "reference": {"other": "whatever"},
            }
        )
    )
    book = CostBook(path)
    assert book.rate(["k"]) is None  # no stamp: the old code's measurement
    book.add(["j"], 2.0, 1.0)
    book.save()
    data = json.loads(path.read_text())
    assert data["machines"][machine_tag()] == {
        "j": {"seconds": 2.0, "units": 1.0, "n": 1.0, "score": 0.2}
    }
    assert data["reference"][machine_tag()] == book.stamp != ""
    assert data["machines"]["other"] == old  # another machine's section is its own
    assert CostBook(path).rate(["j"]) == 2.0  # the same code reads its own measurements


def test_a_rate_measured_under_load_is_rescaled_by_the_reading_runs_speed(
    tmp_path: Path,
) -> None:
    """A run on a busy machine (speed score 0.8 s) files its rates with that score; a run on
    the quiet machine (0.2 s) prices them four times faster, and the reverse."""
    from privaudit.runtime.costs import RunScore

    path = tmp_path / COSTS_FILE
    busy = CostBook(path, score=RunScore(0.8))
    busy.add(["k"], 8.0, 1.0)
    busy.save()
    assert CostBook(path, score=RunScore(0.2)).rate(["k"]) == pytest.approx(2.0)
    quiet = CostBook(path, score=RunScore(0.2))
    quiet.add(["k"], 2.0, 1.0)  # the same work, measured quiet: the entry agrees with itself
    quiet.save()
    assert CostBook(path, score=RunScore(0.4)).rate(["k"]) == pytest.approx(4.0)


def test_capped_attacks_are_priced_by_victims_once_measured(tmp_path: Path) -> None:
    """An attack that scores at most ``max_victims`` costs what its victims cost: a corpus with
    ten times the words but the same 300 victims is not priced ten times higher."""
    from privaudit.audit.estimate import VICTIMS, attack_keys, price_work, victims_of

    capped, plain = _Fake("geia", 1.0), _Fake("ner", 1.0)
    capped.max_victims = 300  # type: ignore[attr-defined]
    small, big = Sizes(10.0, 10.0, victims=400), Sizes(100.0, 100.0, victims=4000)
    assert victims_of(capped, small) == victims_of(capped, big) == 300
    assert victims_of(capped, Sizes(1.0, 1.0, victims=120)) == 120
    assert victims_of(plain, big) is None
    book = CostBook(tmp_path / COSTS_FILE)
    work = Work(_Fake("none", 0.0), False, ["geia", "ner"], "none")
    attacks = {"geia": capped, "ner": plain}
    # not measured by victims yet: by words, as before
    before = {p.component: p.seconds for p in price_work(work, Pricing(attacks, None, big, book))}
    assert before["geia"] == pytest.approx(100.0)
    book.add([VICTIMS + k for k in attack_keys(capped, "none")], 30.0, 3.0)  # 10 s / 100
    book.add(attack_keys(plain, "none"), 20.0, 10.0)
    book.save()
    parts = {p.component: p for p in price_work(work, Pricing(attacks, None, big, book))}
    assert parts["geia"].seconds == pytest.approx(30.0) and parts["geia"].units == 3.0
    assert parts["ner"].seconds == pytest.approx(200.0)  # by words: ten times the corpus


def test_the_tracker_reprices_the_remaining_points_from_what_was_measured(
    tmp_path: Path,
) -> None:
    """Four points priced 10 s each; the first took 40 s (the machine got busier): the
    remaining three are priced at this run's own rate, 120 s, not the 30 s first thought."""
    from privaudit.audit.forecast import Tracker

    book = CostBook(tmp_path / COSTS_FILE)
    attack, defense = _Fake("nn", 0.5), _Fake("t2t", 0.5)
    attacks = {"nn": attack}
    sizes = Sizes(point_kwords=10.0, attack_kwords=10.0)
    tasks = [object() for _ in range(4)]
    work = [Work(defense, False, ["nn"], "t2t") for _ in tasks]
    pricing = Pricing(attacks, _Fake("probe", 0.0), sizes, book)
    tracker = Tracker(tasks, work, pricing, cells=4, done=0, jobs=1)
    outputs = tracker.outputs_s
    assert tracker.remaining() - outputs == pytest.approx(40.0)
    tracker.finished(tasks[0], {"defense t2t": 20.0, "nn": 20.0}, 1)
    assert tracker.remaining() - outputs == pytest.approx(120.0)
    assert tracker.drift == pytest.approx(4.0)
    line = tracker.line("t2t 1")
    assert line.startswith("privaudit: point 1/4 done (t2t 1) · elapsed 0:0")
    assert " · cells 1/4 · ETA 2 min" in line
    # an unmeasured part is priced at its first price × the run's drift
    other = Work(_Fake("pct2t", 0.5), False, ["nn"], "pct2t")
    pricing = Pricing(attacks, None, sizes, book)
    t2 = Tracker([tasks[0], tasks[1]], [work[0], other], pricing, cells=2, done=0, jobs=1)
    t2.finished(tasks[0], {"defense t2t": 10.0, "nn": 10.0}, 1)  # 2× slower than priced
    assert t2.remaining() - t2.outputs_s == pytest.approx(5.0 * 2 + 10.0)


def test_a_component_measured_on_one_defense_is_priced_at_its_own_pace_on_the_next(
    tmp_path: Path,
) -> None:
    """geia took 4× its price on t2t and ner half of its: rapt's geia (a book key not yet
    measured) is priced at 4× its first price, not at the run's median drift (1×). The
    cold quick grid's ETA read 31 min for 56 when the median of many small, fast parts
    priced the slow inverters."""
    from privaudit.audit.forecast import Tracker

    book = CostBook(tmp_path / COSTS_FILE)
    attacks = {"geia": _Fake("geia", 0.5), "ner": _Fake("ner", 0.5), "ae": _Fake("ae", 0.5)}
    sizes = Sizes(point_kwords=10.0, attack_kwords=10.0)
    first = Work(_Fake("t2t", 0.5), False, ["geia", "ner"], "t2t")
    later = Work(_Fake("rapt", 0.5), False, ["geia", "ae"], "rapt")
    tasks = [object(), object()]
    tracker = Tracker(
        tasks, [first, later], Pricing(attacks, None, sizes, book), cells=4, done=0, jobs=1
    )
    assert tracker.remaining() - tracker.outputs_s == pytest.approx(30.0)  # 6 parts × 5 s
    tracker.finished(tasks[0], {"defense t2t": 5.0, "geia": 20.0, "ner": 2.5}, 2)
    assert tracker.drift == pytest.approx(1.0)  # the median of 1×, 4×, 0.5×
    # rapt: its privatize and ae unmeasured (× drift), geia at its own 4×
    assert tracker.remaining() - tracker.outputs_s == pytest.approx(5.0 + 20.0 + 5.0)


def test_the_fit_noise_refits_are_priced_after_the_grid(tmp_path: Path) -> None:
    """The refits after the grid (each random fit again at every undefended point) were
    priced nowhere: a cold quick grid's last ETA said 62 s for 3:11. They are now in the
    first estimate and in the tracker's tail, also when every cell is reused."""
    from privaudit.audit.forecast import Tracker, fit_noise_seconds

    book = CostBook(tmp_path / COSTS_FILE)
    geia, ner, service = _Fake("geia", 0.5), _Fake("ner", 0.5), _Fake("service", 1.0)
    geia.fit_sd, ner.fit_sd, service.fit_sd = 0.02, 0.0, 0.01  # type: ignore[attr-defined]
    pricing = Pricing({"geia": geia, "ner": ner}, service, Sizes(10.0, 10.0), book)
    none = _Fake("none", 0.0)
    # two refits of geia (5 s) and of the service (10 s) at each of two undefended points;
    # ner's fit is deterministic and not refitted, the privatize pass is not repeated
    assert fit_noise_seconds([none, none], 2, pricing) == pytest.approx(2 * 2 * (5.0 + 10.0))
    assert fit_noise_seconds([none], 0, pricing) == 0.0
    assert fit_noise_seconds([], 2, pricing) == 0.0
    work = [Work(none, False, ["ner"], "none")]
    plain = estimate(work, pricing, points=1, cells=2, done=0)
    after = estimate(work, pricing, points=1, cells=2, done=0, after=30.0)
    assert after.wall - plain.wall == pytest.approx(30.0)
    assert after.seconds - plain.seconds == pytest.approx(30.0)
    tasks = [object()]
    tracker = Tracker(tasks, work, pricing, cells=2, done=0, jobs=1, after=30.0)
    tracker.finished(tasks[0], {"defense none": 0.0, "ner": 5.0}, 2)
    without = Tracker(tasks, work, pricing, cells=2, done=0, jobs=1)
    assert tracker.remaining() == pytest.approx(without.outputs_s + 30.0)  # all that is left
    # nothing left to compute: the line still prices the refits and outputs
    done = estimate([], pricing, points=1, cells=2, done=2, after=30.0)
    assert "nothing to compute but the fit-noise refits" in done.lines()[0]
    assert done.wall >= 30.0


def test_a_workers_seconds_are_filed_as_one_process_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers on two cores each take 1 / (0.625 / 2) = 3.2× a part's one-process time,
    and the estimate already prices that contention (speedup 0.625). Filed as measured, it
    counted twice: "ETA 29 min" after the first of three points, with 6 min left."""
    from types import SimpleNamespace

    from privaudit.audit.estimate import attack_keys, speedup
    from privaudit.audit.forecast import Tracker

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert speedup(2) == pytest.approx(0.625)
    book = CostBook(tmp_path / COSTS_FILE)
    nn, t2t = _Fake("nn", 0.5), _Fake("t2t", 0.5)
    sizes = Sizes(point_kwords=10.0, attack_kwords=10.0)
    pricing = Pricing({"nn": nn}, None, sizes, book)
    tasks = [object() for _ in range(3)]
    work = [Work(t2t, False, ["nn"], "t2t") for _ in tasks]
    tracker = Tracker(tasks, work, pricing, cells=3, done=0, jobs=2)
    assert tracker.remaining() - tracker.outputs_s == pytest.approx(30.0 / 0.625)
    tracker.finished(tasks[0], {"defense t2t": 16.0, "nn": 16.0}, 1)  # 5 s each, contended
    assert tracker.remaining() - tracker.outputs_s == pytest.approx(20.0 / 0.625)
    # the cost book files them the same way: the next run, one worker, is not priced slow
    ctx = SimpleNamespace(defense=lambda _: t2t, evaluator=_Fake("probe", 0.0), attacks={"nn": nn})
    task = SimpleNamespace(point=None, point_key="p", attack_keys={"nn": "c"})
    records = [
        ("p", {"status": "ok", "privatize_wall_seconds": 16.0, "utility_seconds": 16.0}),
        ("c", {"status": "ok", "rows": [{"attack_seconds": 16.0}]}),
    ]
    book.record(ctx, task, records, sizes, jobs=2)
    book.save()
    assert book.rate(attack_keys(nn, "t2t")) == pytest.approx(0.5)  # 5 s over 10 kwords


def test_one_mispriced_component_is_not_read_as_the_machine(tmp_path: Path) -> None:
    """A point whose only computed cell took ten times its price (a new attack version, the
    rest from the cell store) re-prices that attack alone: the parts nothing measured keep
    their price until two components agree; their median, not one outlier, is the drift."""
    from privaudit.audit.forecast import Tracker

    book = CostBook(tmp_path / COSTS_FILE)
    attacks = {"nn": _Fake("nn", 0.5), "ner": _Fake("ner", 0.5), "ae": _Fake("ae", 0.5)}
    sizes = Sizes(point_kwords=10.0, attack_kwords=10.0)
    first = Work(_Fake("t2t", 0.5), False, ["nn"], "t2t")
    later = Work(_Fake("pct2t", 0.5), False, ["ner"], "pct2t")
    pricing = Pricing(attacks, None, sizes, book)
    tasks = [object(), object()]
    tracker = Tracker(tasks, [first, later], pricing, cells=2, done=0, jobs=1)
    tracker.finished(tasks[0], {"nn": 50.0}, 1)  # priced 5 s, took 50
    assert tracker.drift == 1.0
    assert tracker.remaining() - tracker.outputs_s == pytest.approx(10.0)  # pct2t + ner
    # two components measured: 10x and 1x -> their median (5.5), bounded by DRIFT_BOUNDS
    tracker.finished(tasks[0], {"defense t2t": 5.0}, 0)
    assert tracker.drift == pytest.approx(4.0)
    t3 = Tracker(
        tasks,
        [Work(_Fake("t2t", 0.5), False, ["nn", "ner", "ae"], "t2t"), later],
        Pricing(attacks, None, sizes, book),
        cells=2,
        done=0,
        jobs=1,
    )
    t3.finished(tasks[0], {"defense t2t": 5.0, "nn": 50.0, "ner": 5.0, "ae": 5.0}, 3)
    assert t3.drift == pytest.approx(1.0)  # three at their price outvote the one at 10x
