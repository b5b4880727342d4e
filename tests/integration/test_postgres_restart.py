"""PostgreSQL restarted during a multi-worker ingestion: the workers reconnect and finish, every
chunk is paid for once (requests == chunks), and no claim is left held. Real worker processes
(tests/claims_worker.py), a throwaway cluster of this test's own, the loopback Anthropic server."""

from __future__ import annotations

import threading
import time

import pytest

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.store.context_store import ContextStore
from contextual_retrieval_core.store.errors import ContextStoreError
from tests.claims_worker import finish, start_workers
from tests.fakes.anthropic_server import FakeAnthropicServer
from tests.servers import postgres_binaries, restart_postgres, running_postgres, start_postgres, stop_postgres

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def own_postgres(pytestconfig):
    """A cluster of this test's own (it is stopped and restarted), not the session's."""
    with running_postgres(postgres_binaries(pytestconfig)) as url:
        yield url


def corpus(n: int = 30, parts: int = 4) -> tuple[list[Document], list[Chunk]]:
    docs, chunks = [], []
    for d in range(n):
        pieces = [f"Document {d} part {i}: " + " ".join(f"w{d}_{i}_{j}" for j in range(40)) for i in range(parts)]
        doc = Document(f"doc{d}", "\n\n".join(pieces))
        docs.append(doc)
        chunks += [Chunk(f"doc{d}_c{i}", doc.id, text, i) for i, text in enumerate(pieces)]
    return docs, chunks


def test_workers_ride_out_a_postgresql_restart_and_pay_each_chunk_once(own_postgres, tmp_path):
    docs, chunks = corpus()
    with FakeAnthropicServer(latency_s=0.05) as server:
        procs, outs = start_workers(3, own_postgres, server.url, tmp_path, docs, chunks, concurrency=2, lease=4, renew=1,
                                    poll=0.2)
        with ContextStore(own_postgres) as store:
            deadline = time.time() + 120
            while len(store) < len(chunks) // 3:
                assert time.time() < deadline and all(p.poll() is None for p in procs), "the workers did not start"
                time.sleep(0.05)
        restarted = threading.Event()

        def restart() -> None:
            restart_postgres(own_postgres, down_s=1.5)  # every worker's connection drops mid-run
            restarted.set()

        threading.Thread(target=restart, daemon=True).start()
        reports = finish(procs, outs, timeout=240)
        assert restarted.wait(60)
        stats = server.stats()
    assert stats["messages"] == len(chunks), "a chunk was paid for twice (or not at all)"
    assert all(r["with_context"] == len(chunks) for r in reports)
    assert sum(r["report"]["generated"] for r in reports) == len(chunks)
    with ContextStore(own_postgres) as store:
        assert len(store) == len(chunks)
        assert store.claims() == {}  # every worker released its claims


def test_a_server_that_stays_down_is_named_in_a_clear_error_and_the_store_recovers_when_it_is_back(own_postgres):
    store = ContextStore(own_postgres, timeout=2)
    store.put("k", "a context", generator="g", model="m")
    stop_postgres(own_postgres)
    started = time.monotonic()
    with pytest.raises(ContextStoreError) as info:
        store.get("k")
    message = str(info.value)
    assert "127.0.0.1" in message and "did not answer" in message and "check that the server runs" in message, message
    assert time.monotonic() - started < 15  # bounded by the store's timeout
    start_postgres(own_postgres)  # back after the store gave up: the same store object works again
    assert store.get("k") == "a context"
