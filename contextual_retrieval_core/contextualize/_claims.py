"""Work claims for a `Contextualizer` run: several workers (processes, or machines on PostgreSQL)
ingesting into one store pay for each chunk once.

A run claims each document's chunks just before it generates them (`ContextStore.claim`, one
short transaction); chunks another worker holds are left to it. A heartbeat thread renews the
run's leases every `renew_s` while it lives. Once its own work is done the run polls the store
every `poll_s`: contexts the other workers stored are served from it, and a claim whose lease
ran out (its worker died) or that was released unfinished is taken over and generated here.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from typing import TYPE_CHECKING

from contextual_retrieval_core.store._claim_ledger import Claimed
from contextual_retrieval_core.store.context_store import ContextStore
from contextual_retrieval_core.store.errors import ContextStoreError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.types import Chunk

__all__ = ["WorkClaims", "DEFAULT_CLAIM_LEASE_S", "DEFAULT_CLAIM_POLL_S"]

log = logging.getLogger(__name__)

#: How long a claim holds without renewal: a dead worker's chunks wait this long at most.
DEFAULT_CLAIM_LEASE_S = 60.0
#: How often a worker waiting on other workers' claims looks at the store.
DEFAULT_CLAIM_POLL_S = 1.0


class WorkClaims:
    """One run's claims: its owner id, the heartbeat that renews them, and their release.

    Args:
        store: the context store shared by the workers.
        lease_s: seconds a claim lasts unless renewed.
        renew_s: seconds between renewals (default: a third of the lease).
        poll_s: seconds between looks at the store while waiting on other workers.
        enabled: False: claim nothing (every chunk is this run's), as for a generator that costs nothing.
    """

    def __init__(self, store: ContextStore, *, lease_s: float, renew_s: float | None, poll_s: float,
                 enabled: bool = True) -> None:
        self.store, self.lease_s, self.poll_s, self.enabled = store, lease_s, poll_s, enabled
        self.renew_s = renew_s if renew_s is not None else lease_s / 3
        #: who holds the claims: host, process and a random part (one per run)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def claim(self, keys: list[str]) -> Claimed:
        """The keys of `keys` this run now holds (all of them when claims are off), and those of
        them taken over from another worker's expired lease."""
        if not self.enabled:
            return Claimed(set(keys), set())
        return self.store.claim(keys, self.owner, self.lease_s)

    def release_dead_local_owners(self) -> int:
        """Release the claims of runs on this machine whose process is gone (a rerun after a crash
        or a kill need not wait for their leases); returns how many were released."""
        host = socket.gethostname()
        released = 0
        for owner in {owner for owner, _ in self.store.claims().values()}:
            parts = owner.rsplit(":", 2)  # host:pid:run
            if len(parts) != 3 or parts[0] != host or not parts[1].isdigit() or _alive(int(parts[1])):
                continue
            released += self.store.release_claims(owner)
        return released

    def start(self) -> None:
        """Release dead local runs' claims, then renew this run's leases in a daemon thread."""
        if self.enabled and self._thread is None:
            self.release_dead_local_owners()
            self._thread = threading.Thread(target=self._heartbeat, name="claims-heartbeat", daemon=True)
            self._thread.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.renew_s):
            try:
                self.store.renew_claims(self.owner, self.lease_s)
            except (ContextStoreError, ValueError) as exc:  # the run sees a failing store on its next write
                log.warning("could not renew work claims: %s", exc)

    def stop(self) -> None:
        """Stop the heartbeat and release every claim still held (chunks this run did not finish)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.enabled:
            try:
                self.store.release_claims(self.owner)
            except (ContextStoreError, ValueError) as exc:  # they expire with their lease
                log.warning("could not release work claims (they expire in %g s): %s", self.lease_s, exc)

    def partition(self, chunks: list[Chunk], keys: dict[str, str]) -> tuple[list[Chunk], list[Chunk], int]:
        """Claim `chunks` (by their store keys): (those this run holds, those left to other
        workers, how many of the held ones were taken over from an expired lease)."""
        held, taken = self.claim([keys[c.id] for c in chunks])
        mine = [c for c in chunks if keys[c.id] in held]
        return mine, [c for c in chunks if keys[c.id] not in held], sum(1 for c in mine if keys[c.id] in taken)


def _alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by another user
        return True
    return True
