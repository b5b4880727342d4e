"""LangChain `Embeddings` over the core's embedders.

`EmbedderEmbeddings` wraps any core `Embedder` (documents and queries embedded differently where
the model distinguishes them); `LocalMiniLMEmbeddings` (offline default) and `ContextualVoyageEmbeddings`
(``input_type="document"`` for chunks, ``"query"`` for queries) build one for you.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, ConfigDict

from contextual_retrieval_core.embeddings.base import aembed_documents, aembed_queries
from contextual_retrieval_core.errors import InputTypeError

__all__ = ["ContextualVoyageEmbeddings", "EmbedderEmbeddings", "LocalMiniLMEmbeddings"]


class EmbedderEmbeddings(BaseModel, Embeddings):
    """Any core `Embedder` as LangChain `Embeddings`.

    Args:
        embedder: a core `Embedder` (`LocalMiniLMEmbedder`, `VoyageEmbedder`, `CachedEmbedder`, ...).

    Example:
        >>> from contextual_retrieval_core.embeddings import LocalMiniLMEmbedder
        >>> embeddings = EmbedderEmbeddings(embedder=LocalMiniLMEmbedder())
        >>> len(embeddings.embed_query("what is BM25?"))
        384
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    embedder: Any

    def model_post_init(self, context: Any) -> None:
        for method in ("embed_documents", "embed_queries"):
            if not callable(getattr(self.embedder, method, None)):
                raise InputTypeError(
                    f"embedder must be a core Embedder (with {method}); for a LangChain Embeddings, use it directly"
                )

    @property
    def model_name(self) -> str:
        return str(getattr(self.embedder, "model_name", ""))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return np.asarray(self.embedder.embed_documents(list(texts)), dtype=float).tolist()

    def embed_query(self, text: str) -> list[float]:
        return np.asarray(self.embedder.embed_queries([text]), dtype=float)[0].tolist()

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return np.asarray(await aembed_documents(self.embedder, list(texts)), dtype=float).tolist()

    async def aembed_query(self, text: str) -> list[float]:
        return np.asarray(await aembed_queries(self.embedder, [text]), dtype=float)[0].tolist()


def _cached(embedder: Any, cache_path: str | os.PathLike | None) -> Any:
    if cache_path is None:
        return embedder
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder

    return CachedEmbedder(embedder, cache_path)


class LocalMiniLMEmbeddings(EmbedderEmbeddings):
    """The offline default: all-MiniLM-L6-v2 (int8 ONNX, 384 dimensions) on the CPU, no network.

    A text longer than the model's 256 tokens is embedded as its first 256 here, without a
    warning: `ContextualEnsembleRetriever.from_documents` and `WindowedVectorStore` embed the rest
    as window rows (their default).

    Args:
        cache_path: an SQLite embedding cache (`CachedEmbedder`); None for no cache.
        batch_size: texts per onnxruntime call.

    Example:
        >>> embeddings = LocalMiniLMEmbeddings()
        >>> len(embeddings.embed_documents(["contextual BM25", "weighted RRF"]))
        2
    """

    def __init__(self, *, cache_path: str | os.PathLike | None = None, batch_size: int = 32, **kwargs: Any) -> None:
        if "embedder" not in kwargs:
            from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

            # no truncation warning: ContextualEnsembleRetriever.from_documents embeds long chunks whole
            kwargs["embedder"] = _cached(LocalMiniLMEmbedder(batch_size=batch_size, warn_truncated=False), cache_path)
        super().__init__(**kwargs)


class ContextualVoyageEmbeddings(EmbedderEmbeddings):
    """Voyage AI embeddings through the core `VoyageEmbedder`.

    Named so that it does not clash with `langchain_community.embeddings.VoyageEmbeddings`.

    Chunks are embedded with ``input_type="document"``, queries with ``"query"``; requests are
    packed under the API's 1,000-text and token limits.

    Args:
        model: a Voyage embedding model (default "voyage-3.5").
        client / async_client: ready `voyageai.Client` / `voyageai.AsyncClient` (built from
            VOYAGE_API_KEY when omitted).
        cache_path: an SQLite embedding cache; None for no cache.
        **voyage_kwargs: further `VoyageEmbedder` arguments (output_dimension, batching=VoyageBatching(...),
            max_retries, ...).

    Example:
        >>> import voyageai
        >>> embeddings = ContextualVoyageEmbeddings(client=voyageai.Client(api_key="..."))  # doctest: +SKIP
        >>> embeddings.embed_query("what is BM25?")[:2]  # doctest: +SKIP
        [0.012, -0.034]
    """

    def __init__(
        self,
        model: str = "voyage-3.5",
        *,
        client: Any = None,
        async_client: Any = None,
        cache_path: str | os.PathLike | None = None,
        embedder: Any = None,
        **voyage_kwargs: Any,
    ) -> None:
        if embedder is None:
            from contextual_retrieval_core.embeddings.voyage import VoyageEmbedder

            embedder = _cached(VoyageEmbedder(model, client=client, async_client=async_client, **voyage_kwargs), cache_path)
        super().__init__(embedder=embedder)
