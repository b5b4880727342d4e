"""langchain-tests' standard retriever tests for ContextualBM25Retriever (built, and loaded from disk)
and ContextualEnsembleRetriever (over Chroma, reranked, over a store filled by LangChain's
indexing API) on an offline corpus (real BM25, embedded Chroma, the offline MiniLM embedder)."""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from langchain_tests.integration_tests import EmbeddingsIntegrationTests, RetrieversIntegrationTests, VectorStoreIntegrationTests

from contextual_retrieval_core.rerank.base import RerankResult, best_first
from contextual_retrieval_langchain import (
    ContextualBM25Retriever,
    ContextualDocumentTransformer,
    ContextualEnsembleRetriever,
    EmbedderEmbeddings,
    LocalMiniLMEmbeddings,
    RerankCompressor,
    chroma_from_documents,
)
from tests.langchain_corpus import chunk_documents, context_generator, whole_documents


@lru_cache(maxsize=1)
def _docs() -> list:
    return ContextualDocumentTransformer(generator=context_generator(), show_progress=False).transform_documents(
        chunk_documents(), parents=whole_documents()
    )


_SESSION: dict[str, Any] = {}


@pytest.fixture(autouse=True, scope="module")
def _session_embedder(core_embedder) -> None:
    """The session's cached offline embedder, for the helpers here (the suites' properties take no fixtures)."""
    _SESSION["embedder"] = core_embedder


@lru_cache(maxsize=1)
def _embeddings() -> EmbedderEmbeddings:
    return EmbedderEmbeddings(embedder=_SESSION["embedder"])


@lru_cache(maxsize=1)
def _fixture() -> tuple[Any, ContextualBM25Retriever]:
    docs = _docs()
    return chroma_from_documents(docs, _embeddings()), ContextualBM25Retriever.from_documents(docs)


@lru_cache(maxsize=1)
def _saved_bm25() -> Path:
    path = Path(tempfile.mkdtemp(prefix="bm25-standard-")) / "bm25"
    return _fixture()[1].save(path)


@lru_cache(maxsize=1)
def _indexed_store() -> Any:
    """An InMemoryVectorStore filled through LangChain's indexing API (its own hash ids)."""
    from langchain_core.indexing import InMemoryRecordManager, index
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(_embeddings())
    manager = InMemoryRecordManager(namespace="standard")
    manager.create_schema()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the sha1 key encoder's advice
        index(_docs(), manager, store, cleanup="incremental", source_id_key="source")
    return store


class WordOverlap:
    """A deterministic core Reranker: query-word overlap."""

    model_name = "word-overlap"

    def rerank(self, query, texts, top_n=None):
        words = set(query.lower().split())
        return best_first([RerankResult(i, float(len(words & set(t.lower().split())))) for i, t in enumerate(texts)], top_n)

    async def arerank(self, query, texts, top_n=None):
        return self.rerank(query, texts, top_n)


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


class TestLoadedBM25RetrieverStandard(RetrieversIntegrationTests):
    """A BM25 retriever saved and loaded back (`ContextualBM25Retriever.load`)."""

    @property
    def retriever_constructor(self) -> Callable[..., ContextualBM25Retriever]:
        return ContextualBM25Retriever.load

    @property
    def retriever_constructor_params(self) -> dict:
        return {"path": _saved_bm25()}

    @property
    def retriever_query_example(self) -> str:
        return "quarterly revenue report"


class TestRerankedEnsembleRetrieverStandard(RetrieversIntegrationTests):
    """The ensemble with a reranker (a core Reranker through a RerankCompressor)."""

    @property
    def retriever_constructor(self) -> type[ContextualEnsembleRetriever]:
        return ContextualEnsembleRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        chroma, bm25 = _fixture()
        return {"retrievers": [chroma.as_retriever(), bm25], "reranker": RerankCompressor(reranker=WordOverlap(), top_n=20)}

    @property
    def retriever_query_example(self) -> str:
        return "How did ACME's revenue change in Q2 2023?"


class TestEnsembleOverIndexingApiStoreStandard(RetrieversIntegrationTests):
    """The ensemble over a vector store that LangChain's indexing API filled (each chunk once)."""

    @property
    def retriever_constructor(self) -> type[ContextualEnsembleRetriever]:
        return ContextualEnsembleRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"retrievers": [_indexed_store().as_retriever(search_kwargs={"k": 8}), _fixture()[1]]}

    @property
    def retriever_query_example(self) -> str:
        return "quarterly revenue report"


class TestLocalMiniLMEmbeddingsStandard(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[LocalMiniLMEmbeddings]:
        return LocalMiniLMEmbeddings

    @property
    def embedding_model_params(self) -> dict:
        return {}


class TestWindowedVectorStoreStandard(VectorStoreIntegrationTests):
    """langchain-tests' vector store contract (ids, upserts, deletes, get_by_ids, sync and async)
    for `WindowedVectorStore` over an `InMemoryVectorStore`; the suite's fake embeddings report no
    window, so every chunk is one row (the window rows are tested in test_framework_windows.py)."""

    @pytest.fixture()
    def vectorstore(self) -> Any:
        from langchain_core.vectorstores import InMemoryVectorStore

        from contextual_retrieval_langchain.windows import WindowedVectorStore

        return WindowedVectorStore(InMemoryVectorStore(self.get_embeddings()))
