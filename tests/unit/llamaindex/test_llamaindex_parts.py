"""Each LlamaIndex part: its place in LlamaIndex's class tree, serialization, sync/async parity, and
behaviour against the real framework (hosted APIs on loopback servers, real SDK clients)."""

from __future__ import annotations

import asyncio
import time

import cohere
import numpy as np
import pytest
import voyageai
from llama_index.core import Document
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.ingestion import IngestionCache, IngestionPipeline
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.node_parser import NodeParser, SentenceSplitter
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeRelationship, NodeWithScore, QueryBundle, TextNode, TransformComponent
from llama_index.core.vector_stores.types import ExactMatchFilter, MetadataFilters

from contextual_retrieval_core import Chunk, ContextualChunk, HybridSearcher
from contextual_retrieval_core.generators import CallableContextGenerator
from contextual_retrieval_core.rerank.base import PassThroughReranker, RerankResult
from contextual_retrieval_core.rerank.cohere import CohereReranker
from contextual_retrieval_llamaindex import (
    ContextualBM25Retriever,
    ContextualNodeParser,
    ContextualRerank,
    ContextualVoyageEmbedding,
    CoreEmbedding,
    HybridRetriever,
    LocalMiniLMEmbedding,
)
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.cohere_server import FakeCohereServer
from tests.fakes.voyage_server import FakeVoyageServer

TEXTS = {
    "acme.md": "# ACME Q2 2023\n\nRevenue grew by 3% over the previous quarter. Margins held.\n\n"
    "Headcount stayed flat at 1,200 employees across all sites.",
    "globex.md": "# Globex 2021\n\nRevenue grew by 3% over the previous quarter. New plants opened.\n\n"
    "The Ohio plant makes turbines; the Texas plant makes pumps.",
    "fuzz.rs": "struct DiffExecutor { primary: A, secondary: B }\n\nimpl DiffExecutor {\n"
    "    fn run_target(&mut self, input: &I) { self.primary.run(input); self.secondary.run(input); }\n}\n",
}


def docs() -> list[Document]:
    return [
        Document(
            text=t,
            id_=name,
            metadata={"file_name": name, "kind": name.split(".")[1], "owner": "team-zebra"},
            excluded_embed_metadata_keys=["owner"],
            excluded_llm_metadata_keys=["owner", "kind"],
        )
        for name, t in TEXTS.items()
    ]


def splitter() -> SentenceSplitter:
    return SentenceSplitter(chunk_size=40, chunk_overlap=0, include_metadata=False)


@pytest.fixture(scope="module")
def nodes() -> list[TextNode]:
    return ContextualNodeParser(node_parser=splitter(), show_progress=False).get_nodes_from_documents(docs())


@pytest.fixture(scope="module")
def minilm() -> LocalMiniLMEmbedding:
    return LocalMiniLMEmbedding()


# -- class tree ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, bases",
    [
        (ContextualNodeParser, (NodeParser, TransformComponent)),
        (ContextualBM25Retriever, (BaseRetriever,)),
        (HybridRetriever, (BaseRetriever,)),
        (ContextualRerank, (BaseNodePostprocessor,)),
        (CoreEmbedding, (BaseEmbedding, TransformComponent)),
        (LocalMiniLMEmbedding, (CoreEmbedding, BaseEmbedding)),
        (ContextualVoyageEmbedding, (CoreEmbedding, BaseEmbedding)),
    ],
)
def test_mro(cls, bases):
    for base in bases:
        assert base in cls.__mro__


# -- ContextualNodeParser -----------------------------------------------------------------------------


def as_llamaindex_renders(text: str, doc: Document, metadata: dict, mode: MetadataMode) -> str:
    """What LlamaIndex itself makes of `text` under `doc`'s metadata rules (template, exclusions)."""
    return TextNode(
        text=text,
        metadata=metadata,
        excluded_embed_metadata_keys=doc.excluded_embed_metadata_keys,
        excluded_llm_metadata_keys=doc.excluded_llm_metadata_keys,
        metadata_template=doc.metadata_template,
        metadata_separator=doc.metadata_separator,
    ).get_content(mode)


