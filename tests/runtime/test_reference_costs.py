"""The first estimate on a fresh machine (privaudit.runtime.costs): the shipped reference
cost book, scaled by this machine's speed ratio, between this machine's measurements and the
priors; the speed score measured once and kept; the book refreshed from a measured file."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import privaudit.runtime.costs as rc
from privaudit.audit.config import load_config
from privaudit.audit.estimate import (
    COSTS_FILE,
    OUTPUTS,
    CostBook,
    Pricing,
    Sizes,
    Work,
    estimate,
)
from privaudit.audit.forecast import estimate_config
from tests.audit.test_estimate import _Fake


@pytest.fixture(autouse=True)
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache of each test's own, references read afresh, no speed measured yet."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("PRIVAUDIT_CACHE", str(cache))
    monkeypatch.setattr(rc, "_SCORES", {})
    rc._load.cache_clear()
    yield cache
    rc._load.cache_clear()


def ratio(monkeypatch: pytest.MonkeyPatch, value: float) -> None:
    monkeypatch.setattr(rc, "speed_ratio", lambda score, run=None: value)


def _entry(rate: float) -> dict[str, float]:
    return {"seconds": rate * 10.0, "units": 10.0, "n": 1.0}


def _write_book(path: Path, entries: dict[str, dict[str, float]], **extra: Any) -> Path:
    book = {
        "format": 1,
        "machine": "ref",
        "device": "cpu",
        "score": 0.1,
        "pretrain_seconds_per_pair": 0.05,
        "entries": entries,
    } | extra
    path.write_text(json.dumps(book))
    return path


def test_the_shipped_book_loads_and_is_package_data() -> None:
    ref = rc.load_reference()
    assert ref is not None and ref.device == "cpu" and ref.score > 0
    assert ref.pretrain_rate is not None and ref.pretrain_rate > 0
    kinds = {key.split(":")[0] for key in ref.entries}
    assert {"privatize", "utility", "attack"} <= kinds
    assert ref.rate(["privatize:t2t"]) is not None and ref.rate([OUTPUTS]) is not None
    package = Path(rc.__file__).resolve().parents[1]
    data = tomllib.loads((package.parent / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = rc.SHIPPED.relative_to(package).as_posix()
    assert any(Path(shipped).match(g) for g in data["package-data"]["privaudit"])


def _fakes() -> tuple[list[Work], dict[str, Any], Any, Sizes]:
    attacks = {"a": _Fake("a", 5.0)}
    work = [Work(_Fake("d", 5.0), True, ["a"])]
    return work, attacks, _Fake("probe", 5.0), Sizes(point_kwords=10.0, attack_kwords=10.0)


def _reference_book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # privatize 0.1, utility 0.2, attack 0.3 s per 1,000 words; outputs 1 s per cell
    entries = {
        "privatize:d": _entry(0.1),
        "utility:probe": _entry(0.2),
        "attack:a": _entry(0.3),
        OUTPUTS: _entry(1.0),
    }
    monkeypatch.setattr(rc, "SHIPPED", _write_book(tmp_path / "reference.json", entries))


def test_a_fresh_machine_prices_from_the_reference_times_its_speed_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _reference_book(tmp_path, monkeypatch)
    work, attacks, evaluator, sizes = _fakes()

    def forecast(value: float) -> Any:
        ratio(monkeypatch, value)
        pricing = Pricing(attacks, evaluator, sizes, CostBook())
        return estimate(work, pricing, points=1, cells=1, done=0)

    one, two = forecast(1.0), forecast(2.0)
    assert one.wall == pytest.approx((0.1 + 0.2 + 0.3) * 10 + 1.0)
    assert two.wall == pytest.approx(2 * one.wall)
    assert (two.measured, two.referenced, two.components, two.priors) == (0, 3, 3, [])
    assert "reference costs scaled ×2 for this machine for 3" in two.lines()[1]
    assert two.record()["speed_ratio"] == 2.0 and two.record()["referenced"] == 3


def test_measured_entries_win_and_unknown_components_keep_their_prior(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _reference_book(tmp_path, monkeypatch)
    ratio(monkeypatch, 2.0)
    work, attacks, evaluator, sizes = _fakes()
    work.append(Work(_Fake("other", 1.0), False, []))  # in no book: its prior
    book = CostBook(tmp_path / COSTS_FILE)
    book.add(["privatize:d"], 7.0, 10.0)  # measured here: 0.7, not the reference's 0.2
    book.save()
    got = estimate(work, Pricing(attacks, evaluator, sizes, book), points=2, cells=1, done=0)
    assert got.wall == pytest.approx(0.7 * 10 + (0.2 + 0.3) * 2 * 10 + 1.0 * 10 + 2.0)
    assert (got.measured, got.referenced, got.priors) == (1, 2, ["defense other"])
    source = got.lines()[1]
    assert "measured costs for 1 of 4" in source and "×2 for this machine for 2" in source
    assert "priors for 1: defense other" in source


def test_a_missing_or_corrupt_reference_falls_back_to_priors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work, attacks, evaluator, sizes = _fakes()
    monkeypatch.setattr(rc, "measure_score", lambda: pytest.fail("no reference: no workload"))
    monkeypatch.setattr(rc, "SHIPPED", tmp_path / "absent.json")
    assert rc.scaled_reference() is None and CostBook().reference is None
    bad = tmp_path / "bad.json"
    for garbage in (
        "{not json",
        json.dumps({"format": 1, "entries": {}}),
        "[]",
        json.dumps({"format": 1, "device": "cpu", "score": -1, "entries": {}}),
    ):
        bad.write_text(garbage)
        rc._load.cache_clear()
        monkeypatch.setattr(rc, "SHIPPED", bad)
        with pytest.warns(UserWarning, match="unreadable reference cost file"):
            book = CostBook()
        assert book.reference is None
        got = estimate(work, Pricing(attacks, evaluator, sizes, book), points=1, cells=1, done=0)
        assert got.referenced == 0 and len(got.priors) == 3
        assert got.wall == pytest.approx(3 * 5.0 * 10 + 0.1)  # priors, outputs' prior
    # a reference measured on another device kind says nothing about this one
    _write_book(bad, {"privatize:d": _entry(0.1)}, device="cuda")
    rc._load.cache_clear()
    assert rc.load_reference() is not None and rc.scaled_reference() is None


def test_the_speed_score_is_measured_at_each_runs_start_and_never_read_back(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A score taken under another load (another process's, kept in speed.json) never prices
    a run: each run (each cost book) measures its own, once."""
    scores = iter([0.25, 2.0, 0.5])
    calls: list[float] = []

    def measure() -> float:
        calls.append(next(scores))
        return calls[-1]

    monkeypatch.setattr(rc, "measure_score", measure)
    busy = rc.run_score(new=True)
    assert busy.value == busy.value == 0.25 and len(calls) == 1  # once per run
    assert rc.speed_ratio(0.125, busy) == pytest.approx(2.0)
    assert rc.speed_ratio(1000.0, busy) == rc.RATIO_BOUNDS[0]  # a swamped measurement, bounded
    kept = json.loads((fresh / rc.SPEED_FILE).read_text())
    assert kept["machines"] == {rc.machine_tag(): 0.25} and rc.machine_tag() in kept["load"]
    monkeypatch.setattr(rc, "_SCORES", {})  # another process: the file is not read back
    quiet = rc.run_score(new=True)
    assert quiet is rc.run_score() and quiet.value == 2.0 and len(calls) == 2
    # a cost book is a run: its own score, not the previous book's
    book = CostBook(fresh / COSTS_FILE)
    assert book.score is not quiet and book.score.value == 0.5 and len(calls) == 3


