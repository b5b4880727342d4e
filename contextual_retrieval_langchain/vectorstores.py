"""Embedded Chroma (through langchain-chroma) set up for contextual chunks.

Cosine distance, so relevance scores are the cosine similarity the core's `VectorIndex` reports,
and always the embeddings you pass: never Chroma's default embedding function.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import Embeddings

from contextual_retrieval_core.dense.chroma import CHROMA_HNSW, chroma_client, chroma_collection
from contextual_retrieval_core.errors import InputError, MissingDependencyError
from contextual_retrieval_langchain._documents import CHUNK_ID_KEY, chunk_id_of

__all__ = ["chroma_from_documents", "CHROMA_HNSW"]

def chroma_from_documents(
    documents: Sequence[LCDocument],
    embeddings: Embeddings,
    *,
    collection_name: str | None = None,
    persist_directory: str | os.PathLike | None = None,
    client: Any = None,
    id_key: str = CHUNK_ID_KEY,
    batch_size: int = 256,
    hnsw: dict[str, Any] | None = None,
) -> Any:
    """A langchain-chroma `Chroma` holding `documents` under their ids, embedded with `embeddings`.

    Args:
        documents: the contextual chunks (page_content is what gets embedded).
        embeddings: LangChain `Embeddings` (e.g. `LocalMiniLMEmbeddings`); required.
        collection_name: default: a fresh unique name.
        persist_directory: a folder for a persistent embedded Chroma; None for in-memory.
        client: a ready `chromadb` client (a Chroma server's `HttpClient`, ...) instead.
        id_key: metadata key holding the chunk id when `Document.id` is unset.
        batch_size: documents embedded and added per call.
        hnsw: HNSW settings merged over `CHROMA_HNSW` (e.g. ``{"ef_search": 200}``).

    Example:
        >>> from langchain_core.documents import Document
        >>> from contextual_retrieval_langchain import LocalMiniLMEmbeddings
        >>> store = chroma_from_documents([Document("BM25 ranks by term overlap", id="a"),
        ...                                Document("Lemon cake with eggs", id="b")], LocalMiniLMEmbeddings())
        >>> store.similarity_search("term ranking", k=1)[0].id
        'a'
    """
    try:
        from langchain_chroma import Chroma
    except ImportError as exc:  # pragma: no cover - the extra is installed in dev
        raise MissingDependencyError("Chroma needs: pip install 'contextual-retrieval-kit[langchain,chroma]'") from exc
    if embeddings is None:
        raise InputError("pass embeddings= (e.g. LocalMiniLMEmbeddings()); Chroma's default embedding function is never used")
    if client is None:
        client = chroma_client(persist_directory)
    collection = chroma_collection(client, collection_name, hnsw)  # our settings, no embedding function
    store = Chroma(collection_name=collection.name, embedding_function=embeddings, client=client)
    docs = list(documents)
    ids = [chunk_id_of(d, id_key) for d in docs]
    if len(set(ids)) != len(ids):
        raise InputError("duplicate document ids: every chunk needs a unique id")
    for start in range(0, len(docs), batch_size):
        store.add_documents(docs[start : start + batch_size], ids=ids[start : start + batch_size])
    return store
