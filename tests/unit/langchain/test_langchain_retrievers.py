"""ContextualBM25Retriever and ContextualEnsembleRetriever: the core's ordering on real Chroma and
real BM25, k, persistence, dedupe by id, metadata, async concurrency, rerankers."""

from __future__ import annotations

import asyncio

import cohere
import pytest
from langchain_classic.retrievers import EnsembleRetriever
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.vectorstores import VectorStoreRetriever

from contextual_retrieval_core.rerank import CohereReranker
from contextual_retrieval_core.search.bm25 import BM25Index
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.hybrid import HybridSearcher
from contextual_retrieval_core.search.ranked import fuse_sources
from contextual_retrieval_langchain import (
    ContextualBM25Retriever,
    ContextualEnsembleRetriever,
    RerankCompressor,
    chroma_from_documents,
)
from tests.fakes.cohere_server import FakeCohereServer
from tests.langchain_corpus import QUERIES


@pytest.fixture(scope="module")
def chroma(contextual_docs, lc_embeddings):
    return chroma_from_documents(contextual_docs, lc_embeddings)


@pytest.fixture(scope="module")
def bm25(contextual_docs) -> ContextualBM25Retriever:
    return ContextualBM25Retriever.from_documents(contextual_docs, k=150)


def ensemble(chroma, bm25, **kw) -> ContextualEnsembleRetriever:
    return ContextualEnsembleRetriever(retrievers=[chroma.as_retriever(), bm25], **kw)


def test_types_and_mro(chroma, bm25) -> None:
    retriever = ensemble(chroma, bm25)
    assert isinstance(bm25, BaseRetriever) and isinstance(retriever, BaseRetriever)
    assert BaseRetriever in ContextualEnsembleRetriever.__mro__ and BaseRetriever in ContextualBM25Retriever.__mro__
    assert retriever.names == ["dense", "bm25"] and retriever.weights == [0.5, 0.5]
    assert (retriever.rrf_k, retriever.depth, retriever.k) == (0.0, 150, 20)


# -- BM25 ------------------------------------------------------------------------------------------


def test_bm25_is_the_core_index_over_page_content(bm25, contextual_docs) -> None:
    core = BM25Index().index([d.id for d in contextual_docs], [d.page_content for d in contextual_docs])
    for query in QUERIES:
        got = bm25.invoke(query)
        assert [(d.id, d.metadata["bm25_score"]) for d in got] == core.search(query, 150)
        assert all(d.page_content == contextual_docs[[c.id for c in contextual_docs].index(d.id)].page_content for d in got)


def test_bm25_k_field_and_invoke_kwarg(bm25, contextual_docs) -> None:
    query = "quarterly revenue report"
    assert len(bm25.invoke(query)) >= 3
    small = ContextualBM25Retriever.from_documents(contextual_docs, k=2)
    assert [d.id for d in small.invoke(query)] == [d.id for d in bm25.invoke(query)][:2]
    assert [d.id for d in small.invoke(query, k=3)] == [d.id for d in bm25.invoke(query)][:3]
    with pytest.raises(ValueError, match="positive integer"):
        small.invoke(query, k=0)
    assert bm25.invoke("zzzz unknownterm") == []
    # scores live on copies: the indexed documents are unchanged
    assert all("bm25_score" not in d.metadata for d in bm25.documents.values())


def test_bm25_save_and_load_roundtrip(bm25, tmp_path) -> None:
    bm25.save(tmp_path / "bm25")
    assert not list((tmp_path / "bm25").glob("*.pkl"))
    loaded = ContextualBM25Retriever.load(tmp_path / "bm25", k=150)
    for query in QUERIES:
        assert loaded.invoke(query) == bm25.invoke(query)
    with pytest.raises(FileNotFoundError, match=r"not a saved BM25 retriever \(write one with the retriever.s save\(\)"):
        ContextualBM25Retriever.load(tmp_path / "nothing")


def test_bm25_needs_ids() -> None:
    with pytest.raises(ValueError, match="ContextualDocumentTransformer sets them"):
        ContextualBM25Retriever.from_documents([LCDocument("no id here")])
    with pytest.raises(ValueError, match="duplicate"):
        ContextualBM25Retriever.from_documents([LCDocument("a", id="x"), LCDocument("b", id="x")])