def test_node_layout_ids_and_relationships(nodes):
    from contextual_retrieval_core.types import format_for_llm

    originals = {d.doc_id: d for d in docs()}
    by_doc: dict[str, list[TextNode]] = {}
    for node in nodes:
        by_doc.setdefault(node.ref_doc_id, []).append(node)
        doc = originals[node.ref_doc_id]
        context = node.metadata["context"]
        chunk = ContextualChunk(Chunk(node.node_id, node.ref_doc_id, node.text), context)
        # the document's metadata by LlamaIndex's rules, then the contextual text (what is embedded)
        assert node.get_content(MetadataMode.EMBED) == as_llamaindex_renders(chunk.indexed_text, doc, doc.metadata, MetadataMode.EMBED)
        assert node.get_content(MetadataMode.EMBED).startswith(f"file_name: {doc.doc_id}\nkind: {doc.metadata['kind']}\n\n{context}")
        assert node.get_content(MetadataMode.LLM) == as_llamaindex_renders(
            format_for_llm(context, node.text), doc, doc.metadata, MetadataMode.LLM
        )
        assert node.get_content(MetadataMode.NONE) == node.text
        assert {k: node.metadata[k] for k in doc.metadata} == doc.metadata  # kept for filters and display
        assert "zebra" not in node.get_content(MetadataMode.EMBED) and "zebra" not in node.get_content(MetadataMode.LLM)
        assert "kind: " not in node.get_content(MetadataMode.LLM)
    assert set(by_doc) == set(TEXTS) and len(nodes) > len(TEXTS)
    ids = {n.node_id for n in nodes}
    for doc_nodes in by_doc.values():
        for prev, nxt in zip(doc_nodes, doc_nodes[1:]):  # links follow the renamed ids
            assert prev.relationships[NodeRelationship.NEXT].node_id == nxt.node_id
            assert nxt.relationships[NodeRelationship.PREVIOUS].node_id == prev.node_id
    assert all(r.node_id in ids for n in nodes for k, r in n.relationships.items() if k in (NodeRelationship.NEXT, NodeRelationship.PREVIOUS))
    again = ContextualNodeParser(node_parser=splitter(), show_progress=False).get_nodes_from_documents(docs())
    assert [n.node_id for n in again] == [n.node_id for n in nodes]


def test_node_parser_serialization_round_trip(nodes):
    parser = ContextualNodeParser(node_parser=splitter(), concurrency=3, show_progress=False)
    data = parser.to_json()
    loaded = ContextualNodeParser.from_json(data)
    assert isinstance(loaded.node_parser, SentenceSplitter) and loaded.node_parser.chunk_size == 40
    assert (loaded.concurrency, loaded.generator_id) == (3, parser.generator_id)
    assert loaded.to_dict() == parser.to_dict()
    out = loaded.get_nodes_from_documents(docs())
    assert [(n.node_id, n.metadata["context"]) for n in out] == [(n.node_id, n.metadata["context"]) for n in nodes]


def test_parser_saved_with_an_llm_generator_needs_it_back(tmp_path):
    gen = CallableContextGenerator(lambda d, c: "ctx", name="my-llm", model="m1")
    parser = ContextualNodeParser(gen, store=tmp_path / "s.sqlite3", show_progress=False)
    data = parser.to_dict()
    assert data["store_path"] == str(tmp_path / "s.sqlite3")
    with pytest.raises(ValueError, match="pass the same generator"):
        ContextualNodeParser.from_dict(data)
    assert ContextualNodeParser.from_dict(data, generator=gen).generator_id == parser.generator_id


