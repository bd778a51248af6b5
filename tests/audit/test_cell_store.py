"""Cells reused across runs (privaudit.runtime.cell_store, privaudit.audit.reuse): a repeat
run takes every cell from the machine's store, an audit of a changed plugin computes only the
plugin's points, --fresh recomputes, the store is bounded and holds no corpus text, and a
cache that cannot be written fails nothing."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from privaudit.audit.config import load_config
from privaudit.runtime.cell_store import (
    CellStore,
    fresh_cells,
    is_fresh,
    max_bytes,
    parse_size,
)

cli = CliRunner()
PLUGIN = Path(__file__).resolve().parents[2] / "examples" / "plugins" / "mask_words.py"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A cache of this module's own: its cell store starts empty."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("cell-store-cache")
        mp.setenv("PRIVAUDIT_CACHE", str(path))
        mp.setenv("PRIVAUDIT_CELL_STORE", "on")  # the suite runs with it off (conftest)
        yield path


def _run(config: Any, run_dir: Path, *, fresh: bool = False) -> tuple[Any, dict[str, Any]]:
    from privaudit.audit.runner import run_grid

    result = run_grid(config, run_dir=run_dir, progress=False, fresh=fresh)
    return result, json.loads((run_dir / "run.json").read_text())


@pytest.fixture(scope="module")
def two_runs(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The smoke grid run twice into two directories, nothing changed."""
    config = load_config("smoke")
    root = tmp_path_factory.mktemp("runs")
    first = _run(config, root / "first")
    second = _run(config, root / "second")
    return config, root, first, second


def test_a_repeat_run_reuses_every_cell(two_runs: Any, capfd: pytest.CaptureFixture) -> None:
    config, root, (first, meta1), (second, meta2) = two_runs
    assert meta1["reused"] == {"cells": 0, "points": 0}
    assert meta2["reused"] == {"cells": 4, "points": 4} and meta2["estimate"]["reused"] == 4
    records = [json.loads(p.read_text()) for p in (root / "second" / "cells").iterdir()]
    assert sum(r.get("reused") is True for r in records) == 8  # 4 utility + 4 attack cells
    # the same results: scores, utility, timings of the run that computed them
    cols = ["label", "knob_value", "attack", "utility", "attack_score", "seconds", "cell_key"]
    assert first.frame[cols].equals(second.frame[cols])
    # a third, fresh: every cell computed again, and the store's entries replaced
    store = CellStore()
    before = {e.key: e.path.stat().st_mtime_ns for e in store.entries()}
    _, meta3 = _run(config, root / "third", fresh=True)
    assert meta3["reused"] == {"cells": 0, "points": 0}
    after = {e.key: e.path.stat().st_mtime_ns for e in store.entries()}
    assert after.keys() == before.keys() and all(after[k] > before[k] for k in before)


def test_the_count_and_a_line_per_point_are_printed(
    cache: Path, two_runs: Any, tmp_path: Path, capfd: pytest.CaptureFixture
) -> None:
    config = load_config("smoke")
    _run(config, tmp_path / "again")
    err = capfd.readouterr().err
    assert "privaudit: 4 of 4 cells reused from the cell store (4 of 4 points' utility" in err
    assert "(4 done, 4 of them from the cell store, 0 to compute)" in err
    _run(config, tmp_path / "fresh", fresh=True)
    lines = [x for x in capfd.readouterr().err.splitlines() if x.startswith("privaudit: point")]
    # one per finished point: which, elapsed, cells done of all, the ETA
    assert len(lines) == 4 and lines[-1].startswith("privaudit: point 4/4 done (t2t 100)")
    assert " · cells 4/4 · ETA " in lines[-1] and " · elapsed " in lines[0]


def test_the_store_holds_no_corpus_text(two_runs: Any) -> None:
    from privaudit.audit.cells import context_for

    config = load_config("smoke").model_copy(update={"show_examples": True})
    _run(config, two_runs[1] / "examples")  # examples asked for: in the run, not the store
    assert (two_runs[1] / "examples" / "examples.json").is_file()
    ctx = context_for(config)
    blobs = [e.path.read_text() for e in CellStore().entries()]
    assert blobs and not any('"examples"' in b for b in blobs)
    for text in [*ctx.test_texts, *ctx.train_texts]:
        words = text.split()
        for i in range(max(1, len(words) - 4)):  # no five words of any document
            window = " ".join(words[i : i + 5])
            assert not any(window in b for b in blobs), window


def test_the_estimate_counts_stored_cells_as_done(two_runs: Any) -> None:
    from privaudit.audit.forecast import estimate_config

    config = two_runs[0]
    stored = estimate_config(config)
    assert (stored.done, stored.reused) == (4, 4)
    assert "nothing to compute" in stored.lines()[0]
    with fresh_cells():
        assert estimate_config(config).done == 0


