"""The `Embedder` protocol every embedding backend implements."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

__all__ = ["Embedder", "aembed_documents", "aembed_queries"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors; documents and queries may be embedded differently.

    Implementations return float32 arrays of shape (len(texts), dimension). Vectors are L2
    normalised when `normalized` is True, so a dot product is the cosine similarity.
    """

    #: a stable name for the model, part of cache keys and reports
    model_name: str
    #: whether the vectors are L2-normalised
    normalized: bool

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for texts to be indexed (chunks)."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for search queries."""
        ...

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        ...

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        ...


async def aembed_documents(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """`embedder.aembed_documents`, or its sync `embed_documents` in a worker thread when it has
    no async method (so a sync-only embedder never blocks the event loop)."""
    fn = getattr(embedder, "aembed_documents", None)
    if fn is not None:
        return await fn(texts)
    return await asyncio.to_thread(embedder.embed_documents, texts)


async def aembed_queries(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """`embedder.aembed_queries`, or `embed_queries` in a worker thread."""
    fn = getattr(embedder, "aembed_queries", None)
    if fn is not None:
        return await fn(texts)
    return await asyncio.to_thread(embedder.embed_queries, texts)