def test_ingestion_pipeline_cache_and_store_pay_once(tmp_path):
    calls: list[str] = []

    def situate(document, chunk):
        calls.append(chunk.id)
        return f"From {document.id}."

    gen = CallableContextGenerator(situate, name="counting", model="m")
    cache = IngestionCache()
    pipeline = IngestionPipeline(
        transformations=[ContextualNodeParser(gen, splitter(), tmp_path / "s.sqlite3", show_progress=False)], cache=cache
    )
    first = pipeline.run(documents=docs())
    assert len(calls) == len(first) > 3
    second = pipeline.run(documents=docs())  # the transformation cache answers
    assert len(calls) == len(first) and [n.node_id for n in second] == [n.node_id for n in first]
    # without the pipeline cache the context store answers: still no new call
    fresh = IngestionPipeline(transformations=[ContextualNodeParser(gen, splitter(), tmp_path / "s.sqlite3", show_progress=False)])
    assert [n.metadata["context"] for n in fresh.run(documents=docs())] == [n.metadata["context"] for n in first]
    assert len(calls) == len(first)
    # another generator is another cache entry, never a stale hit
    other = CallableContextGenerator(lambda d, c: "other", name="other", model="m")
    pipeline2 = IngestionPipeline(
        transformations=[ContextualNodeParser(other, splitter(), tmp_path / "o.sqlite3", show_progress=False)], cache=cache
    )
    headed = pipeline2.run(documents=docs())
    assert {n.metadata["context"].split("\n")[-1] for n in headed} == {"other"}
    assert all(n.metadata["context"].startswith("From ") for n in headed)  # the structural header (default)
    # the header setting keys the pipeline cache too: switched off, no stale headed hit
    pipeline3 = IngestionPipeline(transformations=[ContextualNodeParser(
        other, splitter(), tmp_path / "o.sqlite3", show_progress=False, structural_header=False)], cache=cache)
    assert {n.metadata["context"] for n in pipeline3.run(documents=docs())} == {"other"}


async def test_acall_runs_requests_concurrently_and_matches_sync(tmp_path):
    in_flight, peak = 0, 0

    async def situate(document, chunk):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1
        return f"{document.id} part {chunk.index}"

    gen = CallableContextGenerator(situate, name="slow", model="m")
    parser = ContextualNodeParser(gen, splitter(), tmp_path / "a.sqlite3", concurrency=4, show_progress=False)
    out = await parser.acall(docs())
    assert len(out) > 4 and peak == 4  # every chunk fans out at once, up to the concurrency bound
    sync = ContextualNodeParser(gen, splitter(), tmp_path / "s.sqlite3", show_progress=False).get_nodes_from_documents(docs())
    assert [(n.node_id, n.get_content(MetadataMode.EMBED)) for n in out] == [(n.node_id, n.get_content(MetadataMode.EMBED)) for n in sync]


def test_llamaindex_anthropic_llm_gets_prompt_caching(tmp_path):
    from llama_index.llms.anthropic import Anthropic

    words = ["executor", "harness", "corpus", "monitor", "stage", "mutator", "feedback", "input"]
    text = " ".join(f"{words[i % len(words)]}{i}." for i in range(2200))  # ~20k chars: over 2048 tokens
    with FakeAnthropicServer() as srv:
        llm = Anthropic(model="claude-3-haiku-20240307", api_key=srv.api_key, base_url=srv.url, max_retries=0)
        parser = ContextualNodeParser(
            llm, SentenceSplitter(chunk_size=1024, chunk_overlap=0), tmp_path / "s.sqlite3", show_progress=False
        )
        out = parser.get_nodes_from_documents([Document(text=text, id_="big.txt")])
        bodies = [r.body for r in srv.requests_to("/v1/messages")]
    assert len(out) == len(bodies) >= 4
    for body in bodies:
        content = body["messages"][0]["content"]
        assert content[0]["text"].startswith("<document>\n") and content[0]["cache_control"]["type"] == "ephemeral"
        assert "cache_control" not in content[1] and content[1]["text"].startswith("Here is the chunk")
    report = parser.last_report
    assert report.generator == "anthropic" and report.model == "claude-3-haiku-20240307" and report.cache_writes == 1
    assert report.usage.cache_read_tokens > 0 and report.cache_misses == 0


# -- ContextualBM25Retriever ----------------------------------------------------------------------------


