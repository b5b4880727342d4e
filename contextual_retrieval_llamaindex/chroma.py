"""Embedded Chroma for LlamaIndex, holding our embeddings only."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["chroma_vector_store"]


def chroma_vector_store(
    path: str | os.PathLike[str] | None = None,
    collection: str | None = None,
    *,
    client: Any = None,
) -> Any:
    """A `ChromaVectorStore` on embedded Chroma (`path`: persistent on disk; None: in memory) or on
    a given `client` (an `HttpClient` for a Chroma server). Name the `collection` to reopen it
    later; without a name each call gets a new collection.

    The collection is created with ``embedding_function=None`` and cosine distance: vectors always
    come from your LlamaIndex `embed_model` (`LocalMiniLMEmbedding` offline), never from Chroma's
    default embedding function, which downloads a model at run time.

    Example:
        >>> store = chroma_vector_store()
        >>> store.stores_text, store._collection.count()
        (True, 0)
    """
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from contextual_retrieval_core.dense.chroma import chroma_client, chroma_collection

    if client is None:
        client = chroma_client(path)
    return ChromaVectorStore(chroma_collection=chroma_collection(client, collection))
