"""Disk space for a run's contexts: checked before anything is paid for, and a little set aside so
that the answers already paid for still land when the disk fills up mid-run.

`SpaceReserve` estimates what a run's contexts take in the store's SQLite file and its write-ahead
log, refuses to start (`StoreFullError`, naming the folder, the space needed and the space free)
when the disk cannot hold them, and keeps a reserve file next to the store for the whole run. A
write that then fails for space frees the reserve (`release`) and is tried again; the run stops
sending, the answers in flight are stored in the freed space, and the run ends with
`StoreFullError` naming the folder and the space still needed. A store that is not a local file
(":memory:", PostgreSQL) needs none of this: every method does nothing.

Each run has a reserve file of its own (`<store>.reserve-<pid>-<random>`), locked (`flock`) while
the run holds it, so that runs sharing a store neither free nor reuse each other's reserve. A run
that was killed leaves its file unlocked; the next run deletes it before measuring the free space.
(Without `fcntl`, on Windows, a killed run's reserve file stays until it is deleted by hand.)
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import threading
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: a killed run's reserve file stays
    fcntl = None  # type: ignore[assignment]

from contextual_retrieval_core.store.context_store import ContextStore
from contextual_retrieval_core.store.errors import StoreFullError

__all__ = ["SpaceReserve", "BYTES_PER_CONTEXT", "mb"]

#: what one stored context takes, row and index entries, with room to spare (a context is
#: 50-100 tokens, about 500 bytes; its key, ids and usage about as much again)
BYTES_PER_CONTEXT = 2048
#: the write-ahead log grows up to SQLite's auto-checkpoint (1000 pages of 4 KiB) before it is reused
_WAL_BYTES = 1000 * 4096
#: the reserve: room for the commits of the answers in flight when the disk fills
_RESERVE_BASE, _RESERVE_PER_REQUEST = 512 * 1024, 64 * 1024
_RESERVE_SUFFIX = ".reserve"


def mb(n: float) -> str:
    """Bytes as megabytes for a message.

    Example:
        >>> mb(3_500_000)
        '3.5 MB'
    """
    return f"{n / 1e6:.1f} MB"


class SpaceReserve:
    """The disk space of one run's contexts in `store` (see the module docstring).

    Args:
        store: the run's context store.
        contexts: how many contexts the run may store.
        in_flight: requests in flight at once (the reserve holds their commits).

    Example:
        >>> reserve = SpaceReserve(ContextStore(":memory:"), contexts=10, in_flight=4)
        >>> reserve.check_and_hold(); reserve.release(), reserve.needed()
        (False, 0)
    """

    def __init__(self, store: ContextStore, *, contexts: int, in_flight: int) -> None:
        self.file = store.local_file
        self.contexts = contexts
        self.reserve_bytes = _RESERVE_BASE + _RESERVE_PER_REQUEST * in_flight
        self._lock = threading.Lock()
        self._held: tuple[Path, int] | None = None  # this run's reserve file, and its locked descriptor

    @property
    def folder(self) -> Path | None:
        return None if self.file is None else self.file.parent

    def needed(self, contexts: int | None = None) -> int:
        """Bytes `contexts` more contexts (default: the run's) take, the log's growth included."""
        if self.file is None:
            return 0
        n = self.contexts if contexts is None else contexts
        wal = Path(str(self.file) + "-wal")
        wal_growth = max(0, _WAL_BYTES - (wal.stat().st_size if wal.exists() else 0))
        return n * BYTES_PER_CONTEXT + wal_growth

    def free(self) -> int:
        """Bytes free on the store's disk."""
        assert self.folder is not None
        return shutil.disk_usage(self.folder).free

    def check_and_hold(self) -> None:
        """Raise `StoreFullError` unless the disk holds the run's contexts and the reserve; then
        write this run's reserve file (after deleting those killed runs left)."""
        if self.file is None or not self.contexts:
            return
        self._delete_abandoned()
        needed = self.needed() + self.reserve_bytes
        free = self.free()
        if free < needed:
            raise StoreFullError(
                f"context store {self.file}: the disk holding {self.folder} has {mb(free)} free; this run needs about "
                f"{mb(needed)} for {self.contexts} contexts — free some space (or use a store on another disk) and run "
                "again; nothing was sent", str(self.file))
        reserve = self.file.with_name(f"{self.file.name}{_RESERVE_SUFFIX}-{os.getpid()}-{secrets.token_hex(4)}")
        fd = None
        try:
            fd = os.open(reserve, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            if fcntl is not None:
                # best effort: a sweep that takes the name before the lock (or a file system without
                # locks) only unlinks it; the space stays held by this descriptor until `release`
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if hasattr(os, "posix_fallocate"):
                os.posix_fallocate(fd, 0, self.reserve_bytes)
            else:  # pragma: no cover - not on Linux
                os.write(fd, b"\0" * self.reserve_bytes)
            os.fsync(fd)
        except OSError as exc:
            reserve.unlink(missing_ok=True)
            if fd is not None:
                os.close(fd)
            raise StoreFullError(
                f"context store {self.file}: cannot set {mb(self.reserve_bytes)} aside in {self.folder} ({exc}); "
                "free some space and run again; nothing was sent", str(self.file)) from exc
        self._held = (reserve, fd)

    def _delete_abandoned(self) -> None:
        """Delete the reserve files no run holds a lock on (their runs were killed)."""
        if fcntl is None or self.file is None:  # pragma: no cover - not on POSIX
            return
        prefix = f"{self.file.name}{_RESERVE_SUFFIX}"
        for path in self.file.parent.iterdir():
            if path.name != prefix and not path.name.startswith(f"{prefix}-"):
                continue
            try:
                fd = os.open(path, os.O_RDWR)  # NFS emulates flock with write locks
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)  # a live run's reserve
                continue
            try:
                path.unlink(missing_ok=True)
            finally:
                os.close(fd)

    def release(self) -> bool:
        """Free this run's reserve (a write failed for space); False when none was held."""
        with self._lock:
            if self._held is None:
                return False
            path, fd = self._held
            self._held = None
            path.unlink(missing_ok=True)
            os.close(fd)
            return True

    def close(self) -> None:
        """The run ended: delete the reserve file."""
        self.release()

    def full_error(self, cause: BaseException, stored: int, left: int) -> StoreFullError:
        """The error a run that stopped for space ends with: the folder, the space the `left`
        contexts need and the space free."""
        folder = self.folder or Path(".")
        free = self.free() if self.file is not None else 0
        return StoreFullError(
            f"context store {self.file}: the disk holding {folder} is full ({mb(free)} free; {cause.__cause__ or 'no space left'}): "
            f"the {left} contexts still to generate need about {mb(self.needed(left) + self.reserve_bytes)}; the {stored} "
            "contexts that arrived are stored — free some space and run again", str(self.file or ""))
