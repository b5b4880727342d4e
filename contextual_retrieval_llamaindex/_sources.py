"""LlamaIndex retrievers as the sources of the core's `QueryFlow` (one query each).

`HybridRetriever` wraps each of its retrievers for one `QueryBundle`: a `RetrieverSource` is
searched with the bundle; a `VectorRetrieverSide` (a vector index retriever that dense feedback
moves) is searched by the bundle's embedding, made once with the retriever's own model, and
reads back its store's vectors of the fused top nodes; on a `PGVectorStore` its second search (dense
feedback's) is `pgvector.search_again`. Every source keeps the nodes it returned (`found`), so the
retriever can return the nodes the flow ranked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle

from contextual_retrieval_core.search.feedback import FeedbackRows
from contextual_retrieval_core.search.flow import Hits
from contextual_retrieval_llamaindex._convert import scored_ids
from contextual_retrieval_llamaindex._feedback import VectorSide
from contextual_retrieval_llamaindex._pgvector import lean_search, pgvector_store, server_address

__all__ = ["RetrieverSource", "VectorRetrieverSide", "bound_sources", "first_nodes"]


class RetrieverSource:
    """A LlamaIndex retriever as a flow source, bound to one query bundle."""

    def __init__(self, name: str, retriever: BaseRetriever, bundle: QueryBundle, sources: list[RetrieverSource]) -> None:
        self.name, self.retriever, self.bundle = name, retriever, bundle
        self.sources = sources  # every source of this query
        self.found: list[NodeWithScore] = []

    def _keep(self, found: list[NodeWithScore]) -> list[Hits]:
        self.found = found
        return [scored_ids(found)]

    def search(self, queries: Sequence[str]) -> list[Hits]:
        return self._keep(self.retriever.retrieve(self.bundle))

    async def asearch(self, queries: Sequence[str]) -> list[Hits]:
        return self._keep(await self.retriever.aretrieve(self.bundle))

    def server_address(self) -> str | None:
        """``host:port`` of the PostgreSQL server a `PGVectorStore` source searches (the flow
        names it when the server does not answer); None for any other source."""
        store = pgvector_store(self.retriever)
        return server_address(store) if store is not None else None


class VectorRetrieverSide(RetrieverSource):
    """A vector index retriever as a flow `DenseSide`: searched by vector, its stored rows read back."""

    def __init__(self, name: str, side: VectorSide, bundle: QueryBundle, sources: list[RetrieverSource]) -> None:
        super().__init__(name, side.retriever, bundle, sources)
        self.side = side

    def embed_queries(self, queries: Sequence[str]) -> list[Any]:
        return [self.side.with_query_vector(self.bundle).embedding]

    async def aembed_queries(self, queries: Sequence[str]) -> list[Any]:
        return [(await self.side.awith_query_vector(self.bundle)).embedding]

    def _by(self, vector: Any) -> QueryBundle:
        return dataclasses.replace(self.bundle, embedding=_floats(vector))

    def search_vectors(self, vectors: Sequence[Any]) -> list[Hits]:
        lean = lean_search(self.retriever) if self.found else None  # feedback's second search
        if lean is not None:
            return self._keep(lean.search_again(_floats(vectors[0]), self._known()))
        return self._keep(self.retriever.retrieve(self._by(vectors[0])))

    async def asearch_vectors(self, vectors: Sequence[Any]) -> list[Hits]:
        lean = lean_search(self.retriever) if self.found else None
        if lean is not None:
            return self._keep(await lean.asearch_again(_floats(vectors[0]), self._known()))
        return self._keep(await self.retriever.aretrieve(self._by(vectors[0])))

    def _known(self) -> dict[str, BaseNode]:
        """The nodes this query's sources returned, by id (the first source's first)."""
        return {r.node.node_id: r.node for source in reversed(self.sources) for r in reversed(source.found)}

    def feedback_rows(self, top: Sequence[str]) -> FeedbackRows:
        return self.side.rows(top)

    async def afeedback_rows(self, top: Sequence[str]) -> FeedbackRows:
        return await self.side.arows(top)


def _floats(vector: Any) -> list[float]:
    return vector.tolist() if isinstance(vector, np.ndarray) else list(vector)


def first_nodes(sources: Sequence[RetrieverSource]) -> dict[str, BaseNode]:
    """{node id: the first node returned under it}, sources in order."""
    nodes: dict[str, BaseNode] = {}
    for source in sources:
        for r in source.found:
            nodes.setdefault(r.node.node_id, r.node)
    return nodes


def bound_sources(retrievers: dict[str, BaseRetriever], feedback: dict[str, VectorSide], bundle: QueryBundle) -> list[RetrieverSource]:
    """Each retriever bound to `bundle`: the ones in `feedback` as `VectorRetrieverSide`s."""
    sources: list[RetrieverSource] = []
    for name, retriever in retrievers.items():
        side: VectorSide | None = feedback.get(name)
        sources.append(VectorRetrieverSide(name, side, bundle, sources) if side is not None
                       else RetrieverSource(name, retriever, bundle, sources))
    return sources
