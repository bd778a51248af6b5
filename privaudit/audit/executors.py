"""Executors: where a grid's defense points run. The driver alone writes the result store.

- ``local`` with ``jobs == 1``: in this process, one point after another; each cell is
  persisted the moment it finishes.
- ``local`` with ``jobs > 1``: a pool of ``jobs`` worker processes (spawned, so torch's thread
  pools are not forked); each worker builds the grid's context once and gets
  ``cores // jobs`` torch threads. A point's cells are persisted when the point returns.
- ``ray``: each point is a Ray task on an existing cluster (``address="auto"`` or
  ``HOST:PORT``) or, with no address, on a local Ray instance started for the run. Needs the
  optional extra ``privaudit[ray]``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from privaudit.audit.cells import compute, context_for
from privaudit.params import PositiveInt, checked

if TYPE_CHECKING:
    from privaudit.audit.cells import Context, Task
    from privaudit.audit.config import GridConfig

Put = Callable[[str, dict[str, Any]], None]
Records = list[tuple[str, dict[str, Any]]]
EXECUTORS = ("local", "ray")


class LocalExecutor:
    @checked
    def __init__(self, jobs: PositiveInt = 1) -> None:
        self.jobs = jobs
        self._pool: Any = None

    def run(
        self, config: GridConfig, ctx: Context, tasks: list[Task], put: Put
    ) -> Iterator[tuple[Task, Records]]:

        if self.jobs == 1 or len(tasks) <= 1:
            for task in tasks:
                yield task, compute(ctx, task, on_record=put)
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor, as_completed

        threads = max(1, (os.cpu_count() or 1) // self.jobs)
        self._pool = ProcessPoolExecutor(
            max_workers=self.jobs, mp_context=multiprocessing.get_context("spawn"),
            initializer=_init_worker, initargs=(threads,),
        )  # fmt: skip
        payload = config.model_dump_json()
        futures = {self._pool.submit(work, payload, task): task for task in tasks}
        for future in as_completed(futures):
            records = future.result()
            for key, record in records:
                put(key, record)
            yield futures[future], records

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


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

    def run(
        self, config: GridConfig, ctx: Context, tasks: list[Task], put: Put
    ) -> Iterator[tuple[Task, Records]]:
        ray = self.ray
        if not ray.is_initialized():
            if self.address:
                ray.init(address=self.address, log_to_driver=False)
            else:
                cpus = max(self.jobs, 1) if self.jobs > 1 else None
                ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
            self._started = True
        remote = ray.remote(num_cpus=1)(work)
        payload = config.model_dump_json()
        pending = {remote.remote(payload, task): task for task in tasks}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                task = pending.pop(ref)
                records = ray.get(ref)
                for key, record in records:
                    put(key, record)
                yield task, records

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False


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


def _init_worker(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    # Workers' own bars would interleave with the driver's; the driver shows the cells.
    os.environ["TQDM_DISABLE"] = "1"


def work(config_json: str, task: Task) -> Records:
    """A worker's unit: build (once per process) the grid's context and compute one task."""
    from privaudit.audit.config import GridConfig

    return compute(context_for(GridConfig.model_validate_json(config_json)), task)