def test_bm25_scores_filters_and_persistence(nodes, tmp_path):
    retriever = ContextualBM25Retriever(nodes, similarity_top_k=3)
    hits = retriever.retrieve("DiffExecutor run_target")
    assert hits and hits[0].node.ref_doc_id == "fuzz.rs"
    assert all(a.score >= b.score > 0 for a, b in zip(hits, hits[1:]))
    filtered = ContextualBM25Retriever(nodes, filters=MetadataFilters(filters=[ExactMatchFilter(key="kind", value="md")]))
    got = filtered.retrieve("revenue grew DiffExecutor")
    assert got and {h.node.metadata["kind"] for h in got} == {"md"}
    retriever.persist(tmp_path / "bm25")
    loaded = ContextualBM25Retriever.from_persist_dir(tmp_path / "bm25")
    for query in ("revenue grew by 3%", "turbines", "Headcount"):
        assert [(h.node.node_id, h.score) for h in loaded.retrieve(query)] == [(h.node.node_id, h.score) for h in retriever.retrieve(query)]
    assert loaded.nodes[hits[0].node.node_id].get_content(MetadataMode.EMBED) == hits[0].node.get_content(MetadataMode.EMBED)
    assert not list((tmp_path / "bm25").rglob("*.pkl"))


async def test_bm25_sync_async_parity(nodes):
    retriever = ContextualBM25Retriever(nodes)
    for query in ("revenue", "Ohio plant pumps", "nothing-matches-this"):
        sync = [(h.node.node_id, h.score) for h in retriever.retrieve(query)]
        assert sync == [(h.node.node_id, h.score) for h in await retriever.aretrieve(query)]


def test_bm25_contextual_text_is_what_is_searched(nodes):
    # "Globex" appears only in a context for the chunks after the title: contextual BM25 finds them
    retriever = ContextualBM25Retriever(nodes)
    found = {h.node.node_id for h in retriever.retrieve("Globex turbines")}
    turbines = next(n for n in nodes if "turbines" in n.text)
    assert "Globex" not in turbines.text and turbines.node_id in found


# -- HybridRetriever --------------------------------------------------------------------------------------


class Fixed(BaseRetriever):
    """A retriever that returns fixed nodes (after an optional delay)."""

    def __init__(self, nodes: list[TextNode], delay: float = 0.0, gauge: InFlight | None = None) -> None:
        self.items, self.delay, self.similarity_top_k, self.gauge = nodes, delay, 5, gauge
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        time.sleep(self.delay)
        return [NodeWithScore(node=n, score=1.0 / (i + 1)) for i, n in enumerate(self.items)]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if self.gauge is not None:
            self.gauge.now += 1
            self.gauge.most = max(self.gauge.most, self.gauge.now)
        await asyncio.sleep(self.delay)
        if self.gauge is not None:
            self.gauge.now -= 1
        return [NodeWithScore(node=n, score=1.0 / (i + 1)) for i, n in enumerate(self.items)]


class InFlight:
    """Counts retrievals in progress at once (concurrency shown by overlap, not by a clock)."""

    def __init__(self) -> None:
        self.now = self.most = 0


def _n(i: str) -> TextNode:
    return TextNode(text=f"text {i}", id_=i)


def test_hybrid_weights_are_honoured_ranks_recorded_and_ids_deduped():
    a, b, c = _n("a"), _n("b"), _n("c")
    first, second = Fixed([a, b, c]), Fixed([c, b, TextNode(text="another copy", id_="a")])
    favour_first = HybridRetriever({"x": first, "y": second}, [0.8, 0.2]).retrieve("q")
    favour_second = HybridRetriever({"x": first, "y": second}, [0.2, 0.8]).retrieve("q")
    # a: .8/1 + .2/3, b: .8/2 + .2/2, c: .8/3 + .2/1 -- and the mirror image with the weights swapped
    assert [r.node.node_id for r in favour_first] == ["a", "b", "c"]
    assert [r.node.node_id for r in favour_second] == ["c", "b", "a"]
    top = favour_first[0]
    assert top.node.metadata["ranks"] == {"x": 1, "y": 3}
    assert top.score == pytest.approx(0.8 / 1 + 0.2 / 3) == top.node.metadata["fused_score"]
    assert "fused_score" not in top.node.get_content(MetadataMode.LLM)
    assert "fused_score" not in a.metadata  # the stored node is untouched
    assert first.similarity_top_k == 5  # the caller's retrievers are left as they were
    relative = HybridRetriever({"x": first, "y": second}, [0.5, 0.5], mode="relative_score", similarity_top_k=2).retrieve("q")
    assert len(relative) == 2


