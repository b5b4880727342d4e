"""End to end, offline: Documents -> IngestionPipeline([ContextualNodeParser, embedder]) -> Chroma ->
HybridRetriever -> ContextualRerank (loopback Cohere) -> RetrieverQueryEngine with MockLLM.

Contexts come from the Anthropic generator on the loopback Anthropic server, through the real
SDK; run twice, the second run makes no generation request (the context store answers)."""

from __future__ import annotations

import anthropic
import cohere
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.llms.mock import MockLLM
from llama_index.core.node_parser import MarkdownNodeParser
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode

from contextual_retrieval_core.generators import AnthropicContextGenerator
from contextual_retrieval_core.rerank.cohere import CohereReranker
from contextual_retrieval_core.types import CONTEXT_LABEL, SOURCE_LABEL
from contextual_retrieval_llamaindex import (
    ContextualNodeParser,
    ContextualRerank,
    HybridRetriever,
    LocalMiniLMEmbedding,
    chroma_vector_store,
)
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.fakes.cohere_server import FakeCohereServer

MODEL = "claude-3-haiku-20240307"

REPORTS = {
    "acme-q2-2023.md": "# ACME Corp quarterly report, Q2 2023\n\n## Results\n\nRevenue grew by 3% over the previous quarter.\n\n"
    "## Staffing\n\nHeadcount stayed flat at 1,200 employees.",
    "globex-2021.md": "# Globex Inc annual report 2021\n\n## Results\n\nRevenue grew by 3% over the previous quarter.\n\n"
    "## Plants\n\nGlobex opened two new plants in Ohio.",
    "initech-2022.md": "# Initech annual report 2022\n\n## Results\n\nRevenue fell by 8% as the TPS product line was retired.",
}


def documents() -> list[Document]:
    return [Document(text=text, id_=name, metadata={"file_name": name}) for name, text in REPORTS.items()]


@pytest.fixture(scope="module")
def embed_model():
    return LocalMiniLMEmbedding()


def run_once(anthropic_srv, cohere_srv, store_path, chroma_path, embed_model):
    gen = AnthropicContextGenerator(
        MODEL, client=anthropic.Anthropic(api_key=anthropic_srv.api_key, base_url=anthropic_srv.url, max_retries=0)
    )
    parser = ContextualNodeParser(gen, MarkdownNodeParser(), store_path, show_progress=False)
    vector_store = chroma_vector_store(chroma_path)
    pipeline = IngestionPipeline(transformations=[parser, embed_model], vector_store=vector_store)
    nodes = pipeline.run(documents=documents())
    index = VectorStoreIndex.from_vector_store(vector_store, embed_model=embed_model)
    reranker = CohereReranker(client=cohere.ClientV2(api_key=cohere_srv.api_key, base_url=cohere_srv.base_url))
    retriever = HybridRetriever.from_defaults(index, nodes=nodes, similarity_top_k=4)
    engine = RetrieverQueryEngine.from_args(
        retriever, llm=MockLLM(), node_postprocessors=[ContextualRerank(reranker, top_n=2)]
    )
    return parser, nodes, engine, index


def test_pipeline_chroma_hybrid_rerank_query_engine_and_no_second_payment(tmp_path, embed_model):
    with FakeAnthropicServer() as anthropic_srv, FakeCohereServer() as cohere_srv:
        parser, nodes, engine, index = run_once(anthropic_srv, cohere_srv, tmp_path / "ctx.sqlite3", tmp_path / "chroma", embed_model)
        first_requests = len(anthropic_srv.requests_to("/v1/messages"))
        assert first_requests == len(nodes) >= 6
        assert parser.last_report.generated == len(nodes)

        # every node: the chunk as text, the context in metadata, laid out for embedding and the LLM
        # after the metadata (the document's file name, MarkdownNodeParser's header path), as LlamaIndex does
        for node in nodes:
            context = node.metadata["context"]
            assert context and node.text in REPORTS[node.ref_doc_id]
            header = f"file_name: {node.ref_doc_id}\nheader_path: {node.metadata['header_path']}"
            assert node.get_content(MetadataMode.EMBED) == f"{header}\n\n{context}\n\n{node.text}".strip()
            llm_text = node.get_content(MetadataMode.LLM)
            assert llm_text == f"{header}\n\n{CONTEXT_LABEL}\n\n{context}\n\n{SOURCE_LABEL}\n\n{node.text}"
            assert node.embedding is not None and len(node.embedding) == 384

        response = engine.query("How did ACME's revenue change in Q2 2023?")
        assert len(response.source_nodes) == 2
        assert len(cohere_srv.rerank_requests()) == 1
        reranked = cohere_srv.rerank_requests()[0]
        assert len(reranked["documents"]) == 4  # the hybrid's top 4, as context + chunk
        assert all(doc.count("\n\n") >= 1 for doc in reranked["documents"])
        for source in response.source_nodes:
            assert source.node.metadata["ranks"].keys() == {"dense", "bm25"}
            assert "fused_score" in source.node.metadata
        # Chroma kept the layout: what the synthesizer shows the LLM marks context and source apart
        assert all(SOURCE_LABEL in s.node.get_content(MetadataMode.LLM) for s in response.source_nodes)
        by_id = {n.node_id: n for n in nodes}
        for source in index.as_retriever(similarity_top_k=6).retrieve("revenue"):  # straight from Chroma
            original = by_id[source.node.node_id]
            for mode in (MetadataMode.EMBED, MetadataMode.LLM):
                assert source.node.get_content(mode) == original.get_content(mode)

        # second run, fresh objects, same store and Chroma folder: no generation request at all
        parser2, nodes2, engine2, _ = run_once(anthropic_srv, cohere_srv, tmp_path / "ctx.sqlite3", tmp_path / "chroma2", embed_model)
        assert len(anthropic_srv.requests_to("/v1/messages")) == first_requests
        assert parser2.last_report.generated == 0 and parser2.last_report.store_hits == len(nodes2)
        assert [n.node_id for n in nodes2] == [n.node_id for n in nodes]  # stable ids
        assert [n.metadata["context"] for n in nodes2] == [n.metadata["context"] for n in nodes]
        response2 = engine2.query("How did ACME's revenue change in Q2 2023?")
        assert [s.node.node_id for s in response2.source_nodes] == [s.node.node_id for s in response.source_nodes]
