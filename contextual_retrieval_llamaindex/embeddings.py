"""LlamaIndex `BaseEmbedding`s over the core embedders: offline MiniLM and Voyage (input types right)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr

from contextual_retrieval_core.embeddings.base import Embedder, aembed_documents, aembed_queries

__all__ = ["CoreEmbedding", "LocalMiniLMEmbedding", "ContextualVoyageEmbedding"]


class CoreEmbedding(BaseEmbedding):
    """Any core `Embedder` as a LlamaIndex embedding: texts through ``embed_documents``, queries
    through ``embed_queries`` (so Voyage gets input_type "document" / "query"). Give it the
    nodes' EMBED content, which for `ContextualNodeParser` nodes is context + chunk.

    Args:
        embedder: the core embedder.
        embed_batch_size: texts per call (LlamaIndex's batching; the core splits further when an
            API's limits require it).

    Example:
        >>> import numpy as np
        >>> class Letters:
        ...     model_name = "letters"
        ...     def embed_documents(self, texts): return np.array([[t.count("a"), 1.0] for t in texts])
        ...     embed_queries = embed_documents
        >>> CoreEmbedding(Letters()).get_text_embedding("banana")
        [3.0, 1.0]
    """

    _embedder: Any = PrivateAttr()

    def __init__(self, embedder: Embedder, **kwargs: Any) -> None:
        kwargs.setdefault("model_name", getattr(embedder, "model_name", type(embedder).__name__))
        kwargs.setdefault("embed_batch_size", 64)
        super().__init__(**kwargs)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "CoreEmbedding"

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    def _get_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in self._embedder.embed_queries([query])[0]]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in (await aembed_queries(self._embedder, [query]))[0]]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return (await self._aget_text_embeddings([text]))[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return np.asarray(self._embedder.embed_documents(texts), dtype=float).tolist()

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return np.asarray(await aembed_documents(self._embedder, texts), dtype=float).tolist()


class LocalMiniLMEmbedding(CoreEmbedding):
    """The offline default: all-MiniLM-L6-v2 (int8 ONNX, 384-d) shipped in a PyPI package; no
    download, no key. Wraps the core `LocalMiniLMEmbedder`; `cache_path` adds the core's SQLite
    embedding cache, so re-indexing never re-embeds a text. A node longer than the model's 256
    tokens is embedded as its first 256 here, without a warning: `HybridRetriever.from_defaults`
    adds the rest as window entries (its default `windows`).

    Example:
        >>> len(LocalMiniLMEmbedding().get_query_embedding("what is BM25?"))
        384
    """

    cache_path: str | None = Field(default=None, description="SQLite embedding cache (None: no cache).")

    def __init__(self, cache_path: str | None = None, **kwargs: Any) -> None:
        from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

        embedder: Any = LocalMiniLMEmbedder(warn_truncated=False)  # HybridRetriever embeds long nodes whole
        if cache_path is not None:
            from contextual_retrieval_core.embeddings.cache import CachedEmbedder

            embedder = CachedEmbedder(embedder, os.fspath(cache_path))
        kwargs.pop("model_name", None)
        super().__init__(embedder, cache_path=None if cache_path is None else os.fspath(cache_path), **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "LocalMiniLMEmbedding"


class ContextualVoyageEmbedding(CoreEmbedding):
    """Voyage embeddings through the core `VoyageEmbedder`: chunks as input_type "document",
    queries as "query", requests batched under Voyage's limits (1000 texts, token caps).

    The key comes from VOYAGE_API_KEY unless clients are passed; it is never serialized.

    Args:
        model_name: a Voyage model (default "voyage-3.5").
        client / async_client: ready `voyageai.Client` / `voyageai.AsyncClient`.

    Example:
        >>> import voyageai
        >>> emb = ContextualVoyageEmbedding(client=voyageai.Client(api_key="..."))  # doctest: +SKIP
    """

    def __init__(self, model_name: str = "voyage-3.5", *, client: Any = None, async_client: Any = None, **kwargs: Any) -> None:
        from contextual_retrieval_core.embeddings.voyage import VoyageEmbedder

        super().__init__(VoyageEmbedder(model_name, client=client, async_client=async_client), model_name=model_name, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "ContextualVoyageEmbedding"
