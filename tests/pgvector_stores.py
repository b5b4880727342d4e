"""Both frameworks' own pgvector stores over core `ContextualChunk`s, composed with our BM25 by the
existing hybrid retrievers: LangChain's `PGVector` under `ContextualEnsembleRetriever`,
LlamaIndex's `PGVectorStore` under `HybridRetriever`. No ANN index is created on either table,
so every vector search is PostgreSQL's exact scan (cosine distance)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from contextual_retrieval_core.types import ContextualChunk


def sqlalchemy_url(url: str, driver: str) -> str:
    """``postgresql://...`` as SQLAlchemy's ``postgresql+DRIVER://...``."""
    return url.replace("postgresql://", f"postgresql+{driver}://", 1)


def langchain_pgvector(url: str, chunks: Sequence[ContextualChunk], embedder: Any, *, collection: str, k: int = 20, dim: int = 384) -> Any:
    """`ContextualEnsembleRetriever` over a `PGVector` collection holding `chunks` + our BM25."""
    from langchain_postgres import PGVector

    from contextual_retrieval_langchain import ContextualEnsembleRetriever, EmbedderEmbeddings
    from contextual_retrieval_langchain._documents import contextual_document

    docs = [contextual_document(c, {"source": c.chunk.document_id}) for c in chunks]
    store = PGVector(EmbedderEmbeddings(embedder=embedder), connection=sqlalchemy_url(url, "psycopg"),
                     collection_name=collection, embedding_length=dim, pre_delete_collection=True)
    store.add_documents(docs, ids=[d.id for d in docs])
    return ContextualEnsembleRetriever.from_documents(docs, vectorstore=store, k=k)


def llamaindex_pgvector(url: str, chunks: Sequence[ContextualChunk], embedder: Any, *, table: str, k: int = 20, dim: int = 384) -> Any:
    """`HybridRetriever` over a `PGVectorStore` table holding `chunks` + our BM25."""
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.postgres import PGVectorStore

    from contextual_retrieval_llamaindex import CoreEmbedding, HybridRetriever
    from contextual_retrieval_llamaindex._convert import set_context

    parts = urlsplit(url)
    # the source stays out of the EMBED text, so each node embeds and BM25-indexes the core's indexed_text
    nodes = [set_context(TextNode(id_=c.id, text=c.chunk.text, metadata={"source": c.chunk.document_id},
                                  excluded_embed_metadata_keys=["source"], excluded_llm_metadata_keys=["source"]), c.context)
             for c in chunks]
    store = PGVectorStore.from_params(
        connection_string=sqlalchemy_url(url, "psycopg"), async_connection_string=sqlalchemy_url(url, "asyncpg"),
        database=parts.path.lstrip("/"), table_name=table, embed_dim=dim,
    )
    index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store),
                             embed_model=CoreEmbedding(embedder))
    return HybridRetriever.from_defaults(index, nodes=nodes, similarity_top_k=k, windows=False)  # one row a node