def test_the_workload_is_quick() -> None:
    score = rc.measure_score()
    assert 0 < score < 3.0  # seconds per repeat; the whole measurement stays a few seconds


def test_the_score_is_the_median_of_its_repeats_after_the_warm_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lucky moment (the fastest repeat) or the warm-up (the slowest) does not set it."""
    durations = [5.0, 0.1, 0.9, 0.3, 0.5, 0.2, 0.8, 0.4, 0.7, 0.6]
    assert len(durations) == rc._REPEATS + 1
    clock = iter(np.cumsum([[0.0, d] for d in durations]).tolist())
    monkeypatch.setattr(rc.time, "perf_counter", lambda: next(clock))
    assert rc.measure_score() == pytest.approx(0.5)


def test_pretraining_rate_measured_then_reference_then_prior(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _reference_book(tmp_path, monkeypatch)  # its pre-training: 0.05 s per weighted pair
    ratio(monkeypatch, 3.0)
    monkeypatch.setattr(rc, "run_score", lambda new=False: rc.RunScore(0.4))
    timings = tmp_path / "timings.json"
    assert rc.pretrain_rate(timings, 0.033) == pytest.approx(0.15)
    # Measured under load (a speed score of 0.8 s, twice this run's 0.4): half the rate now.
    timings.write_text(json.dumps({rc.PRETRAIN_KEY: 0.02, "score": 0.8}))
    assert rc.pretrain_rate(timings, 0.033) == pytest.approx(0.01)
    # An older file's rate per document and epoch, blind to the texts' sizes: ignored.
    timings.write_text(json.dumps({"seconds_per_doc_epoch": 0.02}))
    assert rc.pretrain_rate(timings, 0.033) == pytest.approx(0.15)
    timings.write_text("{broken")
    assert rc.pretrain_rate(timings, 0.033) == pytest.approx(0.15)
    monkeypatch.setattr(rc, "SHIPPED", tmp_path / "absent.json")
    assert rc.pretrain_rate(timings, 0.033) == 0.033


def test_a_pretraining_files_its_rate_with_the_score_it_ran_under(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    timings = tmp_path / "inverters" / "timings.json"
    monkeypatch.setattr(rc, "run_score", lambda new=False: rc.RunScore(0.6))  # a busy machine
    rc.record_pretrain_rate(timings, 300.0, 10_000.0)
    filed = json.loads(timings.read_text())
    assert filed[rc.PRETRAIN_KEY] == pytest.approx(0.03) and filed["score"] == 0.6
    monkeypatch.setattr(rc, "run_score", lambda new=False: rc.RunScore(0.2))  # quiet again
    assert rc.pretrain_rate(timings, 1.0) == pytest.approx(0.01)


def test_the_book_is_refreshed_from_a_measured_cost_file(tmp_path: Path) -> None:
    from benchmarks.reference_costs import main

    costs = tmp_path / "costs.json"
    section = {"privatize:t2t": _entry(0.4), OUTPUTS: _entry(0.2)}
    costs.write_text(json.dumps({"format": 1, "machines": {"m-2cpu": section, "other": {}}}))
    (tmp_path / "inverters").mkdir()
    (tmp_path / "inverters" / "timings.json").write_text(
        json.dumps({"pretrain_seconds_per_pair": 0.04, "score": 0.4})
    )
    out = tmp_path / "ref.json"
    main(["--from", str(costs), "--machine", "m-2cpu", "--score", "0.2", "--out", str(out)])
    ref = rc.load_reference(out)
    assert ref is not None and (ref.machine, ref.device, ref.score) == ("m-2cpu", "cpu", 0.2)
    # the rate measured at score 0.4, filed at the book's 0.2: half
    assert ref.entries == section and ref.pretrain_rate == pytest.approx(0.02)
    assert json.loads(costs.read_text())["machines"]["m-2cpu"] == section  # read only
    with pytest.raises(ValueError, match="no costs for machine 'nope'"):
        rc.write_reference(costs, out, machine="nope", score=0.1)


def test_the_smoke_grid_on_a_fresh_machine_uses_the_shipped_book(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = load_config("smoke")
    ratio(monkeypatch, 1.0)
    one = estimate_config(config)
    ratio(monkeypatch, 2.0)
    two = estimate_config(config)
    assert one.measured == 0 and one.referenced == one.components == 4 and not one.priors
    assert two.wall == pytest.approx(2 * one.wall)
    assert "reference costs scaled ×2 for this machine for 4" in "\n".join(two.lines())


def test_a_refresh_keeps_what_its_run_did_not_measure_rescaled(tmp_path: Path) -> None:
    """A reference refreshed from a quick-grid run keeps the smoke grid's probe from the book
    it replaces, its seconds rescaled to the new speed score; what the run measured wins."""
    out = tmp_path / "ref.json"
    first = tmp_path / "first.json"
    first.write_text(
        json.dumps(
            {
                "format": 1,
                "machines": {
                    "m-2cpu": {"utility:probe": _entry(0.5), "privatize:t2t": _entry(9.0)}
                },
            }
        )
    )
    rc.write_reference(first, out, machine="m-2cpu", score=0.1)
    second = tmp_path / "second.json"
    second.write_text(
        json.dumps({"format": 1, "machines": {"m-2cpu": {"privatize:t2t": _entry(0.4)}}})
    )
    ref = rc.write_reference(second, out, machine="m-2cpu", score=0.2)
    assert ref.rate(["privatize:t2t"]) == pytest.approx(0.4)  # measured now
    assert ref.rate(["utility:probe"]) == pytest.approx(1.0)  # kept, ×2 for a 2× slower score


def test_the_speed_score_runs_with_the_threads_the_models_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run with OMP_NUM_THREADS=1 runs its models on one thread: its score must too, or its
    single-thread costs are filed under a two-thread score (a slow machine, read later)."""
    import contextlib

    from privaudit.runtime.devices import run_thread_count

    seen: list[int | None] = []

    @contextlib.contextmanager
    def recorded(n: int | None):  # type: ignore[no-untyped-def]
        seen.append(n)
        yield

    monkeypatch.setattr(rc, "torch_threads", recorded)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert run_thread_count() == 1
    rc.measure_score()
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert run_thread_count() == (os.cpu_count() or 1)
    rc.measure_score()
    assert seen == [1, os.cpu_count() or 1]


