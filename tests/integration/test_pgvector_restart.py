"""A PostgreSQL (pgvector) server stopped and started again under a loop of queries through each
framework's own store (LangChain's `PGVector`, LlamaIndex's `PGVectorStore`) composed with our
BM25: while it is down every query, sync and async (LangChain's async path runs the sync
`PGVector`'s search in a worker thread; a `PGVector(async_mode=True)` refuses sync calls, so it
is not what `ContextualEnsembleRetriever` takes), fails with `VectorServerUnavailable` naming
the server's address and the fix (not SQLAlchemy's error with its SQL and the query vector, and
never the URL's password); once it is back the same retriever answers again, the same answers as
before, without rebuilding anything. A server restarted while no query ran leaves stale pooled
connections behind: the next query, sync or async, succeeds (a dead connection is tried once
more on a fresh one). LlamaIndex's async path works with one ``asyncio.run`` per query (its
store's async connections are closed as each loop shuts down), and a query from a second loop
while the first is still open fails with an error that says to keep one loop. A throwaway
cluster of this test's own (tests/servers.py)."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import pytest

pytest.importorskip("langchain_postgres")
pytest.importorskip("llama_index.vector_stores.postgres")

from contextual_retrieval_core import ContextualChunk  # noqa: E402
from contextual_retrieval_core.app._demo import demo_chunks  # noqa: E402
from contextual_retrieval_core.dense.server_errors import VectorServerUnavailable  # noqa: E402
from tests.pgvector_stores import langchain_pgvector, llamaindex_pgvector  # noqa: E402
from tests.servers import pgvector_binaries, restart_postgres, running_postgres, start_postgres, stop_postgres  # noqa: E402

pytestmark = pytest.mark.timeout(300)

QUERIES = ["fork server child process", "battery life of the Widget Pro", "parental leave at the Austin office",
           "revenue grew by 3% over the previous quarter"]
#: trust authentication ignores it; it must appear in no error
PASSWORD = "s3cret-pw-never-printed"


@pytest.fixture
def own_pgvector(pytestconfig):
    """A cluster of this test's own (it is stopped and started again), not the session's."""
    with running_postgres(pgvector_binaries(pytestconfig)) as url:
        yield url


def with_password(url: str) -> str:
    parts = urlsplit(url)
    return url.replace(f"//{parts.username}@", f"//{parts.username}:{PASSWORD}@", 1)


class Framework:
    """One framework's retriever, asked by chunk id, sync and async."""

    def __init__(self, name: str, url: str, chunks: list[ContextualChunk], embedder) -> None:
        self.name = name
        if name == "langchain":
            self.retriever = langchain_pgvector(url, chunks, embedder, collection="restart", k=10)
        else:
            self.retriever = llamaindex_pgvector(url, chunks, embedder, table="restart", k=10)

    def ids(self, query: str) -> list[str]:
        if self.name == "langchain":
            return [d.metadata["chunk_id"] for d in self.retriever.invoke(query)]
        return [r.node.node_id for r in self.retriever.retrieve(query)]

    async def aids(self, query: str) -> list[str]:
        if self.name == "langchain":
            return [d.metadata["chunk_id"] for d in await self.retriever.ainvoke(query)]
        return [r.node.node_id for r in await self.retriever.aretrieve(query)]


def check_clear(error: VectorServerUnavailable) -> str:
    message = str(error)
    assert "does not answer" in message and "start it again" in message and "pg_ctl" in message, message
    assert PASSWORD not in message and "SELECT" not in message and "[0." not in message, message
    return message


