"""The context store's file checks and errors: each names the file, the reason and the fix."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from contextual_retrieval_core._sdk import error_chain
from contextual_retrieval_core.errors import ContextualRetrievalError, InputError

__all__ = ["ContextStoreError", "StoreFullError", "check_store_path", "explain", "is_disk_full", "unwritable_reason"]


class ContextStoreError(ContextualRetrievalError, RuntimeError):
    """The context store cannot be read or written: the message names the file, why and the fix.

    Attributes:
        path: the store's file.
    """

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class StoreFullError(ContextStoreError):
    """The disk holding the context store is full: the message names the folder and about how
    much space the run needs. What was stored is kept."""


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc`, or an error it was raised from, says the disk is full (ENOSPC, or SQLite's
    "database or disk is full", as a library may pass it on in its own error)."""
    for error in error_chain(exc):
        if isinstance(error, OSError) and error.errno == errno.ENOSPC:
            return True
        text = str(error).lower()
        if "disk is full" in text or "no space left" in text:
            return True
    return False


def explain(path: str, doing: str, exc: BaseException) -> str:
    """A database error as a sentence naming the file, the reason and the fix."""
    text = str(exc)
    low = text.lower()
    if "malformed" in low or "not a database" in low or "corrupt" in low:
        fix = ("the file is damaged; restore it from a backup, or move it aside to start a new store "
               "(its contexts are then generated, and paid for, again)")
    elif "locked" in low or "busy" in low:
        fix = ("another process held the store's write lock past the timeout; stop it, or pass "
               "ContextStore(path, timeout=...) with a longer wait")
    elif "readonly" in low or "read-only" in low or "permission" in low:
        fix = "the file or its folder is not writable; make both writable or use another store path"
    elif "full" in low or "no space" in low:
        fix = "the disk is full; free some space and run again (what is stored is kept)"
    elif "unable to open" in low:
        fix = "check that the path is a file in a folder that exists and can be read and written"
    else:
        fix = "check the file; move it aside to start a new store if it is damaged"
    return f"context store {path}: {doing} failed: {text} — {fix}"


def unwritable_reason(path: Path) -> str | None:
    """None when the store's file (or, if missing, its folder) can be written; else why not.

    The folder matters too: a WAL-mode database writes its -wal and -shm files next to it.
    """
    folder = path.parent
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is not writable"
    if not os.access(folder, os.W_OK):
        return "its folder is not writable"
    return None


def check_store_path(file: Path, read_only: bool) -> str | None:
    """Check a store path before it is opened (creating its folder for a writable store).

    Returns why the store must be opened read-only (None: it can be written). A folder, a missing
    file to read, or a new store in a folder that cannot be written are errors.
    """
    path = str(file)
    if file.is_dir():
        raise InputError(
            f"context store {path} is a folder, not a file; pass a file path such as {file / 'contexts.sqlite3'}"
        )
    if read_only:
        if not file.exists():
            raise InputError(f"context store {path} does not exist; nothing can be read from it")
        return "opened with read_only=True"
    if not file.exists():
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ContextStoreError(
                f"context store {path}: cannot create its folder: {exc} — pass a path in a writable folder", path
            ) from exc
    reason = unwritable_reason(file)
    if reason is not None and not file.exists():
        raise ContextStoreError(f"context store {path} cannot be created: {reason} — pass a path in a writable folder", path)
    return reason
