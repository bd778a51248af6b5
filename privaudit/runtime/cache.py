"""The cache directory every derived artefact lives in (``$PRIVAUDIT_CACHE``), and the lock
that lets concurrent runs and a pool's workers share its files."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


class CacheUnusable(ValueError):
    """The cache directory cannot be used at all: one line naming ``PRIVAUDIT_CACHE``."""


_WAY_OUT = "point PRIVAUDIT_CACHE at a directory you can write (or unset it: ~/.cache/privaudit)"


def _cache_root() -> Path:
    return Path(os.environ.get("PRIVAUDIT_CACHE") or Path.home() / ".cache" / "privaudit")


def cache_dir() -> Path:
    """Where derived artefacts (nearest-neighbour radii, POS vocabularies, pre-trained
    inverters, measured costs) are cached across runs: ``$PRIVAUDIT_CACHE``, default
    ``~/.cache/privaudit``. An existing directory that cannot be written is returned as is
    (read what it holds: :func:`cache_writable`); one that is a file, or cannot be made, is
    :class:`CacheUnusable`."""
    path = _cache_root()
    if path.is_dir():
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        what = "is a file" if path.exists() else f"cannot be created ({exc.strerror or exc})"
        raise CacheUnusable(
            f"The cache directory PRIVAUDIT_CACHE={path} {what}; {_WAY_OUT}."
        ) from None
    return path


def cache_writable() -> bool:
    """Whether new cache entries can be kept: tried, not asked (``access()`` passes root on a
    read-only file system). A read-only cache is still read."""
    probe = cache_dir() / f".probe-{os.getpid()}"
    try:
        os.close(os.open(probe, os.O_CREAT | os.O_WRONLY, 0o600))
        os.unlink(probe)
    except OSError:
        return False
    return True


def keep_entry(path: Path, write: Callable[[IO[bytes]], object]) -> bool:
    """Write a cache entry atomically (a temporary file beside ``path``, then a rename, so a
    concurrent reader never sees half a file): ``write(fh)`` fills it. Whether it was kept:
    a cache that takes no new files (read-only, full, gone) loses the entry and never fails
    the caller, who recomputes it next time. Every write into the cache goes through here
    or is guarded the same way."""
    tmp: str | None = None
    try:
        # the temporary file too: on a read-only cache, creating it is what fails
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        return False
    return True


def check_cache() -> str | None:
    """Before any work: :class:`CacheUnusable` for a cache directory that cannot be used,
    the one line to say for a read-only one (what it holds is used; nothing new is kept),
    else None."""
    path = cache_dir()
    if cache_writable():
        return None
    return (
        f"The cache directory PRIVAUDIT_CACHE={path} is read-only: what it holds is used, but "
        "nothing new is kept (pre-trained models are trained again each run, measured costs "
        f"are not saved); {_WAY_OUT} to keep them."
    )


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (none where ``fcntl`` is missing): concurrent
    runs and a pool's workers take turns on a shared cache file. The holder writes its pid
    into the lock file, and a process that has to wait says whom it waits for. A lock file
    that cannot be opened for writing (a read-only cache: nobody can write the entry) is no
    lock: the caller only reads."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: callers re-read before they write
        yield
        return
    try:
        handle = open(path, "a+")  # noqa: SIM115 - closed below, after the unlock
    except OSError:
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            print(
                f"privaudit: waiting for {holder}, which holds {path} (it is building "
                f"{path.stem}; this process reads it when done)",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(handle, fcntl.LOCK_EX)
        with contextlib.suppress(OSError):  # the note is for the waiters: never a failure
            handle.seek(0)
            handle.truncate()
            handle.write(f"process {os.getpid()} on {socket.gethostname()}\n")
            handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
