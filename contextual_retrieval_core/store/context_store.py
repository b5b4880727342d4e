"""`ContextStore`: a persistent, content-addressed store of generated chunk contexts, on SQLite.

A context is keyed by the sha256 of (generator, model, prompt identity, document text, chunk
text), so an unchanged chunk is never situated, or paid for, twice, and changing the model or
the prompt never serves a stale context. Each `put` is its own committed transaction in a
WAL-mode database: a context is durable the moment it arrives, and several threads or processes
may write the same file at once. No pickle anywhere; usage is stored as JSON text.

A store whose file or folder cannot be written (or one opened with ``read_only=True``) is opened
read-only: it serves every stored context, and a write raises `ContextStoreError` saying why.
Every error of the database underneath (a damaged page, a lock held too long, a full disk) is a
`ContextStoreError` naming the file, the reason and the fix.

Example:
    >>> from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT
    >>> with ContextStore(":memory:") as store:
    ...     key = ContextStore.key("anthropic", "claude-3-haiku", DEFAULT_PROMPT.identity,
    ...                            "The whole document.", "A chunk.")
    ...     store.put(key, "Situating context.", generator="anthropic", model="claude-3-haiku",
    ...               doc_id="doc_1", chunk_id="doc_1_chunk_0", original_index=0,
    ...               usage={"input_tokens": 12, "output_tokens": 3})
    ...     (store.get(key), key in store, len(store))
    ('Situating context.', True, 1)
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

from contextual_retrieval_core.errors import InputError, InputTypeError, RunError
from contextual_retrieval_core.store._batch_ledger import BatchLedger
from contextual_retrieval_core.store._batch_ledger import now_iso as _now
from contextual_retrieval_core.store._claim_ledger import CLAIMS_TABLE, ClaimLedger
from contextual_retrieval_core.store.errors import ContextStoreError, StoreFullError, check_store_path, explain, is_disk_full
from contextual_retrieval_core.store.jsonl import ImportResult, export_jsonl, import_jsonl

__all__ = ["ContextStore", "ContextStoreError", "ImportResult", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1
_BATCH = 500
_KEY_TAG = b"contextual-retrieval/context/v1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS contexts (
    key TEXT PRIMARY KEY,
    context TEXT NOT NULL,
    generator TEXT NOT NULL,
    model TEXT NOT NULL,
    doc_id TEXT,
    chunk_id TEXT,
    original_index INTEGER,
    usage TEXT,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS batches (
    batch_id TEXT PRIMARY KEY,
    generator TEXT NOT NULL,
    model TEXT NOT NULL,
    manifest TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL
);
""" + CLAIMS_TABLE + "\n"


def _absorb(h: Any, part: str) -> None:
    if not isinstance(part, str):
        raise InputTypeError(f"key parts must be str, got {type(part).__name__}")
    data = part.encode("utf-8", "surrogatepass")
    h.update(len(data).to_bytes(8, "big"))
    h.update(data)


#: the module of each server backend, imported when a URL of its scheme is first opened
_BACKEND_MODULES = {"postgresql": "contextual_retrieval_core.store.postgres", "postgres": "contextual_retrieval_core.store.postgres"}


