"""LlamaIndex's rerank events: `HybridRetriever` with a reranker emits `ReRankStartEvent` /
`ReRankEndEvent` on the instrumentation dispatcher and the RERANKING callback event, as
LlamaIndex's own rerankers do (`ContextualRerank` on its own too), sync and async."""

from __future__ import annotations

import pytest
from llama_index.core.callbacks import CallbackManager, CBEventType, EventPayload, LlamaDebugHandler
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.schema import NodeWithScore, TextNode

from contextual_retrieval_core.rerank.base import RerankResult, best_first
from contextual_retrieval_llamaindex import ContextualBM25Retriever, ContextualRerank, HybridRetriever

TEXTS = [
    "Revenue grew by 3% over the previous quarter.",
    "Revenue fell by 8% as the product line was retired.",
    "Two new plants opened in Ohio.",
    "Headcount stayed flat at 1,200 employees.",
    "The revenue report is published every quarter.",
]


class Overlap:
    """A deterministic core Reranker: query-word overlap."""

    model_name = "overlap-v1"

    def rerank(self, query, texts, top_n=None):
        words = set(query.lower().split())
        return best_first([RerankResult(i, float(len(words & set(t.lower().split())))) for i, t in enumerate(texts)], top_n)

    async def arerank(self, query, texts, top_n=None):
        return self.rerank(query, texts, top_n)


class Events(BaseEventHandler):
    seen: list = []

    @classmethod
    def class_name(cls) -> str:
        return "Events"

    def handle(self, event, **kwargs):
        if isinstance(event, (ReRankStartEvent, ReRankEndEvent)):
            self.seen.append(event)


@pytest.fixture()
def events():
    handler = Events(seen=[])
    root = get_dispatcher()
    root.add_event_handler(handler)
    try:
        yield handler.seen
    finally:
        root.event_handlers.remove(handler)


def bm25() -> ContextualBM25Retriever:
    return ContextualBM25Retriever([TextNode(text=t, id_=f"n{i}") for i, t in enumerate(TEXTS)], similarity_top_k=5)


@pytest.mark.parametrize("wrapped", [False, True], ids=["core-reranker", "ContextualRerank"])
@pytest.mark.parametrize("use_async", [False, True])
async def test_hybrid_reranker_emits_llamaindex_rerank_events(events, wrapped, use_async):
    debug = LlamaDebugHandler()
    reranker = ContextualRerank(Overlap(), top_n=2) if wrapped else Overlap()
    hybrid = HybridRetriever(
        {"a": bm25(), "b": bm25()}, reranker=reranker, similarity_top_k=3, callback_manager=CallbackManager([debug])
    )
    query = "revenue quarter report"
    out = await hybrid.aretrieve(query) if use_async else hybrid.retrieve(query)
    assert [type(e).__name__ for e in events] == ["ReRankStartEvent", "ReRankEndEvent"]
    start, end = events
    assert start.query.query_str == query and start.model_name == "overlap-v1"
    matches = {r.node.node_id for r in bm25().retrieve(query)}
    assert start.top_n == (2 if wrapped else 3) and {n.node.node_id for n in start.nodes} == matches  # the fused candidates
    assert [n.node.node_id for n in end.nodes] == [n.node.node_id for n in out] and len(out) == len(end.nodes)
    assert out[0].node.node_id == "n4"  # "revenue", "quarter" and "report"
    pairs = debug.get_event_pairs(CBEventType.RERANKING)
    assert len(pairs) == 1
    assert [n.node.node_id for n in pairs[0][1].payload[EventPayload.NODES]] == [n.node.node_id for n in out]


async def test_no_reranker_no_rerank_event(events):
    hybrid = HybridRetriever({"a": bm25(), "b": bm25()}, similarity_top_k=3)
    assert len(hybrid.retrieve("revenue")) == 3 and len(await hybrid.aretrieve("revenue")) == 3
    assert events == []


async def test_contextual_rerank_alone_emits_one_pair_per_call(events):
    rerank = ContextualRerank(Overlap(), top_n=1)
    nodes = [NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=0.0) for i, t in enumerate(TEXTS)]
    sync = rerank.postprocess_nodes(nodes, query_str="plants Ohio")
    asynced = await rerank.apostprocess_nodes(nodes, query_str="plants Ohio")
    assert [n.node.node_id for n in sync] == [n.node.node_id for n in asynced] == ["n2"]
    assert [type(e).__name__ for e in events] == ["ReRankStartEvent", "ReRankEndEvent"] * 2
    assert [n.node.node_id for n in events[1].nodes] == ["n2"]