# -- ensemble == core ------------------------------------------------------------------------------


@pytest.mark.parametrize("kw", [{}, {"weights": [0.8, 0.2], "rrf_k": 60.0}, {"mode": "relative_score"}, {"depth": 3}])
def test_ensemble_returns_the_cores_ordering(chroma, bm25, core_chunks, core_embedder, kw) -> None:
    core_kw = {"weights": tuple(kw.get("weights", (0.5, 0.5))), "mode": kw.get("mode", "rrf"), "rrf_k": kw.get("rrf_k", 0.0), "depth": kw.get("depth", 150)}
    searcher = HybridSearcher(core_chunks, core_embedder, config=FusionConfig(**core_kw))
    retriever = ensemble(chroma, bm25, **kw)
    for query in QUERIES:
        expected = searcher.search(query, top_k=5)
        got = retriever.invoke(query, k=5)
        assert [d.id for d in got] == [h.id for h in expected]
        assert [d.metadata["ranks"] for d in got] == [h.ranks for h in expected]
        assert [d.metadata["fused_score"] for d in got] == pytest.approx([h.fused_score for h in expected], rel=1e-5)
        assert [d.page_content for d in got] == [h.chunk.indexed_text for h in expected]
        assert set(got[0].metadata["source_scores"]) <= {"dense", "bm25"}


async def test_async_equals_sync(chroma, bm25) -> None:
    retriever = ensemble(chroma, bm25, k=6)
    for query in QUERIES:
        assert await retriever.ainvoke(query) == retriever.invoke(query)
    assert await bm25.ainvoke(QUERIES[0], k=2) == bm25.invoke(QUERIES[0], k=2)


def test_k_truncates_and_dense_scores_are_cosines(chroma, bm25, core_embedder) -> None:
    import numpy as np

    query = "quarterly revenue report"
    retriever = ensemble(chroma, bm25, k=3)
    got = retriever.invoke(query)
    assert len(got) == 3 and len(retriever.invoke(query, k=1)) == 1
    assert len(ensemble(chroma, bm25).invoke(query)) == 8  # never more than the corpus
    q = core_embedder.embed_queries([query])[0]
    off = ensemble(chroma, bm25, k=3, dense_prf=0).invoke(query)
    for doc in off:  # one dense search: the cosine to the query
        v = core_embedder.embed_documents([doc.page_content])[0]
        assert doc.metadata["source_scores"]["dense"] == pytest.approx(float(q @ v), abs=1e-4)
        assert doc.metadata["score"] == doc.metadata["fused_score"] and "rerank_score" not in doc.metadata
    # dense PRF (the default): the second search's cosine, to the query moved toward the first
    # fused top 3 (here the top 3 without feedback), as a search by text would report it
    moved = q + 0.5 * np.mean(core_embedder.embed_documents([d.page_content for d in off]), axis=0)
    moved /= np.linalg.norm(moved)
    for doc in got:
        v = core_embedder.embed_documents([doc.page_content])[0]
        assert doc.metadata["source_scores"]["dense"] == pytest.approx(float(moved @ v), abs=1e-4)


def test_dedupes_by_id_not_by_page_content() -> None:
    same_text = "Revenue grew by 3% over the previous quarter."
    docs = [LCDocument(same_text, id="acme"), LCDocument(same_text, id="globex"), LCDocument("Plants in Ohio.", id="ohio")]
    one = RunnableLambda(lambda q: docs[:2])
    two = RunnableLambda(lambda q: [docs[1], docs[0], docs[1]])  # a source repeating a chunk keeps its first rank
    ours = ContextualEnsembleRetriever(retrievers=[one, two], names=["a", "b"]).invoke("revenue")
    assert [d.id for d in ours] == ["acme", "globex"]
    assert [d.metadata["ranks"] for d in ours] == [{"a": 1, "b": 2}, {"a": 2, "b": 1}]
    stock = EnsembleRetriever(retrievers=[one, RunnableLambda(lambda q: [docs[1], docs[0]])]).invoke("revenue")
    assert len(stock) == 1  # LangChain's own collapses the two chunks into one


