"""LlamaIndex pruning postprocessors: same text as the core, a real query engine, inputs untouched."""

from __future__ import annotations

import asyncio

import anthropic
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.llms.mock import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import ImageNode, MetadataMode, NodeWithScore, QueryBundle, TextNode

from contextual_retrieval_core.pruning import PRUNED_SPANS_KEY, ContextPruner, PruningConfig
from contextual_retrieval_core.rerank import PassThroughReranker
from contextual_retrieval_core.types import CONTEXT_LABEL, Chunk, ContextualChunk
from contextual_retrieval_llamaindex import ContextualRerank, CoreEmbedding
from contextual_retrieval_llamaindex._convert import set_context
from contextual_retrieval_llamaindex.pruning import ContextPruningPostprocessor, LLMCompressorPostprocessor
from tests.fakes.anthropic_server import FakeAnthropicServer

TEXTS = {
    "acme.md": ("ACME Corp's Q2 report.", "ACME reports its results for the quarter. The company's revenue grew by 3% over the "
                "previous quarter, to $412 million. Headcount ended the quarter at 1,200 employees. The guidance "
                "assumes no change in exchange rates."),
    "austin.md": ("Austin office handbook.", "Employees are entitled to 12 weeks of fully paid leave. The standard working week "
                  "is 40 hours. The office closes on eleven public holidays a year."),
    "executor.py": ("The DiffExecutor class.", "class DiffExecutor:\n    def run_target(self, input):\n        first = self.primary.run(input)\n"
                    "        second = self.secondary.run(input)\n        return first if first == second else 'diff'\n"),
}


@pytest.fixture(scope="module")
def embedder(offline_embedder):
    return offline_embedder


def _nodes() -> list[NodeWithScore]:
    out = []
    for i, (name, (context, text)) in enumerate(TEXTS.items()):
        node = set_context(TextNode(id_=f"n{i}", text=text, metadata={"file_name": name}), context)
        out.append(NodeWithScore(node=node, score=1.0 - i / 10))
    return out


def _snapshot(nodes):
    return [(n.node.node_id, n.node.get_content(MetadataMode.NONE), dict(n.node.metadata), n.score) for n in nodes]


def test_postprocessor_returns_exactly_the_cores_text_and_leaves_nodes_alone(embedder):
    query = "How much did ACME's revenue grow?"
    nodes = _nodes()
    before = _snapshot(nodes)
    post = ContextPruningPostprocessor(embedder, budget=40)
    out = post.postprocess_nodes(nodes, query_bundle=QueryBundle(query))
    assert _snapshot(nodes) == before  # the caller's nodes are untouched
    core_chunks = [ContextualChunk(Chunk(f"n{i}", name, text), ctx) for i, (name, (ctx, text)) in enumerate(TEXTS.items())]
    core = ContextPruner(embedder, config=PruningConfig(budget=40)).prune(query, core_chunks)
    assert [(n.node.node_id, n.node.get_content(MetadataMode.NONE)) for n in out] == [(c.id, c.text) for c in core.chunks]
    assert "grew by 3%" in out[0].node.get_content(MetadataMode.NONE)
    assert out[0].node.metadata[PRUNED_SPANS_KEY] == core.chunks[0].spans
    shown = out[0].node.get_content(MetadataMode.LLM)
    assert CONTEXT_LABEL in shown and "ACME Corp's Q2 report." in shown and PRUNED_SPANS_KEY not in shown
    assert post.last_report.tokens_after < post.last_report.tokens_before
    again = asyncio.run(post.apostprocess_nodes(nodes, query_bundle=QueryBundle(query)))
    assert [n.node.get_content(MetadataMode.NONE) for n in again] == [n.node.get_content(MetadataMode.NONE) for n in out]


def test_in_a_retriever_query_engine_after_contextual_rerank(embedder):
    nodes = [n.node for n in _nodes()]
    index = VectorStoreIndex(nodes, embed_model=CoreEmbedding(embedder))
    engine = RetrieverQueryEngine.from_args(
        index.as_retriever(similarity_top_k=3), llm=MockLLM(),
        node_postprocessors=[ContextualRerank(PassThroughReranker(), top_n=3), ContextPruningPostprocessor(embedder, budget=30)],
    )
    response = engine.query("How many weeks of paid leave do Austin employees get?")
    texts = [n.node.get_content(MetadataMode.NONE) for n in response.source_nodes]
    assert any("12 weeks" in t for t in texts)
    assert sum(len(t) for t in texts) < sum(len(text) for _, text in TEXTS.values())
    assert [n.get_content(MetadataMode.NONE) for n in nodes] == [text for _, text in TEXTS.values()]


def test_empty_list_non_text_nodes_and_missing_query(embedder):
    post = ContextPruningPostprocessor(embedder, budget=20)
    assert post.postprocess_nodes([], query_str="anything") == []
    image = NodeWithScore(node=ImageNode(id_="img", image="aGVsbG8=", text=""), score=0.5)
    nodes = _nodes()[:1] + [image]
    out = post.postprocess_nodes(nodes, query_str="revenue growth")
    assert out[-1] is image  # passed through, in its place
    with pytest.raises(ValueError, match="pruning needs the query"):
        post.postprocess_nodes(nodes)
    with pytest.raises(ValueError, match="budget must be a positive number of tokens"):
        ContextPruningPostprocessor(embedder, budget=0)


def test_the_fields_are_pruning_configs_and_a_pruner_brings_its_own(embedder):
    fields = ContextPruningPostprocessor.model_fields
    for name, _, default, doc in PruningConfig.field_specs():
        assert fields[name].default == default and fields[name].description == doc, name
    post = ContextPruningPostprocessor(embedder, lam=0.5, neighbours=False)
    assert post.pruning_config == PruningConfig(lam=0.5, neighbours=False) == post.pruner.config
    assert post.to_dict()["lam"] == 0.5
    pruner = ContextPruner(embedder, config=PruningConfig(budget=40))
    assert ContextPruningPostprocessor(pruner=pruner).budget == 40
    with pytest.raises(ValueError, match="not both"):
        ContextPruningPostprocessor(pruner=pruner, budget=10)
    with pytest.raises(TypeError, match=r"unknown settings \['lamda'\]"):
        ContextPruningPostprocessor(embedder, lamda=0.5)


def test_llm_compressor_postprocessor_on_the_loopback_server():
    with FakeAnthropicServer() as server:
        client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=0)
        post = LLMCompressorPostprocessor(client=client)
        nodes = _nodes()
        before = _snapshot(nodes)
        out = post.postprocess_nodes(nodes, query_str="How much did revenue grow?")
    assert _snapshot(nodes) == before
    # the fake quotes the first words of the retrieved text: the only verifiable passage
    assert [n.node.node_id for n in out] == ["n0"]
    assert out[0].node.get_content(MetadataMode.NONE) == " ".join(TEXTS["acme.md"][1].split()[:8])
    assert post.last_report.unverified >= 1
