"""The context store's ledger of Message Batches in flight (SQLite; store_postgres.py has the same
methods on PostgreSQL): a submitted batch is recorded with its manifest the moment it exists, so a
process that dies while the batch runs leaves it for the next run to collect instead of paying again.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

__all__ = ["BatchLedger", "now_iso"]


def now_iso() -> str:
    """The current UTC time as ISO 8601 text (the stores' created_at)."""
    return datetime.now(timezone.utc).isoformat()


class BatchLedger:
    """`ContextStore`'s batch methods (a mixin over its connection, lock and error translation)."""

    _lock: Any
    _db: Any

    def add_batch(self, batch_id: str, *, generator: str, model: str, manifest: dict[str, Any]) -> None:
        """Record a submitted batch (and how to map its results back) the moment it exists.

        A process that dies while the batch runs finds it with `pending_batches` and collects its
        results instead of paying for the requests again.
        """
        self._refuse_if_read_only()  # type: ignore[attr-defined]
        with self._lock, self._errors(f"recording Message Batch {batch_id}"):  # type: ignore[attr-defined]
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "INSERT OR REPLACE INTO batches (batch_id, generator, model, manifest, status, created_at) "
                    "VALUES (?, ?, ?, ?, 'pending', ?)",
                    (batch_id, generator, model, json.dumps(manifest, sort_keys=True), now_iso()),
                )
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # SQLite has rolled back already after some errors (a full disk)
                    db.execute("ROLLBACK")
                raise

    def pending_batches(self, *, generator: str, model: str) -> list[tuple[str, dict[str, Any]]]:
        """Batches submitted by this generator and model whose results are not yet collected."""
        with self._lock, self._errors("reading pending Message Batches"):  # type: ignore[attr-defined]
            rows = self._db.execute(
                "SELECT batch_id, manifest FROM batches WHERE status='pending' AND generator=? AND model=? "
                "ORDER BY created_at",
                (generator, model),
            ).fetchall()
        return [(batch_id, json.loads(manifest)) for batch_id, manifest in rows]

    def finish_batch(self, batch_id: str) -> None:
        """Mark a batch's results as collected."""
        self._set_batch_status(batch_id, "done")

    def abandon_batch(self, batch_id: str) -> None:
        """Mark a batch the API no longer knows (or whose results are gone) as abandoned: it is
        never polled again, and its chunks are generated anew."""
        self._set_batch_status(batch_id, "abandoned")

    def batch_status(self, batch_id: str) -> str | None:
        """"pending", "done" or "abandoned"; None for a batch never recorded."""
        with self._lock, self._errors("reading Message Batches"):  # type: ignore[attr-defined]
            row = self._db.execute("SELECT status FROM batches WHERE batch_id=?", (batch_id,)).fetchone()
        return None if row is None else str(row[0])

    def _set_batch_status(self, batch_id: str, status: str) -> None:
        self._refuse_if_read_only()  # type: ignore[attr-defined]
        with self._lock, self._errors(f"updating Message Batch {batch_id}"):  # type: ignore[attr-defined]
            self._db.execute("UPDATE batches SET status=? WHERE batch_id=?", (status, batch_id))
