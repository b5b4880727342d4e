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
from typing import Any

from contextual_retrieval_core.store.context_store import SCHEMA_VERSION, ContextStore
from contextual_retrieval_core.store.errors import ContextStoreError
from contextual_retrieval_core.store.jsonl import ImportResult
from contextual_retrieval_core.store.postgres import PostgresContextStore

__all__ = ["ContextStore", "ContextStoreError", "ImportResult", "PostgresContextStore", "SCHEMA_VERSION", "open_store"]


def open_store(location: str | os.PathLike[str], **options: Any) -> ContextStore:
    """The context store at `location`: an SQLite file (created with its folders if missing),
    ":memory:", or a ``postgresql://user:password@host/db`` URL. `options` are the backend's
    (``timeout``, ``read_only``)."""
    if isinstance(location, str) and location.startswith(("postgresql://", "postgres://")):
        return PostgresContextStore(location, **options)
    return ContextStore(location, **options)
