"""Dense PRF (on by default) gives the same top 20 in the core and both framework retrievers, on
each kind of vector store the frameworks read stored vectors from (LlamaIndex's SimpleVectorStore
and Chroma, LangChain's InMemoryVectorStore and Chroma; pgvector in test_cookbook_corpus.py and
test_pgvector_feedback.py), sync and async; on a store that gives no vectors back, feedback is
skipped (nothing is embedded again at query time): the top 20 is the core's without it. With
``dense_prf=0`` all three agree too."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore
from llama_index.core import Document as LIDocument
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.vector_stores.simple import SimpleVectorStore
from llama_index.core.vector_stores.types import BasePydanticVectorStore, VectorStoreQuery, VectorStoreQueryResult

from contextual_retrieval_core import Chunk, ContextualChunk, HybridSearcher
from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS, DEMO_QUERIES
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_langchain import ContextualDocumentTransformer, ContextualEnsembleRetriever, LocalMiniLMEmbeddings
from contextual_retrieval_langchain._sources import feedback_sides
from contextual_retrieval_llamaindex import ContextualNodeParser, HybridRetriever, LocalMiniLMEmbedding, chroma_vector_store

QUERIES = [q.query for q in DEMO_QUERIES] + [
    "revenue grew by 3% over the previous quarter",
    "fork server child process",
    "battery life of the Widget Pro",
]


class OpaqueLIStore(BasePydanticVectorStore):
    """A LlamaIndex vector store that searches but never gives its vectors back."""

    stores_text: bool = False
    inner: Any = None

    def __init__(self) -> None:
        super().__init__(inner=SimpleVectorStore())

    @property
    def client(self) -> Any:
        return None

    def add(self, nodes: list[Any], **kwargs: Any) -> list[str]:
        return self.inner.add(nodes, **kwargs)

    def delete(self, ref_doc_id: str, **kwargs: Any) -> None:
        self.inner.delete(ref_doc_id, **kwargs)

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return self.inner.query(query, **kwargs)


class OpaqueLCStore(VectorStore):
    """A LangChain vector store that searches but never gives its vectors back."""

    def __init__(self, embeddings: Any) -> None:
        self._inner = InMemoryVectorStore(embeddings)

    @property
    def embeddings(self) -> Any:
        return self._inner.embeddings

    def add_texts(self, texts, metadatas=None, *, ids=None, **kwargs):
        return self._inner.add_texts(texts, metadatas, ids=ids, **kwargs)

    def similarity_search(self, query, k=4, **kwargs):
        return self._inner.similarity_search(query, k=k, **kwargs)

    def similarity_search_with_score(self, query, k=4, **kwargs):
        return self._inner.similarity_search_with_score(query, k=k, **kwargs)

    def similarity_search_by_vector(self, embedding, k=4, **kwargs):
        return self._inner.similarity_search_by_vector(embedding, k=k, **kwargs)

    @classmethod
    def from_texts(cls, texts, embedding, metadatas=None, **kwargs):  # pragma: no cover - not used
        raise NotImplementedError


@pytest.fixture(scope="module")
def corpus(offline_embedder):
    nodes = ContextualNodeParser(node_parser=SentenceSplitter(chunk_size=64, chunk_overlap=0), show_progress=False)(
        [LIDocument(text=text, id_=path) for path, text in DEMO_DOCUMENTS]
    )
    chunks = [LCDocument(page_content=n.text, metadata={"source": n.ref_doc_id}) for n in nodes]
    docs = ContextualDocumentTransformer(show_progress=False).transform_documents(chunks, parents=dict(DEMO_DOCUMENTS))
    core_chunks = [ContextualChunk(Chunk(n.node_id, n.ref_doc_id, n.text), n.metadata["context"]) for n in nodes]
    embedder = offline_embedder
    core = {beta: HybridSearcher(core_chunks, embedder, config=FusionConfig(top_k=20, dense_prf=beta)) for beta in (0.5, 0)}
    return nodes, docs, core


def llamaindex(nodes, store, **kwargs):
    storage = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=LocalMiniLMEmbedding())
    return HybridRetriever.from_defaults(index, nodes=nodes, similarity_top_k=20, **kwargs)


def langchain(docs, store, **kwargs):
    store.add_documents(docs, ids=[d.metadata["chunk_id"] for d in docs])
    return ContextualEnsembleRetriever.from_documents(docs, vectorstore=store, k=20, **kwargs)


STORES = {
    "simple / in-memory": (SimpleVectorStore, lambda: InMemoryVectorStore(LocalMiniLMEmbeddings())),
    "chroma": (lambda: chroma_vector_store(), None),
    "no stored vectors": (OpaqueLIStore, lambda: OpaqueLCStore(LocalMiniLMEmbeddings())),
}


@pytest.mark.parametrize("kind", list(STORES))
async def test_prf_top_20_is_the_cores_in_both_frameworks(corpus, kind):
    nodes, docs, core = corpus
    beta = 0 if kind == "no stored vectors" else 0.5  # no vectors back: feedback skipped, the ranking without it
    make_li, make_lc = STORES[kind]
    li = llamaindex(nodes, make_li())
    assert li.dense_prf == 0.5 and li.prf_top == 3 and set(li._feedback) == {"dense"}
    lc = None
    if make_lc is not None:
        lc = langchain(docs, make_lc())
    else:  # LangChain's Chroma: from_documents builds it
        lc = ContextualEnsembleRetriever.from_documents(docs, LocalMiniLMEmbeddings(), k=20)
    assert lc.dense_prf == 0.5 and [i for i, _ in feedback_sides(lc.retrievers, lc.config)] == [0]
    changed = 0
    for query in QUERIES:
        expected = [h.id for h in core[beta].search(query)]
        changed += [h.id for h in core[0.5].search(query)] != [h.id for h in core[0].search(query)]
        assert len(expected) == 20
        assert [r.node.node_id for r in li.retrieve(query)] == expected, query
        assert [d.metadata["chunk_id"] for d in lc.invoke(query)] == expected, query
    for query in QUERIES[:2]:
        expected = [h.id for h in core[beta].search(query)]
        assert [r.node.node_id for r in await li.aretrieve(query)] == expected
        assert [d.metadata["chunk_id"] for d in await lc.ainvoke(query)] == expected
    assert changed >= 3  # the feedback moves the ranking: a path without it could not match the core's with it


def test_prf_off_in_both_frameworks_is_the_cores_without_it(corpus):
    nodes, docs, core = corpus
    li = llamaindex(nodes, SimpleVectorStore(), dense_prf=0)
    lc = langchain(docs, InMemoryVectorStore(LocalMiniLMEmbeddings()), dense_prf=0)
    assert li._feedback == {} and feedback_sides(lc.retrievers, lc.config) == []
    for query in QUERIES:
        expected = [h.id for h in core[0].search(query)]
        assert [r.node.node_id for r in li.retrieve(query)] == expected
        assert [d.metadata["chunk_id"] for d in lc.invoke(query)] == expected


def test_prf_searches_again_and_keeps_the_scores_a_text_search_gives(corpus):
    """Both dense searches go by vector; the query is embedded once; the second search's scores are
    relevance scores like the first's (Chroma: 1 - cosine distance, not the raw distance)."""
    nodes, docs, core = corpus
    calls = []

    class Counting(LocalMiniLMEmbeddings):
        def embed_query(self, text):
            calls.append(text)
            return super().embed_query(text)

    lc = ContextualEnsembleRetriever.from_documents(docs, Counting(), k=20)
    query = QUERIES[1]
    out = lc.invoke(query)
    assert calls == [query]
    dense = [d.metadata["source_scores"]["dense"] for d in out if "dense" in d.metadata["source_scores"]]
    assert dense and all(0 < s <= 1 for s in dense)
    hits = {h.id: h for h in core[0.5].search(query)}
    assert [d.metadata["ranks"] for d in out] == [hits[d.metadata["chunk_id"]].ranks for d in out]


