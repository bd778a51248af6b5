"""Issue 15, a run's life cycle: no corpus text in the run directory unless asked for; SIGTERM
and ``kill -9`` leave no worker behind and ``--resume`` finishes; a full disk is one line and
never a truncated file; a local Ray instance contacts nothing outside the machine."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

from privaudit.api import Defense, Release
from privaudit.audit.config import PRESETS, load_config
from privaudit.cli import EXIT_DISK_FULL, EXIT_TERMINATED, app
from privaudit.params import PositiveFloat

REPO = Path(__file__).resolve().parents[1]
PRIVAUDIT = Path(sys.executable).with_name("privaudit")
runner = CliRunner()


class Sleepy(Defense):
    """Slow enough that a grid of it is still running when a test signals the driver."""

    name: ClassVar[str] = "sleepy"
    knob: ClassVar[str | None] = "eta"

    def __init__(self, eta: PositiveFloat = 1.0, backbone: str | None = None) -> None:
        self.eta, self.backbone = eta, backbone

    def privatize(self, texts, *, rng) -> Release:
        time.sleep(0.5)
        return Release("text", texts=[t.upper() for t in texts], meta={"defense": self.name})


# ---- corpus text in the run directory -------------------------------------------------------


def _corpus_texts() -> list[str]:
    """Every text of the smoke corpus that is long enough to be unmistakable."""
    from privaudit.audit.cells import context_for

    corpus = context_for(load_config("smoke")).corpus
    return [t for split in corpus.splits for t in corpus.texts(split) if len(t) >= 20]


def _hits(run_dir: Path, texts: list[str]) -> dict[str, int]:
    """How many of ``texts``, or of their 20-character pieces, each file holds (every file,
    text or binary, as bytes)."""
    needles = {t[i : i + 20].encode() for t in texts for i in range(0, len(t) - 19, 10)}
    needles |= {t.encode() for t in texts}
    hits = {}
    for path in sorted(run_dir.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found = sum(needle in data for needle in needles)
            if found:
                hits[str(path.relative_to(run_dir))] = found
    return hits


def _run(*args: str):
    result = runner.invoke(app, ["run", *args, "--no-progress"])
    assert result.exit_code == 0, result.output
    return result


def test_run_dir_holds_no_corpus_text_unless_asked(tmp_path) -> None:
    texts = _corpus_texts()
    plain = tmp_path / "plain"
    _run("--preset", "smoke", "--run-dir", str(plain))
    assert _hits(plain, texts) == {}  # the none defense's release is the original: not kept
    assert not (plain / "examples.json").exists()

    # The report says in one line what to rerun to get examples.
    report = runner.invoke(app, ["report", str(plain), "--show-examples"])
    assert report.exit_code == 0, report.output
    assert f"privaudit run --resume {plain} --show-examples" in report.output
    assert len(report.output.strip().splitlines()) == 2  # that line, then the report's path

    # Asked for on --resume: nothing is recomputed (no cell key changes), the examples appear.
    before = pd.read_csv(plain / "results.csv")
    _run("--resume", str(plain), "--show-examples")
    assert json.loads((plain / "run.json").read_text())["computed"] == 0
    pd.testing.assert_frame_equal(pd.read_csv(plain / "results.csv"), before)
    assert set(_hits(plain, texts)) == {"examples.json"}  # drawn again, not stored in cells

    # The same pairs as a run that asked from the start (drawn from the same streams).
    asked = tmp_path / "asked"
    _run("--preset", "smoke", "--run-dir", str(asked), "--show-examples")
    examples = json.loads((asked / "examples.json").read_text())
    assert examples == json.loads((plain / "examples.json").read_text())
    assert {e["defense"] for e in examples} == {"none", "t2t"}
    assert any(e["original"] == e["released"] for e in examples)  # none: the very text
    assert json.loads((asked / "config.json").read_text())["show_examples"] is True
    assert "examples.json" in _hits(asked, texts)

    # A config that does not ask takes every stored text away again.
    _run("--preset", "smoke", "--run-dir", str(asked))
    assert _hits(asked, texts) == {}


@pytest.mark.slow
def test_no_corpus_text_with_entity_and_attribute_attacks(tmp_path) -> None:
    """The attacks whose predictions are strings (entities, HaS surrogates) store scores only."""
    from privaudit.outputs import run_grid

    smoke = PRESETS["smoke"]
    data = {
        **smoke,
        "corpus": {**smoke["corpus"], "limits": {"train": 60, "test": 30, "aux": 30}},
        "defenses": [{"name": "none"}, {"name": "has"}],
        "attacks": ["ner", "has-deanonymization", "attribute-inference"],
    }
    result = run_grid(load_config(data), run_dir=tmp_path / "r", progress=False)
    assert (result.frame["status"] != "failed").all(), result.frame["reason"].tolist()
    assert _hits(result.run_dir, _corpus_texts()) == {}


# ---- processes --------------------------------------------------------------------------------


POINTS = 8  # the slow grid's points (one attack cell each)


def _cells_done(run_dir: Path) -> int:
    records = [json.loads(p.read_text()) for p in (run_dir / "cells").glob("*.json")]
    return sum(r["kind"] == "cell" for r in records)


def _slow_grid(tmp_path: Path) -> Path:
    data = {
        **PRESETS["smoke"],
        "name": "slow",
        "defenses": [
            {"name": "tests.test_lifecycle:Sleepy", "knob_values": list(range(1, POINTS + 1))}
        ],
    }
    path = tmp_path / "slow.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _start(args: list[str]) -> subprocess.Popen:
    env = os.environ | {"PYTHONPATH": str(REPO)}  # the workers import tests.test_lifecycle
    return subprocess.Popen(
        [str(PRIVAUDIT), *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _workers_busy(driver: subprocess.Popen, run_dir: Path, timeout: float = 240) -> list:
    """The driver's worker processes, once both exist and a first point is stored."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert driver.poll() is None, driver.communicate()[0]
        children = psutil.Process(driver.pid).children(recursive=True)
        workers = [p for p in children if "multiprocessing" in " ".join(_cmdline(p))]
        if len(workers) >= 2 and any((run_dir / "cells").glob("*.json")):
            return children
        time.sleep(0.2)
    raise AssertionError("the workers did not start in time")


