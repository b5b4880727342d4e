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


def test_a_side_that_gives_no_rows_back_is_searched_once_and_nothing_is_embedded_again() -> None:
    """Feedback is skipped for a store that gives no vectors back: no second search, the first
    list stands (the ranking of dense_prf=0)."""
    from contextual_retrieval_core.search.feedback import StoreRead

    class Opaque(Dense):
        def feedback_rows(self, top):
            self.log.append("rows:" + ",".join(top))
            return StoreRead(top, {}, {}).rows()

    opaque, bm25 = Opaque(), Listed("bm25", [("c", 9.0), ("d", 5.0)])
    skipped = QueryFlow(FusionConfig(prf_top=2), [opaque, bm25]).run(["q", "q"], rerank=False)
    assert opaque.log[:2] == ["embed", "search"] and opaque.log[2:] == [opaque.log[2]] * 2  # rows read, no search
    off = QueryFlow(FusionConfig(dense_prf=0), [Dense(), Listed("bm25", bm25.hits)]).run(["q", "q"], rerank=False)
    assert [[h.id for h in r.fused] for r in skipped] == [[h.id for h in r.fused] for r in off]
    again = asyncio.run(QueryFlow(FusionConfig(prf_top=2), [Opaque(), Listed("bm25", bm25.hits)]).arun(["q"], rerank=False))
    assert [h.id for h in again[0].fused] == [h.id for h in off[0].fused]


def _lost_server() -> Exception:
    """A pooled connection the server dropped, as psycopg reports it (no address)."""
    psycopg = pytest.importorskip("psycopg")
    try:
        raise psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")
    except Exception as low:
        try:
            raise RuntimeError("the store's own wrapper") from low
        except RuntimeError as high:
            return high


class OnServer(Listed):
    """A source on a server that drops its connection `drops` times, then answers."""

    def __init__(self, drops: int) -> None:
        super().__init__("server", [("x", 1.0)])
        self.drops = drops

    def search(self, queries):
        self.calls += 1
        if self.drops:
            self.drops -= 1
            raise _lost_server()
        return [list(self.hits) for _ in queries]

    async def asearch(self, queries):
        return self.search(queries)

    def server_address(self) -> str | None:
        return "db.example:6543"


def test_a_dropped_connection_is_tried_once_more_then_named_with_the_sources_address() -> None:
    from contextual_retrieval_core.dense.server_errors import VectorServerUnavailable
    from contextual_retrieval_core.search.flow import ServerSource

    assert isinstance(OnServer(0), ServerSource) and not isinstance(Listed("x", []), ServerSource)
    once = OnServer(1)  # a stale pooled connection: the second try answers
    assert [h.id for h in QueryFlow(FusionConfig(), [once]).run(["q"], rerank=False)[0].fused] == ["x"]
    assert once.calls == 2
    assert [h.id for h in asyncio.run(QueryFlow(FusionConfig(), [OnServer(1)]).arun(["q"], rerank=False))[0].fused] == ["x"]
    for run in (lambda flow: flow.run(["q"]), lambda flow: asyncio.run(flow.arun(["q"]))):
        down = OnServer(5)  # still down: two tries, then the clear error naming the source's address
        with pytest.raises(VectorServerUnavailable, match="server at db.example:6543 does not answer"):
            run(QueryFlow(FusionConfig(), [down]))
        assert down.calls == 2
