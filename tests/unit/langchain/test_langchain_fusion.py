"""ContextualEnsembleRetriever on the core FusionConfig: the same settings and names as the core, a
blank query returns nothing (it returned 20 Documents ranked by the embedding of ""), and a failing
reranker (the real Cohere SDK against the loopback server answering 500) can fall back to the fused
order."""

from __future__ import annotations

import asyncio
import warnings

import cohere
import pytest
from langchain_core.vectorstores import InMemoryVectorStore

from contextual_retrieval_core import FusionConfig, HybridSearcher
from contextual_retrieval_langchain import (
    ContextualBM25Retriever,
    ContextualEnsembleRetriever,
    RerankCompressor,
    chroma_from_documents,
)

QUERY = "quarterly revenue report"


@pytest.fixture(scope="module")
def sources(contextual_docs, lc_embeddings):
    store = chroma_from_documents(contextual_docs, lc_embeddings)
    return [store.as_retriever(), ContextualBM25Retriever.from_documents(contextual_docs, k=150)]


@pytest.mark.parametrize("query", ["", "  ", "\n\t"])
async def test_a_blank_query_returns_no_documents(sources, query) -> None:
    retriever = ContextualEnsembleRetriever(retrievers=sources)
    assert len(retriever.invoke(QUERY)) > 3
    assert len(sources[0].invoke(query)) > 0  # the dense side alone ranks everything for a blank query
    assert retriever.invoke(query) == []
    assert await retriever.ainvoke(query) == []


def test_config_and_fields_are_the_cores_and_agree(sources, core_chunks, core_embedder) -> None:
    config = FusionConfig(weights=(0.8, 0.2), rrf_k=60, depth=4, top_k=3)
    from_config = ContextualEnsembleRetriever(retrievers=sources, config=config)
    from_fields = ContextualEnsembleRetriever(retrievers=sources, weights=[0.8, 0.2], rrf_k=60, depth=4, k=3)
    assert from_config.config == from_fields.config == config
    assert (from_config.weights, from_config.rrf_k, from_config.depth, from_config.k) == ([0.8, 0.2], 60.0, 4, 3)
    core = HybridSearcher(core_chunks, core_embedder, config=config)
    for query in (QUERY, "DiffExecutor run target", "holiday policy"):
        got = [d.id for d in from_config.invoke(query)]
        assert got == [d.id for d in from_fields.invoke(query)] == [h.id for h in core.search(query)]
    overridden = ContextualEnsembleRetriever(retrievers=sources, config=config, k=1)
    assert overridden.config == config.replace(top_k=1) and len(overridden.invoke(QUERY)) == 1


@pytest.mark.parametrize(
    "fields, error, message",
    [
        ({"depth": 0}, ValueError, "depth must be a positive integer, got 0"),
        ({"k": -2}, ValueError, "top_k must be a positive integer"),
        ({"rerank_depth": 0}, ValueError, "rerank_depth must be a positive integer or None"),
        ({"rrf_k": -1.0}, ValueError, "rrf_k must be a finite number >= 0"),
        ({"weights": [1.0]}, ValueError, "got 1 weights for 2 retrievers; pass one weight per retriever"),
        ({"on_rerank_error": "ignore"}, ValueError, "on_rerank_error"),
    ],
)
def test_bad_fields_fail_when_built_naming_them(sources, fields, error, message) -> None:
    with pytest.raises(error, match=message):
        ContextualEnsembleRetriever(retrievers=sources, **fields)


def test_invoke_k_and_the_removed_candidates_name(sources) -> None:
    retriever = ContextualEnsembleRetriever(retrievers=sources)
    for bad, error in ((0, ValueError), (2.5, TypeError), ("3", TypeError)):
        with pytest.raises(error, match="^k must be a positive integer"):
            retriever.invoke(QUERY, k=bad)
    with pytest.raises((TypeError, ValueError), match="candidates"):  # depth= since 0.2; removed in 0.3
        ContextualEnsembleRetriever(retrievers=sources, candidates=5)
    with pytest.raises(TypeError, match="^documents must be a list of Documents, not a single str"):
        ContextualBM25Retriever.from_documents("some text")  # type: ignore[arg-type]


def test_a_failing_reranker_raises_by_default(sources, cohere_server) -> None:
    retriever = ContextualEnsembleRetriever(retrievers=sources, reranker=cohere_server.reranker())
    cohere_server.fail_next(500)
    with pytest.raises(cohere.errors.InternalServerError):
        retriever.invoke(QUERY)


