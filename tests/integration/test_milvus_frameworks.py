"""Both frameworks' Milvus stores holding both sides of the hybrid on a real server (Milvus Lite):
LlamaIndex's `MilvusVectorStore` and langchain-milvus's `Milvus`, each with Milvus's BM25 function,
fed by `ContextualNodeParser` / `ContextualDocumentTransformer`, their two legs fused by
`HybridRetriever` / `ContextualEnsembleRetriever`: the same top 20 as the core's in-process
hybrid over the same chunks (one vector a chunk on both sides), filters on both legs, dense
feedback from the vectors Milvus gives back, and a server stopped and started again."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document as LCDocument
from llama_index.core import Document as LIDocument
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from contextual_retrieval_core import Chunk, ContextualChunk, HybridSearcher
from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS, DEMO_QUERIES
from contextual_retrieval_core.search.milvus import TERMS, MilvusServerUnavailable
from contextual_retrieval_langchain import ContextualDocumentTransformer, LocalMiniLMEmbeddings
from contextual_retrieval_langchain._feedback import stored_rows
from contextual_retrieval_langchain.milvus import ContextualMilvus, MilvusLeg, milvus_ensemble
from contextual_retrieval_llamaindex import ContextualNodeParser, LocalMiniLMEmbedding
from contextual_retrieval_llamaindex.milvus import ContextualMilvusVectorStore, milvus_hybrid_retriever
from tests.milvus_server import milvus_lite  # noqa: F401

pytestmark = pytest.mark.timeout(300)

QUERIES = [q.query for q in DEMO_QUERIES] + ["revenue grew by 3% over the previous quarter", "fork server child process",
                                             "public holidays in Berlin", "Initech headcount"]


@pytest.fixture(scope="module")
def corpus():
    """The demo corpus split by LlamaIndex, the same chunks through LangChain's transformer, and the
    core's ContextualChunks of them."""
    nodes = ContextualNodeParser(node_parser=SentenceSplitter(chunk_size=64, chunk_overlap=0), show_progress=False)(
        [LIDocument(text=text, id_=path) for path, text in DEMO_DOCUMENTS]
    )
    chunks = [LCDocument(page_content=n.text, metadata={"source": n.ref_doc_id}) for n in nodes]
    docs = ContextualDocumentTransformer(show_progress=False).transform_documents(chunks, parents=dict(DEMO_DOCUMENTS))
    core = [ContextualChunk(Chunk(d.id, d.metadata["parent_id"], d.metadata["original_content"], d.metadata["chunk_index"]),
                            d.metadata["context"]) for d in docs]
    assert [c.indexed_text for c in core] == [d.page_content for d in docs] == [n.get_content(metadata_mode="embed") for n in nodes]
    return nodes, docs, core


@pytest.fixture(scope="module")
def reference(corpus, offline_embedder):
    """The core's in-process hybrid over the same chunks, one vector a chunk (what a Milvus row holds)."""
    _, _, core = corpus
    return HybridSearcher(core, offline_embedder, windows=False)


def _langchain(docs, uri: str, name: str, **kwargs) -> ContextualMilvus:
    store = ContextualMilvus(LocalMiniLMEmbeddings(), connection_args={"uri": uri}, collection_name=name, drop_old=True, **kwargs)
    store.add_documents(docs, ids=[d.id for d in docs])
    return store


def _llamaindex(nodes, uri: str, name: str, **kwargs) -> VectorStoreIndex:
    store = ContextualMilvusVectorStore(uri, collection_name=name, dim=384, overwrite=True, **kwargs)
    return VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=LocalMiniLMEmbedding())


def test_langchain_milvus_legs_rank_as_the_core(corpus, reference, milvus_server):  # noqa: F811
    _, docs, _ = corpus
    store = _langchain(docs, milvus_server.uri, "lc_parity")
    retriever = milvus_ensemble(store, k=20)
    for query in QUERIES:
        want = reference.search(query, top_k=20)
        got = retriever.invoke(query)
        assert [d.id for d in got] == [h.id for h in want], query
        assert [d.metadata["ranks"] for d in got] == [h.ranks for h in want], query
        assert all(TERMS not in d.metadata for d in got) and got[0].page_content == want[0].chunk.indexed_text

    async def run() -> list[list[str]]:
        return [[d.id for d in await retriever.ainvoke(q)] for q in QUERIES]

    assert asyncio.run(run()) == [[d.id for d in retriever.invoke(q)] for q in QUERIES]
    # dense feedback reads the top chunks' vectors back from Milvus: the ones it was given
    top = [d.id for d in retriever.invoke(QUERIES[0])[:3]]
    rows = stored_rows(MilvusLeg(store), top, {})
    assert sorted(rows.rows_of_chunk) == sorted(top) and rows.vectors.shape == (3, 384)
    # the filter goes to both legs on the server, as a Milvus expression on the metadata
    source = docs[0].metadata["source"]
    filtered = retriever.invoke("revenue quarter report", filter={"source": source})
    assert filtered and all(d.metadata["source"] == source for d in filtered)
    assert any(None not in d.metadata["ranks"].values() for d in filtered)
    assert not retriever.invoke("revenue quarter report", filter={"source": "no-such-file.md"})


def test_llamaindex_milvus_legs_rank_as_the_core(corpus, reference, milvus_server):  # noqa: F811
    nodes, _, _ = corpus
    index = _llamaindex(nodes, milvus_server.uri, "li_parity")
    retriever = milvus_hybrid_retriever(index, similarity_top_k=20)
    assert list(retriever._feedback) == ["dense"]  # the dense leg is fed back, from Milvus's vectors
    for query in QUERIES:
        want = reference.search(query, top_k=20)
        got = retriever.retrieve(query)
        assert [r.node.node_id for r in got] == [h.id for h in want], query
        assert [r.node.metadata["ranks"] for r in got] == [h.ranks for h in want], query
        assert all(TERMS not in r.node.metadata for r in got)

    async def run() -> list[list[str]]:
        return [[r.node.node_id for r in await retriever.aretrieve(q)] for q in QUERIES]

    assert asyncio.run(run()) == [[r.node.node_id for r in retriever.retrieve(q)] for q in QUERIES]
    source = nodes[0].ref_doc_id
    filters = MetadataFilters(filters=[MetadataFilter(key="doc_id", value=source)])
    filtered = milvus_hybrid_retriever(index, filters=filters, similarity_top_k=20).retrieve("revenue quarter report")
    assert filtered and all(r.node.ref_doc_id == source for r in filtered)
    assert any(None not in r.node.metadata["ranks"].values() for r in filtered)


def test_both_frameworks_name_a_stopped_server_and_answer_once_it_is_back(corpus, pytestconfig):
    nodes, docs, _ = corpus
    with milvus_lite(pytestconfig) as server:
        lc = milvus_ensemble(_langchain(docs, server.uri, "lc_restart"), k=5, timeout=5)
        li = milvus_hybrid_retriever(_llamaindex(nodes, server.uri, "li_restart", timeout=5), similarity_top_k=5)
        query = QUERIES[0]
        want_lc, want_li = [d.id for d in lc.invoke(query)], [r.node.node_id for r in li.retrieve(query)]
        server.stop()
        for run in (lambda: lc.invoke(query), lambda: li.retrieve(query)):
            with pytest.raises(MilvusServerUnavailable, match=f"the Milvus server at {server.uri} does not answer"):
                run()
        server.start()
        assert [d.id for d in lc.invoke(query)] == want_lc
        assert [r.node.node_id for r in li.retrieve(query)] == want_li
