"""`UnitCache` and `ContextPruner.prepare`: per-text work done once, the selection unchanged."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from contextual_retrieval_core.app._demo import demo_chunks
from contextual_retrieval_core.app.demo_corpus import DEMO_QUERIES
from contextual_retrieval_core.chunking.tokenizer import Tokenizer
from contextual_retrieval_core.pruning import ContextPruner, UnitCache, split_units
from contextual_retrieval_core.pruning._select import bm25_scores, bm25_term_scores
from contextual_retrieval_core.search.hybrid import HybridSearcher
from contextual_retrieval_core.types import Chunk, ContextualChunk
from tests.fakes.counting_embedder import CountingEmbedder


@pytest.fixture(scope="module")
def demo(offline_embedder):
    """Each demo query with its default contextual-hybrid top 10 (structural contexts)."""
    from contextual_retrieval_core.generators.structural import StructuralContextGenerator

    documents, chunks = demo_chunks()
    docs = {d.id: d for d in documents}
    generator = StructuralContextGenerator()
    contextual = [ContextualChunk(c, generator.generate(docs[c.document_id], c).context) for c in chunks]
    searcher = HybridSearcher(contextual, offline_embedder)
    return contextual, [(q.query, [h.chunk for h in searcher.search(q.query, top_k=10)]) for q in DEMO_QUERIES]


def _pruned(result) -> list[tuple[str, str]]:
    return [(c.id, c.text) for c in result.chunks]


def test_prepared_pruning_embeds_nothing_at_query_time_and_selects_the_same(offline_embedder, demo):
    corpus, cases = demo
    counting = CountingEmbedder(offline_embedder)
    pruner = ContextPruner(counting)
    embedded = pruner.prepare(corpus)
    assert embedded == len(counting.documents) == len(set(counting.documents)) > len(corpus)
    assert pruner.prepare(corpus) == 0  # everything known already
    counting.documents.clear()
    for query, chunks in cases:
        query_vector = offline_embedder.embed_queries([query])[0]
        warm = pruner.prune(query, chunks, query_vector=query_vector)
        cold = ContextPruner(offline_embedder).prune(query, chunks)  # nothing kept, the query embedded
        assert _pruned(warm) == _pruned(cold), query
        assert warm.report.units_kept == cold.report.units_kept
    assert counting.documents == [] and counting.queries == []  # no embedding at query time


def test_async_prune_uses_the_cache_and_matches(offline_embedder, demo):
    corpus, cases = demo
    counting = CountingEmbedder(offline_embedder)
    pruner = ContextPruner(counting)
    pruner.prepare(corpus)
    counting.documents.clear()
    query, chunks = cases[0]
    result = asyncio.run(pruner.aprune(query, chunks))
    assert counting.documents == [] and counting.queries == [query]
    assert _pruned(result) == _pruned(ContextPruner(offline_embedder).prune(query, chunks))


def test_a_query_vector_of_the_wrong_shape_is_refused(offline_embedder):
    chunk = ContextualChunk(Chunk("c", "notes.md", "Revenue grew. Costs fell. Staff moved."), "")
    with pytest.raises(ValueError, match="query_vector must be one vector"):
        ContextPruner(offline_embedder).prune("revenue", [chunk], query_vector=np.zeros((1, 384)))


def test_bm25_from_cached_terms_equals_an_index_built_per_query(demo):
    corpus, cases = demo
    tokenizer = Tokenizer()
    cache = UnitCache()
    units = [u.text for c in corpus for u in split_units(c.text, None)]
    for query, chunks in cases:
        terms = tokenizer.tokenize(query)
        assert np.array_equal(bm25_term_scores(terms, cache.terms(units, tokenizer)), bm25_scores(query, units, tokenizer))
        texts = [c.indexed_text for c in chunks]
        assert np.array_equal(bm25_term_scores(terms, cache.terms(texts, tokenizer)), bm25_scores(query, texts, tokenizer))


def test_vectors_are_embedded_once_and_float16_halves_them(offline_embedder):
    counting = CountingEmbedder(offline_embedder)
    cache = UnitCache()
    first = cache.vectors(["alpha beta", "gamma", "alpha beta"], counting)
    again = cache.vectors(["gamma", "alpha beta"], counting)
    assert counting.documents == ["alpha beta", "gamma"] and cache.embedded == 2
    assert first.dtype == np.float32 and np.array_equal(again, first[[1, 0]])
    assert np.array_equal(first[0], offline_embedder.embed_documents(["alpha beta"])[0])
    half = UnitCache(dtype=np.float16)
    rounded = half.vectors(["alpha beta", "gamma"], offline_embedder)
    assert rounded.dtype == np.float32 and half.vector_bytes * 2 == cache.vector_bytes
    assert np.allclose(rounded, first[:2], atol=1e-3)
    with pytest.raises(ValueError, match="float32 or numpy.float16"):
        UnitCache(dtype=np.int8)


def test_the_bound_drops_the_oldest_entries(offline_embedder):
    cache = UnitCache(max_texts=2)
    cache.vectors(["one", "two", "three"], offline_embedder)
    assert len(cache) == 2
    counting = CountingEmbedder(offline_embedder)
    cache.vectors(["three"], counting)
    assert counting.documents == []
    cache.vectors(["one"], counting)
    assert counting.documents == ["one"]
    assert cache.units("A. B.", "prose") is cache.units("A. B.", "prose")
