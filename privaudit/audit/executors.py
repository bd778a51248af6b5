"""Executors: where a grid's defense points run. The driver alone writes the result store.

- ``local`` with ``jobs == 1``: in this process, one point after another; each cell is
  persisted the moment it finishes.
- ``local`` with ``jobs > 1``: a pool of ``jobs`` worker processes (spawned, so torch's thread
  pools are not forked); each worker builds the grid's context once and gets
  ``cores // jobs`` torch threads. A point's cells are persisted when the point returns.
- ``ray``: each point is a Ray task on an existing cluster (``address="auto"`` or
  ``HOST:PORT``) or, with no address, on a local Ray instance started for the run, offline:
  no usage stats, no cloud-metadata probe, bound to the loopback address. Needs the optional
  extra ``privaudit[ray]``. When the grid's device is a GPU (``cuda*``, or ``auto`` on a
  cluster with GPUs), a point asks Ray for the share of a GPU its components declare
  (``Component.gpu``, the largest among its defense, evaluator and attacks) and runs on the
  GPU Ray assigns; a point that declares none runs on the CPU (:func:`ray_placement`).
  A local instance ends with the driver, however it ends: a watchdog
  (:mod:`privaudit.audit.raywatch`) kills its processes, Ray's agents included, when the
  driver closes it or dies.

Every worker runs its points on the grid's ``device`` (:mod:`privaudit.runtime.devices`).

A run's processes end with it: :func:`guard_run` makes SIGTERM stop the driver as Ctrl-C does
(:class:`Interrupted`, naming the ``--resume`` command); an interrupted pool's workers are
terminated; a worker whose driver died (``kill -9``) exits by itself within a second; and so
do the processes of a local Ray instance (its watchdog kills them).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from privaudit.audit import raywatch
from privaudit.audit.cells import compute, context_for
from privaudit.audit.config import GridConfig
from privaudit.audit.store import DiskFull, RunDir
from privaudit.params import PositiveInt, checked
from privaudit.runtime.devices import use_device

if TYPE_CHECKING:
    from privaudit.audit.cells import Context, Task

Put = Callable[[str, dict[str, Any]], None]
Started = Callable[["Task", str], None]  # a task's component (privatize, ...) has started
Records = list[tuple[str, dict[str, Any]]]
EXECUTORS = ("local", "ray")

#: How often a worker checks that its driver is alive (seconds).
PARENT_POLL_S = 0.5


class Interrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C (SIGINT) or SIGTERM. Finished cells are in the store; the
    message names the command that continues the run. A KeyboardInterrupt, so code that
    handles Ctrl-C handles SIGTERM alike."""

    def __init__(self, run_dir: Path, signum: int) -> None:
        super().__init__(run_dir, signum)
        self.run_dir, self.signum = Path(run_dir), signum

    @property
    def exit_code(self) -> int:
        """128 + the signal number, as a shell reports it: 130 for Ctrl-C, 143 for SIGTERM."""
        return 128 + self.signum

    def __str__(self) -> str:
        name = signal.Signals(self.signum).name
        if not RunDir(self.run_dir).config_json.is_file():  # stopped before the run began
            return f"Interrupted ({name}) before the run started; nothing was kept."
        return (
            f"Interrupted ({name}); finished cells are kept. Continue with: "
            f"privaudit run --resume {self.run_dir}"
        )


@contextlib.contextmanager
def guard_run(run_dir: Path) -> Iterator[Callable[[], None]]:
    """Within: SIGTERM raises :class:`Interrupted` (as Ctrl-C does, so the executor's cleanup
    runs and no worker is left behind), Ctrl-C becomes :class:`Interrupted` too, and a full
    disk (:class:`~privaudit.audit.store.DiskFull`) learns the run directory to resume. The
    previous SIGTERM handler is restored on the way out.

    Yields a checkpoint to call between cells: Python swallows an exception raised while a
    ``__del__`` or a weakref callback runs, so a SIGTERM landing there would otherwise be
    lost and the run would go on; the signal is remembered and the checkpoint raises it."""
    received: list[int] = []

    def on_term(signum: int, frame: Any) -> None:
        # A second SIGTERM while cleaning up gets the previous behaviour (by default: exit).
        signal.signal(signal.SIGTERM, previous)
        received.append(signum)
        raise Interrupted(run_dir, signum)

    def checkpoint() -> None:
        if received:
            raise Interrupted(run_dir, received[0])

    def quiet(unraisable: Any) -> None:
        # Swallowed in a finalizer, the interrupt is remembered and raised at the checkpoint:
        # Python's "Exception ignored in ... Traceback" for it would only alarm the reader.
        if not isinstance(unraisable.exc_value, Interrupted):
            hook(unraisable)

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, on_term) if main else None
    hook = sys.unraisablehook
    if main:
        sys.unraisablehook = quiet
    try:
        yield checkpoint
        checkpoint()  # a signal swallowed after the last checkpoint still ends as one
    except Interrupted:
        raise
    except KeyboardInterrupt:
        raise Interrupted(run_dir, signal.SIGINT) from None
    except DiskFull as exc:
        exc.run_dir = Path(run_dir)
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
            sys.unraisablehook = hook