def test_a_changed_plugin_recomputes_only_its_own_points(
    cache: Path, two_runs: Any, tmp_path: Path
) -> None:
    from privaudit.audit.plugin import audit

    plugin = tmp_path / "mask_words.py"
    shutil.copy(PLUGIN, plugin)
    target = f"{plugin}:MaskWords"

    def run(name: str) -> dict[str, Any]:
        result = audit(
            target,
            knob="p=0.2,0.8",
            preset="smoke",
            compare=["t2t"],
            run_dir=tmp_path / name,
            progress=False,
        )
        assert result.run is not None
        return json.loads((tmp_path / name / "run.json").read_text())

    # none and t2t at three levels: the smoke runs computed them; the plugin's two are new
    first = run("first")
    assert first["cells"] == 6 and first["reused"] == {"cells": 4, "points": 4}
    assert run("again")["reused"] == {"cells": 6, "points": 6}
    source = plugin.read_text().replace('FILLERS = ["thing",', 'FILLERS = ["object",')
    plugin.write_text(source)  # one line of the plugin changed: its points are computed
    assert run("changed")["reused"] == {"cells": 4, "points": 4}


def test_a_cache_that_cannot_be_written_fails_no_run(cache: Path, tmp_path: Path) -> None:
    from privaudit.runtime.cell_store import CELLS_DIR

    blocked = tmp_path / "blocked-cache"
    blocked.mkdir()
    (blocked / CELLS_DIR).write_text("not a directory")  # every write into it fails
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PRIVAUDIT_CACHE", str(blocked))
        store = CellStore()
        assert store.get("ab" * 20) is None
        assert store.put("ab" * 20, {"kind": "cell", "status": "ok", "rows": []}) is False
        assert not store.writable and store.entries() == [] and store.prune(0) == (0, 0)
        config = load_config("smoke")
        config = config.model_copy(update={"defenses": config.defenses[:1]})
        _, meta = _run(config, tmp_path / "run")
    assert meta["finished"] and meta["reused"] == {"cells": 0, "points": 0}


def test_the_store_can_be_switched_off(cache: Path, tmp_path: Path) -> None:
    from privaudit.cli import app

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PRIVAUDIT_CELL_STORE", "off")
        store = CellStore()
        assert store.root is None and store.get("ab" * 20) is None
        assert store.put("ab" * 20, {"kind": "point", "status": "ok"}) is False
        shown = cli.invoke(app, ["cache"])
        assert shown.exit_code == 0 and "The cell store is off" in shown.output


def test_least_recently_used_entries_are_pruned_first(tmp_path: Path) -> None:
    store = CellStore(tmp_path / "cells")
    record = {"kind": "cell", "status": "ok", "rows": [{"x": "y" * 1000}]}
    keys = [f"{i:02d}" + "0" * 38 for i in range(6)]
    for i, key in enumerate(keys):
        assert store.put(key, record, {"corpus": "c", "component": f"a{i % 2}"})
        os.utime(store._path(key), (1000 + i, 1000 + i))
    assert store.get(keys[0]) is not None  # a hit: now the most recently used
    size = store.entries()[0].size
    removed, freed = store.prune(3 * size, to=1.0)
    assert removed == 3 and freed == 3 * size
    assert {e.key for e in store.entries()} == {keys[0], keys[4], keys[5]}
    assert store.put("ff" * 20, {"kind": "cell", "status": "failed", "rows": []}) is False
    assert not store.empty()
    assert store.clear() == (3, 3 * size) and store.entries() == [] and store.empty()


def test_fresh_makes_every_lookup_miss(tmp_path: Path) -> None:
    store = CellStore(tmp_path / "cells")
    store.put("aa" * 20, {"kind": "point", "status": "ok"})
    assert not is_fresh()
    with fresh_cells():
        assert is_fresh() and store.get("aa" * 20) is None
    assert store.get("aa" * 20) == {"kind": "point", "status": "ok"}


def test_sizes_and_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_size("500MB") == 500 << 20 and parse_size("2g") == 2 << 30
    assert parse_size("1048576") == 1 << 20
    with pytest.raises(ValueError, match="is not a size"):
        parse_size("lots")
    monkeypatch.setenv("PRIVAUDIT_CELL_STORE_MAX", "10MB")
    assert max_bytes() == 10 << 20


def test_the_cache_command_shows_prunes_and_clears(two_runs: Any) -> None:
    from privaudit.cli import app

    shown = cli.invoke(app, ["cache"])
    assert shown.exit_code == 0, shown.output
    assert "By corpus:" in shown.output and "synthetic-reviews" in shown.output
    assert "nn-inversion" in shown.output and "utility:probe" in shown.output
    n = len(CellStore().entries())
    pruned = cli.invoke(app, ["cache", "prune", "--max-size", "1KB"])
    assert pruned.exit_code == 0, pruned.output
    assert CellStore().size() <= 1024 and len(CellStore().entries()) < n
    bad = cli.invoke(app, ["cache", "prune", "--max-size", "lots"])
    assert bad.exit_code == 2 and "--max-size 'lots' is not a size" in bad.output
    cleared = cli.invoke(app, ["cache", "clear"])
    assert cleared.exit_code == 0 and CellStore().entries() == []