def test_any_runnable_is_a_source_and_unknown_ids_fail_clearly() -> None:
    a = RunnableLambda(lambda q: [LCDocument("x", metadata={"chunk_id": "1"}), LCDocument("y", metadata={"chunk_id": "2"})])
    b = RunnableLambda(lambda q: [LCDocument("y", metadata={"chunk_id": "2"})])
    got = ContextualEnsembleRetriever(retrievers=[a, b], weights=[0.8, 0.2]).invoke("q")
    expected = fuse_sources([("retriever_0", [("1", 1.0), ("2", 0.5)], 0.8), ("retriever_1", [("2", 1.0)], 0.2)], rrf_k=0)
    assert [(d.id, d.metadata["fused_score"]) for d in got] == [(h.id, h.fused_score) for h in expected]
    bad = RunnableLambda(lambda q: [LCDocument("no id")])
    with pytest.raises(ValueError, match="id_key="):
        ContextualEnsembleRetriever(retrievers=[bad]).invoke("q")


def test_configuration_errors_name_the_fix(chroma, bm25) -> None:
    with pytest.raises(ValueError, match="at least one"):
        ContextualEnsembleRetriever(retrievers=[])
    with pytest.raises(ValueError, match="one weight per retriever"):
        ensemble(chroma, bm25, weights=[1.0])
    with pytest.raises(ValueError, match="unique names"):
        ensemble(chroma, bm25, names=["x", "x"])
    with pytest.raises(TypeError, match="ContextualCompressionRetriever"):
        ensemble(chroma, bm25, reranker=object())
    with pytest.raises(ValueError, match="embeddings="):
        ContextualEnsembleRetriever.from_documents([LCDocument("a", id="a")])


async def test_async_runs_its_retrievers_concurrently() -> None:
    in_flight = {"now": 0, "most": 0}

    async def slow(query: str) -> list[LCDocument]:
        in_flight["now"] += 1
        in_flight["most"] = max(in_flight["most"], in_flight["now"])
        await asyncio.sleep(0.05)
        in_flight["now"] -= 1
        return [LCDocument(query, id=query)]

    retriever = ContextualEnsembleRetriever(retrievers=[RunnableLambda(slow), RunnableLambda(slow), RunnableLambda(slow)])
    got = await retriever.ainvoke("q")
    assert in_flight["most"] == 3  # all three sources were in flight at once, not one after another
    assert [d.metadata["ranks"] for d in got] == [{"slow": 1, "slow_2": 1, "slow_3": 1}]


def test_from_documents_builds_chroma_and_bm25(contextual_docs, lc_embeddings, core_chunks, core_embedder) -> None:
    retriever = ContextualEnsembleRetriever.from_documents(contextual_docs, lc_embeddings, k=4)
    dense, bm = retriever.retrievers
    # Chroma, inside the windows that embed long chunks whole (the default when it builds the store)
    assert isinstance(dense, VectorStoreRetriever) and type(dense.vectorstore).__name__ == "WindowedVectorStore"
    chroma = dense.vectorstore.vectorstore
    assert type(chroma).__name__ == "Chroma"
    assert chroma._embedding_function is lc_embeddings  # ours, never Chroma's default
    assert chroma._collection.configuration["hnsw"]["space"] == "cosine"
    plain = ContextualEnsembleRetriever.from_documents(contextual_docs, lc_embeddings, k=4, windows=False)
    assert type(plain.retrievers[0].vectorstore).__name__ == "Chroma"
    assert isinstance(bm, ContextualBM25Retriever)
    searcher = HybridSearcher(core_chunks, core_embedder)
    for query in QUERIES:
        assert [d.id for d in retriever.invoke(query)] == [h.id for h in searcher.search(query, top_k=4)]


# -- reranking ---------------------------------------------------------------------------------------


@pytest.fixture
def cohere_server():
    with FakeCohereServer() as server:
        yield server


def cohere_reranker(server: FakeCohereServer) -> CohereReranker:
    return CohereReranker(
        client=cohere.ClientV2(api_key=server.api_key, base_url=server.base_url),
        async_client=cohere.AsyncClientV2(api_key=server.api_key, base_url=server.base_url),
    )


