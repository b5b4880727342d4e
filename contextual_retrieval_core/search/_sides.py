"""The core's own sources for the `QueryFlow`: BM25 and an in-process dense index.

`HybridSearcher` searches with both; `ContextualIndex` with `BM25Side` and its Chroma side.

Example:
    >>> from contextual_retrieval_core.search.bm25 import BM25Index
    >>> side = BM25Side("bm25", BM25Index().index(["a", "b"], ["red apples", "green pears"]), depth=5)
    >>> [[i for i, _ in hits] for hits in side.search(["apples"])]
    [['a']]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from contextual_retrieval_core.dense.windows import collapse_hits, fetch_sizes
from contextual_retrieval_core.embeddings.base import Embedder
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.search.bm25 import BM25Index
from contextual_retrieval_core.search.feedback import FeedbackRows
from contextual_retrieval_core.search.flow import Hits, SyncDenseSide, SyncSource

__all__ = ["BM25Side", "InMemoryDenseSide"]


class BM25Side(SyncSource):
    """A `BM25Index`'s top `depth` chunks for each query."""

    def __init__(self, name: str, bm25: BM25Index, depth: int) -> None:
        self.name, self.bm25, self.depth = name, bm25, depth

    def search(self, queries: Sequence[str]) -> list[Hits]:
        return [self.bm25.search(q, self.depth) for q in queries]  # type: ignore[misc]


class InMemoryDenseSide(SyncDenseSide):
    """An index with ``search_many(vectors, k)`` over chunk rows and window rows (`owners` maps a
    window row to its chunk), each chunk returned once at its best row; queries embedded in one
    batch; feedback reads `rows` (the index's normalised rows, or a copy)."""

    def __init__(
        self, name: str, embedder: Embedder, index: Any, depth: int, owners: dict[str, str], extra_rows: int,
        chunk_count: int, rows: FeedbackRows | None,
    ) -> None:
        self.name, self.embedder, self.index, self.depth = name, embedder, index, depth
        self.owners, self.extra_rows, self.chunk_count, self.rows = owners, extra_rows, chunk_count, rows

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        return np.asarray(self.embedder.embed_queries(list(queries)))

    def search_vectors(self, vectors: Any) -> list[Hits]:
        """Each query's top-`depth` chunks. With window rows, the rows come best first, so the
        first `depth` distinct chunks among the top rows are the answer: rows are fetched in the
        `fetch_sizes` steps, deeper only for a query whose rows did not reach `depth` chunks (the
        same hits as always fetching them all)."""
        qv = np.asarray(vectors)
        depth = self.depth
        wanted = min(depth, self.chunk_count)
        out: list[Any] = [None] * len(qv)
        todo = list(range(len(qv)))
        for size in fetch_sizes(depth, self.extra_rows):
            for i, hits in zip(todo, self.index.search_many(qv[todo], size)):
                out[i] = collapse_hits(hits, self.owners, depth)
            todo = [i for i in todo if len(out[i]) < wanted]
            if not todo:
                break
        return out

    def feedback_rows(self, top: Sequence[str]) -> FeedbackRows:
        if self.rows is None:
            raise InputError("this dense side keeps no rows for feedback (built with dense_prf=0)")
        return self.rows
