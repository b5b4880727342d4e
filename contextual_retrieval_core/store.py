"""`ContextStore`: a persistent, content-addressed store of generated chunk contexts, on SQLite.

A context is keyed by the sha256 of (generator, model, prompt identity, document text, chunk
text), so an unchanged chunk is never situated, or paid for, twice, and changing the model or
the prompt never serves a stale context. Each `put` is its own committed transaction in a
WAL-mode database: a context is durable the moment it arrives, and several threads or processes
may write the same file at once. No pickle anywhere; usage is stored as JSON text.

Example:
    >>> from contextual_retrieval_core.prompts import DEFAULT_PROMPT
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
import json
import os
import sqlite3
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple

__all__ = ["ContextStore", "ImportResult", "SCHEMA_VERSION"]

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
"""


class ImportResult(NamedTuple):
    imported: int
    skipped: int


def _absorb(h: Any, part: str) -> None:
    if not isinstance(part, str):
        raise TypeError(f"key parts must be str, got {type(part).__name__}")
    data = part.encode("utf-8", "surrogatepass")
    h.update(len(data).to_bytes(8, "big"))
    h.update(data)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


class ContextStore:
    """Generated contexts in an SQLite file, keyed by `ContextStore.key`.

    Args:
        path: the SQLite file (created, with its parent folders, if missing); ":memory:" for a
            per-process store.
        timeout: seconds to wait for another writer's lock before giving up.

    Safe to share across threads (one connection behind a lock) and across processes (WAL mode,
    busy timeout, one transaction per write).
    """

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        # isolation_level=None: autocommit; writes open their own explicit transactions.
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            self.path, timeout=timeout, check_same_thread=False, isolation_level=None
        )
        try:
            self._init_db(timeout)
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            self._conn = None
            raise ValueError(f"{self.path}: not a usable context store: {exc}") from exc
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    # -- setup -------------------------------------------------------------------------------

    def _init_db(self, timeout: float) -> None:
        conn = self._conn
        assert conn is not None
        conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
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
                found = int(row[0])
                if found > SCHEMA_VERSION:
                    raise RuntimeError(
                        f"{self.path}: this context store has schema version {found}, written by "
                        f"a newer contextual-retrieval; this version reads schema "
                        f"{SCHEMA_VERSION} at most. Upgrade contextual-retrieval "
                        "(pip install -U contextual-retrieval) to open it."
                    )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ValueError(f"ContextStore {self.path!r} is closed")
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
        with self._lock:
            row = self._db.execute("SELECT context FROM contexts WHERE key=?", (key,)).fetchone()
        return None if row is None else row[0]

    def get_many(self, keys: Iterable[str]) -> dict[str, str]:
        """{key: context} for those of `keys` that are stored (missing keys are left out)."""
        unique = list(dict.fromkeys(keys))
        found: dict[str, str] = {}
        with self._lock:
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
        with self._lock:
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
        with self._lock:
            return (
                self._db.execute("SELECT 1 FROM contexts WHERE key=?", (key,)).fetchone()
                is not None
            )

    def __len__(self) -> int:
        with self._lock:
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
            raise ValueError(f"key must be a non-empty string, got {key!r}")
        if not isinstance(context, str):
            raise TypeError(f"context must be str, got {type(context).__name__}")
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

    def _write(self, rows: list[tuple]) -> None:
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany(
                    "INSERT OR REPLACE INTO contexts (key, context, generator, model, doc_id, "
                    "chunk_id, original_index, usage, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    # -- Message Batches in flight ---------------------------------------------------------

    def add_batch(self, batch_id: str, *, generator: str, model: str, manifest: dict[str, Any]) -> None:
        """Record a submitted batch (and how to map its results back) the moment it exists.

        A process that dies while the batch runs finds it with `pending_batches` and collects its
        results instead of paying for the requests again.
        """
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "INSERT OR REPLACE INTO batches (batch_id, generator, model, manifest, status, created_at) "
                    "VALUES (?, ?, ?, ?, 'pending', ?)",
                    (batch_id, generator, model, json.dumps(manifest, sort_keys=True), _now()),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def pending_batches(self, *, generator: str, model: str) -> list[tuple[str, dict[str, Any]]]:
        """Batches submitted by this generator and model whose results are not yet collected."""
        with self._lock:
            rows = self._db.execute(
                "SELECT batch_id, manifest FROM batches WHERE status='pending' AND generator=? AND model=? "
                "ORDER BY created_at",
                (generator, model),
            ).fetchall()
        return [(batch_id, json.loads(manifest)) for batch_id, manifest in rows]

    def finish_batch(self, batch_id: str) -> None:
        """Mark a batch's results as collected."""
        with self._lock:
            self._db.execute("UPDATE batches SET status='done' WHERE batch_id=?", (batch_id,))

    # -- JSONL -------------------------------------------------------------------------------

    def export_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write every context as a JSON line in the cookbook's format; returns the line count.

        Each line has doc_id, chunk_id, original_index, context, plus key, generator and model.
        """
        with self._lock:
            rows = self._db.execute(
                "SELECT doc_id, chunk_id, original_index, context, key, generator, model "
                "FROM contexts ORDER BY rowid"
            ).fetchall()
        names = ("doc_id", "chunk_id", "original_index", "context", "key", "generator", "model")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(dict(zip(names, row)), ensure_ascii=False) + "\n")
        return len(rows)

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
        rows: list[tuple] = []
        skipped = 0
        created = _now()
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}, line {lineno}: malformed JSON: {exc}") from exc
                if not isinstance(item, dict) or not isinstance(item.get("context"), str):
                    raise ValueError(
                        f"{path}, line {lineno}: expected a JSON object with a string 'context'"
                    )
                key = resolve(item)
                if key is None:
                    skipped += 1
                    continue
                if not isinstance(key, str) or not key:
                    raise ValueError(
                        f"{path}, line {lineno}: resolve returned {key!r}, not a key or None"
                    )
                index = item.get("original_index")
                rows.append(
                    (
                        key,
                        item["context"],
                        item.get("generator") or generator,
                        item.get("model") or model,
                        item.get("doc_id"),
                        item.get("chunk_id"),
                        index if isinstance(index, int) else None,
                        None,
                        created,
                    )
                )
        if rows:
            self._write(rows)
        return ImportResult(len(rows), skipped)

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
        return f"ContextStore({self.path!r})"