def test_prf_needs_another_source_and_rejects_a_bad_weight(corpus):
    nodes, docs, _ = corpus
    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=LocalMiniLMEmbedding())
    alone = HybridRetriever([index.as_retriever(similarity_top_k=20)])
    assert alone._feedback == {}  # dense alone: never fed back (it lowered the no-context dense row)
    with pytest.raises(ValueError, match="dense_prf must be"):
        HybridRetriever([index.as_retriever()], dense_prf=-1)
    with pytest.raises(ValueError, match="dense_prf must be"):
        ContextualEnsembleRetriever.from_documents(docs, LocalMiniLMEmbeddings(), dense_prf=20)


def test_langchain_prf_reads_vectors_under_the_stores_own_ids(corpus):
    """A store holding the chunks under ids of its own (LangChain's indexing API stores each under
    a hash) gives its stored vectors back by the Documents' store ids: nothing is embedded again,
    and the top 20 is the core's."""
    nodes, docs, core = corpus
    embedded: list[int] = []

    class Counting(LocalMiniLMEmbeddings):
        def embed_documents(self, texts):
            embedded.append(len(texts))
            return super().embed_documents(texts)

    store = InMemoryVectorStore(Counting())
    store.add_documents([d.model_copy(update={"id": None}) for d in docs], ids=[f"row-{i}" for i in range(len(docs))])
    lc = ContextualEnsembleRetriever.from_documents(docs, vectorstore=store, k=20)
    embedded.clear()
    for query in QUERIES:
        out = lc.invoke(query)
        assert [d.metadata["chunk_id"] for d in out] == [h.id for h in core[0.5].search(query)], query
    assert embedded == []  # every top chunk's vector was read from the store


