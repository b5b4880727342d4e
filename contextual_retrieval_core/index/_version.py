"""Reading an index folder while another process updates it: every query answers from one
version of the index, the old or the new one, never from a mix and never with an error.

An update writes its new parts beside the old ones and switches by replacing ``manifest.json``
(`os.replace`: a new file, so a new inode); only after that does it remove the old version's BM25
folder and the Chroma rows no version lists any more. So a reader:

- compares the manifest's `manifest_stamp` with the one of the version it has open before each
  query, and opens the new version's parts when it changed; for embedded Chroma on a client
  opened at that version (`client_for_version`: Chroma keeps one client per database for the
  whole process, whose vector index holds the rows it saw when it opened and would not see the
  rows the other process added since);
- runs a query again (`read_retrying`) when it found a part of its version missing (it ran into
  the clean-up after a switch, and the new version is complete; or into a row being rewritten),
  on a fresh client when Chroma's engine failed (it read rows the other process was deleting).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from contextual_retrieval_core.checks import IndexFileError
from contextual_retrieval_core.index.manifest import MANIFEST_NAME, IndexDamagedError

__all__ = ["manifest_stamp", "read_retrying", "client_for_version", "drop_cached_client", "READ_TRIES"]

T = TypeVar("T")

#: how many failed tries with no version switched during them a query makes before its error
#: stands (a try during which another process switched the manifest does not count)
READ_TRIES = 5
#: the longest a query keeps trying while the versions keep switching under it, in seconds
READ_DEADLINE_S = 60.0


def manifest_stamp(folder: str | os.PathLike[str]) -> tuple[int, int, int] | None:
    """(inode, mtime in ns, size) of the folder's ``manifest.json``, None when there is none: it
    changes whenever an update switches versions."""
    try:
        st = os.stat(Path(folder) / MANIFEST_NAME)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def read_retrying(folder: str | os.PathLike[str], attempt: Callable[[], T], *, reopen: Callable[[], None] | None = None,
                  tries: int = READ_TRIES, pause: float = 0.05) -> T:
    """`attempt()`, run again after a pause (doubling from `pause` seconds) when it failed for a
    reason an update in another process explains: a part of its version missing or unreadable
    (`IndexDamagedError`, `IndexFileError`, FileNotFoundError: the manifest was switched under it
    and the old parts removed, or a row was being rewritten), or an error of the vector store's
    engine (Chroma's own errors: a client reading rows the other process is deleting; `reopen()`
    is called first). Any other error is raised at once, and after `tries` failures the last error
    is: a folder damaged for good is reported a second or so later, with its own error. A failed
    try during which the manifest was switched does not count (a slow reader beside a writer that
    keeps updating), until `READ_DEADLINE_S` has passed.

    Example:
        >>> import tempfile
        >>> calls = []
        >>> def attempt():
        ...     calls.append(1)
        ...     return len(calls)
        >>> read_retrying(tempfile.mkdtemp(), attempt)
        1
    """
    deadline = time.monotonic() + READ_DEADLINE_S
    n = 0  # failed tries with no switch during them
    while True:
        before = manifest_stamp(folder)
        try:
            return attempt()
        except (IndexDamagedError, IndexFileError, FileNotFoundError):
            now = manifest_stamp(folder)
            if now is None:  # no index at all: nothing to wait for
                raise
            # another process switched versions under this try (a slow reader beside a busy
            # writer): try the new one, without counting it, until the deadline
            switched = now != before and time.monotonic() < deadline
            if not switched:
                n += 1
                if n == tries:
                    raise
        except Exception as exc:
            n += 1
            if n == tries or not _store_engine_error(exc):
                raise
            if reopen is not None:
                reopen()
        time.sleep(pause * 2 ** min(n, tries))


def _store_engine_error(exc: BaseException) -> bool:
    """Whether `exc` is Chroma's own error (its module is loaded whenever Chroma raised one)."""
    errors = sys.modules.get("chromadb.errors")
    base = getattr(errors, "ChromaError", None)
    return isinstance(base, type) and isinstance(exc, base)


#: chroma folder -> the manifest stamp this process's embedded Chroma client on it was opened at
_CLIENT_VERSIONS: dict[Path, object] = {}
_CLIENT_LOCK = threading.Lock()


def client_for_version(chroma_folder: str | os.PathLike[str], stamp: object) -> None:
    """Call before opening an embedded Chroma client on `chroma_folder` to read the version whose
    manifest has `stamp`: when this process's client on it was opened for another version, drop
    it (`drop_cached_client`), so the new client reads the rows another process wrote since. A
    client this module has no record of (opened by an update in this process, which wrote the
    rows itself) is kept. `stamp` None: drop the folder's client on the next call, whatever it is."""
    folder = Path(chroma_folder).resolve()
    with _CLIENT_LOCK:
        if stamp is None:
            _CLIENT_VERSIONS[folder] = None  # a record no stamp equals
            return
        if folder in _CLIENT_VERSIONS and _CLIENT_VERSIONS[folder] != stamp:
            drop_cached_client(folder)
        _CLIENT_VERSIONS[folder] = stamp


def drop_cached_client(chroma_folder: str | os.PathLike[str]) -> None:
    """Make the next embedded Chroma client on `chroma_folder` read the folder afresh. Chroma
    keeps one system per database path for the whole process; clients opened before keep theirs
    (a query in flight finishes on it)."""
    try:
        from chromadb.api.shared_system_client import SharedSystemClient
    except ImportError:  # pragma: no cover - other chromadb layouts keep no such cache
        return
    systems = getattr(SharedSystemClient, "_identifier_to_system", {})
    folder = Path(chroma_folder).resolve()
    for key in [k for k in list(systems) if k and Path(k).resolve() == folder]:
        systems.pop(key, None)
