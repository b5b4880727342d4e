"""A vector store's async connections belong to one event loop at a time.

A framework's pgvector store (LlamaIndex's `PGVectorStore`) keeps an async engine whose pooled
connections (asyncpg) belong to the event loop that opened them; used from the next
``asyncio.run(...)`` they fail ("attached to a different loop", then "another operation is in
progress"). `LoopBinding` ties a pool to the loop it is in use on, so one ``asyncio.run`` per
query works as one loop for every query does:

- the first use on a loop registers `release` (close the pool's connections) to run when that
  loop shuts down the way ``asyncio.run`` shuts it down (`at_loop_shutdown`): the next loop opens
  connections of its own;
- a loop closed without that shutdown (``loop.close()`` alone) left connections nothing can close
  any more: `drop` (let the pool forget them) runs before the next loop uses it;
- a use while the pool is in use on another loop that is still open (two loops, one in another
  thread) raises `OtherEventLoopError`, naming the fix: keep one event loop for the store's
  async calls (or use the sync calls there).
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from typing import Any

from contextual_retrieval_core._sdk import at_loop_shutdown
from contextual_retrieval_core.errors import ContextualRetrievalError

__all__ = ["LoopBinding", "OtherEventLoopError"]


class OtherEventLoopError(ContextualRetrievalError, RuntimeError):
    """A vector store's async connections are in use on another event loop that is still open;
    the message names the store and the fix (one event loop for its async calls)."""


class LoopBinding:
    """The event loop an async connection pool is in use on (`enter` before each async use).

    Args:
        name: what the pool belongs to, for the error (e.g. "LlamaIndex's PGVectorStore").

    Example (one `asyncio.run` per query; then a loop closed without shutting down):
        >>> import asyncio
        >>> log = []
        >>> binding = LoopBinding("a store")
        >>> async def release():
        ...     log.append("closed")
        >>> async def drop():
        ...     log.append("dropped")
        >>> async def query(n):
        ...     await binding.enter(release, drop)
        ...     log.append(f"query {n}")
        >>> for n in (1, 2):
        ...     asyncio.run(query(n))
        >>> log
        ['query 1', 'closed', 'query 2', 'closed']
        >>> loop = asyncio.new_event_loop()
        >>> loop.run_until_complete(query(3)); loop.close()
        >>> asyncio.run(query(4))
        >>> log[4:]
        ['query 3', 'dropped', 'query 4', 'closed']
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._loop: weakref.ref[Any] | None = None
        self._hook: Any = None  # keeps the shutdown hook of the bound loop registered

    async def enter(self, release: Callable[[], Awaitable[Any]], drop: Callable[[], Awaitable[Any]]) -> None:
        """Bind the pool to the running loop, or check it is bound to it. `release`: close the
        pool's connections (run on the bound loop as it shuts down); `drop`: forget them unclosed
        (their loop is gone). Raises `OtherEventLoopError` when the pool is in use on another
        open loop."""
        import asyncio  # loaded wherever an event loop runs

        loop = asyncio.get_running_loop()
        bound = self._loop() if self._loop is not None else None
        if bound is loop:
            return
        if bound is not None and not bound.is_closed():
            raise OtherEventLoopError(
                f"{self.name} is in use on another event loop that is still open, and its pooled async "
                "connections belong to that loop: keep one event loop for its async calls (run every "
                "query inside one `asyncio.run(...)`, one loop per thread), or use the sync calls there"
            )
        if self._loop is not None:  # its loop closed without shutting down: its connections are lost
            stale, self._hook = self._hook, None
            self._loop = None
            if stale is not None:
                await stale.aclose()  # the old hook, retired: it releases nothing now
            await drop()
        self._loop = weakref.ref(loop)
        hook: Any = None

        async def released() -> None:
            if self._hook is not hook:  # retired
                return
            self._loop, self._hook = None, None
            await release()

        self._hook = hook = at_loop_shutdown(released)
