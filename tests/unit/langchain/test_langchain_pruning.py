"""`ContextPruningCompressor`: same text as the core, in a compression retriever, a pipeline and an
LCEL chain (sync and async), inputs untouched."""

from __future__ import annotations

import asyncio

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline
from langchain_core.documents import Document as LCDocument
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore

from contextual_retrieval_core.pruning import PRUNED_SPANS_KEY, ContextPruner, PruningConfig
from contextual_retrieval_core.rerank import PassThroughReranker
from contextual_retrieval_core.types import CONTEXT_LABEL, Chunk, ContextualChunk
from contextual_retrieval_langchain import EmbedderEmbeddings, RerankCompressor, format_docs_for_llm
from contextual_retrieval_langchain._documents import ORIGINAL_CONTENT_KEY, contextual_document
from contextual_retrieval_langchain.pruning import ContextPruningCompressor

CHUNKS = [
    ContextualChunk(Chunk("a", "reports/acme.md", "ACME reports its results for the quarter. The company's revenue grew by 3% over the "
                          "previous quarter, to $412 million. Headcount ended the quarter at 1,200 employees. The guidance "
                          "assumes no change in exchange rates."), "ACME Corp's Q2 2023 report."),
    ContextualChunk(Chunk("b", "handbook/austin.md", "Employees are entitled to 12 weeks of fully paid leave. The standard working "
                          "week is 40 hours. The office closes on eleven public holidays a year."), "Austin office handbook."),
    ContextualChunk(Chunk("c", "fuzzer/diff.py", "class DiffExecutor:\n    def run_target(self, input):\n        first = self.primary.run(input)\n"
                          "        second = self.secondary.run(input)\n        return first if first == second else 'diff'\n"), "DiffExecutor."),
]


@pytest.fixture(scope="module")
def embedder(offline_embedder):
    return offline_embedder


def _docs() -> list[LCDocument]:
    return [contextual_document(c, {"source": c.document_id}) for c in CHUNKS]


def _snapshot(docs):
    return [(d.id, d.page_content, dict(d.metadata)) for d in docs]


def test_same_text_as_the_core_sync_and_async_inputs_untouched(embedder):
    query = "How much did ACME's revenue grow?"
    docs = _docs()
    before = _snapshot(docs)
    compressor = ContextPruningCompressor(embedder=embedder, budget=40)
    out = compressor.compress_documents(docs, query)
    assert _snapshot(docs) == before
    core = ContextPruner(embedder, config=PruningConfig(budget=40)).prune(query, CHUNKS)
    assert [(d.id, d.metadata[ORIGINAL_CONTENT_KEY]) for d in out] == [(c.id, c.text) for c in core.chunks]
    assert out[0].page_content == CHUNKS[0].context + "\n\n" + core.chunks[0].text
    assert out[0].metadata[PRUNED_SPANS_KEY] == core.chunks[0].spans
    assert "grew by 3%" in out[0].metadata[ORIGINAL_CONTENT_KEY]
    formatted = format_docs_for_llm(out)
    assert CONTEXT_LABEL in formatted and "grew by 3%" in formatted
    again = asyncio.run(compressor.acompress_documents(docs, query))
    assert [d.page_content for d in again] == [d.page_content for d in out]
    # a plain Document: page_content is the text pruned
    plain = [LCDocument(page_content=CHUNKS[1].text, id="p")]
    kept = compressor.compress_documents(plain, "How many weeks of leave?")
    assert kept[0].page_content == ContextPruner(embedder, config=PruningConfig(budget=40)).prune("How many weeks of leave?", [CHUNKS[1].chunk]).chunks[0].text


def test_compression_retriever_pipeline_and_lcel_chain(embedder):
    store = InMemoryVectorStore(EmbedderEmbeddings(embedder=embedder))
    store.add_documents(_docs())
    pipeline = DocumentCompressorPipeline(transformers=[
        RerankCompressor(reranker=PassThroughReranker(), top_n=3), ContextPruningCompressor(embedder=embedder, budget=30),
    ])
    retriever = ContextualCompressionRetriever(base_compressor=pipeline, base_retriever=store.as_retriever(search_kwargs={"k": 3}))
    prompt = ChatPromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}")
    seen = []
    llm = FakeListChatModel(responses=["12 weeks.", "12 weeks."])
    chain = {"context": retriever | RunnableLambda(lambda docs: seen.append(docs) or format_docs_for_llm(docs)),
             "question": RunnableLambda(lambda q: q)} | prompt | llm | StrOutputParser()
    question = "How many weeks of paid leave do Austin employees get?"
    assert chain.invoke(question) == "12 weeks."
    assert asyncio.run(chain.ainvoke(question)) == "12 weeks."
    for docs in seen:
        kept = [d.metadata[ORIGINAL_CONTENT_KEY] for d in docs]
        assert any("12 weeks" in t for t in kept)
        assert sum(len(t) for t in kept) < sum(len(c.text) for c in CHUNKS)


def test_bad_input(embedder):
    compressor = ContextPruningCompressor(embedder=embedder, budget=20)
    assert compressor.compress_documents([], "anything") == []
    with pytest.raises(TypeError, match=r"documents\[0\] is a str"):
        compressor.compress_documents(["text"], "q")  # type: ignore[list-item]
    with pytest.raises(ValueError, match="budget must be a positive number of tokens"):
        ContextPruningCompressor(embedder=embedder, budget=-1)
    unchanged = compressor.compress_documents(_docs(), "the of and")
    assert [d.page_content for d in unchanged] == [d.page_content for d in _docs()]


def test_the_fields_are_pruning_configs_and_a_pruner_brings_its_own(embedder):
    fields = ContextPruningCompressor.model_fields
    for name, _, default, doc in PruningConfig.field_specs():
        assert fields[name].default == default and fields[name].description == doc, name
    compressor = ContextPruningCompressor(embedder=embedder, lam=0.5, neighbours=False)
    assert compressor.pruning_config == PruningConfig(lam=0.5, neighbours=False) == compressor._pruner.config
    pruner = ContextPruner(embedder, config=PruningConfig(budget=40))
    assert ContextPruningCompressor(pruner=pruner).budget == 40
    with pytest.raises(ValueError, match="not both"):
        ContextPruningCompressor(pruner=pruner, budget=10)
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):  # a misspelt setting
        ContextPruningCompressor(embedder=embedder, lamda=0.5)
