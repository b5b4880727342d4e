"""LlamaIndex HybridRetriever on the core FusionConfig: the same settings and names as the core, a blank
query returns nothing, and a failing reranker (the real Cohere SDK against the loopback server
answering 500) can fall back to the fused order."""

from __future__ import annotations

import cohere
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from contextual_retrieval_core import FusionConfig, HybridSearcher
from contextual_retrieval_llamaindex import ContextualBM25Retriever, ContextualRerank, HybridRetriever, LocalMiniLMEmbedding
from tests.unit.search.test_bad_input import CHUNKS

QUERY = "ACME revenue grew"


@pytest.fixture(scope="module")
def nodes() -> list[TextNode]:
    return [TextNode(text=c.indexed_text, id_=c.id) for c in CHUNKS]


@pytest.fixture(scope="module")
def minilm() -> LocalMiniLMEmbedding:
    return LocalMiniLMEmbedding()


@pytest.fixture(scope="module")
def hybrid(nodes, minilm) -> HybridRetriever:
    return HybridRetriever.from_defaults(VectorStoreIndex(nodes, embed_model=minilm), nodes=nodes, similarity_top_k=3)


@pytest.mark.parametrize("query", ["", "   ", "\n"])
async def test_a_blank_query_returns_no_nodes(hybrid, query) -> None:
    assert len(hybrid.retrieve(QUERY)) == 3  # the dense side alone would rank every node for ""
    assert len(hybrid.retrievers["dense"].retrieve(query or " ")) == 3
    assert hybrid.retrieve(query) == []
    assert await hybrid.aretrieve(query) == []


def test_config_and_settings_are_the_cores_and_agree(nodes, minilm) -> None:
    index = VectorStoreIndex(nodes, embed_model=minilm)
    config = FusionConfig(weights=(0.8, 0.2), rrf_k=60, depth=2, top_k=2)
    from_config = HybridRetriever.from_defaults(index, nodes=nodes, config=config)
    from_settings = HybridRetriever.from_defaults(index, nodes=nodes, weights=[0.8, 0.2], rrf_k=60, depth=2, similarity_top_k=2)
    assert from_config.config == from_settings.config == config
    assert (from_config.depth, from_config.rrf_k, from_config.similarity_top_k) == (2, 60.0, 2)
    assert from_config.retrievers["bm25"].similarity_top_k == 2  # from_defaults asks each side for `depth`
    core = HybridSearcher(CHUNKS, minilm.embedder, config=config)
    for query in (QUERY, "Globex report", "headcount"):
        got = [r.node.node_id for r in from_config.retrieve(query)]
        assert got == [r.node.node_id for r in from_settings.retrieve(query)] == [h.id for h in core.search(query)]
    with pytest.raises(ValueError, match="^depth must be a positive integer, got 0"):
        HybridRetriever.from_defaults(index, nodes=nodes, depth=0)
    with pytest.raises(ValueError, match="^similarity_top_k|^top_k must be a positive integer"):
        HybridRetriever(from_config.retrievers, similarity_top_k=-1)
    with pytest.raises(TypeError, match="candidates"):  # depth= since 0.2; the old name was removed in 0.3
        HybridRetriever.from_defaults(index, nodes=nodes, candidates=2)
    with pytest.raises(TypeError, match="^nodes must be a list of nodes, not a single str"):
        ContextualBM25Retriever("some text")  # type: ignore[arg-type]


def test_a_failing_reranker_raises_by_default(nodes, cohere_server) -> None:
    hybrid = HybridRetriever({"bm25": ContextualBM25Retriever(nodes)}, reranker=cohere_server.reranker())
    cohere_server.fail_next(500)
    with pytest.raises(cohere.errors.InternalServerError):
        hybrid.retrieve(QUERY)


@pytest.mark.parametrize("wrap", [False, True], ids=["core-reranker", "ContextualRerank"])
async def test_on_rerank_error_fused_keeps_the_fused_order_sync_and_async(nodes, cohere_server, wrap) -> None:
    reranker = cohere_server.reranker()
    bm25 = ContextualBM25Retriever(nodes)
    plain = HybridRetriever({"bm25": bm25}, similarity_top_k=2).retrieve(QUERY)
    hybrid = HybridRetriever(
        {"bm25": bm25}, similarity_top_k=2, reranker=ContextualRerank(reranker) if wrap else reranker, on_rerank_error="fused"
    )
    assert all("rerank_score" in r.node.metadata for r in hybrid.retrieve(QUERY))  # the server works
    cohere_server.fail_next(500, times=2, message="upstream overloaded")
    for got in (hybrid.retrieve(QUERY), await hybrid.aretrieve(QUERY)):
        assert [(r.node.node_id, r.score) for r in got] == [(r.node.node_id, r.score) for r in plain]
        assert {r.node.metadata["rerank_error"] for r in got} == {"InternalServerError: HTTP 500: upstream overloaded"}
        assert all("rerank_score" not in r.node.metadata for r in got)
        assert "HTTP 500" not in got[0].node.get_content(metadata_mode="embed")  # result keys stay out of the text
    assert [r.status for r in cohere_server.requests] == [200, 500, 500]


class Failing(BaseNodePostprocessor):
    """A LlamaIndex postprocessor whose backend is down."""

    def _postprocess_nodes(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        raise ConnectionError("reranker unreachable")


async def test_a_failing_postprocessor_falls_back_too(nodes) -> None:
    bm25 = ContextualBM25Retriever(nodes)
    plain = [r.node.node_id for r in HybridRetriever({"bm25": bm25}).retrieve(QUERY)]
    with pytest.raises(ConnectionError):
        HybridRetriever({"bm25": bm25}, reranker=Failing()).retrieve(QUERY)
    hybrid = HybridRetriever({"bm25": bm25}, reranker=Failing(), config=FusionConfig(on_rerank_error="fused"))
    for got in (hybrid.retrieve(QUERY), await hybrid.aretrieve(QUERY)):
        assert [r.node.node_id for r in got] == plain
        assert {r.node.metadata["rerank_error"] for r in got} == {"ConnectionError: reranker unreachable"}
