"""The persistent, content-addressed context store: every generated context is kept, so nothing
is paid for twice.

`open_store` is the one factory: a file path (or ":memory:") opens SQLite (`ContextStore`), a
``postgresql://`` URL opens PostgreSQL (`PostgresContextStore`, for workers on many machines).
Both keep contexts, work claims and the Message Batch ledger, and export / import JSON lines.

Example:
    >>> store = open_store(":memory:")
    >>> type(store).__name__, len(store)
    ('ContextStore', 0)
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from contextual_retrieval_core._sdk import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.store.context_store import SCHEMA_VERSION, ContextStore
    from contextual_retrieval_core.store.errors import ContextStoreError, StoreFullError
    from contextual_retrieval_core.store.jsonl import ImportResult
    from contextual_retrieval_core.store.postgres import PostgresContextStore

__all__ = ["SCHEMA_VERSION", "ContextStore", "ContextStoreError", "ImportResult", "PostgresContextStore", "StoreFullError", "open_store"]

# each name is imported on first use, as the other stages' are
__getattr__, __dir__ = lazy_exports(globals(), {
    "SCHEMA_VERSION": "contextual_retrieval_core.store.context_store",
    "ContextStore": "contextual_retrieval_core.store.context_store",
    "ContextStoreError": "contextual_retrieval_core.store.errors",
    "ImportResult": "contextual_retrieval_core.store.jsonl",
    "PostgresContextStore": "contextual_retrieval_core.store.postgres",
    "StoreFullError": "contextual_retrieval_core.store.errors",
})


def open_store(location: str | os.PathLike[str], **options: Any) -> ContextStore:
    """The context store at `location`: an SQLite file (created with its folders if missing),
    ":memory:", or a ``postgresql://user:password@host/db`` URL. `options` are the backend's
    (``timeout``, ``read_only``)."""
    if isinstance(location, str) and location.startswith(("postgresql://", "postgres://")):
        from contextual_retrieval_core.store.postgres import PostgresContextStore

        return PostgresContextStore(location, **options)
    from contextual_retrieval_core.store.context_store import ContextStore

    return ContextStore(location, **options)
