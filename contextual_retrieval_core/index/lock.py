"""An OS file lock on an index folder, so two `contextual-retrieval index` runs never update one
index at once (the second waits for the first, or stops with a clear message).

The lock is ``fcntl.flock`` (POSIX) or ``msvcrt.locking`` (Windows) on ``<folder>/.lock``: the OS
releases it when the process ends, so a killed run never leaves a stale lock behind.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from contextual_retrieval_core.errors import ContextualRetrievalError, InputError

__all__ = ["folder_lock", "IndexLockedError", "LOCK_NAME"]

LOCK_NAME = ".lock"


class IndexLockedError(ContextualRetrievalError, RuntimeError):
    """Another process holds the index folder's lock."""


def _try_lock(fd: int) -> bool:
    try:
        if sys.platform == "win32":
            import msvcrt

            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _unlock(fd: int) -> None:
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    else:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)


@contextmanager
def folder_lock(folder: str | os.PathLike[str], wait: float = 0.0) -> Iterator[None]:
    """Hold the lock on `folder` (created if missing) for the ``with`` block.

    Args:
        folder: the index folder.
        wait: seconds to wait for another holder to finish; 0 fails at once.

    Raises:
        IndexLockedError: the lock was still held after `wait` seconds, naming the holder's pid
            when it wrote one and the fix (``--lock-wait``).
    """
    if wait < 0:
        raise InputError(f"wait must be >= 0 seconds, got {wait!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / LOCK_NAME
    fd = os.open(file, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait
    try:
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() if hasattr(os, "pread") else ""
                raise IndexLockedError(
                    f"another contextual-retrieval run{f' (pid {holder})' if holder else ''} is updating {folder} "
                    f"({file} is locked); wait for it to finish, or pass --lock-wait SECONDS to wait for it"
                )
            time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0) if hasattr(os, "pwrite") else None
        try:
            yield
        finally:
            _unlock(fd)
    finally:
        os.close(fd)
