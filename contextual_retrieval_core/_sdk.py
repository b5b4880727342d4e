"""Shared plumbing for the hosted-API backends: optional SDK imports, API keys from the env, and
the chain of errors an SDK's error was raised from (`error_chain`).

API keys are read from the environment only when no client was injected, and never appear in a
message: errors name the variable and the alternative instead.
"""

from __future__ import annotations

import importlib
import os
import weakref
from collections.abc import Awaitable, Callable, Iterator
from types import ModuleType
from typing import Any, TypeVar

from contextual_retrieval_core.errors import MissingDependencyError, RunError

T = TypeVar("T")

__all__ = ["env_key", "require_env_key", "import_sdk", "in_thread", "error_chain", "at_loop_shutdown", "LoopClients",
           "aclose_client"]


def in_thread(call: Callable[..., T], *args: Any) -> Awaitable[T]:
    """`asyncio.to_thread(call, *args)`: a sync method run off the event loop. asyncio is imported
    here, where a loop already runs, so the sync paths (a `query`, say) never load it."""
    import asyncio

    return asyncio.to_thread(call, *args)


def error_chain(exc: BaseException | None) -> Iterator[BaseException]:
    """`exc`, then each error it was raised from (its `__cause__`, else its `__context__`), each
    once: a library's error often wraps the one that says what happened.

    Example:
        >>> try:
        ...     try:
        ...         raise ConnectionResetError("reset by peer")
        ...     except OSError as low:
        ...         raise RuntimeError("request failed") from low
        ... except RuntimeError as high:
        ...     [type(e).__name__ for e in error_chain(high)]
        ['RuntimeError', 'ConnectionResetError']
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


class LoopClients:
    """Async clients built by the library, one per event loop, each closed when its loop shuts down.

    A client's connections belong to the loop that opened them, so a client kept from an earlier
    `asyncio.run` would fail with "Event loop is closed": `get()` builds one (with `build`) per
    running loop. When the loop is shut down the way `asyncio.run` does it
    (`loop.shutdown_asyncgens()`), the client built for it is closed first, so its connections do
    not outlive the loop and wait for the garbage collector ("unclosed transport").

    Example:
        >>> import asyncio
        >>> class Client:
        ...     closed = False
        ...     async def close(self):
        ...         self.closed = True
        >>> clients = LoopClients(Client)
        >>> async def use():
        ...     return clients.get(), clients.get()
        >>> first, again = asyncio.run(use())
        >>> first is again, first.closed
        (True, True)
        >>> asyncio.run(use())[0] is first
        False

    A loop that ended holds nothing of it (its client is forgotten once closed):

        >>> import gc, weakref
        >>> async def loop_used():
        ...     clients.get()
        ...     return weakref.ref(asyncio.get_running_loop())
        >>> ended = asyncio.run(loop_used())
        >>> _ = gc.collect(); ended() is None
        True
    """

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build
        self._clients: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()

    def get(self) -> Any:
        """The client for the running event loop, built on first use."""
        import asyncio  # loaded wherever an event loop runs

        loop = asyncio.get_running_loop()
        entry = self._clients.get(loop)
        if entry is None:
            for ended in [other for other in self._clients if other.is_closed()]:  # closed without shutdown
                self._clients.pop(ended, None)
            client = self._build()
            entry = self._clients[loop] = (client, at_loop_shutdown(lambda: self._release(loop, client)))
        return entry[0]

    async def _release(self, loop: Any, client: Any) -> None:
        # forgotten first: the entry (through its closer) would otherwise keep the loop alive
        self._clients.pop(loop, None)
        await aclose_client(client)


def at_loop_shutdown(release: Callable[[], Awaitable[Any]]) -> Any:
    """Run `release()` on the running event loop when the loop is shut down the way `asyncio.run`
    shuts it down (`loop.shutdown_asyncgens()`), before it closes: what a connection pool of that
    loop needs to close its connections while the loop still runs them. Returns the async
    generator that holds the hook (its first step registers it with the loop); keep it as long as
    the hook should stand: one collected earlier runs `release` then.

    Example:
        >>> import asyncio
        >>> done = []
        >>> async def release():
        ...     done.append("released")
        >>> async def use():
        ...     hooks.append(at_loop_shutdown(release))
        ...     done.append("used")
        >>> hooks = []
        >>> asyncio.run(use()); done
        ['used', 'released']
    """
    import asyncio  # loaded wherever an event loop runs

    async def hook() -> Any:
        try:
            yield
        finally:
            await release()

    held = hook()
    asyncio.ensure_future(held.asend(None))
    return held


async def aclose_client(client: Any) -> None:
    """Close an SDK's async client: its `close()` coroutine (Anthropic), else its `async with`
    exit (Cohere); a client with neither holds no connections of its own (Voyage)."""
    import inspect

    close = getattr(client, "close", None)
    if close is not None and inspect.iscoroutinefunction(close):
        await close()
    elif hasattr(type(client), "__aexit__"):
        await client.__aexit__(None, None, None)


def env_key(*names: str) -> str | None:
    """The first non-empty environment variable among `names`, or None."""
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def require_env_key(names: tuple[str, ...], message: str) -> str:
    """`env_key(*names)`, or RuntimeError(message) when none is set."""
    key = env_key(*names)
    if not key:
        raise RunError(message)
    return key


def import_sdk(module: str, extra: str, label: str) -> ModuleType:
    """Import an optional SDK, or ImportError naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError(f"the {label} SDK is not installed; pip install 'contextual-retrieval-kit[{extra}]'") from exc