class ContextStore(ClaimLedger, BatchLedger):
    """Generated contexts in an SQLite file, keyed by `ContextStore.key`.

    Args:
        path: the SQLite file (created, with its parent folders, if missing); ":memory:" for a
            per-process store; a ``postgresql://`` URL for a PostgreSQL server (store_postgres.py).
        timeout: seconds to wait for another writer's lock before giving up.
        read_only: open for reading only (writes raise `ContextStoreError`). A store whose file
            or folder is not writable is opened read-only on its own; `read_only_reason` says why.

    Safe to share across threads (one connection behind a lock) and across processes (WAL mode,
    busy timeout, one short transaction per write). Several ingestion workers on one store split
    the work through claims (`claim`, `renew_claims`, `release_claims`; store_claims.py); the
    batch ledger is in store_batches.py.
    """

    #: URL scheme -> the store class that serves it (each server backend registers its own)
    _backends: ClassVar[dict[str, type[ContextStore]]] = {}

    def __init_subclass__(cls, *, schemes: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for scheme in schemes:
            ContextStore._backends[scheme] = cls

    def __new__(cls, path: Any = None, *args: Any, **kwargs: Any) -> ContextStore:
        """``ContextStore(url)`` with a server URL opens the backend registered for its scheme
        (``postgresql://``: `PostgresContextStore`); `open_store` is the same, by name."""
        if cls is ContextStore and isinstance(path, str) and "://" in path:
            scheme = path.split("://", 1)[0]
            if scheme not in ContextStore._backends and scheme in _BACKEND_MODULES:
                importlib.import_module(_BACKEND_MODULES[scheme])  # registers its class for the scheme
            if scheme not in ContextStore._backends:
                raise InputError(f"{scheme}:// is not a context store: pass a file path, ':memory:' or a "
                                 "postgresql://user:password@host/db URL")
            cls = ContextStore._backends[scheme]
        return super().__new__(cls)

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0, read_only: bool = False) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        #: why writes are refused (None: the store is writable)
        self.read_only_reason: str | None = "opened with read_only=True" if read_only else None
        if self.path != ":memory:":
            self.read_only_reason = check_store_path(Path(self.path), read_only) or self.read_only_reason
        try:
            self._conn = self._connect(timeout)
            self._open_when_unlocked(timeout)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise InputError(f"{self.path}: not a usable context store: {exc}") from exc
        except BaseException:
            self.close()
            raise

    @property
    def local_file(self) -> Path | None:
        """The database file on this machine (None for ":memory:" and server stores)."""
        return None if self.path == ":memory:" else Path(self.path)

    @property
    def read_only(self) -> bool:
        """True when writes are refused (see `read_only_reason`)."""
        return self.read_only_reason is not None

    # -- setup -------------------------------------------------------------------------------

    def _connect(self, timeout: float) -> sqlite3.Connection:
        # isolation_level=None: autocommit; writes open their own explicit transactions.
        options: dict[str, Any] = dict(timeout=timeout, check_same_thread=False, isolation_level=None)
        if not self.read_only:
            return sqlite3.connect(self.path, **options)
        uri = "file:" + quote(str(Path(self.path).resolve()))
        conn = sqlite3.connect(uri + "?mode=ro", uri=True, **options)
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            return conn
        except sqlite3.OperationalError:
            # a WAL database in a read-only folder without its -shm file: read the file as it is
            conn.close()
            return sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True, **options)

    def _open_when_unlocked(self, timeout: float) -> None:
        """`_init_db`, retried while another process holds a lock it cannot wait for (switching a new
        file to WAL while other workers open it too): "database is locked" is waited out, up to
        `timeout`, never shown."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self._init_db(timeout)
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc) or time.monotonic() > deadline:
                    raise
                if self._conn is not None and self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                time.sleep(0.05)

    def _init_db(self, timeout: float) -> None:
        conn = self._conn
        assert conn is not None
        conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        if self.read_only:
            names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not {"meta", "contexts", "batches"} <= names:
                raise sqlite3.DatabaseError("it has no context store tables")
            row = conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()
            self._check_schema(row)
            return
        if self.path != ":memory:":
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            row = conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO meta (name, value) VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
            else:
                self._check_schema(row)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _check_schema(self, row: tuple | None) -> None:
        found = int(row[0]) if row is not None else SCHEMA_VERSION
        if found > SCHEMA_VERSION:
            raise RunError(
                f"{self.path}: this context store has schema version {found}, written by "
                f"a newer contextual-retrieval; this version reads schema "
                f"{SCHEMA_VERSION} at most. Upgrade contextual-retrieval "
                "(pip install -U contextual-retrieval-kit) to open it."
            )

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        """Database errors as `ContextStoreError` naming the file, the reason and the fix."""
        try:
            yield
        except sqlite3.Error as exc:
            kind = StoreFullError if is_disk_full(exc) else ContextStoreError
            raise kind(explain(self.path, doing, exc), self.path) from exc

    def _refuse_if_read_only(self) -> None:
        if self.read_only_reason is not None:
            raise ContextStoreError(
                f"context store {self.path} is open read-only ({self.read_only_reason}): contexts "
                "cannot be stored in it — make the file and its folder writable, or pass another "
                "store path", self.path)

    def check_writable(self) -> None:
        """Raise `ContextStoreError` unless a context can be written now (a write lock taken and a
        row written, then rolled back): a generation run calls it before its first request."""
        self._refuse_if_read_only()
        with self._lock, self._errors("a test write"):
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('write_check', ?)", (_now(),))
            finally:
                if db.in_transaction:
                    db.execute("ROLLBACK")

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise InputError(f"ContextStore {self.path!r} is closed")
        return self._conn

    # -- keys --------------------------------------------------------------------------------

    @staticmethod
    def key(
        generator: str, model: str, prompt_identity: str, document_text: str, chunk_text: str
    ) -> str:
        """The store key: sha256 hex over length-prefixed parts (("ab", "c") != ("a", "bc"))."""
        return ContextStore.keyer(generator, model, prompt_identity, document_text)(chunk_text)

    @staticmethod
    def keyer(generator: str, model: str, prompt_identity: str, document_text: str) -> Callable[[str], str]:
        """`key` with the document part hashed once: chunk text -> key, for many chunks of a document."""
        h = hashlib.sha256(_KEY_TAG)
        for part in (generator, model, prompt_identity, document_text):
            _absorb(h, part)

        def key_of(chunk_text: str) -> str:
            chunk_hash = h.copy()
            _absorb(chunk_hash, chunk_text)
            return chunk_hash.hexdigest()

        return key_of

    # -- reads -------------------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        """The context stored under `key`, or None."""
        with self._lock, self._errors("reading a context"):
            row = self._db.execute("SELECT context FROM contexts WHERE key=?", (key,)).fetchone()
        return None if row is None else row[0]

    def get_many(self, keys: Iterable[str]) -> dict[str, str]:
        """{key: context} for those of `keys` that are stored (missing keys are left out)."""
        unique = list(dict.fromkeys(keys))
        found: dict[str, str] = {}
        with self._lock, self._errors("reading contexts"):
            for start in range(0, len(unique), _BATCH):
                part = unique[start : start + _BATCH]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT key, context FROM contexts WHERE key IN ({marks})", part
                ).fetchall()
                found.update(rows)
        return found

    def record(self, key: str) -> dict[str, Any] | None:
        """Everything stored under `key` (context, generator, model, ids, usage, created_at)."""
        with self._lock, self._errors("reading a context"):
            cur = self._db.execute(
                "SELECT key, context, generator, model, doc_id, chunk_id, original_index, usage, "
                "created_at FROM contexts WHERE key=?",
                (key,),
            )
            row = cur.fetchone()
            names = [d[0] for d in cur.description]
        if row is None:
            return None
        rec = dict(zip(names, row))
        rec["usage"] = None if rec["usage"] is None else json.loads(rec["usage"])
        return rec

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        with self._lock, self._errors("reading a context"):
            return (
                self._db.execute("SELECT 1 FROM contexts WHERE key=?", (key,)).fetchone()
                is not None
            )

    def __len__(self) -> int:
        with self._lock, self._errors("counting contexts"):
            return self._db.execute("SELECT COUNT(*) FROM contexts").fetchone()[0]

    # -- writes ------------------------------------------------------------------------------

    def put(
        self,
        key: str,
        context: str,
        *,
        generator: str,
        model: str,
        doc_id: str | None = None,
        chunk_id: str | None = None,
        original_index: int | None = None,
        usage: dict[str, Any] | None = None,
    ) -> None:
        """Store `context` under `key` (replacing any previous one), committed at once."""
        if not isinstance(key, str) or not key:
            raise InputError(f"key must be a non-empty string, got {key!r}")
        if not isinstance(context, str):
            raise InputTypeError(f"context must be str, got {type(context).__name__}")
        row = (
            key,
            context,
            generator,
            model,
            doc_id,
            chunk_id,
            original_index,
            None if usage is None else json.dumps(usage, sort_keys=True),
            _now(),
        )
        self._write([row])

    def copy_from(self, other: ContextStore, keys: Iterable[str]) -> int:
        """Copy the contexts `other` holds under `keys` and this store does not (records whole:
        generator, model, ids, usage, time), in one transaction; returns how many were copied.
        How two stores share what was paid for (an index's own store and the one `eval` uses)."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return 0
        mine = self.get_many(wanted)
        theirs = other.get_many([k for k in wanted if k not in mine])
        rows = []
        for key in theirs:
            rec = other.record(key)
            if rec is not None:
                usage = None if rec["usage"] is None else json.dumps(rec["usage"], sort_keys=True)
                rows.append((key, rec["context"], rec["generator"], rec["model"], rec["doc_id"], rec["chunk_id"],
                             rec["original_index"], usage, rec["created_at"]))
        if rows:
            self._write(rows)
        return len(rows)

    def _write(self, rows: list[tuple]) -> None:
        self._refuse_if_read_only()
        with self._lock, self._errors("storing a context" if len(rows) == 1 else f"storing {len(rows)} contexts"):
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "INSERT OR REPLACE INTO contexts (key, context, generator, model, doc_id, "
                    "chunk_id, original_index, usage, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                db.executemany("DELETE FROM claims WHERE key = ?", [(row[0],) for row in rows])  # its work is done
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # SQLite has rolled back already after some errors (a full disk)
                    db.execute("ROLLBACK")
                raise

    # -- JSONL -------------------------------------------------------------------------------

    def export_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write every context as a JSON line in the cookbook's format; returns the line count.

        Each line has doc_id, chunk_id, original_index, context, plus key, generator and model.
        """

        return export_jsonl(self, path)

    def import_jsonl(
        self,
        path: str | os.PathLike[str],
        resolve: Callable[[dict[str, Any]], str | None],
        *,
        generator: str = "imported",
        model: str = "unknown",
    ) -> ImportResult:
        """Import contexts from JSON lines (the cookbook's format, or `export_jsonl`'s).

        Args:
            path: the JSONL file.
            resolve: maps a line's dict to its store key, or None to skip a line the caller
                cannot place.
            generator, model: recorded for lines that carry no "generator" / "model" field.

        Returns:
            (imported, skipped). The whole file is validated first and written in one
            transaction: a malformed line (ValueError naming file and line) imports nothing.
        """

        return import_jsonl(self, path, resolve, generator=generator, model=model)

    def _rows(self, sql: str) -> list[tuple]:
        with self._lock, self._errors("reading contexts"):
            return self._db.execute(sql).fetchall()

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> ContextStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ContextStore({self.path!r}{', read_only=True' if self.read_only else ''})"