@pytest.mark.parametrize("as_compressor", [False, True])
async def test_ensemble_reranks_the_fused_candidates(chroma, bm25, core_chunks, core_embedder, cohere_server, as_compressor) -> None:
    reranker = cohere_reranker(cohere_server)
    retriever = ensemble(chroma, bm25, k=3, rerank_depth=5, reranker=RerankCompressor(reranker=reranker) if as_compressor else reranker)
    searcher = HybridSearcher(core_chunks, core_embedder, config=FusionConfig(reranker=reranker, rerank_depth=5))
    query = "quarterly revenue report"
    got = retriever.invoke(query)
    expected = searcher.search(query, top_k=3)
    assert [d.id for d in got] == [h.id for h in expected]
    assert [d.metadata["rerank_score"] for d in got] == pytest.approx([cohere_server.rerank_score(query, d.page_content) for d in got])
    assert all(d.metadata["score"] == d.metadata["rerank_score"] for d in got)
    body = cohere_server.requests[-1].body
    assert body["model"] == "rerank-v3.5" and len(body["documents"]) == 5 and body["top_n"] == 3
    assert await retriever.ainvoke(query) == got


def test_persistent_chroma_and_bm25_reopen_to_the_same_results(contextual_docs, lc_embeddings, tmp_path) -> None:
    import chromadb
    from langchain_chroma import Chroma

    built = ContextualEnsembleRetriever.from_documents(
        contextual_docs, vectorstore=chroma_from_documents(contextual_docs, lc_embeddings, persist_directory=tmp_path / "chroma", collection_name="chunks"), k=5
    )
    built.retrievers[1].save(tmp_path / "bm25")
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=chromadb.Settings(anonymized_telemetry=False))
    reopened_store = Chroma(collection_name="chunks", embedding_function=lc_embeddings, client=client)
    reopened = ContextualEnsembleRetriever(
        retrievers=[reopened_store.as_retriever(), ContextualBM25Retriever.load(tmp_path / "bm25")], k=5
    )
    for query in QUERIES:
        assert [d.id for d in reopened.invoke(query)] == [d.id for d in built.invoke(query)]


def test_review_fixes_bm25_settings_compressor_top_n_and_vector_callbacks(tmp_path, contextual_docs, lc_embeddings) -> None:
    from langchain_core.callbacks import BaseCallbackHandler

    from contextual_retrieval_core.rerank.base import PassThroughReranker
    from contextual_retrieval_langchain import RerankCompressor

    bm25 = ContextualBM25Retriever.from_documents(contextual_docs, k=3)
    bm25.save(tmp_path / "bm25")
    assert ContextualBM25Retriever.load(tmp_path / "bm25").k == 3
    assert ContextualBM25Retriever.load(tmp_path / "bm25", k=2).k == 2

    retriever = ContextualEnsembleRetriever.from_documents(contextual_docs, lc_embeddings, reranker=RerankCompressor(reranker=PassThroughReranker(), top_n=2))
    assert len(retriever.invoke("revenue")) == 2  # the compressor's top_n is honoured

    class Runs(BaseCallbackHandler):
        def __init__(self) -> None:
            self.names: list[str] = []

        def on_retriever_start(self, serialized, query, **kwargs):
            self.names.append(kwargs.get("name") or "")

    runs = Runs()
    retriever.invoke("revenue", config={"callbacks": [runs]})
    assert runs.names[0] == "ContextualEnsembleRetriever" and "VectorStoreRetriever" in runs.names and "ContextualBM25Retriever" in runs.names


async def test_async_embeddings_with_a_sync_only_core_embedder() -> None:
    import numpy as np

    from contextual_retrieval_langchain import EmbedderEmbeddings

    class Letters:
        model_name = "letters"

        def embed_documents(self, texts):
            return np.array([[t.count("a"), 1.0] for t in texts])

        embed_queries = embed_documents

    emb = EmbedderEmbeddings(embedder=Letters())
    assert await emb.aembed_query("banana") == [3.0, 1.0] == emb.embed_query("banana")
    assert await emb.aembed_documents(["a", "aa"]) == [[1.0, 1.0], [2.0, 1.0]]