@pytest.mark.parametrize("framework", ["langchain", "llamaindex"])
async def test_queries_fail_clearly_while_the_server_is_down_and_recover_when_it_is_back(
    own_pgvector, core_embedder, framework
) -> None:
    _, chunks = demo_chunks()
    contextual = [ContextualChunk(c, f"From {c.document_id}.") for c in chunks]
    url = with_password(own_pgvector)
    fw = Framework(framework, url, contextual, core_embedder)
    before = [fw.ids(q) for q in QUERIES]
    assert all(len(ids) == 10 for ids in before)
    assert [await fw.aids(q) for q in QUERIES] == before

    stop_postgres(own_pgvector)  # every connection drops, as in a crash
    messages = []
    for q in QUERIES:  # the loop goes on: every query fails, naming the server and what to do
        with pytest.raises(VectorServerUnavailable) as failed:
            fw.ids(q)
        messages.append(check_clear(failed.value))
        with pytest.raises(VectorServerUnavailable) as failed:
            await fw.aids(q)
        messages.append(check_clear(failed.value))
    port = urlsplit(own_pgvector).port
    assert all(f"127.0.0.1:{port}" in m for m in messages), messages  # every one names the server

    start_postgres(own_pgvector)  # same port, same data: the same retriever answers again
    assert [fw.ids(q) for q in QUERIES] == before
    assert [await fw.aids(q) for q in QUERIES] == before


@pytest.mark.parametrize("framework", ["langchain", "llamaindex"])
async def test_the_first_query_after_a_restart_with_no_query_while_down_succeeds(own_pgvector, core_embedder, framework) -> None:
    """Every pooled connection (the sync engine's and, for LlamaIndex, the async one's) is stale
    after the restart; the first query of each path is answered anyway, twice over."""
    _, chunks = demo_chunks()
    contextual = [ContextualChunk(c, f"From {c.document_id}.") for c in chunks]
    fw = Framework(framework, with_password(own_pgvector), contextual, core_embedder)
    before = [fw.ids(q) for q in QUERIES]
    assert [await fw.aids(q) for q in QUERIES] == before
    for _ in range(2):
        stop_postgres(own_pgvector)
        start_postgres(own_pgvector)  # no query while it was down
        assert fw.ids(QUERIES[0]) == before[0]
        assert await fw.aids(QUERIES[1]) == before[1]
        assert [fw.ids(q) for q in QUERIES] == before


def test_llamaindex_async_with_one_event_loop_per_query(own_pgvector, core_embedder) -> None:
    """`asyncio.run` per query: every query answers (before, each one from the second on failed:
    "attached to a different loop", then "another operation is in progress"), across a restart too."""
    from contextual_retrieval_core.dense.event_loops import OtherEventLoopError

    _, chunks = demo_chunks()
    contextual = [ContextualChunk(c, f"From {c.document_id}.") for c in chunks]
    fw = Framework("llamaindex", own_pgvector, contextual, core_embedder)
    before = [fw.ids(q) for q in QUERIES]
    assert [asyncio.run(fw.aids(q)) for q in QUERIES] == before
    restart_postgres(own_pgvector, down_s=0.2)
    assert [asyncio.run(fw.aids(q)) for q in QUERIES] == before
    lc = Framework("langchain", own_pgvector, contextual, core_embedder)
    assert [asyncio.run(lc.aids(q)) for q in QUERIES] == [lc.ids(q) for q in QUERIES]

    # a loop that stays open holds the store's async connections: a second loop is refused, clearly
    held = asyncio.new_event_loop()
    try:
        assert held.run_until_complete(fw.aids(QUERIES[0])) == before[0]
        with pytest.raises(OtherEventLoopError, match=r"keep one event loop.*asyncio\.run") as refused:
            asyncio.run(fw.aids(QUERIES[1]))
        assert "PGVectorStore" in str(refused.value)
        assert held.run_until_complete(fw.aids(QUERIES[1])) == before[1]  # the first loop still answers
    finally:
        held.run_until_complete(held.shutdown_asyncgens())  # as asyncio.run ends a loop: its connections close
        held.close()
    assert asyncio.run(fw.aids(QUERIES[2])) == before[2]
    # a loop closed without that shutdown: its connections are dropped, the next loop answers
    bare = asyncio.new_event_loop()
    assert bare.run_until_complete(fw.aids(QUERIES[3])) == before[3]
    bare.close()
    assert asyncio.run(fw.aids(QUERIES[0])) == before[0]