def put_all(put: Put, records: Records) -> None:
    """Persist a returned point's every record, then re-raise an interrupt that came while
    doing so: its cells are finished work."""
    held: KeyboardInterrupt | None = None
    for key, record in records:
        try:
            put(key, record)
        except KeyboardInterrupt as exc:
            held = held or exc
    if held is not None:
        raise held


class LocalExecutor:
    @checked
    def __init__(self, jobs: PositiveInt = 1) -> None:
        self.jobs = jobs
        self._pool: Any = None
        self._futures: list[Any] = []

    def run(
        self,
        config: GridConfig,
        ctx: Context,
        tasks: list[Task],
        put: Put,
        on_start: Started | None = None,
    ) -> Iterator[tuple[Task, Records]]:
        """Compute ``tasks``, yielding each with its records. In this process (``jobs`` 1),
        ``on_start(task, component)`` is told each component as it starts; a pool runs the
        tasks in the order given, ``jobs`` at a time (nothing is told)."""
        if self.jobs == 1 or len(tasks) <= 1:
            for task in tasks:
                told = None if on_start is None else partial(on_start, task)
                yield task, compute(ctx, task, on_record=put, on_start=told)
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        threads = max(1, (os.cpu_count() or 1) // self.jobs)
        self._pool = ProcessPoolExecutor(
            max_workers=self.jobs,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker,
            initargs=(threads, os.getpid()),
        )
        payload = config.model_dump_json()
        futures = {self._pool.submit(work, payload, task): task for task in tasks}
        self._futures = list(futures)
        for future in as_completed(futures):
            records = future.result()
            put_all(put, records)
            yield futures[future], records

    def close(self) -> None:
        """Shut the pool down. When the run was cut short (Ctrl-C, SIGTERM, an error), the
        workers are terminated: a point in flight would otherwise keep computing, and keep
        its memory, after the driver has gone."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        end_pool(pool, cut_short=any(not f.done() for f in self._futures))


def end_pool(pool: Any, *, cut_short: bool) -> None:
    """Shut a process pool down: wait for its tasks, or, ``cut_short`` (Ctrl-C, SIGTERM, an
    error), kill its workers, which hold nothing to clean up (the driver writes every file);
    a worker left running would keep computing, and keep its memory, for minutes."""
    # The pool's own handles (private): the public API cannot stop a running task.
    workers = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=not cut_short, cancel_futures=True)
    if cut_short:
        for proc in workers:
            proc.kill()
        for proc in workers:
            proc.join(timeout=5)
        if manager is not None:  # it sees the workers gone and closes the pool's queues
            manager.join(timeout=5)


class RayExecutor:
    def __init__(self, address: str | None = None, jobs: int = 1) -> None:
        try:
            import ray
        except ImportError:
            raise ValueError(
                "The ray executor needs Ray: pip install 'privaudit[ray]' (or use --executor "
                "local)."
            ) from None
        self.ray = ray
        self.address = address
        self.jobs = jobs
        self._started = False
        self._watchdog: Any = None

    def run(
        self,
        config: GridConfig,
        ctx: Context,
        tasks: list[Task],
        put: Put,
        on_start: Started | None = None,
    ) -> Iterator[tuple[Task, Records]]:
        ray = self.ray
        if not ray.is_initialized():
            if self.address:
                with _env(RAY_OFFLINE_ENV):  # this driver reports no usage
                    ray.init(address=self.address, log_to_driver=False)
            else:
                cpus = max(self.jobs, 1) if self.jobs > 1 else None
                # Every process of the instance is started here and inherits this environment,
                # the watchdog's marker included.
                marker = self._watch()
                with _env(RAY_OFFLINE_ENV | RAY_LOCAL_ENV | marker), _local_instance(ray):
                    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
            self._started = True
        remote = ray.remote(num_cpus=1)(work)
        payload = config.model_dump_json()
        gpus = float(ray.cluster_resources().get("GPU", 0))
        pending = {}
        for task in tasks:
            share, device = ray_placement(config, ctx, task, gpus)
            ref = remote.options(num_gpus=share).remote(payload, task, device)
            pending[ref] = task
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                task = pending.pop(ref)
                records = ray.get(ref)
                put_all(put, records)
                yield task, records

    def _watch(self) -> dict[str, str]:
        """Start the watchdog that ends the local instance with this driver; the marker its
        processes must carry (none where the watchdog cannot see environments)."""
        if not raywatch.available():
            return {}
        token = f"{os.getpid()}-{secrets.token_hex(8)}"
        self._watchdog = raywatch.start(token)
        return {raywatch.MARKER: token}

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:  # after shutdown: it kills what Ray left (agents linger)
            raywatch.stop(watchdog)


#: Ray's usage statistics off (they are on by default for ``ray.init``).
RAY_OFFLINE_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}
#: A local instance: loopback only. Without this Ray finds its node address by a UDP
#: ``connect`` to 8.8.8.8 (in the driver and in each agent), meant for multi-node clusters.
RAY_LOCAL_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    """Set environment variables the user has not set themselves, and restore them after."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


@contextlib.contextmanager
def _local_instance(ray: Any) -> Iterator[None]:
    """Start a local Ray instance that contacts nothing outside this machine (Ray 2.x):

    - no API server (the dashboard process): with ``include_dashboard=False`` Ray still starts
      it for one module, usage statistics, which asks the cloud-metadata endpoints
      (169.254.169.254, metadata.google.internal) which cloud it runs on even when usage
      statistics are off (``UsageStatsHead.run``). A grid needs no dashboard, and Ray treats
      "no API server" as a dashboard that did not start, which it allows when none was asked
      for;
    - the driver's node address is the loopback one (what :data:`RAY_LOCAL_ENV` tells the
      processes started here; the driver read that setting when it imported Ray).

    Both are Ray internals: where a Ray version moves them, the instance starts as usual and
    the offline test (tests/test_lifecycle.py) reports the connection."""
    private = getattr(ray, "_private", None)
    patches = [
        (getattr(private, "services", None), "start_api_server", lambda *a, **k: (None, None)),
        (getattr(private, "ray_constants", None), "ENABLE_RAY_CLUSTER", False),
    ]
    saved = []
    for module, name, value in patches:
        if module is not None and hasattr(module, name):
            saved.append((module, name, getattr(module, name)))
            setattr(module, name, value)
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def ray_placement(
    config: GridConfig, ctx: Context, task: Task, cluster_gpus: float
) -> tuple[float, str]:
    """``(share of a GPU to request, device the point runs on)`` for a Ray task: the largest
    ``gpu`` hint among the point's defense, evaluator (unless its utility is cached) and
    attacks to compute, when the grid's device is ``cuda*`` (or ``auto`` and the cluster has
    GPUs); Ray then makes the assigned GPU the task's ``cuda``. Otherwise ``(0, cpu)`` for a
    GPU grid (Ray hides the GPUs from such a task), or the grid's device as it is."""
    device = config.device
    wants_gpu = device.startswith("cuda") or (device == "auto" and cluster_gpus > 0)
    if not wants_gpu:
        return 0.0, device
    if cluster_gpus <= 0:
        raise ValueError(
            f"device {device!r}: the Ray cluster has no GPU; use device auto or cpu, or add "
            "GPU nodes."
        )
    parts = [ctx._specs[task.point.spec], *(ctx.attacks[a] for a in task.attack_keys)]
    if task.cached_utility is None:
        parts.append(ctx.evaluator)
    share = max(float(getattr(type(c), "gpu", 0.0)) for c in parts)
    return (min(share, 1.0), "cuda") if share > 0 else (0.0, "cpu")


def make_executor(
    kind: str, *, jobs: int = 1, address: str | None = None
) -> LocalExecutor | RayExecutor:
    if kind == "local":
        if address:
            raise ValueError("--address is for the ray executor; add --executor ray.")
        return LocalExecutor(jobs)
    if kind == "ray":
        return RayExecutor(address, jobs)
    raise ValueError(f"Unknown executor {kind!r}; use one of {', '.join(EXECUTORS)}.")


def _init_worker(threads: int, driver: int) -> None:
    import torch

    torch.set_num_threads(threads)
    # Workers' own bars would interleave with the driver's; the driver shows the cells.
    os.environ["TQDM_DISABLE"] = "1"
    # tqdm's default lock is a process-shared semaphore, which a worker ended mid-point would
    # leave behind ("leaked semaphore" at exit); a worker's bars need only a thread lock.
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())
    # Ctrl-C, and `timeout`'s SIGTERM, reach the whole process group: the driver handles
    # them and ends the workers, so a run stops one way however it is signalled.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=_exit_with, args=(driver,), daemon=True, name="driver-watch").start()


def _exit_with(driver: int) -> None:
    """Exit this worker when its driver is gone (``kill -9``: no cleanup ran there). Polling
    the parent pid is portable; an orphan is re-parented, so the pid changes."""
    while os.getppid() == driver:
        time.sleep(PARENT_POLL_S)
    os._exit(1)


def work(config_json: str, task: Task, device: str | None = None) -> Records:
    """A worker's unit: build (once per process) the grid's context and compute one task, on
    ``device`` (default: the grid's)."""
    config = GridConfig.model_validate_json(config_json)
    with use_device(device or config.device):
        return compute(context_for(config), task)
