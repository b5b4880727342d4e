"""The one place this package reads another package's private members, where no public API exists.

Each accessor names the versions it is tested with (tests/unit/project/test_compat.py pins them); everything
else in this package uses public API only.

- llama-index-llms-anthropic (0.8 - 0.12): `Anthropic` keeps its SDK clients (Anthropic, Bedrock
  or Vertex, built from an api key it does not store) only as ``_client`` / ``_aclient``. Reusing
  them lets the core `AnthropicContextGenerator` call the API with the user's own credentials,
  base URL and retries.
- llama-index-core (0.12 - 0.14): `VectorStoreIndex` keeps the embedding model it embeds nodes and
  queries with only as ``_embed_model``; windowed embeddings (`windows.add_windows`) embed a
  node's windows with that same model.
- llama-index-core (0.12 - 0.14): `VectorIndexRetriever` keeps its vector store and embedding
  model only as ``_vector_store`` / ``_embed_model``; dense PRF (`feedback`) reads the stored
  vectors of the fused top nodes from that store and embeds the query once with that model.
- llama-index-vector-stores-postgres (0.5 - 0.9): `PGVectorStore` keeps its async engine only as
  ``_async_engine`` (its public ``client`` is the sync one); `pgvector.on_this_loop` closes that
  engine's connections as an ``asyncio.run`` loop shuts down, so the next loop opens its own. It
  keeps its table model and query hook only as ``_table_class`` / ``_customize_query_fn``, and
  `VectorIndexRetriever` what narrows its query only as ``_filters``, ``_node_ids``,
  ``_doc_ids``, ``_vector_store_query_mode`` and ``_kwargs``: dense feedback's second search
  (`pgvector.search_again`) selects row ids and distances from that table when nothing narrows
  the query, the search the store runs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["anthropic_llm_clients", "index_embed_model", "vector_retriever_parts", "searches_by_vector",
           "pgvector_async_engine", "pgvector_table", "plain_vector_query"]


def anthropic_llm_clients(llm: Any) -> tuple[Any | None, Any | None]:
    """(sync, async) anthropic SDK clients of llama-index's `Anthropic` LLM; (None, None) when the
    installed version keeps them elsewhere."""
    return getattr(llm, "_client", None), getattr(llm, "_aclient", None)


def index_embed_model(index: Any) -> Any | None:
    """The embedding model of a llama-index `VectorStoreIndex`; None when the installed version
    keeps it elsewhere."""
    return getattr(index, "_embed_model", None)


def vector_retriever_parts(retriever: Any) -> tuple[Any | None, Any | None]:
    """(vector store, embedding model) of a llama-index `VectorIndexRetriever` (llama-index-core
    0.12 - 0.14 keep them only as ``_vector_store`` and ``_embed_model``); what dense PRF reads the
    stored vectors from and embeds the query with. (None, None) when kept elsewhere."""
    return getattr(retriever, "_vector_store", None), getattr(retriever, "_embed_model", None)


def searches_by_vector(retriever: Any) -> bool:
    """Whether a llama-index `VectorIndexRetriever` embeds the query (its private
    ``_needs_embedding()``, the store's ``is_embedding_query``); a store that searches by text has
    no query vector for dense PRF to move."""
    needs = getattr(retriever, "_needs_embedding", None)
    return bool(needs()) if callable(needs) else True


def pgvector_async_engine(store: Any) -> Any | None:
    """The SQLAlchemy `AsyncEngine` of a llama-index `PGVectorStore` (kept only as
    ``_async_engine``); None before the store has connected, or when kept elsewhere."""
    return getattr(store, "_async_engine", None)


def pgvector_table(store: Any) -> Any | None:
    """The SQLAlchemy model of a llama-index `PGVectorStore`'s table (``_table_class``); None when
    a query hook (``_customize_query_fn``) changes the store's queries, or when kept elsewhere."""
    if getattr(store, "_customize_query_fn", None) is not None:
        return None
    return getattr(store, "_table_class", None)


def plain_vector_query(retriever: Any) -> bool:
    """Whether a llama-index `VectorIndexRetriever` asks its store for the nearest rows and nothing
    else (no filters, node or document ids, store kwargs; the default query mode)."""
    from llama_index.core.vector_stores.types import VectorStoreQueryMode

    unknown = object()  # kept elsewhere: not known to be plain
    narrowing = [getattr(retriever, name, unknown) for name in ("_filters", "_node_ids", "_doc_ids", "_kwargs")]
    mode = getattr(retriever, "_vector_store_query_mode", None)
    return mode == VectorStoreQueryMode.DEFAULT and not any(v is unknown or v for v in narrowing)
