"""The one query flow (`search/flow.py`): the sequence, its sync and async drivers, and when
dense feedback runs, on small in-process sources."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.feedback import feedback_rows
from contextual_retrieval_core.search.flow import DenseSide, QueryFlow, Source, SyncDenseSide, SyncSource

IDS = ["a", "b", "c", "d"]
VECTORS = np.array([[1.0, 0.0, 0.0], [0.8, 0.6, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)


class Listed(SyncSource):
    def __init__(self, name: str, hits: list[tuple[str, float]]) -> None:
        self.name, self.hits, self.calls = name, hits, 0

    def search(self, queries):
        self.calls += 1
        return [list(self.hits) for _ in queries]


class Dense(SyncDenseSide):
    """Exact cosine search over VECTORS; the query 'q' embeds to [1, 0.2, 0]."""

    def __init__(self) -> None:
        self.name = "dense"
        self.log: list[str] = []
        self.rows = feedback_rows(IDS, VECTORS, {})

    def embed_queries(self, queries):
        self.log.append("embed")
        return np.array([[1.0, 0.2, 0.0] for _ in queries], dtype=np.float32)

    def search_vectors(self, vectors):
        self.log.append("search")
        out = []
        for v in np.asarray(vectors):
            sims = VECTORS @ (v / np.linalg.norm(v))
            out.append([(IDS[i], float(sims[i])) for i in np.argsort(-sims)])
        return out

    def feedback_rows(self, top):
        self.log.append("rows:" + ",".join(top))
        return self.rows


def test_the_sides_satisfy_their_protocols() -> None:
    assert isinstance(Dense(), DenseSide) and isinstance(Listed("x", []), Source)
    assert not isinstance(Listed("x", []), DenseSide)


def test_feedback_embeds_once_reads_the_fused_top_and_searches_the_dense_side_again() -> None:
    dense, bm25 = Dense(), Listed("bm25", [("c", 9.0), ("d", 5.0)])
    result = QueryFlow(FusionConfig(prf_top=2), [dense, bm25]).run(["q"], rerank=False)[0]
    assert dense.log[0] == "embed" and dense.log.count("embed") == 1
    assert dense.log[1] == "search" and dense.log[2].startswith("rows:") and dense.log[3] == "search"
    first = FusionConfig(weights=(0.5, 0.5)).fuse([("dense", Dense().search(["q"])[0]), ("bm25", bm25.hits)])
    assert dense.log[2] == "rows:" + ",".join(str(h.id) for h in first[:2])
    assert bm25.calls == 1  # only the dense side is searched again
    assert [i for i, _ in result.lists[1]] == ["c", "d"] and {h.id for h in result.fused} == set(IDS)


def test_no_feedback_when_it_is_off_or_the_dense_side_is_alone() -> None:
    for config, sources in [(FusionConfig(dense_prf=0), [Dense(), Listed("bm25", [("c", 1.0)])]),
                            (FusionConfig(), [Dense()])]:
        QueryFlow(config, sources).run(["q"], rerank=False)
        assert sources[0].log == ["embed", "search"]  # search() embeds, then searches by vector


def test_sync_and_async_drivers_give_the_same_ranking() -> None:
    def build():
        return QueryFlow(FusionConfig(prf_top=2, top_k=3), [Dense(), Listed("bm25", [("c", 9.0), ("b", 5.0)])])

    sync = build().run(["q", "q"], text_of=str)
    both = asyncio.run(build().arun(["q", "q"], text_of=str))
    assert [[h.id for h in r.hits] for r in sync] == [[h.id for h in r.hits] for r in both]
    assert all(len(r.hits) == 3 for r in sync)


def test_a_reranker_needs_the_candidates_text() -> None:
    from contextual_retrieval_core.rerank import PassThroughReranker

    flow = QueryFlow(FusionConfig(reranker=PassThroughReranker()), [Listed("a", [("x", 1.0)])])
    with pytest.raises(ValueError, match="text_of"):
        flow.run(["q"])
    assert [h.id for h in flow.run(["q"], text_of=str)[0].hits] == ["x"]


def test_sources_must_match_the_weights_and_have_unique_names() -> None:
    with pytest.raises(ValueError, match="unique"):
        QueryFlow(FusionConfig(), [Listed("a", []), Listed("a", [])])
    with pytest.raises(ValueError):
        QueryFlow(FusionConfig(weights=(1.0, 2.0, 3.0)), [Listed("a", []), Listed("b", [])])


def test_a_failing_source_fails_the_query() -> None:
    class Broken(SyncSource):
        name = "broken"

        def search(self, queries):
            raise ConnectionError("the store went away")

    with pytest.raises(ConnectionError, match="went away"):
        QueryFlow(FusionConfig(), [Dense(), Broken()]).run(["q"])
    with pytest.raises(ConnectionError):
        asyncio.run(QueryFlow(FusionConfig(), [Dense(), Broken()]).arun(["q"]))
