"""Dense pseudo-relevance feedback on a LlamaIndex vector retriever (`HybridRetriever`'s dense PRF).

The core's Rocchio step (`contextual_retrieval_core.search.feedback`) over the vectors a LlamaIndex vector
store already holds: the query is embedded once with the retriever's own model, the stored rows
of the fused top nodes (a node's own row and, for a windowed index, its window rows) are read
back from the store, and the dense side is searched again with the moved vector
(``QueryBundle(embedding=...)``). Stores: `SimpleVectorStore` and `ChromaVectorStore` are read
directly; a node any other store holds (or one of these gives no vector back for) is embedded
again with the same model (one embedding call for the top nodes per query). The async path reads
the store in a worker thread and embeds with the model's async call.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from itertools import count
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.indices.vector_store.retrievers import VectorIndexRetriever
from llama_index.core.schema import BaseNode, MetadataMode, QueryBundle
from llama_index.core.vector_stores.simple import SimpleVectorStore

from contextual_retrieval_core.dense.window_rows import row_id
from contextual_retrieval_core.search.feedback import FeedbackRows, StoreRead, stored_read
from contextual_retrieval_llamaindex._compat import searches_by_vector, vector_retriever_parts

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

    def rows(self, top: Sequence[str], nodes: dict[str, BaseNode]) -> FeedbackRows:
        """The stored rows of the `top` node ids; a node the store gives no vector for is
        embedded again from `nodes` with the retriever's model."""
        read = self._read(top)
        texts = _texts(read.unheld(), nodes)
        vectors = self.model.get_text_embedding_batch(list(texts.values())) if texts else []
        return read.rows(dict(zip(texts, vectors)))

    async def arows(self, top: Sequence[str], nodes: dict[str, BaseNode]) -> FeedbackRows:
        """`rows` without blocking the event loop: the store read in a worker thread, the nodes a
        store gives no vector for embedded with the model's async call."""
        read = await asyncio.to_thread(self._read, top)
        texts = _texts(read.unheld(), nodes)
        vectors = await self.model.aget_text_embedding_batch(list(texts.values())) if texts else []
        return read.rows(dict(zip(texts, vectors)))

    def _read(self, top: Sequence[str]) -> StoreRead:
        """The rows the store holds for the `top` node ids (a node's own row, then its window
        rows): read from `SimpleVectorStore` and Chroma, none from any other store."""
        store = self.store
        if isinstance(store, SimpleVectorStore):
            held = store.data.embedding_dict
            rows = {node_id: _held_rows(node_id, held) for node_id in top}
            return StoreRead(top, rows, {row: held[row] for per in rows.values() for row in per if row in held})
        collection = _chroma_collection(store)
        return stored_read(collection, top) if collection is not None else StoreRead(top, {}, {})


def _texts(node_ids: Sequence[str], nodes: dict[str, BaseNode]) -> dict[str, str]:
    """{node id: the text its vector was embedded from} of the `node_ids` at hand."""
    return {n: nodes[n].get_content(metadata_mode=MetadataMode.EMBED) for n in node_ids if n in nodes}


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
