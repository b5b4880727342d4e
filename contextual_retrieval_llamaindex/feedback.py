"""Dense pseudo-relevance feedback on a LlamaIndex vector retriever (`HybridRetriever`'s dense PRF).

The core's Rocchio step (`contextual_retrieval_core.feedback`) over the vectors a LlamaIndex vector
store already holds: the query is embedded once with the retriever's own model, the stored rows
of the fused top nodes (a node's own row and, for a windowed index, its window rows) are read
back from the store, and the dense side is searched again with the moved vector
(``QueryBundle(embedding=...)``). Stores: `SimpleVectorStore` and `ChromaVectorStore` are read
directly; any other store's nodes are embedded again with the same model (one embedding call for
the top nodes per query).
"""

from __future__ import annotations

import asyncio
import dataclasses
from itertools import count
from typing import Any, Dict, List, Optional, Sequence

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.indices.vector_store.retrievers import VectorIndexRetriever
from llama_index.core.schema import BaseNode, MetadataMode, QueryBundle
from llama_index.core.vector_stores.simple import SimpleVectorStore

from contextual_retrieval_core.feedback import looked_up_rows, stored_rows_by_id
from contextual_retrieval_core.window_rows import row_owner
from contextual_retrieval_core.windows import WINDOW_MARK

from ._compat import searches_by_vector, vector_retriever_parts

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

    def moved(self, bundle: QueryBundle, top: Sequence[str], nodes: Dict[str, BaseNode], beta: float) -> QueryBundle:
        """`bundle` (with its embedding) moved toward the stored rows of the `top` node ids."""
        rows, missing = self._held(top, nodes)
        if missing:
            rows.update(zip(missing, self.model.get_text_embedding_batch(list(missing.values()))))
        return self._moved(bundle, top, rows, beta)

    async def amoved(self, bundle: QueryBundle, top: Sequence[str], nodes: Dict[str, BaseNode], beta: float) -> QueryBundle:
        """`moved` without blocking the event loop: the store read in a worker thread, the nodes
        a store gives no vector for embedded with the model's async call."""
        rows, missing = await asyncio.to_thread(self._held, top, nodes)
        if missing:
            rows.update(zip(missing, await self.model.aget_text_embedding_batch(list(missing.values()))))
        return self._moved(bundle, top, rows, beta)

    def _held(self, top: Sequence[str], nodes: Dict[str, BaseNode]) -> tuple[Dict[str, Any], Dict[str, str]]:
        """({row id: stored vector}, {node id: embedding text}): the rows the store holds for
        the `top` node ids (a node's own row, then its window rows), and the nodes it holds none
        for (embedded again by the caller, with the same model)."""
        store = self.store
        held: Dict[str, Any] = {}
        if isinstance(store, SimpleVectorStore):
            embeddings = store.data.embedding_dict
            held = {row: embeddings[row] for node_id in top for row in _held_rows(node_id, embeddings) if row in embeddings}
        else:
            collection = _chroma_collection(store)
            if collection is not None:
                held = stored_rows_by_id(collection, top)
        missing = {n: nodes[n].get_content(metadata_mode=MetadataMode.EMBED)
                   for n in top if n in nodes and not any(row_owner(row) == n for row in held)}
        return held, missing

    @staticmethod
    def _moved(bundle: QueryBundle, top: Sequence[str], rows: Dict[str, Any], beta: float) -> QueryBundle:
        by_node: Dict[str, List[str]] = {}
        for row in rows:  # own row first, then windows in window order (the order they were read in)
            by_node.setdefault(row_owner(row), []).append(row)
        moved = looked_up_rows(top, lambda node_id: by_node.get(node_id, []), rows.get).moved_query(bundle.embedding, top, beta)
        return dataclasses.replace(bundle, embedding=moved.tolist())


def vector_side(retriever: BaseRetriever) -> Optional[VectorSide]:
    """The `VectorSide` of a vector index retriever (or a `WindowedVectorRetriever` around one);
    None for any other retriever."""
    from .windows import WindowedVectorRetriever

    inner = retriever.vector_retriever if isinstance(retriever, WindowedVectorRetriever) else retriever
    if not isinstance(inner, VectorIndexRetriever) or not searches_by_vector(inner):
        return None  # not a vector retriever, or its store searches by text (no query vector to move)
    store, model = vector_retriever_parts(inner)
    if store is None or model is None:
        return None
    return VectorSide(retriever, store, model)


def _held_rows(node_id: str, held: Dict[str, List[float]]) -> List[str]:
    """A node's own row and its window rows ``<id> + WINDOW_MARK + n`` (n = 1, 2, ...) in `held`."""
    rows = [node_id]
    for n in count(1):
        row = f"{node_id}{WINDOW_MARK}{n}"
        if row not in held:
            return rows
        rows.append(row)
    return rows  # pragma: no cover - count() never ends


def _chroma_collection(store: Any) -> Any:
    """The chromadb collection of a `ChromaVectorStore` (its public ``client``); None otherwise."""
    try:
        from llama_index.vector_stores.chroma import ChromaVectorStore
    except ImportError:  # pragma: no cover - the chroma extra is not installed
        return None
    return store.client if isinstance(store, ChromaVectorStore) else None
