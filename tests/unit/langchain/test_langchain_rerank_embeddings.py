"""RerankCompressor (Cohere by default, Voyage) through the real SDKs against loopback servers, inside
ContextualCompressionRetriever; Embeddings adapters over the core Voyage and MiniLM embedders."""

from __future__ import annotations

import cohere
import numpy as np
import pytest
import voyageai
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.documents import BaseDocumentCompressor
from langchain_core.embeddings import Embeddings

from contextual_retrieval_core.embeddings.voyage import VoyageEmbedder
from contextual_retrieval_core.rerank import CohereReranker, VoyageReranker
from contextual_retrieval_langchain import (
    ContextualBM25Retriever,
    ContextualVoyageEmbeddings,
    EmbedderEmbeddings,
    LocalMiniLMEmbeddings,
    RerankCompressor,
)
from tests.fakes.cohere_server import FakeCohereServer
from tests.fakes.voyage_server import FakeVoyageServer

QUERY = "quarterly revenue report"


@pytest.fixture
def cohere_server():
    with FakeCohereServer() as server:
        yield server


@pytest.fixture
def voyage_server():
    with FakeVoyageServer() as server:
        yield server


def cohere_compressor(server: FakeCohereServer, **kw) -> RerankCompressor:
    return RerankCompressor(
        client=cohere.ClientV2(api_key=server.api_key, base_url=server.base_url),
        async_client=cohere.AsyncClientV2(api_key=server.api_key, base_url=server.base_url),
        **kw,
    )


def test_cohere_is_the_default_and_ranks_best_first(cohere_server, contextual_docs) -> None:
    compressor = cohere_compressor(cohere_server, top_n=3)
    assert isinstance(compressor, BaseDocumentCompressor) and isinstance(compressor.reranker, CohereReranker)
    got = compressor.compress_documents(contextual_docs, QUERY)
    scores = {d.id: cohere_server.rerank_score(QUERY, d.page_content) for d in contextual_docs}
    expected = sorted(contextual_docs, key=lambda d: -scores[d.id])[:3]
    assert [d.id for d in got] == [d.id for d in expected]
    assert [d.metadata["relevance_score"] for d in got] == pytest.approx([scores[d.id] for d in expected])
    body = cohere_server.requests[-1].body
    assert body["model"] == "rerank-v3.5" and body["documents"] == [d.page_content for d in contextual_docs]
    assert all("relevance_score" not in d.metadata for d in contextual_docs)  # copies, inputs untouched


async def test_cohere_async_uses_the_async_client_and_matches_sync(cohere_server, contextual_docs) -> None:
    compressor = cohere_compressor(cohere_server, top_n=4)
    sync = compressor.compress_documents(contextual_docs, QUERY)
    assert await compressor.acompress_documents(contextual_docs, QUERY) == sync
    assert len(cohere_server.requests) == 2
    assert await compressor.acompress_documents([], QUERY) == []


async def test_inside_contextual_compression_retriever(cohere_server, contextual_docs) -> None:
    base = ContextualBM25Retriever.from_documents(contextual_docs, k=6)
    retriever = ContextualCompressionRetriever(base_compressor=cohere_compressor(cohere_server, top_n=2), base_retriever=base)
    got = retriever.invoke(QUERY)
    candidates = base.invoke(QUERY)
    best = sorted(candidates, key=lambda d: -cohere_server.rerank_score(QUERY, d.page_content))[:2]
    assert [d.id for d in got] == [d.id for d in best]
    assert await retriever.ainvoke(QUERY) == got


def test_voyage_reranker(voyage_server, contextual_docs) -> None:
    compressor = RerankCompressor.voyage(
        client=voyageai.Client(api_key=voyage_server.api_key, base_url=voyage_server.base_url, max_retries=0), top_n=2
    )
    assert isinstance(compressor.reranker, VoyageReranker)
    got = compressor.compress_documents(contextual_docs, QUERY)
    best = sorted(contextual_docs, key=lambda d: -voyage_server.rerank_score(QUERY, d.page_content))[:2]
    assert [d.id for d in got] == [d.id for d in best]
    assert voyage_server.rerank_requests()[0]["model"] == "rerank-2.5"


def test_missing_key_names_the_fix(monkeypatch) -> None:
    for var in ("COHERE_API_KEY", "CO_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(RuntimeError, match="COHERE_API_KEY"):
        RerankCompressor()
    with pytest.raises(TypeError, match="core Reranker"):
        RerankCompressor(reranker="cohere")


def test_voyage_embeddings_use_document_and_query_input_types(voyage_server) -> None:
    client = voyageai.Client(api_key=voyage_server.api_key, base_url=voyage_server.base_url, max_retries=0)
    aclient = voyageai.AsyncClient(api_key=voyage_server.api_key, base_url=voyage_server.base_url, max_retries=0)
    embeddings = ContextualVoyageEmbeddings(client=client, async_client=aclient)
    assert isinstance(embeddings, Embeddings)
    docs = embeddings.embed_documents(["BM25 ranks by term overlap", "dense vectors"])
    query = embeddings.embed_query("BM25 ranks by term overlap")
    types = [r["input_type"] for r in voyage_server.embeddings_requests()]
    assert types == ["document", "query"]
    assert len(docs) == 2 and len(query) == len(docs[0])
    assert not np.allclose(docs[0], query)  # same text, different input type, different vector
    core = VoyageEmbedder(client=client)
    assert np.allclose(docs, core.embed_documents(["BM25 ranks by term overlap", "dense vectors"]))


async def test_voyage_embeddings_async(voyage_server) -> None:
    aclient = voyageai.AsyncClient(api_key=voyage_server.api_key, base_url=voyage_server.base_url, max_retries=0)
    client = voyageai.Client(api_key=voyage_server.api_key, base_url=voyage_server.base_url, max_retries=0)
    embeddings = ContextualVoyageEmbeddings(client=client, async_client=aclient)
    assert np.allclose(await embeddings.aembed_query("hi there"), embeddings.embed_query("hi there"))
    assert np.allclose(await embeddings.aembed_documents(["hi there"]), embeddings.embed_documents(["hi there"]))


async def test_minilm_embeddings_are_the_core_embedders(core_embedder, offline_embedder) -> None:
    texts = ["contextual BM25", "weighted rank fusion"]
    embeddings = LocalMiniLMEmbeddings()
    expected = offline_embedder.embed_documents(texts)
    assert np.allclose(embeddings.embed_documents(texts), expected, atol=1e-6)
    assert np.allclose(await embeddings.aembed_query(texts[0]), expected[0], atol=1e-6)
    assert embeddings.embed_documents([]) == []
    with pytest.raises(TypeError, match="core Embedder"):
        EmbedderEmbeddings(embedder=LocalMiniLMEmbeddings())


def test_no_public_name_clashes_with_langchain_community():
    """A user importing from both packages never gets one class shadowing the other."""
    import warnings

    import contextual_retrieval_langchain

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community announces its sunset
        from langchain_community import document_compressors, document_transformers, embeddings, retrievers
    theirs = set()
    for module in (embeddings, retrievers, document_transformers, document_compressors):
        theirs |= set(module.__all__)
    assert "VoyageEmbeddings" in theirs and "ContextualVoyageEmbeddings" in contextual_retrieval_langchain.__all__
    assert not set(contextual_retrieval_langchain.__all__) & theirs