async def test_hybrid_async_runs_retrievers_concurrently_and_matches_sync():
    a, b = _n("a"), _n("b")
    gauge = InFlight()
    hybrid = HybridRetriever([Fixed([a, b], delay=0.05, gauge=gauge), Fixed([b, a], delay=0.05, gauge=gauge)])
    got = await hybrid.aretrieve("q")
    assert gauge.most == 2  # both retrievals were in flight at the same time
    assert [(r.node.node_id, r.score) for r in got] == [(r.node.node_id, r.score) for r in hybrid.retrieve("q")]


def test_hybrid_equals_the_core_hybrid_searcher(minilm):
    from llama_index.core import VectorStoreIndex

    # the core indexes context + chunk: the documents' metadata kept out of the EMBED text
    unembedded = [d.model_copy(update={"excluded_embed_metadata_keys": list(d.metadata)}) for d in docs()]
    nodes = ContextualNodeParser(node_parser=splitter(), show_progress=False).get_nodes_from_documents(unembedded)

    index = VectorStoreIndex(nodes, embed_model=minilm)
    hybrid = HybridRetriever.from_defaults(index, nodes=nodes, similarity_top_k=6)
    chunks = [ContextualChunk(Chunk(n.node_id, n.ref_doc_id, n.text), n.metadata["context"]) for n in nodes]
    core = HybridSearcher(chunks, minilm.embedder)
    for query in ("How did ACME revenue change?", "Which plant makes pumps?", "run the target on both executors"):
        assert [r.node.node_id for r in hybrid.retrieve(query)] == [h.id for h in core.search(query, top_k=6)]


def test_hybrid_with_a_core_reranker_and_with_a_postprocessor(nodes):
    class Reverse:
        model_name = "reverse"

        def rerank(self, query, texts, top_n=None):
            return [RerankResult(i, float(i)) for i in reversed(range(len(texts)))][:top_n]

        async def arerank(self, query, texts, top_n=None):
            return self.rerank(query, texts, top_n)

    bm25 = ContextualBM25Retriever(nodes)
    plain = [r.node.node_id for r in HybridRetriever({"bm25": bm25}).retrieve("revenue grew")]
    reranked = HybridRetriever({"bm25": bm25}, reranker=Reverse(), similarity_top_k=2).retrieve("revenue grew")
    assert [r.node.node_id for r in reranked] == plain[::-1][:2]
    assert reranked[0].node.metadata["rerank_score"] == reranked[0].score
    post = HybridRetriever({"bm25": bm25}, reranker=ContextualRerank(Reverse(), top_n=5), similarity_top_k=2).retrieve("revenue grew")
    assert [r.node.node_id for r in post] == [r.node.node_id for r in reranked]


def test_hybrid_rejects_bad_arguments(nodes):
    bm25 = ContextualBM25Retriever(nodes)
    with pytest.raises(ValueError, match="one weight per retriever"):
        HybridRetriever([bm25], [0.5, 0.5])
    with pytest.raises(TypeError, match="BaseRetriever"):
        HybridRetriever({"x": object()})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="rrf"):
        HybridRetriever([bm25], mode="max")  # type: ignore[arg-type]


# -- ContextualRerank ---------------------------------------------------------------------------------------


class Recorder(BaseEventHandler):
    events: list = []

    @classmethod
    def class_name(cls) -> str:
        return "Recorder"

    def handle(self, event, **kwargs):
        self.events.append(event.class_name())


@pytest.fixture()
def cohere_srv():
    with FakeCohereServer() as srv:
        yield srv