def _cmdline(proc) -> list[str]:
    import psutil

    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def _survivors(procs: list, timeout: float) -> list:
    """The processes still alive (zombies count as gone) after ``timeout`` seconds."""
    import psutil

    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for proc in procs:
            try:
                if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def test_sigterm_stops_the_run_ends_its_workers_and_resume_finishes(tmp_path) -> None:
    pytest.importorskip("psutil")
    run_dir = tmp_path / "run"
    args = ["run", "--config", str(_slow_grid(tmp_path)), "--run-dir", str(run_dir)]
    driver = _start([*args, "--jobs", "2", "--no-progress"])
    try:
        children = _workers_busy(driver, run_dir)
        driver.send_signal(signal.SIGTERM)
        output, _ = driver.communicate(timeout=30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert driver.returncode == EXIT_TERMINATED == 143, output
    assert (
        f"Interrupted (SIGTERM); finished cells are kept. Continue with: "
        f"privaudit run --resume {run_dir}" in output
    )
    assert "Traceback" not in output, output
    assert _survivors(children, timeout=5) == []
    kept = _cells_done(run_dir)
    assert 0 < kept < POINTS  # stopped part-way, finished points kept

    resumed = subprocess.run(
        [str(PRIVAUDIT), "run", "--resume", str(run_dir), "--no-progress"],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["finished"] and meta["computed"] == POINTS - kept


def test_a_sigterm_swallowed_by_a_finaliser_still_stops_the_run(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python ignores an exception raised while a ``__del__`` runs (CI once saw SIGTERM land
    in ``regex``'s): the guard remembers the signal and its checkpoint raises it, and the
    swallowed one prints no "Exception ignored ... Traceback" (a test of the ``--jobs 2``
    stop found one in the driver's output); any other unraisable still reaches the hook."""
    from privaudit.audit.executors import Interrupted, guard_run, put_all

    reported: list[BaseException | None] = []

    def record(unraisable: Any) -> None:
        reported.append(unraisable.exc_value)

    monkeypatch.setattr(sys, "unraisablehook", record)

    class Finaliser:
        def __del__(self) -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # the handler's exception is swallowed here

    class Broken:
        def __del__(self) -> None:
            raise ValueError("a finaliser's own error")

    stored: list[str] = []
    with pytest.raises(Interrupted) as caught, guard_run(tmp_path) as checkpoint:
        Broken()  # not an interrupt: reported as before
        Finaliser()  # collected at once: the signal arrives inside __del__
        stored.append("after the swallowed signal")

        def put(key: str, record: dict) -> None:
            stored.append(key)
            checkpoint()

        put_all(put, [("a", {}), ("b", {})])  # every returned record is kept, then it stops
        stored.append("never reached")
    assert caught.value.exit_code == EXIT_TERMINATED
    assert stored == ["after the swallowed signal", "a", "b"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    assert [type(e) for e in reported] == [ValueError]  # the interrupt was not reported
    assert sys.unraisablehook is record  # the guard's hook is gone with the guard


def test_workers_exit_when_the_driver_is_killed(tmp_path) -> None:
    pytest.importorskip("psutil")
    run_dir = tmp_path / "run"
    args = ["run", "--config", str(_slow_grid(tmp_path)), "--run-dir", str(run_dir)]
    driver = _start([*args, "--jobs", "2", "--no-progress"])
    children: list = []
    try:
        children = _workers_busy(driver, run_dir)
        driver.kill()  # kill -9: nothing runs in the driver
        driver.communicate(timeout=30)
        assert _survivors(children, timeout=5) == []
    finally:
        for proc in _survivors(children, timeout=0):
            proc.kill()


# ---- a full disk ------------------------------------------------------------------------------


def _full_disk(monkeypatch, when) -> None:
    """``DataFrame.to_csv`` writes half its bytes to the target ``when(path)`` says, then
    fails as a full disk does."""
    original = pd.DataFrame.to_csv

    def to_csv(frame, path=None, *args, **kwargs):
        if path is not None and when(Path(path)):
            text = original(frame, None, *args, **kwargs)
            Path(path).write_text(text[: len(text) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(frame, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv)


def _no_partial_files(run_dir: Path) -> None:
    leftovers = [
        p.name
        for p in run_dir.rglob("*")
        if p.is_file() and (p.stat().st_size == 0 or p.name.endswith(".tmp"))
    ]
    assert leftovers == []
    if (run_dir / "results.csv").exists():
        pd.read_csv(run_dir / "results.csv")  # whole, if present


@pytest.mark.parametrize("target", ["results.csv", "leaderboard.csv"])
def test_a_full_disk_is_one_line_and_leaves_no_partial_file(target, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    with monkeypatch.context() as patch:
        _full_disk(patch, lambda path: target in path.name)
        result = runner.invoke(
            app, ["run", "--preset", "smoke", "--run-dir", str(run_dir), "--no-progress"]
        )
    assert result.exit_code == EXIT_DISK_FULL == 4, result.output
    lines = result.output.strip().splitlines()  # after the estimate, which --no-progress keeps
    assert lines[0].startswith("Grid: ") and lines[-1] == (
        f"Error: the disk is full writing {run_dir / target}; free space and run "
        f"privaudit run --resume {run_dir}"
    )
    assert result.output.count("Error") == 1
    _no_partial_files(run_dir)
    assert any((run_dir / "cells").glob("*.json"))  # finished cells kept
    resumed = runner.invoke(app, ["run", "--resume", str(run_dir), "--no-progress"])
    assert resumed.exit_code == 0, resumed.output
    assert (run_dir / target).stat().st_size > 0
    _no_partial_files(run_dir)


def test_disk_full_from_a_plot_or_outside_a_run(tmp_path, monkeypatch) -> None:
    """A plot (not a table) that cannot be saved; an ENOSPC from a write that is not ours."""
    import matplotlib.figure

    from privaudit.cli.base import user_errors

    def no_space(self, *args, **kwargs):
        Path(args[0]).write_bytes(b"\x89PNG half")
        raise OSError(errno.ENOSPC, "No space left on device")

    png = tmp_path / "p.png"
    with monkeypatch.context() as patch:
        patch.setattr(matplotlib.figure.Figure, "savefig", no_space)
        from privaudit.outputs.plots import save_figure

        with pytest.raises(OSError, match=f"the disk is full writing {png}"):
            save_figure(matplotlib.figure.Figure(), png)
    assert list(tmp_path.iterdir()) == []

    @user_errors
    def command() -> None:
        raise OSError(errno.EDQUOT, "Disk quota exceeded", str(tmp_path / "x"))

    import typer

    with pytest.raises(typer.Exit) as exit_:
        command()
    assert exit_.value.exit_code == EXIT_DISK_FULL


# ---- Ray, offline -----------------------------------------------------------------------------

# Loaded by every Python process of the run (driver, Ray's dashboard/agents, workers) through
# PYTHONPATH: records each socket connect/sendto/DNS lookup that leaves the machine.
_SITECUSTOMIZE = """
import os, socket, sys

_OWN = {socket.gethostname()}

def _log(event, args):
    if event not in ("socket.connect", "socket.sendto", "socket.getaddrinfo"):
        return
    if event == "socket.getaddrinfo":
        host = args[0]
    else:
        address = args[1] if event == "socket.connect" else args[-1]
        if not isinstance(address, tuple):  # a unix socket
            return
        host = address[0]
    host = host.decode() if isinstance(host, bytes) else str(host)
    if host in _OWN or host in ("", "localhost", "::1", "0.0.0.0", "::") or host.startswith(
        ("127.", "::ffff:127.")
    ):
        return
    with open(os.path.join(os.environ["PRIVAUDIT_NET_LOG"], str(os.getpid())), "a") as fh:
        fh.write(f"{event} {host} {' '.join(sys.argv[:2])}\\n")

sys.addaudithook(_log)
"""

_RAY_RUN = """
from privaudit.audit.config import load_config
from privaudit.outputs import run_grid
frame = run_grid(load_config("smoke"), run_dir={run_dir!r}, progress=False, executor="ray",
                 jobs=2).frame
assert (frame["status"] == "ok").all(), frame
"""


def _outside_connects(strace_log: Path) -> list[str]:
    """connect/sendto lines of an ``strace -f`` log whose address is not loopback or local."""
    found = []
    for line in strace_log.read_text(errors="replace").splitlines():
        if not any(call in line for call in ("connect(", "sendto(", "sendmsg(")):
            continue
        if "AF_INET" not in line:  # unix sockets, netlink
            continue
        if any(local in line for local in ('"127.', '"::1"', '"::ffff:127.')):
            continue
        found.append(line)
    return found


def test_ray_run_contacts_nothing_outside(tmp_path) -> None:
    """A smoke grid on a local Ray instance: no Python process of it connects or sends to, or
    looks up, any non-loopback address (an audit hook in every process); where ``strace`` can
    trace, no process at all does (Ray's C++ GCS and raylet included). It checks what this
    machine's run does, not every code path of every Ray version."""
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install privaudit[ray])")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(textwrap.dedent(_SITECUSTOMIZE))
    log = tmp_path / "net"
    log.mkdir()
    env = os.environ | {
        "PYTHONPATH": os.pathsep.join([str(hook), str(REPO)]),
        "PRIVAUDIT_NET_LOG": str(log),
    }
    for key in ("RAY_USAGE_STATS_ENABLED", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"):
        env.pop(key, None)  # what a user has by default
    command = [sys.executable, "-c", _RAY_RUN.format(run_dir=str(tmp_path / "run"))]
    strace = shutil.which("strace")
    if strace and subprocess.run([strace, "-o", os.devnull, "true"]).returncode == 0:
        trace = tmp_path / "strace.log"
        command = [strace, "-f", "-e", "trace=connect,sendto,sendmsg", "-o", str(trace), *command]
    else:
        trace = None
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=500)
    assert done.returncode == 0, done.stdout + done.stderr
    logged = sorted({line for f in log.iterdir() for line in f.read_text().splitlines()})
    assert logged == []
    if trace is not None:
        assert _outside_connects(trace) == []


_RAY_SLOW = """
from privaudit.audit.config import load_config
from privaudit.outputs import run_grid
run_grid(load_config({config!r}), run_dir={run_dir!r}, progress=False, executor="ray", jobs=2)
"""


def test_a_local_ray_instance_ends_with_its_driver(tmp_path) -> None:
    """``kill -9`` of a driver that started a local Ray instance: none of the processes it
    started (Ray's GCS and raylet, their agents, the workers) outlives it by more than a few
    seconds. Ray's own agents used to live on, re-parented, for over a minute."""
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install privaudit[ray])")
    psutil = pytest.importorskip("psutil")
    run_dir = tmp_path / "run"
    script = _RAY_SLOW.format(config=str(_slow_grid(tmp_path)), run_dir=str(run_dir))
    driver = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    started: list = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # Ray's agents are up and a first point is stored
            assert driver.poll() is None, driver.communicate()[0]
            started = psutil.Process(driver.pid).children(recursive=True)
            titles = " ".join(" ".join(_cmdline(p)) for p in started)
            if "DashboardAgent" in titles and any((run_dir / "cells").glob("*.json")):
                break
            time.sleep(0.5)
        else:
            raise AssertionError("the Ray run did not start in time")
        driver.kill()  # kill -9: nothing runs in the driver
        driver.communicate(timeout=30)
        left = _survivors(started, timeout=10)
        assert [" ".join(_cmdline(p)).strip() or p.name() for p in left] == []
    finally:
        for proc in _survivors(started, timeout=0):
            proc.kill()


def test_a_sigterm_during_the_pretraining_ends_its_child_at_once(tmp_path) -> None:
    """Issue 50: the inverter pre-trains in a child process. A SIGTERM to the run alone (not
    its process group, as `kill` or a scheduler sends it) ends the child too, at once, not
    after its minutes of training; the run says how to continue."""
    psutil = pytest.importorskip("psutil")
    geia = {"n_layer": 1, "n_memory": 2, "public_docs": 2000, "pretrain_epochs": 50}
    data = {
        **PRESETS["smoke"],
        "name": "pretrain-stop",
        "defenses": [{"name": "none"}],
        "attacks": [{"name": "geia", "params": geia | {"max_tokens": 16}}],
    }
    config = tmp_path / "g.yaml"
    config.write_text(yaml.safe_dump(data), encoding="utf-8")
    run_dir = tmp_path / "run"
    driver = subprocess.Popen(
        [
            str(PRIVAUDIT),
            "run",
            "--config",
            str(config),
            "--run-dir",
            str(run_dir),
            "--no-progress",
        ],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO), "PRIVAUDIT_CACHE": str(tmp_path / "cache")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        children: list = []
        while not children and time.monotonic() < deadline and driver.poll() is None:
            kids = psutil.Process(driver.pid).children()
            children = [p for p in kids if "spawn_main" in " ".join(p.cmdline())]
            time.sleep(0.5)
        assert children, "no pre-training child started"
        time.sleep(5)  # the child is importing or training
        driver.send_signal(signal.SIGTERM)
        output, _ = driver.communicate(timeout=60)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    assert driver.returncode == EXIT_TERMINATED, output
    assert "Interrupted (SIGTERM)" in output, output
    assert _survivors(children, timeout=10) == []
    assert not list((tmp_path / "cache" / "inverters").glob("*.pt"))
