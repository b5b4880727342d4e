"""`CountingEmbedder`: a real embedder behind a wrapper that records every text it is asked to embed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class CountingEmbedder:
    """An `Embedder` that records every text it is asked to embed, in front of the real one."""

    inner: object
    documents: list[str] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    normalized = True

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.documents.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.queries.extend(texts)
        return self.inner.embed_queries(texts)

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_queries(texts)