def test_scores_inside_the_quiet_spread_are_the_same_pace() -> None:
    """A reading a few seconds apart on a quiet machine moved 2× (0.074-0.150 s): inside
    the spread both read as the typical score; a busy machine's reading is taken as it is."""
    typical = 0.1
    spread = rc.QUIET_SPREAD
    assert rc.score_ratio(0.15, 0.07, typical) == 1.0  # two quiet readings: the same pace
    assert rc.score_ratio(typical * spread, typical / spread, typical) == 1.0  # the edges
    assert rc.score_ratio(0.3, 0.16, typical) == pytest.approx(3.0)  # busy now, quiet then
    assert rc.score_ratio(0.1, 0.4, typical) == pytest.approx(0.25)  # filed under load
    assert rc.score_ratio(0.04, 0.1, typical) == pytest.approx(0.4)  # a faster machine
    assert rc.score_ratio(50.0, 0.1, typical) == rc.RATIO_BOUNDS[1]  # swamped: bounded
    assert rc.score_ratio(0.15, 0.07, None) == rc.score_ratio(0.15, 0.07)  # the shipped one's
    assert rc.quiet_or_busy(0.2, typical) == 0.2 and rc.quiet_or_busy(0.12, typical) == typical


def test_the_shipped_reference_reads_a_quiet_run_as_its_own_pace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shipped = rc.load_reference()
    assert shipped is not None
    for reading in (shipped.score * 0.8, shipped.score * 1.6):  # quiet readings seen here
        assert rc.speed_ratio(shipped.score, rc.RunScore(reading)) == 1.0
    busy = rc.RunScore(shipped.score * 2.9)  # three busy processes beside the run
    assert rc.speed_ratio(shipped.score, busy) == pytest.approx(2.9)


def test_a_reference_is_scored_by_the_median_of_spaced_readings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    readings = iter([0.3, 0.1, 0.12, 0.09, 0.11])
    monkeypatch.setattr(rc, "measure_score", lambda: next(readings))
    monkeypatch.setattr(rc.time, "sleep", lambda s: None)
    assert rc.typical_score(5) == pytest.approx(0.11)