def cohere_reranker(srv) -> CohereReranker:
    return CohereReranker(
        client=cohere.ClientV2(api_key=srv.api_key, base_url=srv.base_url),
        async_client=cohere.AsyncClientV2(api_key=srv.api_key, base_url=srv.base_url),
    )


async def test_rerank_cohere_sync_async_parity_and_events(nodes, cohere_srv):
    handler = Recorder(events=[])
    root = get_dispatcher()
    root.add_event_handler(handler)
    try:
        rerank = ContextualRerank(cohere_reranker(cohere_srv), top_n=3)
        candidates = [NodeWithScore(node=n, score=0.0) for n in nodes]
        sync = rerank.postprocess_nodes(candidates, query_str="Globex plant turbines")
        asynced = await rerank.apostprocess_nodes(candidates, query_str="Globex plant turbines")
    finally:
        root.event_handlers.remove(handler)
    assert [(r.node.node_id, r.score) for r in sync] == [(r.node.node_id, r.score) for r in asynced]
    assert len(sync) == 3 and "turbines" in sync[0].node.text
    sent = cohere_srv.rerank_requests()
    assert sent[0]["model"] == "rerank-v3.5" and sent[0]["documents"][0] == nodes[0].get_content(MetadataMode.EMBED)
    assert handler.events.count("ReRankStartEvent") == 2 and handler.events.count("ReRankEndEvent") == 2


def test_rerank_serialization_round_trip(monkeypatch):
    monkeypatch.setenv("COHERE_API_KEY", "test-key-not-logged")
    rerank = ContextualRerank(top_n=7)
    data = rerank.to_dict()
    assert data["backend"] == "cohere" and data["model"] == "rerank-v3.5" and "test-key" not in str(data)
    loaded = ContextualRerank.from_dict(data)
    assert isinstance(loaded.reranker, CohereReranker) and loaded.top_n == 7 and loaded.to_dict() == data
    custom = ContextualRerank(PassThroughReranker(), top_n=2)
    with pytest.raises(ValueError, match="pass reranker="):
        ContextualRerank.from_dict(custom.to_dict())
    assert ContextualRerank.from_dict(custom.to_dict(), reranker=PassThroughReranker()).top_n == 2


# -- embeddings -------------------------------------------------------------------------------------------


def test_minilm_embedding_round_trip_and_core_vectors(minilm):
    loaded = LocalMiniLMEmbedding.from_dict(minilm.to_dict())
    text = "Revenue grew by 3% over the previous quarter."
    assert np.allclose(loaded.get_text_embedding(text), minilm.embedder.embed_documents([text])[0], atol=1e-6)
    assert np.allclose(minilm.get_query_embedding(text), minilm.get_text_embedding(text), atol=1e-6)


async def test_voyage_embedding_input_types_sync_and_async():
    with FakeVoyageServer() as srv:
        emb = ContextualVoyageEmbedding(
            client=voyageai.Client(api_key=srv.api_key, base_url=srv.base_url, max_retries=0),
            async_client=voyageai.AsyncClient(api_key=srv.api_key, base_url=srv.base_url, max_retries=0),
        )
        docs_sync = emb.get_text_embedding_batch(["a chunk", "another chunk"])
        query_sync = emb.get_query_embedding("a chunk")
        docs_async = await emb.aget_text_embedding_batch(["a chunk", "another chunk"])
        query_async = await emb.aget_query_embedding("a chunk")
        kinds = [body["input_type"] for body in srv.embeddings_requests()]
    assert kinds == ["document", "query", "document", "query"]
    assert np.allclose(docs_sync, docs_async) and np.allclose(query_sync, query_async)
    assert not np.allclose(docs_sync[0], query_sync)  # the server nudges by input type
    data = emb.to_dict()
    assert data["model_name"] == "voyage-3.5" and "key" not in str(data).lower()


