"""fuse_sources / rerank_hits: the fusion and reranking every retriever (core and adapters) uses."""

from __future__ import annotations

import pytest

from contextual_retrieval_core.rerank.base import RerankResult
from contextual_retrieval_core.search.ranked import RankedHit, arerank_hits, fuse_sources, rerank_hits


class ByLength:
    model_name = "by-length"

    def __init__(self) -> None:
        self.seen: list[list[str]] = []

    def rerank(self, query, texts, top_n=None):
        self.seen.append(list(texts))
        ranked = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        return [RerankResult(i, float(len(texts[i]))) for i in ranked][:top_n]

    async def arerank(self, query, texts, top_n=None):
        return self.rerank(query, texts, top_n)


SOURCES = [("dense", [("a", 0.9), ("b", 0.8), ("c", 0.1)], 0.8), ("bm25", [("c", 9.0), ("d", 3.0)], 0.2)]
TEXTS = {"a": "a", "b": "bbbb", "c": "cc", "d": "ddd"}


def test_weighted_rrf_with_ranks_by_source_name():
    hits = fuse_sources(SOURCES)
    assert [h.id for h in hits] == ["a", "c", "b", "d"]  # .8, .8/3+.2, .4, .1
    assert hits[1].ranks == {"dense": 3, "bm25": 1}
    assert hits[1].score == pytest.approx(0.8 / 3 + 0.2) == hits[1].fused_score
    assert hits[3].ranks == {"dense": None, "bm25": 2} and hits[0].rerank_score is None
    classic = fuse_sources(SOURCES, rrf_k=60)
    assert classic[0].id == "c" and classic[0].score == pytest.approx(0.8 / 63 + 0.2 / 61)  # k=60 flattens ranks
    assert [h.id for h in fuse_sources(SOURCES, depth=1)] == ["a", "c"]
    assert len(fuse_sources(SOURCES, mode="relative_score", top_k=2)) == 2


def test_duplicate_source_names_are_an_error():
    with pytest.raises(ValueError, match="unique"):
        fuse_sources([("x", [("a", 1.0)], 1.0), ("x", [("b", 1.0)], 1.0)])


async def test_rerank_depth_top_k_and_async_parity():
    hits = fuse_sources(SOURCES)
    reranker = ByLength()
    out = rerank_hits("q", hits, TEXTS.__getitem__, reranker, top_k=2, rerank_depth=3)
    assert reranker.seen == [["a", "cc", "bbbb"]]  # only the first 3 fused hits are sent
    assert [h.id for h in out] == ["b", "c"]
    assert out[0].rerank_score == out[0].score == 4.0 and out[0].fused_score == hits[2].fused_score
    assert out[0].ranks == hits[2].ranks
    assert await arerank_hits("q", hits, TEXTS.__getitem__, reranker, top_k=2, rerank_depth=3) == out
    assert rerank_hits("q", hits, TEXTS.__getitem__, None, top_k=2) == hits[:2]
    assert rerank_hits("q", [], TEXTS.__getitem__, reranker) == []
    assert isinstance(out[0], RankedHit)


def test_a_source_listing_an_id_twice_keeps_its_first_rank_and_defaults():
    from contextual_retrieval_core.search.ranked import default_weights, unique_names

    hits = fuse_sources([("x", [("a", 3.0), ("b", 2.0), ("a", 1.0)], 1.0)])
    assert [(h.id, h.ranks) for h in hits] == [("a", {"x": 1}), ("b", {"x": 2})]
    assert default_weights(2) == [0.5, 0.5] and default_weights(4) == [0.25] * 4
    assert unique_names(["bm25", "bm25", "bm25"]) == ["bm25", "bm25_2", "bm25_3"]
    with pytest.raises(ValueError, match="rerank_depth"):
        rerank_hits("q", hits, TEXTS.__getitem__, ByLength(), rerank_depth=0)


def test_missing_scores_count_as_reciprocal_rank():
    with_none = fuse_sources([("x", [("a", None), ("b", None)], 1.0), ("y", [("b", 4.0), ("a", 1.0)], 1.0)], mode="relative_score")
    explicit = fuse_sources([("x", [("a", 1.0), ("b", 0.5)], 1.0), ("y", [("b", 4.0), ("a", 1.0)], 1.0)], mode="relative_score")
    assert with_none == explicit
