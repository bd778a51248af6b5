"""Ends a local Ray instance's processes when the driver that started it dies.

Ray's GCS and raylet die with the driver, but the processes the raylet starts (its
``DashboardAgent`` and ``RuntimeEnvAgent``, the workers) are re-parented and live on until
they notice, about a minute later. So the driver starts this watchdog with a pipe on its
standard input, and starts Ray with a marker in its environment (:data:`MARKER` = a token
unique to the run), which every process of the instance inherits. When the pipe closes — the
driver closed it after ``ray.shutdown()``, or the driver died, ``kill -9`` included — the
watchdog kills every process of the instance (:class:`Tracker`), and exits.

Run as a script (``python raywatch.py TOKEN``): it imports only the standard library, so it
starts at once whatever the driver's ``sys.path``. It reads ``/proc`` (Linux); elsewhere the
driver does not start it.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

#: The environment variable that marks a local Ray instance's processes.
MARKER = "PRIVAUDIT_RAY_OWNER"
#: How often the watchdog looks for the instance's new processes (seconds).
POLL_S = 0.5
#: How long the watchdog keeps killing (a process being killed may have started another).
SETTLE_S = 5.0


def available() -> bool:
    """Whether processes' environments can be read (Linux's ``/proc``)."""
    return Path("/proc/self/environ").is_file()


Proc = tuple[int, bytes]  # (pid, start time): a pid the kernel has reused is another process


def _table() -> dict[Proc, int]:
    """Every live process as ``{(pid, start time): parent pid}`` (``/proc/PID/stat``)."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # gone
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()  # the name, in (), may hold spaces
        if fields[0] != b"Z":  # a zombie is dead already
            table[(int(entry.name), fields[19])] = int(fields[1])
    return table


def _is_marked(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return needle in fh.read().split(b"\0")
    except OSError:  # gone, or not ours
        return False


class Tracker:
    """The processes of the instance marked with ``token``, followed while they live: a
    process is the instance's when its environment holds the marker, or when its parent is
    the instance's. Ray's agents and workers rename themselves (``ray::DashboardAgent``),
    which overwrites what ``/proc`` shows of their environment; their parent, the raylet,
    keeps it, so each is recognised by the one or the other while the raylet lives, and
    remembered after."""

    def __init__(self, token: str) -> None:
        self.needle = f"{MARKER}={token}".encode()
        self.ours: set[Proc] = set()
        me = os.getpid()
        self.me = next(p for p in _table() if p[0] == me)

    def update(self) -> None:
        """Look at every process once more."""
        table = _table()
        self.ours &= set(table)  # forget the processes that have ended
        since = int(self.me[1])  # only a process started after this one can be marked
        for proc in table:
            fresh = proc not in self.ours and proc != self.me and int(proc[1]) >= since
            if fresh and _is_marked(proc[0], self.needle):
                self.ours.add(proc)
        by_pid = {pid for pid, _ in self.ours}
        grew = True
        while grew:  # children of the instance's processes, theirs, ...
            grew = False
            for proc, parent in table.items():
                if parent in by_pid and proc not in self.ours and proc != self.me:
                    self.ours.add(proc)
                    by_pid.add(proc[0])
                    grew = True

    def kill(self, settle: float = SETTLE_S) -> None:
        """SIGKILL every process of the instance, again until none is left (or ``settle``
        seconds have passed: a process being killed may have started another)."""
        deadline = time.monotonic() + settle
        while True:
            self.update()
            if not self.ours or time.monotonic() > deadline:
                return
            for pid, _ in self.ours:
                with contextlib.suppress(ProcessLookupError, PermissionError):  # gone, not ours
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)


def start(token: str) -> subprocess.Popen[bytes]:
    """Start the watchdog for ``token``: its own session (Ctrl-C at the terminal does not
    reach it; the driver ends the run, then closes the pipe), no marker in its environment.
    Close its ``stdin`` to end it (after killing what is left)."""
    env = {k: v for k, v in os.environ.items() if k != MARKER}
    return subprocess.Popen(
        [sys.executable, "-I", str(Path(__file__).resolve()), token],  # -I: stdlib only
        stdin=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )


def stop(watchdog: subprocess.Popen[bytes]) -> None:
    """Close the watchdog's pipe: it kills what is left of the instance, and exits."""
    if watchdog.stdin is not None:
        watchdog.stdin.close()
    try:
        watchdog.wait(timeout=SETTLE_S + 5)
    except subprocess.TimeoutExpired:  # never expected: it only reads /proc
        watchdog.kill()
        watchdog.wait()


def main(token: str) -> None:
    """Follow the instance until the pipe on stdin closes (the driver closed it, or the kernel
    did when the driver died), then kill it."""
    tracker = Tracker(token)
    while True:
        tracker.update()
        ready, _, _ = select.select([sys.stdin], [], [], POLL_S)
        if ready and not os.read(sys.stdin.fileno(), 4096):  # end of file
            break
    tracker.kill()


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver decides when Ray ends
    main(sys.argv[1])