async def test_rerank_with_voyage_backend_sync_and_async(nodes):
    from contextual_retrieval_core.rerank.voyage import VoyageReranker

    with FakeVoyageServer() as srv:
        reranker = VoyageReranker(
            client=voyageai.Client(api_key=srv.api_key, base_url=srv.base_url, max_retries=0),
            async_client=voyageai.AsyncClient(api_key=srv.api_key, base_url=srv.base_url, max_retries=0),
        )
        rerank = ContextualRerank(reranker, top_n=2)
        candidates = [NodeWithScore(node=n, score=0.0) for n in nodes]
        sync = rerank.postprocess_nodes(candidates, query_str="DiffExecutor run_target")
        asynced = await rerank.apostprocess_nodes(candidates, query_str="DiffExecutor run_target")
        sent = srv.rerank_requests()
    assert rerank.backend == "VoyageReranker" and len(sent) == 2
    assert [(r.node.node_id, r.score) for r in sync] == [(r.node.node_id, r.score) for r in asynced]
    assert sync[0].node.ref_doc_id == "fuzz.rs"


async def test_minilm_embedding_async_matches_sync(minilm):
    texts = ["Revenue grew by 3%.", "struct DiffExecutor"]
    assert np.allclose(await minilm.aget_text_embedding_batch(texts), minilm.get_text_embedding_batch(texts), atol=1e-6)
    assert np.allclose(await minilm.aget_query_embedding(texts[0]), minilm.get_query_embedding(texts[0]), atol=1e-6)


def test_hybrid_reranker_sees_candidates_and_postprocessors_never_touch_stored_nodes(nodes):
    class Count:
        model_name = "count"

        def __init__(self) -> None:
            self.seen: list = []

        def rerank(self, query, texts, top_n=None):
            self.seen.append(len(texts))
            return [RerankResult(i, 1.0 / (i + 1)) for i in range(len(texts))][:top_n]

        async def arerank(self, query, texts, top_n=None):
            return self.rerank(query, texts, top_n)

    many = [TextNode(text=f"item {i}", id_=f"n{i}") for i in range(400)]
    counter = Count()
    HybridRetriever({"x": Fixed(many[:200]), "y": Fixed(many[200:])}, reranker=counter).retrieve("q")
    assert counter.seen == [150]  # rerank_depth defaults to the candidates per side, as the core

    class Rewrite(BaseNodePostprocessor):
        def _postprocess_nodes(self, nodes, query_bundle=None):
            for n in nodes:
                n.node.text = "REWRITTEN"
            return nodes + [NodeWithScore(node=TextNode(text="added", id_="extra"), score=0.1)]

    bm25 = ContextualBM25Retriever(nodes)
    before = {i: n.text for i, n in bm25.nodes.items()}
    out = HybridRetriever({"bm25": bm25}, reranker=Rewrite(), similarity_top_k=50).retrieve("revenue grew")
    assert {i: n.text for i, n in bm25.nodes.items()} == before
    extra = next(r for r in out if r.node.node_id == "extra")
    assert extra.node.metadata["ranks"] == {"bm25": None} and "rerank_score" not in extra.node.metadata


def test_in_memory_chroma_stores_never_mix():
    from contextual_retrieval_llamaindex import chroma_vector_store

    a, b = chroma_vector_store(), chroma_vector_store()
    a.add([TextNode(text="cats purr", id_="c1", embedding=[1.0, 0.0])])
    assert b._collection.count() == 0 and a._collection.count() == 1


def test_a_document_passed_twice_is_situated_once_and_a_clash_is_an_error(tmp_path):
    calls: list[str] = []
    gen = CallableContextGenerator(lambda d, c: calls.append(c.id) or "ctx", name="count", model="m")
    parser = ContextualNodeParser(gen, splitter(), tmp_path / "s.sqlite3", show_progress=False)
    once = parser.get_nodes_from_documents(docs()[:1])
    calls.clear()
    twice = ContextualNodeParser(gen, splitter(), tmp_path / "t.sqlite3", show_progress=False).get_nodes_from_documents(docs()[:1] * 2)
    assert [n.node_id for n in twice] == [n.node_id for n in once] and len(calls) == len(once)
    with pytest.raises(ValueError, match="two different documents share the id 'acme.md'"):
        parser.get_nodes_from_documents([docs()[0], Document(text="other", id_="acme.md")])
