"""langchain-tests' standard retriever tests for ContextualBM25Retriever and ContextualEnsembleRetriever
on an offline corpus (real BM25, embedded Chroma, the offline MiniLM embedder)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from langchain_tests.integration_tests import EmbeddingsIntegrationTests, RetrieversIntegrationTests

from contextual_retrieval_core.embeddings.cache import CachedEmbedder
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
from contextual_retrieval_langchain import (
    ContextualBM25Retriever,
    ContextualDocumentTransformer,
    ContextualEnsembleRetriever,
    EmbedderEmbeddings,
    LocalMiniLMEmbeddings,
    chroma_from_documents,
)

from conftest import chunk_documents, context_generator, whole_documents


@lru_cache(maxsize=1)
def _fixture() -> tuple[Any, ContextualBM25Retriever]:
    docs = ContextualDocumentTransformer(generator=context_generator(), show_progress=False).transform_documents(
        chunk_documents(), parents=whole_documents()
    )
    embeddings = EmbedderEmbeddings(embedder=CachedEmbedder(LocalMiniLMEmbedder(), ":memory:"))
    return chroma_from_documents(docs, embeddings), ContextualBM25Retriever.from_documents(docs)


class TestContextualBM25RetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[ContextualBM25Retriever]:
        return ContextualBM25Retriever

    @property
    def retriever_constructor_params(self) -> dict:
        bm25 = _fixture()[1]
        return {"index": bm25.index, "documents": bm25.documents}

    @property
    def retriever_query_example(self) -> str:
        return "quarterly revenue report"


class TestContextualEnsembleRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[ContextualEnsembleRetriever]:
        return ContextualEnsembleRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        chroma, bm25 = _fixture()
        return {"retrievers": [chroma.as_retriever(), bm25]}

    @property
    def retriever_query_example(self) -> str:
        return "How did ACME's revenue change in Q2 2023?"


class TestLocalMiniLMEmbeddingsStandard(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[LocalMiniLMEmbeddings]:
        return LocalMiniLMEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {}
