"""`ContextStore("postgresql://...")`: the context store on a PostgreSQL server, for many machines.

Same tables, keys and public API as the SQLite store (`store.ContextStore`, which hands a
``postgresql://`` or ``postgres://`` URL to this class); psycopg 3, one autocommit connection per
store object behind a lock, one transaction per write, ``INSERT ... ON CONFLICT`` for the
SQLite store's ``INSERT OR REPLACE``. The schema is created on first use under an advisory lock,
so several workers may open a new database at once. The password in the URL never appears in
a message or a repr. Install with the ``postgres`` extra.

Work claims (store_claims.py) work the same way here, for workers on several machines; their
leases are timed by the server's clock, so the machines' clocks need not agree.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from contextual_retrieval_core.errors import InputError, MissingDependencyError
from contextual_retrieval_core.store._claim_ledger import CLAIMS_TABLE, Claimed
from contextual_retrieval_core.store.context_store import SCHEMA_VERSION, ContextStore, _now
from contextual_retrieval_core.store.errors import ContextStoreError

__all__ = ["PostgresContextStore", "redact_url"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS contexts (
    seq BIGSERIAL UNIQUE,
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
""" + CLAIMS_TABLE
_SERVER_NOW = "extract(epoch from clock_timestamp())"
_CLAIM = (
    "INSERT INTO claims (key, owner, expires_at) "
    f"SELECT w.key, %(owner)s, {_SERVER_NOW} + %(lease)s FROM unnest(%(keys)s::text[]) AS w(key) "
    "WHERE NOT EXISTS (SELECT 1 FROM contexts c WHERE c.key = w.key AND trim(c.context) <> '') ORDER BY w.key "
    "ON CONFLICT (key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at "
    f"WHERE claims.owner = excluded.owner OR claims.expires_at < {_SERVER_NOW} RETURNING key"
)
# a context committed while the insert waited on its claim's row lock: that claim is void
_UNCLAIM_STORED = (
    "DELETE FROM claims WHERE owner = %(owner)s AND key = ANY(%(keys)s) AND EXISTS "
    "(SELECT 1 FROM contexts c WHERE c.key = claims.key AND trim(c.context) <> '') RETURNING key"
)
_SCHEMA_LOCK = 0x63727478  # pg_advisory_xact_lock key: one schema creation at a time
_UPSERT = (
    "INSERT INTO contexts (key, context, generator, model, doc_id, chunk_id, original_index, usage, created_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO UPDATE SET context = excluded.context, "
    "generator = excluded.generator, model = excluded.model, doc_id = excluded.doc_id, chunk_id = excluded.chunk_id, "
    "original_index = excluded.original_index, usage = excluded.usage, created_at = excluded.created_at"
)


