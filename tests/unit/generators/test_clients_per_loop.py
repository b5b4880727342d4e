"""Async SDK clients built by the library belong to one event loop: two `asyncio.run(...)` calls in
a row must each work (issue 12: every second call failed with "Event loop is closed")."""

from __future__ import annotations

import asyncio
import time

import pytest

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.embeddings.voyage import VoyageEmbedder
from contextual_retrieval_core.generators import AnthropicContextGenerator
from contextual_retrieval_core.rerank import CohereReranker, VoyageReranker
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.cohere_server import FakeCohereServer
from tests.fakes.voyage_server import FakeVoyageServer

QUERY = "how does contextual retrieval improve bm25 search"
TEXTS = ["BM25 search ranks documents by term frequency.", "A recipe for lemon cake.", "Contextual retrieval and BM25."]


def _twice(make_coroutine) -> list:
    return [asyncio.run(make_coroutine()) for _ in range(2)]


def test_cohere_reranker_built_from_the_environment_works_on_two_loops(monkeypatch):
    with FakeCohereServer() as server:
        monkeypatch.setenv("COHERE_API_KEY", server.api_key)
        reranker = CohereReranker(base_url=server.base_url)  # the library builds its clients
        first, second = _twice(lambda: reranker.arerank(QUERY, TEXTS, top_n=2))
        assert first == second == reranker.rerank(QUERY, TEXTS, top_n=2) and len(first) == 2
        assert len(server.requests_to("/v2/rerank")) == 3


def test_langchain_rerank_compressor_acompress_documents_on_two_loops(monkeypatch):
    from langchain_core.documents import Document as LCDocument

    from contextual_retrieval_langchain.rerank import RerankCompressor

    with FakeCohereServer() as server:
        monkeypatch.setenv("COHERE_API_KEY", server.api_key)
        compressor = RerankCompressor(reranker=CohereReranker(base_url=server.base_url), top_n=2)
        docs = [LCDocument(page_content=t, metadata={"i": i}) for i, t in enumerate(TEXTS)]
        first, second = _twice(lambda: compressor.acompress_documents(docs, QUERY))
        assert [d.metadata["i"] for d in first] == [d.metadata["i"] for d in second]
        assert len(first) == 2 and all("relevance_score" in d.metadata for d in first)


def test_voyage_reranker_and_embedder_built_from_the_environment_work_on_two_loops(monkeypatch):
    with FakeVoyageServer() as server:
        monkeypatch.setenv("VOYAGE_API_KEY", server.api_key)
        reranker = VoyageReranker(base_url=server.base_url)
        first, second = _twice(lambda: reranker.arerank(QUERY, TEXTS, top_n=2))
        assert first == second and len(first) == 2
        embedder = VoyageEmbedder(base_url=server.base_url)
        one, two = _twice(lambda: embedder.aembed_documents(TEXTS))
        assert one.shape == (3, embedder.dimension) and (one == two).all()


def test_anthropic_generator_built_from_the_environment_works_on_two_loops(monkeypatch):
    document = Document("d", "The whole document about BM25 and contextual retrieval. " * 10)
    chunk = Chunk("c", "d", "The whole document about BM25", 0)
    with FakeAnthropicServer() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        generator = AnthropicContextGenerator("claude-3-haiku-20240307")
        first, second = _twice(lambda: generator.agenerate(document, chunk))
        assert first.context == second.context and first.usage.requests == 1
        assert len(server.requests_to("/v1/messages")) == 2


def _all_closed_soon(*servers) -> bool:
    deadline = time.monotonic() + 5
    while any(s.open_connections() for s in servers) and time.monotonic() < deadline:
        time.sleep(0.01)
    return not any(s.open_connections() for s in servers)


def test_the_clients_built_for_a_loop_are_closed_when_the_loop_ends(monkeypatch):
    """No connection outlives the `asyncio.run` that opened it (they used to wait for the garbage
    collector, with an "unclosed transport" warning)."""
    document = Document("d", "The whole document about BM25 and contextual retrieval. " * 10)
    chunk = Chunk("c", "d", "The whole document about BM25", 0)
    with FakeCohereServer() as cohere, FakeAnthropicServer() as claude:
        monkeypatch.setenv("COHERE_API_KEY", cohere.api_key)
        monkeypatch.setenv("ANTHROPIC_API_KEY", claude.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.url)
        reranker = CohereReranker(base_url=cohere.base_url)
        generator = AnthropicContextGenerator("claude-3-haiku-20240307")

        async def use_both() -> tuple[int, int]:
            await reranker.arerank(QUERY, TEXTS, top_n=2)
            await generator.agenerate(document, chunk)
            return cohere.open_connections(), claude.open_connections()

        for _ in range(2):
            assert asyncio.run(use_both()) == (1, 1)  # kept alive while the loop runs ...
            assert _all_closed_soon(cohere, claude)  # ... and closed with it


def test_the_llm_pruner_built_from_the_environment_works_on_two_loops_and_closes_with_each(monkeypatch):
    from contextual_retrieval_core.pruning.llm import LLMContextCompressor

    chunks = [Chunk("c1", "d", "Revenue grew by 3% over the previous quarter.", 0)]
    with FakeAnthropicServer() as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        pruner = LLMContextCompressor()

        async def prune() -> tuple[object, int]:
            return await pruner.acompress("how did revenue change?", chunks), server.open_connections()

        (first, open_first), (second, open_second) = _twice(prune)
        assert first.text == second.text and open_first == open_second == 1
        assert _all_closed_soon(server)
        assert len(server.requests_to("/v1/messages")) == 2


@pytest.mark.parametrize("cls", [CohereReranker, VoyageReranker, VoyageEmbedder])
def test_an_injected_async_client_is_used_as_given(cls):
    marker = object()
    part = cls(client=object(), async_client=marker) if cls is not VoyageEmbedder else cls(client=object(), async_client=marker)

    async def which():
        return part._aio_client()

    assert asyncio.run(which()) is marker and asyncio.run(which()) is marker
