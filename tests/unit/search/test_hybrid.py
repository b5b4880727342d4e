from __future__ import annotations

import pytest

from contextual_retrieval_core import Chunk, ContextualChunk, HybridSearcher
from contextual_retrieval_core.rerank import PassThroughReranker, RerankResult
from contextual_retrieval_core.search.bm25 import BM25Index
from contextual_retrieval_core.search.config import FusionConfig

CHUNKS = [
    ContextualChunk(Chunk("acme-rev", "acme", "Revenue grew by 3% over the previous quarter."), "ACME Corp Q2 2023 filing, revenue section."),
    ContextualChunk(Chunk("globex-rev", "globex", "Revenue grew by 3% over the previous quarter."), "Globex Inc Q4 2021 filing, revenue section."),
    ContextualChunk(Chunk("acme-staff", "acme", "Headcount stayed flat at 1,200."), "ACME Corp Q2 2023 filing, staffing section."),
]


@pytest.fixture(scope="module")
def embedder(offline_embedder):
    return offline_embedder


def test_context_disambiguates_identical_chunks(embedder):
    searcher = HybridSearcher(CHUNKS, embedder)
    assert searcher.search("What was ACME's revenue growth in Q2 2023?", top_k=1)[0].id == "acme-rev"
    assert searcher.search("Globex revenue growth 2021", top_k=1)[0].id == "globex-rev"
    # without the contexts the two revenue chunks are indistinguishable: the tie goes to the first
    # indexed, and plain retrieval answers the Globex question with ACME's chunk
    plain = HybridSearcher([ContextualChunk(c.chunk, "") for c in CHUNKS], embedder)
    assert plain.bm25 is not None
    bm25 = dict(plain.bm25.search("Globex revenue growth 2021", k=3))
    assert bm25["acme-rev"] == bm25["globex-rev"]
    assert plain.search("Globex revenue growth 2021", top_k=1)[0].id == "acme-rev"


def test_hits_carry_fused_score_and_per_source_ranks(embedder):
    hits = HybridSearcher(CHUNKS, embedder).search("ACME headcount", top_k=3)
    top = hits[0]
    assert top.id == "acme-staff"
    assert set(top.ranks) == {"dense", "bm25"} and top.ranks["bm25"] == 1
    # default fusion: 0.5 / dense_rank + 0.5 / bm25_rank (weighted RRF, k=0)
    expected = sum(0.5 / r for r in top.ranks.values() if r is not None)
    assert top.score == pytest.approx(expected) and top.fused_score == top.score
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_dense_only_and_bm25_only(embedder):
    dense = HybridSearcher(CHUNKS, embedder, use_bm25=False)
    assert dense.bm25 is None and set(dense.search("staffing", top_k=3)[0].ranks) == {"dense"}
    sparse = HybridSearcher(CHUNKS, None)
    assert sparse.vectors is None and sparse.search("headcount", top_k=3)[0].id == "acme-staff"


class ShortestFirstReranker:
    """A real Reranker implementation: ranks candidates by ascending length, recording its calls."""

    model_name = "by-length"

    def __init__(self):
        self.seen: list[list[str]] = []

    def rerank(self, query, texts, top_n=None):
        self.seen.append(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        return [RerankResult(i, 1.0 / (1 + pos)) for pos, i in enumerate(order)][:top_n]

    async def arerank(self, query, texts, top_n=None):
        return self.rerank(query, texts, top_n)


def test_reranker_reorders_fused_candidates(embedder):
    hits = HybridSearcher(CHUNKS, embedder, config=FusionConfig(reranker=ShortestFirstReranker())).search("revenue", top_k=2)
    assert len(hits) == 2 and hits[0].id == "acme-staff"  # the shortest indexed text
    assert hits[0].fused_score > 0 and hits[0].score == 1.0
    same = HybridSearcher(CHUNKS, embedder, config=FusionConfig(reranker=PassThroughReranker())).search("revenue", top_k=3)
    assert [h.id for h in same] == [h.id for h in HybridSearcher(CHUNKS, embedder).search("revenue", top_k=3)]


def test_bad_input(embedder):
    with pytest.raises(ValueError, match="at least one"):
        HybridSearcher([], embedder)
    with pytest.raises(ValueError, match="duplicate chunk ids"):
        HybridSearcher([CHUNKS[0], CHUNKS[0]], None)
    with pytest.raises(ValueError, match="nothing to search"):
        HybridSearcher(CHUNKS, None, use_bm25=False)
    with pytest.raises(ValueError, match="weights"):
        HybridSearcher(CHUNKS, None, config=FusionConfig(weights=(1.0,)))
    searcher = HybridSearcher(CHUNKS, embedder)
    assert searcher.search("", top_k=5) == []
    assert searcher.search_many([], top_k=5) == []
    with pytest.raises(ValueError, match="positive"):
        searcher.search("revenue", top_k=0)
    with pytest.raises(TypeError, match="str"):
        searcher.search_many([b"bytes"], top_k=1)  # type: ignore[list-item]


def test_a_prebuilt_bm25_index_must_cover_exactly_the_chunks():
    ids, texts = [c.id for c in CHUNKS], [c.indexed_text for c in CHUNKS]
    same = BM25Index().index(ids[::-1], texts[::-1])  # order does not matter
    assert HybridSearcher(CHUNKS, None, bm25=same).search("headcount", top_k=1)[0].id == "acme-staff"
    with pytest.raises(ValueError, match=r"1 chunk ids missing from it \(e.g. 'acme-staff'\).*BM25Index\(\)\.index"):
        HybridSearcher(CHUNKS, None, bm25=BM25Index().index(ids[:2], texts[:2]))
    with pytest.raises(ValueError, match=r"1 ids of no chunk \(e.g. 'other'\)"):
        HybridSearcher(CHUNKS, None, bm25=BM25Index().index([*ids, "other"], [*texts, "other text"]))


def test_rerank_depth_is_a_positive_integer_or_the_fusion_depth():
    reranker = ShortestFirstReranker()
    HybridSearcher(CHUNKS, None, config=FusionConfig(reranker=reranker, rerank_depth=1)).search("revenue filing", top_k=3)
    assert [len(texts) for texts in reranker.seen] == [1]
    searcher = HybridSearcher(CHUNKS, None, config=FusionConfig(reranker=reranker, depth=2))
    assert searcher.rerank_depth == 2
    searcher.search("revenue filing", top_k=3)
    assert [len(texts) for texts in reranker.seen] == [1, 2]
    for bad, error in ((0, ValueError), (-1, ValueError), (True, TypeError), (2.5, TypeError), ("3", TypeError)):
        with pytest.raises(error, match="rerank_depth must be a positive integer or None"):
            HybridSearcher(CHUNKS, None, config=FusionConfig(rerank_depth=bad))
