"""Embedded Chroma as the vector side, holding our own embeddings only.

Every collection is created with ``embedding_function=None`` and cosine distance: vectors are
always computed by the library's embedder and passed in, so Chroma never falls back to its default
embedding function (which downloads a model at run time). Used by `HybridSearcher(vector_store=
"chroma")`, the on-disk `ContextualIndex` and the framework adapters' Chroma helpers.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from contextual_retrieval_core.checks import finite_vectors, not_a_string, positive_int
from contextual_retrieval_core.errors import InputError, MissingDependencyError

__all__ = ["chroma_client", "chroma_collection", "ChromaVectorIndex", "CHROMA_HNSW"]

#: cosine space, and a search beam wide enough that the 150 candidates a side match exact search
#: (Chroma's default ef_search of 100 loses some of the tail at k=150). Lower ef_search for
#: millions of chunks if query latency matters more.
CHROMA_HNSW: dict[str, Any] = {"space": "cosine", "ef_construction": 200, "ef_search": 800}


def chroma_client(path: str | os.PathLike[str] | None = None) -> Any:
    """An embedded Chroma client: persistent under `path`, or in memory when None."""
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError as exc:
        raise MissingDependencyError("Chroma is not installed: pip install 'contextual-retrieval-kit[chroma]'") from exc
    settings = Settings(anonymized_telemetry=False)
    if path is None:
        return chromadb.EphemeralClient(settings=settings)
    return chromadb.PersistentClient(path=os.fspath(path), settings=settings)


def chroma_collection(client: Any, name: str | None = None, hnsw: dict[str, Any] | None = None) -> Any:
    """Get or create collection `name` for our embeddings (no embedding function; `CHROMA_HNSW`,
    with `hnsw` merged over it, when created). Without a name, a new collection with a unique one:
    in-memory clients share one store per process, so a fixed default name would mix corpora."""
    return client.get_or_create_collection(
        name or f"contextual-{uuid.uuid4().hex[:16]}",
        embedding_function=None,
        configuration={"hnsw": {**CHROMA_HNSW, **(hnsw or {})}},
    )


class ChromaVectorIndex:
    """A `VectorIndex` look-alike on a Chroma collection: (id, cosine) results, best first.

    Args:
        ids, vectors: what to add (row i of `vectors` under ``ids[i]``); may be empty to open an
            existing collection.
        collection: a collection from `chroma_collection` (default: a fresh in-memory one).
        documents, metadatas: stored beside the vectors.

    Example:
        >>> index = ChromaVectorIndex(["a", "b"], np.array([[1.0, 0.0], [0.0, 1.0]]))
        >>> [(i, round(s, 3)) for i, s in index.search(np.array([0.9, 0.1]), k=1)]
        [('a', 0.994)]
    """

    def __init__(
        self,
        ids: Sequence[str] = (),
        vectors: np.ndarray | None = None,
        *,
        collection: Any = None,
        documents: Sequence[str] | None = None,
        metadatas: Sequence[dict] | None = None,
    ) -> None:
        self.collection = collection if collection is not None else chroma_collection(chroma_client())
        self._max_batch: int | None = None
        if len(ids):
            self.add(ids, vectors, documents=documents, metadatas=metadatas)  # type: ignore[arg-type]

    def __len__(self) -> int:
        return int(self.collection.count())

    def add(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        *,
        documents: Sequence[str] | None = None,
        metadatas: Sequence[dict] | None = None,
    ) -> None:
        """Upsert rows, in batches under the client's limit."""
        not_a_string("ids", ids, "ids")
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(ids) != vectors.shape[0]:
            raise InputError(f"got {len(ids)} ids for vectors of shape {vectors.shape}; pass one id per row")
        finite_vectors("vectors", vectors)
        step = self.max_batch_size
        for start in range(0, len(ids), step):
            part = slice(start, start + step)
            self.collection.upsert(
                ids=[str(i) for i in ids[part]],
                embeddings=vectors[part],
                documents=list(documents[part]) if documents is not None else None,
                metadatas=list(metadatas[part]) if metadatas is not None else None,
            )

    def delete(self, ids: Sequence[str]) -> None:
        """Delete rows by id, in batches under the client's limit (ids not present are ignored)."""
        ids = [str(i) for i in ids]
        step = self.max_batch_size
        for start in range(0, len(ids), step):
            self.collection.delete(ids=ids[start : start + step])

    @property
    def max_batch_size(self) -> int:
        """The most rows one Chroma call may carry: the client's limit (5000 if it does not say)."""
        if self._max_batch is None:
            from contextual_retrieval_core._compat import chroma_max_batch_size

            self._max_batch = chroma_max_batch_size(self.collection)
        return self._max_batch

    def search(self, query: np.ndarray, k: int = 10) -> list[tuple[str, float]]:
        return self.search_many(np.asarray(query, dtype=np.float32)[None, :], k)[0]

    def search_many(self, queries: np.ndarray, k: int = 10) -> list[list[tuple[str, float]]]:
        """The `k` nearest (id, cosine similarity) pairs for each query vector."""
        k = positive_int("k", k)
        queries = finite_vectors("query vectors", np.asarray(queries, dtype=np.float32))
        total = len(self)
        if total == 0:
            return [[] for _ in range(len(queries))]
        got = self.collection.query(
            query_embeddings=np.asarray(queries, dtype=np.float32), n_results=min(k, total), include=["distances"]
        )
        return [
            [(str(i), 1.0 - float(d)) for i, d in zip(ids, dists)] for ids, dists in zip(got["ids"], got["distances"])
        ]
