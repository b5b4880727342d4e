"""Work claims in the context store, so that several ingestion workers never pay for a chunk twice.

A run claims the store keys it is about to generate: a row (key, owner, expires_at) in the
``claims`` table. A key can be claimed when no context is stored under it and no other owner
holds a live claim on it; a claim whose lease has expired (its worker died) is taken over. The
owner renews its leases while it runs (`renew_claims`, a heartbeat), a stored context ends the
claim on its key (`put` deletes it in the same transaction), and a run releases what is left
when it ends (`release_claims`). Every call is one short transaction.

This module holds the SQLite version (processes on one machine: WAL, BEGIN IMMEDIATE, the busy
timeout); store_postgres.py has the same methods on a server, with the server's clock.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, NamedTuple

__all__ = ["ClaimLedger", "Claimed", "CLAIMS_TABLE"]


class Claimed(NamedTuple):
    """What a `claim` call got: the keys the owner now holds, and those of them whose claim it
    took over from another owner whose lease had expired."""

    held: set[str]
    taken_over: set[str]

#: The claims table (the same columns on PostgreSQL): expires_at in seconds since the epoch.
CLAIMS_TABLE = """
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
)"""
_PART = 500  # keys per statement (SQLite's bound-parameter limit is far above)


class ClaimLedger:
    """`ContextStore`'s claim methods on SQLite (a mixin over its connection and lock)."""

    _lock: Any
    _db: Any

    def claim(self, keys: Iterable[str], owner: str, lease_s: float) -> Claimed:
        """Claim those of `keys` that have no stored context and no live claim by another owner
        (expired claims are taken over; the owner's own claims are renewed). Returns the keys
        `owner` now holds, each for `lease_s` seconds, and those it took over."""
        wanted = sorted(set(keys))
        if not wanted:
            return Claimed(set(), set())
        self._refuse_if_read_only()  # type: ignore[attr-defined]
        held: set[str] = set()
        taken: set[str] = set()
        with self._lock, self._errors("claiming contexts to generate"):  # type: ignore[attr-defined]
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                now = time.time()
                for start in range(0, len(wanted), _PART):
                    part = wanted[start : start + _PART]
                    marks = ",".join("?" * len(part))
                    stored = {k for (k,) in db.execute(
                        f"SELECT key FROM contexts WHERE key IN ({marks}) AND trim(context) <> ''", part)}
                    taken.update(k for (k,) in db.execute(
                        f"SELECT key FROM claims WHERE key IN ({marks}) AND owner <> ? AND expires_at < ?",
                        [*part, owner, now]) if k not in stored)
                    db.executemany(
                        "INSERT INTO claims (key, owner, expires_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE "
                        "SET owner = excluded.owner, expires_at = excluded.expires_at "
                        "WHERE claims.owner = excluded.owner OR claims.expires_at < ?",
                        [(k, owner, now + lease_s, now) for k in part if k not in stored],
                    )
                    held.update(k for (k,) in db.execute(
                        f"SELECT key FROM claims WHERE owner = ? AND key IN ({marks})", [owner, *part]))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # SQLite has rolled back already after some errors (a full disk)
                    db.execute("ROLLBACK")
                raise
        return Claimed(held, taken & held)

    def renew_claims(self, owner: str, lease_s: float) -> int:
        """Extend every claim `owner` holds to `lease_s` seconds from now; returns how many."""
        self._refuse_if_read_only()  # type: ignore[attr-defined]
        with self._lock, self._errors("renewing claims"):  # type: ignore[attr-defined]
            cur = self._db.execute("UPDATE claims SET expires_at = ? WHERE owner = ?", (time.time() + lease_s, owner))
            return int(cur.rowcount)

    def release_claims(self, owner: str) -> int:
        """Drop every claim `owner` still holds (its run ended); returns how many."""
        if self.read_only:  # type: ignore[attr-defined]
            return 0
        with self._lock, self._errors("releasing claims"):  # type: ignore[attr-defined]
            return int(self._db.execute("DELETE FROM claims WHERE owner = ?", (owner,)).rowcount)

    def claims(self) -> dict[str, tuple[str, float]]:
        """Every claim now in the store: key -> (owner, seconds until its lease expires; < 0: expired)."""
        with self._lock, self._errors("reading claims"):  # type: ignore[attr-defined]
            rows = self._db.execute("SELECT key, owner, expires_at FROM claims").fetchall()
        now = time.time()
        return {key: (owner, float(expires) - now) for key, owner, expires in rows}
