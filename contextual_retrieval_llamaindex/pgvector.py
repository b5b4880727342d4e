"""LlamaIndex's `PGVectorStore` (llama-index-vector-stores-postgres) under `HybridRetriever`.

- `stored_vectors` / `astored_vectors`: the stored vectors of the fused top nodes, for dense
  feedback, through the store's public ``get_nodes`` / ``aget_nodes`` (a node's own row by id;
  its window rows, when the index has any, by their ``window_of`` metadata);
- `server_address`: the server's ``host:port`` (from the store's connection URL; never its
  password), which `VectorServerUnavailable` names;
- `on_this_loop`: the store's async engine bound to the running event loop (the core's
  `LoopBinding`): its connections are closed as an ``asyncio.run`` loop shuts down, so one
  ``asyncio.run`` per query works; a use from a second loop while the first is still open raises
  `OtherEventLoopError`, naming the fix.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.indices.vector_store.retrievers import VectorIndexRetriever
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from contextual_retrieval_core.dense import server_errors
from contextual_retrieval_core.dense.event_loops import LoopBinding
from contextual_retrieval_core.dense.window_rows import WINDOW_OF_KEY
from contextual_retrieval_llamaindex._compat import pgvector_async_engine, vector_retriever_parts

__all__ = ["is_pgvector_store", "pgvector_store", "stored_vectors", "astored_vectors", "server_address", "on_this_loop"]

#: one binding per async engine (a store's pool), for as long as the engine lives
_BINDINGS: weakref.WeakKeyDictionary[Any, LoopBinding] = weakref.WeakKeyDictionary()


def is_pgvector_store(store: Any) -> bool:
    """Whether `store` is llama-index's `PGVectorStore` (the pgvector extra)."""
    try:
        from llama_index.vector_stores.postgres import PGVectorStore
    except ImportError:  # pragma: no cover - the pgvector extra is not installed
        return False
    return isinstance(store, PGVectorStore)


def pgvector_store(retriever: BaseRetriever) -> Any | None:
    """The `PGVectorStore` a vector retriever (or a `WindowedVectorRetriever` around one)
    searches; None for any other retriever or store."""
    from contextual_retrieval_llamaindex.windows import WindowedVectorRetriever

    inner = retriever.vector_retriever if isinstance(retriever, WindowedVectorRetriever) else retriever
    if not isinstance(inner, VectorIndexRetriever):
        return None
    store, _ = vector_retriever_parts(inner)
    return store if is_pgvector_store(store) else None


def _window_filter(node_ids: Sequence[str]) -> MetadataFilters:
    return MetadataFilters(filters=[MetadataFilter(key=WINDOW_OF_KEY, value=list(node_ids), operator=FilterOperator.IN)])


def stored_vectors(store: Any, node_ids: Sequence[str], windows: bool) -> dict[str, Any]:
    """{row id: vector} of the `node_ids`' rows in `store` (their window rows too with `windows`)."""
    if not node_ids:
        return {}
    nodes = store.get_nodes(node_ids=list(node_ids))
    if windows:
        nodes += store.get_nodes(filters=_window_filter(node_ids))
    return {n.node_id: n.embedding for n in nodes if n.embedding is not None}


async def astored_vectors(store: Any, node_ids: Sequence[str], windows: bool) -> dict[str, Any]:
    """`stored_vectors` through the store's async engine."""
    if not node_ids:
        return {}
    nodes = await store.aget_nodes(node_ids=list(node_ids))
    if windows:
        nodes += await store.aget_nodes(filters=_window_filter(node_ids))
    return {n.node_id: n.embedding for n in nodes if n.embedding is not None}


def server_address(store: Any) -> str | None:
    """``host:port`` of the server `store` connects to (its engine's URL, else its connection
    string); never the password."""
    engine = store.client  # the sync engine, once the store has connected
    url = engine.url.render_as_string(hide_password=True) if engine is not None else store.connection_string
    return server_errors.server_address(url)


async def on_this_loop(store: Any) -> None:
    """Bind `store`'s async engine to the running event loop (`LoopBinding.enter`); nothing while
    the store has not made one yet."""
    engine = pgvector_async_engine(store)
    if engine is None:
        return
    binding = _BINDINGS.get(engine)
    if binding is None:
        binding = _BINDINGS[engine] = LoopBinding(f"LlamaIndex's PGVectorStore (table {store.table_name!r})")
    await binding.enter(engine.dispose, lambda: engine.dispose(close=False))
