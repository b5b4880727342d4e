"""The `Embedder` protocol every embedding backend implements."""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np

__all__ = ["Embedder"]


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
