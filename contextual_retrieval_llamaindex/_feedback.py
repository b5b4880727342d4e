"""Dense pseudo-relevance feedback on a LlamaIndex vector retriever (`HybridRetriever`'s dense PRF).

The core's Rocchio step (`contextual_retrieval_core.search.feedback`) over the vectors a LlamaIndex vector
store already holds: the query is embedded once with the retriever's own model, the stored rows
of the fused top nodes (a node's own row and, for a windowed index, its window rows) are read
back from the store, and the dense side is searched again with the moved vector
(``QueryBundle(embedding=...)``). Stores read: `SimpleVectorStore` (its embedding dict),
`ChromaVectorStore` (its collection), `PGVectorStore` (its ``get_nodes``, `pgvector`) and any store
that gives its vectors back itself (`StoredVectors`: `milvus.ContextualMilvusVectorStore`). Nothing
is embedded again at query time: a node the store gives no vector back for feeds nothing back,
and on any other store feedback is skipped (the dense side is searched once). The async path
reads a `PGVectorStore` through its async engine, the others in a worker thread.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from itertools import count
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.indices.vector_store.retrievers import VectorIndexRetriever
from llama_index.core.schema import QueryBundle
from llama_index.core.vector_stores.simple import SimpleVectorStore

from contextual_retrieval_core.dense._window_rows import row_id
from contextual_retrieval_core.search.feedback import FeedbackRows, StoredVectors, StoreRead, stored_read
from contextual_retrieval_llamaindex._compat import searches_by_vector, vector_retriever_parts
from contextual_retrieval_llamaindex._pgvector import astored_vectors, is_pgvector_store, stored_vectors

__all__ = ["VectorSide", "vector_side"]


@dataclasses.dataclass(frozen=True)
class VectorSide:
    """A vector retriever with the store and model dense PRF reads and embeds with."""

    retriever: BaseRetriever
    store: Any
    model: Any

    def with_query_vector(self, bundle: QueryBundle) -> QueryBundle:
        """`bundle` with its embedding, made here once with the retriever's model when missing."""
        if bundle.embedding is not None:
            return bundle
        return dataclasses.replace(bundle, embedding=self.model.get_agg_embedding_from_queries(bundle.embedding_strs))

    async def awith_query_vector(self, bundle: QueryBundle) -> QueryBundle:
        if bundle.embedding is not None:
            return bundle
        return dataclasses.replace(bundle, embedding=await self.model.aget_agg_embedding_from_queries(bundle.embedding_strs))

    def rows(self, top: Sequence[str]) -> FeedbackRows:
        """The stored rows of the `top` node ids (a node's own row, then its window rows); a node
        the store gives no vector back for has none."""
        if is_pgvector_store(self.store):
            return StoreRead.of_rows(top, stored_vectors(self.store, top, self._windowed())).rows()
        return self._read(top).rows()

    async def arows(self, top: Sequence[str]) -> FeedbackRows:
        """`rows` without blocking the event loop: a `PGVectorStore` read through its async
        engine, any other store in a worker thread."""
        if is_pgvector_store(self.store):
            return StoreRead.of_rows(top, await astored_vectors(self.store, top, self._windowed())).rows()
        return (await asyncio.to_thread(self._read, top)).rows()

    def _windowed(self) -> bool:
        """Whether the index holds window rows beyond one per node."""
        from contextual_retrieval_llamaindex.windows import WindowedVectorRetriever

        return isinstance(self.retriever, WindowedVectorRetriever) and self.retriever.extra > 0

    def _read(self, top: Sequence[str]) -> StoreRead:
        """The rows the store holds for the `top` node ids (a node's own row, then its window
        rows): read from `SimpleVectorStore` and Chroma, none from any other store."""
        store = self.store
        if isinstance(store, SimpleVectorStore):
            held = store.data.embedding_dict
            rows = {node_id: _held_rows(node_id, held) for node_id in top}
            return StoreRead(top, rows, {row: held[row] for per in rows.values() for row in per if row in held})
        if isinstance(store, StoredVectors):  # a store that reads its vectors back itself (`milvus`)
            return StoreRead(top, {node_id: [node_id] for node_id in top}, dict(store.stored_vectors(list(top))))
        collection = _chroma_collection(store)
        return stored_read(collection, top) if collection is not None else StoreRead(top, {}, {})


def vector_side(retriever: BaseRetriever) -> VectorSide | None:
    """The `VectorSide` of a vector index retriever (or a `WindowedVectorRetriever` around one);
    None for any other retriever."""
    from contextual_retrieval_llamaindex.windows import WindowedVectorRetriever

    inner = retriever.vector_retriever if isinstance(retriever, WindowedVectorRetriever) else retriever
    if not isinstance(inner, VectorIndexRetriever) or not searches_by_vector(inner):
        return None  # not a vector retriever, or its store searches by text (no query vector to move)
    store, model = vector_retriever_parts(inner)
    if store is None or model is None:
        return None
    return VectorSide(retriever, store, model)


def _held_rows(node_id: str, held: dict[str, list[float]]) -> list[str]:
    """A node's own row and its window rows (`row_id`, n = 1, 2, ...) as far as `held` has them."""
    rows = [node_id]
    for n in count(1):
        if row_id(node_id, n) not in held:
            return rows
        rows.append(row_id(node_id, n))
    return rows  # pragma: no cover - count() never ends


def _chroma_collection(store: Any) -> Any:
    """The chromadb collection of a `ChromaVectorStore` (its public ``client``); None otherwise."""
    try:
        from llama_index.vector_stores.chroma import ChromaVectorStore
    except ImportError:  # pragma: no cover - the chroma extra is not installed
        return None
    return store.client if isinstance(store, ChromaVectorStore) else None
