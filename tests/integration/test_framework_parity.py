"""LlamaIndex and LangChain, same corpus, same contexts, same embedder, same queries: the same
top-20 ids. LlamaIndex splits; the same chunks go to LangChain as already-split chunks with their
parents, so both frameworks also agree on the chunk ids and their contexts. With windowed
contextual embeddings on, the core `HybridSearcher`, both frameworks (Chroma) agree too."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document as LCDocument
from llama_index.core import Document as LIDocument
from llama_index.core import VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter

from contextual_retrieval_core import Chunk, ContextualChunk, HybridSearcher
from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS, DEMO_QUERIES
from contextual_retrieval_core.dense.windows import WindowConfig
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_langchain import ContextualDocumentTransformer, ContextualEnsembleRetriever, LocalMiniLMEmbeddings
from contextual_retrieval_llamaindex import ContextualNodeParser, HybridRetriever, LocalMiniLMEmbedding, chroma_vector_store

EXTRA_QUERIES = [
    "revenue grew by 3% over the previous quarter",
    "fork server child process",
    "public holidays in Berlin",
    "battery life of the Widget Pro",
    "Initech headcount",
]


@pytest.fixture(scope="module")
def both():
    from llama_index.core import StorageContext

    nodes = ContextualNodeParser(node_parser=SentenceSplitter(chunk_size=64, chunk_overlap=0), show_progress=False)(
        [LIDocument(text=text, id_=path) for path, text in DEMO_DOCUMENTS]
    )
    storage = StorageContext.from_defaults(vector_store=chroma_vector_store(collection="parity-llamaindex"))
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=LocalMiniLMEmbedding())
    llamaindex = HybridRetriever.from_defaults(index, nodes=nodes, similarity_top_k=20)

    chunks = [LCDocument(page_content=n.text, metadata={"source": n.ref_doc_id}) for n in nodes]
    parents = {path: text for path, text in DEMO_DOCUMENTS}
    docs = ContextualDocumentTransformer(show_progress=False).transform_documents(chunks, parents=parents)
    langchain = ContextualEnsembleRetriever.from_documents(docs, LocalMiniLMEmbeddings(), k=20)
    return nodes, llamaindex, docs, langchain


def test_same_chunk_ids_and_contexts(both):
    nodes, _, docs, _ = both
    assert len(nodes) > 20
    assert [d.metadata["chunk_id"] for d in docs] == [n.node_id for n in nodes]
    assert [d.metadata["context"] for d in docs] == [n.metadata["context"] for n in nodes]
    assert [d.page_content for d in docs] == [n.get_content(metadata_mode="embed") for n in nodes]


@pytest.mark.parametrize("query", [q.query for q in DEMO_QUERIES] + EXTRA_QUERIES)
def test_same_top_20_ids(both, query):
    _, llamaindex, _, langchain = both
    li = [r.node.node_id for r in llamaindex.retrieve(query)]
    lc = [d.metadata["chunk_id"] for d in langchain.invoke(query)]
    assert len(li) == 20 and li == lc


class Overlap:
    """A deterministic core Reranker: query-word overlap, ties by position."""

    model_name = "overlap"

    def rerank(self, query, texts, top_n=None):
        from contextual_retrieval_core.rerank.base import RerankResult, best_first

        words = set(query.lower().split())
        return best_first([RerankResult(i, float(len(words & set(t.lower().split())))) for i, t in enumerate(texts)], top_n)

    async def arerank(self, query, texts, top_n=None):
        return self.rerank(query, texts, top_n)


@pytest.mark.parametrize("query", [q.query for q in DEMO_QUERIES[:3]])
async def test_same_reranked_top_ids_sync_and_async(both, query):
    from llama_index.core.base.base_retriever import BaseRetriever

    nodes, llamaindex, docs, langchain = both
    li = HybridRetriever(llamaindex.retrievers, reranker=Overlap(), similarity_top_k=10)
    lc = ContextualEnsembleRetriever(retrievers=langchain.retrievers, reranker=Overlap(), k=10)
    expected = [r.node.node_id for r in li.retrieve(query)]
    assert isinstance(li, BaseRetriever) and len(expected) == 10
    assert [d.metadata["chunk_id"] for d in lc.invoke(query)] == expected
    assert [r.node.node_id for r in await li.aretrieve(query)] == expected
    assert [d.metadata["chunk_id"] for d in await lc.ainvoke(query)] == expected


#: a window short enough that most demo chunks (64 LlamaIndex tokens + context) are windowed
WINDOWS = WindowConfig(size=48, overlap=8)


@pytest.fixture(scope="module")
def windowed(both):
    from llama_index.core import StorageContext

    nodes, _, docs, _ = both
    storage = StorageContext.from_defaults(vector_store=chroma_vector_store(collection="parity-llamaindex-windows"))
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=LocalMiniLMEmbedding())
    llamaindex = HybridRetriever.from_defaults(index, nodes=nodes, similarity_top_k=20, windows=WINDOWS)
    langchain = ContextualEnsembleRetriever.from_documents(docs, LocalMiniLMEmbeddings(), k=20, windows=WINDOWS)
    chunks = [ContextualChunk(Chunk(n.node_id, n.ref_doc_id, n.text), n.metadata["context"]) for n in nodes]
    assert [c.indexed_text for c in chunks] == [d.page_content for d in docs]
    core = HybridSearcher(chunks, LocalMiniLMEmbedder(), vector_store="chroma", windows=WINDOWS, config=FusionConfig(top_k=20))
    return llamaindex, langchain, core


def test_windows_are_written_alike(windowed):
    llamaindex, langchain, core = windowed
    extra = core._extra_rows
    assert extra > 20  # most chunks are windowed
    assert llamaindex.retrievers["dense"].vector_retriever.similarity_top_k == llamaindex.depth + extra
    assert langchain.retrievers[0].vectorstore.extra == extra


@pytest.mark.parametrize("query", [q.query for q in DEMO_QUERIES] + EXTRA_QUERIES)
def test_windowed_same_top_20_ids_in_core_and_both_frameworks(windowed, query):
    llamaindex, langchain, core = windowed
    expected = [h.id for h in core.search(query)]
    li = [r.node.node_id for r in llamaindex.retrieve(query)]
    lc = [d.metadata["chunk_id"] for d in langchain.invoke(query)]
    assert len(expected) == 20 == len(set(li)) and li == expected and lc == expected