def redact_url(url: str) -> str:
    """`url` with any password replaced by ***."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


class PostgresContextStore(ContextStore, schemes=("postgresql", "postgres")):
    """The `ContextStore` API on PostgreSQL; build it as ``ContextStore("postgresql://...")``.

    Args:
        path: a libpq URL, ``postgresql://user[:password]@host[:port]/database``.
        timeout: seconds to wait when connecting and for another writer's row lock.
        read_only: open for reading only (writes raise `ContextStoreError`).
    """

    def __init__(self, path: str, *, timeout: float = 30.0, read_only: bool = False) -> None:
        try:
            import psycopg
        except ImportError as exc:
            raise MissingDependencyError("a postgresql:// context store needs psycopg: pip install 'contextual-retrieval-kit[postgres]'") from exc
        self._psycopg = psycopg
        self._url = str(path)
        self.path = redact_url(self._url)
        self._timeout = timeout
        self._lock = threading.RLock()
        self._conn: Any = None
        self.read_only_reason: str | None = "opened with read_only=True" if read_only else None
        try:
            self._conn = self._open_connection()
        except psycopg.Error as exc:
            raise ContextStoreError(
                f"cannot open the context store {self.path}: {str(exc).replace(self._url, self.path)}; check that "
                "the server runs, the URL's host, port, user and database, and that the user may connect", self.path
            ) from None
        self._init_db(timeout)

    def _init_db(self, timeout: float) -> None:
        with self._lock, self._errors("creating the context store tables"):
            if self.read_only:
                row = self._conn.execute("SELECT to_regclass('contexts') IS NOT NULL AND to_regclass('batches') IS NOT NULL").fetchone()
                if not row[0]:
                    raise ContextStoreError(f"{self.path} has no context store tables (opened read-only)", self.path)
            else:
                with self._conn.transaction():
                    self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            self._conn.execute(statement)
                    self._conn.execute(
                        "INSERT INTO meta (name, value) VALUES ('schema_version', %s) ON CONFLICT (name) DO NOTHING",
                        (str(SCHEMA_VERSION),),
                    )
            row = self._conn.execute("SELECT value FROM meta WHERE name='schema_version'").fetchone()
        self._check_schema(row)

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except self._psycopg.Error as exc:
            text = str(exc).replace(self._url, self.path).strip()
            raise ContextStoreError(f"context store {self.path}: {doing} failed ({type(exc).__name__}: {text})", self.path) from None

    @property
    def local_file(self) -> None:
        """None: the server keeps the data (its disk is the server's)."""
        return None

    @property
    def _db(self) -> Any:
        if self._conn is None:
            raise InputError(f"ContextStore {self.path!r} is closed")
        return self._conn

    def check_writable(self) -> None:
        self._refuse_if_read_only()
        with self._lock, self._errors("a test write"), self._db.transaction(force_rollback=True):
            self._db.execute("INSERT INTO meta (name, value) VALUES ('write_check', %s) "
                             "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (_now(),))

    # -- reads ---------------------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        with self._lock, self._errors("reading a context"):
            row = self._db.execute("SELECT context FROM contexts WHERE key=%s", (key,)).fetchone()
        return None if row is None else row[0]

    def get_many(self, keys: Iterable[str]) -> dict[str, str]:
        unique = list(dict.fromkeys(keys))
        if not unique:
            return {}
        with self._lock, self._errors("reading contexts"):
            rows = self._db.execute("SELECT key, context FROM contexts WHERE key = ANY(%s)", (unique,)).fetchall()
        return dict(rows)

    def record(self, key: str) -> dict[str, Any] | None:
        with self._lock, self._errors("reading a context"):
            cur = self._db.execute(
                "SELECT key, context, generator, model, doc_id, chunk_id, original_index, usage, created_at "
                "FROM contexts WHERE key=%s", (key,))
            row = cur.fetchone()
            names = [d.name for d in cur.description]
        if row is None:
            return None
        rec = dict(zip(names, row))
        rec["usage"] = None if rec["usage"] is None else json.loads(rec["usage"])
        return rec

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        with self._lock, self._errors("reading a context"):
            return self._db.execute("SELECT 1 FROM contexts WHERE key=%s", (key,)).fetchone() is not None

    def __len__(self) -> int:
        with self._lock, self._errors("counting contexts"):
            return int(self._db.execute("SELECT COUNT(*) FROM contexts").fetchone()[0])

    def _rows(self, sql: str) -> list[tuple]:
        # the SQLite store orders by insertion (rowid); here the insertion counter is seq
        with self._lock, self._errors("reading contexts"):
            return self._db.execute(sql.replace("ORDER BY rowid", "ORDER BY seq")).fetchall()

    # -- writes --------------------------------------------------------------------------------

    def _write(self, rows: list[tuple]) -> None:
        self._refuse_if_read_only()
        doing = "storing a context" if len(rows) == 1 else f"storing {len(rows)} contexts"
        with self._lock, self._errors(doing), self._db.transaction(), self._db.cursor() as cur:
            cur.executemany(_UPSERT, rows)
            cur.execute("DELETE FROM claims WHERE key = ANY(%s)", ([row[0] for row in rows],))

    # -- claims (store_claims.py says what they mean) --------------------------------------------

    def claim(self, keys: Iterable[str], owner: str, lease_s: float) -> Claimed:
        wanted = sorted(set(keys))
        if not wanted:
            return Claimed(set(), set())
        self._refuse_if_read_only()
        args = {"keys": wanted, "owner": owner, "lease": float(lease_s)}
        with self._lock, self._errors("claiming contexts to generate"), self._db.transaction():
            expired = {k for (k,) in self._db.execute(
                f"SELECT key FROM claims WHERE key = ANY(%(keys)s) AND owner <> %(owner)s AND expires_at < {_SERVER_NOW}",
                args).fetchall()}
            held = {k for (k,) in self._db.execute(_CLAIM, args).fetchall()}
            if held:
                held -= {k for (k,) in self._db.execute(_UNCLAIM_STORED, {**args, "keys": sorted(held)}).fetchall()}
        return Claimed(held, expired & held)

    def renew_claims(self, owner: str, lease_s: float) -> int:
        self._refuse_if_read_only()
        with self._lock, self._errors("renewing claims"):
            cur = self._db.execute(f"UPDATE claims SET expires_at = {_SERVER_NOW} + %s WHERE owner = %s", (float(lease_s), owner))
            return int(cur.rowcount)

    def release_claims(self, owner: str) -> int:
        if self.read_only:
            return 0
        with self._lock, self._errors("releasing claims"):
            return int(self._db.execute("DELETE FROM claims WHERE owner = %s", (owner,)).rowcount)

    def claims(self) -> dict[str, tuple[str, float]]:
        with self._lock, self._errors("reading claims"):
            rows = self._db.execute(f"SELECT key, owner, expires_at - {_SERVER_NOW} FROM claims").fetchall()
        return {key: (owner, float(left)) for key, owner, left in rows}

    def add_batch(self, batch_id: str, *, generator: str, model: str, manifest: dict[str, Any]) -> None:
        self._refuse_if_read_only()
        with self._lock, self._errors(f"recording Message Batch {batch_id}"):
            self._db.execute(
                "INSERT INTO batches (batch_id, generator, model, manifest, status, created_at) "
                "VALUES (%s, %s, %s, %s, 'pending', %s) ON CONFLICT (batch_id) DO UPDATE SET generator = excluded.generator, "
                "model = excluded.model, manifest = excluded.manifest, status = 'pending', created_at = excluded.created_at",
                (batch_id, generator, model, json.dumps(manifest, sort_keys=True), _now()),
            )

    def pending_batches(self, *, generator: str, model: str) -> list[tuple[str, dict[str, Any]]]:
        with self._lock, self._errors("reading pending Message Batches"):
            rows = self._db.execute(
                "SELECT batch_id, manifest FROM batches WHERE status='pending' AND generator=%s AND model=%s "
                "ORDER BY created_at", (generator, model)).fetchall()
        return [(batch_id, json.loads(manifest)) for batch_id, manifest in rows]

    def batch_status(self, batch_id: str) -> str | None:
        with self._lock, self._errors("reading Message Batches"):
            row = self._db.execute("SELECT status FROM batches WHERE batch_id=%s", (batch_id,)).fetchone()
        return None if row is None else str(row[0])

    def _set_batch_status(self, batch_id: str, status: str) -> None:
        self._refuse_if_read_only()
        with self._lock, self._errors(f"updating Message Batch {batch_id}"):
            self._db.execute("UPDATE batches SET status=%s WHERE batch_id=%s", (status, batch_id))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- a server that went away -----------------------------------------------------------------

    def _open_connection(self) -> Any:
        """A new autocommit connection whose lock waits end after the store's `timeout`."""
        conn = self._psycopg.connect(self._url, autocommit=True, connect_timeout=max(1, int(self._timeout)))
        try:
            conn.execute(f"SET lock_timeout = {int(self._timeout * 1000)}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _connection_lost(self) -> bool:
        conn = self._conn
        return conn is not None and bool(conn.closed or getattr(conn, "broken", False))

    def _reconnect(self, error: BaseException) -> None:
        """Open a new connection after the old one was lost (the server restarted or the network
        dropped), trying for up to the store's `timeout`; else a `ContextStoreError` naming the
        server."""
        psycopg = self._psycopg
        with self._lock:
            if self._conn is not None and not self._connection_lost():
                return  # another thread reconnected meanwhile
            if self._conn is not None:
                self._conn.close()
            deadline = time.monotonic() + self._timeout
            last: BaseException = error
            while True:
                try:
                    conn = self._open_connection()
                except psycopg.Error as exc:
                    last = exc
                    if time.monotonic() >= deadline:  # the closed connection stays: the next call tries again
                        text = str(last).replace(self._url, self.path).strip()
                        raise ContextStoreError(
                            f"context store {self.path}: the connection to the server was lost and the server did not "
                            f"answer again within {self._timeout:g} s ({type(last).__name__}: {text}); check that the "
                            "server runs, then run again — what was stored is kept", self.path) from None
                    time.sleep(min(0.5, max(0.0, deadline - time.monotonic())))
                    continue
                self._conn = conn
                log.warning("context store %s: the connection was lost (%s); reconnected", self.path, type(error).__name__)
                return


def _reconnecting(method: Any) -> Any:
    """`method`, run again once on a new connection when the old one was lost mid-call (every
    store call is one statement or one transaction, and writes are upserts: running one again is
    safe)."""

    @functools.wraps(method)
    def call(self: PostgresContextStore, *args: Any, **kwargs: Any) -> Any:
        if self._conn is not None and self._connection_lost():
            self._reconnect(ConnectionError("found closed"))
        try:
            return method(self, *args, **kwargs)
        except ContextStoreError as exc:
            if self._conn is None or not self._connection_lost():
                raise
            self._reconnect(exc)
            return method(self, *args, **kwargs)

    return call


for _name in ("check_writable", "get", "get_many", "record", "__contains__", "__len__", "_rows", "_write", "claim",
              "renew_claims", "release_claims", "claims", "add_batch", "pending_batches", "batch_status",
              "_set_batch_status"):
    setattr(PostgresContextStore, _name, _reconnecting(getattr(PostgresContextStore, _name)))