@pytest.mark.parametrize("as_compressor", [False, True])
async def test_on_rerank_error_fused_keeps_the_fused_order_sync_and_async(sources, cohere_server, as_compressor) -> None:
    reranker = cohere_server.reranker()
    plain = ContextualEnsembleRetriever(retrievers=sources, k=4).invoke(QUERY)
    retriever = ContextualEnsembleRetriever(
        retrievers=sources, k=4, reranker=RerankCompressor(reranker=reranker) if as_compressor else reranker, on_rerank_error="fused"
    )
    assert all("rerank_score" in d.metadata for d in retriever.invoke(QUERY))  # the server works
    cohere_server.fail_next(500, times=2, message="upstream overloaded")
    for got in (retriever.invoke(QUERY), await retriever.ainvoke(QUERY)):
        assert [(d.id, d.metadata["score"]) for d in got] == [(d.id, d.metadata["score"]) for d in plain]
        assert {d.metadata["rerank_error"] for d in got} == {"InternalServerError: HTTP 500: upstream overloaded"}
        assert all("rerank_score" not in d.metadata for d in got)
        assert all(cohere_server.api_key not in d.metadata["rerank_error"] for d in got)
    assert [r.status for r in cohere_server.requests] == [200, 500, 500]


class _WideRelevanceStore(InMemoryVectorStore):
    """An in-memory store whose relevance function spreads scores past [0, 1] (as an inner-product
    store with unnormalised vectors does), so LangChain's public relevance search warns."""

    def _select_relevance_score_fn(self):
        return lambda similarity: 4 * similarity - 1.5


def _wide_sources(contextual_docs, lc_embeddings, **search_kwargs):
    store = _WideRelevanceStore(lc_embeddings)
    store.add_documents(contextual_docs, ids=[d.metadata["chunk_id"] for d in contextual_docs])
    dense = store.as_retriever(search_type="similarity_score_threshold" if search_kwargs else "similarity",
                               search_kwargs=search_kwargs)
    return store, [dense, ContextualBM25Retriever.from_documents(contextual_docs, k=150)]


@pytest.mark.parametrize("dense_prf", [0.0, 0.5])
async def test_relevance_outside_0_1_gives_no_warning_and_keeps_the_stores_scores(contextual_docs, lc_embeddings, dense_prf) -> None:
    """The public relevance search warns with the retrieved documents in the message; the ensemble
    reads the same scores without it, and its score_threshold holds on both paths."""
    store, sources = _wide_sources(contextual_docs, lc_embeddings)
    with pytest.warns(UserWarning, match="Relevance scores must be between"):
        expected = store.similarity_search_with_relevance_scores(QUERY, k=len(contextual_docs))
    retriever = ContextualEnsembleRetriever(retrievers=sources, dense_prf=dense_prf)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = retriever.invoke(QUERY)
        aout = await retriever.ainvoke(QUERY)
    assert not [w for w in caught if "Relevance scores" in str(w.message)]
    assert [d.metadata["chunk_id"] for d in out] == [d.metadata["chunk_id"] for d in aout]
    if not dense_prf:  # the text search: exactly the public method's scores
        want = {d.metadata["chunk_id"]: s for d, s in expected}
        got = {d.metadata["chunk_id"]: d.metadata["source_scores"]["dense"] for d in out if d.metadata["ranks"]["dense"]}
        assert got == pytest.approx({c: want[c] for c in got}) and min(got.values()) < 0 < max(got.values())
    _, thresholded = _wide_sources(contextual_docs, lc_embeddings, score_threshold=0.5)
    kept = [d for d in ContextualEnsembleRetriever(retrievers=thresholded, dense_prf=dense_prf).invoke(QUERY)
            if d.metadata["ranks"]["dense"] is not None]
    assert kept and all(d.metadata["source_scores"]["dense"] >= 0.5 for d in kept)
    if not dense_prf:  # PRF's second search moves the scores
        assert len(kept) == sum(s >= 0.5 for _, s in expected) < len(contextual_docs)


async def test_concurrent_async_queries_leave_the_warning_filters_as_they_were(contextual_docs, lc_embeddings) -> None:
    """`warnings.catch_warnings` around an await swaps the process's filter list while another
    query runs; two queries at once through Chroma's async search (a worker thread) must leave the
    filters exactly as they found them."""
    store = chroma_from_documents(contextual_docs, lc_embeddings)
    retriever = ContextualEnsembleRetriever(retrievers=[store.as_retriever(), ContextualBM25Retriever.from_documents(contextual_docs)],
                                            dense_prf=0)
    before = list(warnings.filters)
    results = await asyncio.gather(*(retriever.ainvoke(q) for q in (QUERY, "fuzzer executors", QUERY, "plants in Ohio")))
    assert warnings.filters == before
    assert [d.page_content for d in results[0]] == [d.page_content for d in results[2]] == [d.page_content for d in retriever.invoke(QUERY)]