class LazyClients:
    """Mixin: the SDK's sync and async clients, built on first use unless injected.

    A subclass sets `_sdk` (module, extra, label), `_sync_cls`, `_async_cls`, `_key_vars` and
    `_missing_key`, and its __init__ calls `_init_clients`. The retries are the SDK's own: no
    second retry layer is stacked on them.

    When only a sync client was injected, async calls must not build an async client from the
    environment (it would miss the injected client's key, base URL and settings): the subclass runs
    its sync path in a worker thread instead (`asyncio.to_thread`) when `_async_in_thread` is set.

    An async client built here is built once per event loop and closed when that loop shuts down
    (`LoopClients`). An injected async client is the caller's, used as given.
    """

    _sdk: tuple[str, str, str]
    _sync_cls: str
    _async_cls: str
    _key_vars: tuple[str, ...]
    _missing_key: str
    _client: object
    _async_client: object
    _max_retries: int
    _timeout: float | None
    _base_url: str | None
    _async_in_thread: bool
    _loop_clients: LoopClients

    def _init_clients(
        self,
        client: object,
        async_client: object,
        max_retries: int,
        timeout: float | None,
        base_url: str | None = None,
    ) -> None:
        """Keep the injected clients and the settings for building the missing ones.

        RuntimeError(`_missing_key`) when no client was injected and none of `_key_vars` is set.
        """
        self._client = client
        self._async_client = async_client
        self._max_retries = max_retries
        self._timeout = timeout
        self._base_url = base_url
        self._loop_clients = LoopClients(lambda: self._build(self._async_cls))
        # a sync client injected alone: async calls run the sync path in a worker thread
        self._async_in_thread = client is not None and async_client is None
        if client is None and async_client is None:
            require_env_key(self._key_vars, self._missing_key)

    def _build(self, cls_name: str) -> object:
        module = import_sdk(*self._sdk)
        api_key = require_env_key(self._key_vars, self._missing_key)
        options = {"base_url": self._base_url} if self._base_url else {}
        return getattr(module, cls_name)(api_key=api_key, max_retries=self._max_retries, timeout=self._timeout, **options)

    def _sync_client(self):  # type: ignore[no-untyped-def]
        if self._client is None:
            self._client = self._build(self._sync_cls)
        return self._client

    def _aio_client(self):  # type: ignore[no-untyped-def]
        """The injected async client, or the one built for the running event loop."""
        if self._async_client is not None:
            return self._async_client
        return self._loop_clients.get()


def lazy_exports(namespace: dict, lazy: dict[str, str]):  # type: ignore[no-untyped-def]
    """Module-level `__getattr__` / `__dir__` that import `name` from `lazy[name]` on first use.

    Keeps optional SDKs (voyageai, cohere, anthropic, onnxruntime) out of a package's import.
    """
    package = namespace["__name__"]

    def __getattr__(name: str):  # type: ignore[no-untyped-def]
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())))

    return __getattr__, __dir__