async def test_prf_on_a_store_without_vectors_embeds_no_chunk_sync_or_async(corpus):
    """On a store that gives no vectors back, a query embeds the query and nothing else (no stored
    chunk is embedded again, by the sync or the async call), in both frameworks."""
    nodes, docs, core = corpus
    calls: list[str] = []

    class Counting(LocalMiniLMEmbeddings):
        def embed_documents(self, texts):
            calls.append("sync")
            return super().embed_documents(texts)

        async def aembed_documents(self, texts):
            calls.append("async")
            return LocalMiniLMEmbeddings.embed_documents(self, texts)

    class CountingModel(LocalMiniLMEmbedding):
        def get_text_embedding_batch(self, texts, **kwargs):
            calls.append("li sync")
            return super().get_text_embedding_batch(texts, **kwargs)

        async def aget_text_embedding_batch(self, texts, **kwargs):
            calls.append("li async")
            return await super().aget_text_embedding_batch(texts, **kwargs)

    store = OpaqueLCStore(Counting())
    store._inner.add_documents(docs, ids=[d.metadata["chunk_id"] for d in docs])
    lc = ContextualEnsembleRetriever.from_documents(docs, vectorstore=store, k=20)
    index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=OpaqueLIStore()),
                             embed_model=CountingModel())
    li = HybridRetriever.from_defaults(index, nodes=nodes, similarity_top_k=20, windows=False)
    calls.clear()
    for query in QUERIES[:3]:
        expected = [h.id for h in core[0].search(query)]
        assert [d.metadata["chunk_id"] for d in lc.invoke(query)] == expected
        assert [d.metadata["chunk_id"] for d in await lc.ainvoke(query)] == expected
        assert [r.node.node_id for r in li.retrieve(query)] == expected
        assert [r.node.node_id for r in await li.aretrieve(query)] == expected
    assert calls == []


def test_langchain_prf_on_an_inner_product_chroma_keeps_relevance_rising_with_similarity(corpus):
    """Chroma in "ip" space: the moved query is unit length, so the second search's distances are
    1 - cosine and the relevance scores fall with the dense rank (an unnormalised moved vector
    gives negative distances, which LangChain's inner-product relevance turns upside down)."""
    from contextual_retrieval_langchain import chroma_from_documents

    nodes, docs, core = corpus
    store = chroma_from_documents(docs, LocalMiniLMEmbeddings(), hnsw={"space": "ip"})
    lc = ContextualEnsembleRetriever.from_documents(docs, vectorstore=store, k=20)
    for query in QUERIES[:4]:
        out = lc.invoke(query)
        assert [d.metadata["chunk_id"] for d in out] == [h.id for h in core[0.5].search(query)], query
        dense = sorted((d.metadata["ranks"]["dense"], d.metadata["source_scores"]["dense"]) for d in out
                       if d.metadata["ranks"]["dense"] is not None)
        scores = [s for _, s in dense]
        assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores), query


def test_langchain_prf_applies_the_score_threshold_to_both_dense_searches(corpus):
    nodes, docs, core = corpus
    store = InMemoryVectorStore(LocalMiniLMEmbeddings())
    store.add_documents(docs, ids=[d.metadata["chunk_id"] for d in docs])
    dense = store.as_retriever(search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.3})
    from contextual_retrieval_langchain import ContextualBM25Retriever

    lc = ContextualEnsembleRetriever(retrievers=[dense, ContextualBM25Retriever.from_documents(docs)], k=20)
    assert [i for i, _ in feedback_sides(lc.retrievers, lc.config)] == [0]
    cut = 0
    for query in QUERIES:
        lists = [d.metadata for d in lc.invoke(query)]
        scores = [m["source_scores"]["dense"] for m in lists if m["ranks"]["dense"] is not None]
        assert all(s >= 0.3 for s in scores), query
        cut += sum(m["ranks"]["dense"] is None for m in lists)
    assert cut > 0  # the threshold kept some chunks off the dense list


def test_llamaindex_store_that_searches_by_text_is_not_fed_back(corpus):
    from contextual_retrieval_llamaindex._feedback import vector_side

    nodes, _, _ = corpus

    class TextSearchStore(OpaqueLIStore):
        is_embedding_query: bool = False

    storage = StorageContext.from_defaults(vector_store=SimpleVectorStore())
    index = VectorStoreIndex(nodes, storage_context=storage, embed_model=LocalMiniLMEmbedding())
    assert vector_side(index.as_retriever()) is not None
    text_index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=TextSearchStore()),
                                  embed_model=LocalMiniLMEmbedding())
    assert vector_side(text_index.as_retriever()) is None
