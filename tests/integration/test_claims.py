"""Several ingestion worker processes on one context store (issue 15): each chunk is paid for once.

Real processes (tests/claims_worker.py) run the real Contextualizer and the real anthropic SDK
against one loopback fake Anthropic server started here, which counts every request; the store
is one SQLite file, or one PostgreSQL database on the server tests/servers.py starts.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path

import pytest

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.store.context_store import ContextStore
from tests import claims_worker
from tests.claims_worker import finish
from tests.fakes.anthropic_server import FakeAnthropicServer

TESTS = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(300)


def corpus(big: int = 4, small: int = 8) -> tuple[list[Document], list[Chunk]]:
    """`big` documents over Claude 3 Haiku's 2048-token cache minimum (8 chunks each: one cache
    write, then fan-out) and `small` ones under it (3 chunks each)."""
    docs, chunks = [], []
    for d in range(big + small):
        parts = 8 if d < big else 3
        size = 1400 if d < big else 300  # characters per chunk: 8 x 1400 / 4 = 2800 tokens
        pieces = [f"Document {d} part {i}: " + " ".join(f"w{d}_{i}_{j}" for j in range(size // 9)) for i in range(parts)]
        doc = Document(f"doc{d}", "\n\n".join(pieces))
        docs.append(doc)
        chunks += [Chunk(f"doc{d}_c{i}", doc.id, text, i) for i, text in enumerate(pieces)]
    return docs, chunks


def start_workers(n: int, store: str, server: FakeAnthropicServer, tmp: Path, **opts: object) -> tuple[list, list[Path]]:
    docs, chunks = opts.pop("corpus", None) or corpus()
    return claims_worker.start_workers(n, store, server.url, tmp, docs, chunks, **opts)


def check_every_chunk_once(reports: list[dict], server: FakeAnthropicServer, store_path: str, n_chunks: int) -> None:
    stats = server.stats()
    # every chunk paid for exactly once, across all workers
    assert stats["requests"] == stats["messages"] + stats["faults"] == n_chunks
    assert sum(r["report"]["generated"] for r in reports) == n_chunks
    assert sum(1 for r in reports if r["report"]["generated"]) >= 2, "the work was not shared"
    for r in reports:  # and every worker returns every chunk with its context
        rep = r["report"]
        assert r["with_context"] == n_chunks
        assert rep["generated"] + rep["left_to_other_workers"] + rep["store_hits"] == n_chunks
    with ContextStore(store_path) as store:
        assert len(store) == n_chunks and store.claims() == {}


@pytest.fixture()
def server():
    with FakeAnthropicServer(latency_s=0.05) as srv:
        yield srv


@pytest.mark.parametrize("workers", [2, 4])
def test_workers_on_one_sqlite_store_pay_each_chunk_once(workers, server, tmp_path) -> None:
    store = str(tmp_path / "contexts.sqlite3")
    reports = finish(*start_workers(workers, store, server, tmp_path, concurrency=2, poll=0.1))
    check_every_chunk_once(reports, server, store, len(corpus()[1]))
    left = [r["report"]["left_to_other_workers"] for r in reports]
    assert sum(left) == (workers - 1) * len(corpus()[1])  # what one did not pay, it took from the others


def test_two_workers_on_one_postgresql_store(postgres_server, server, tmp_path) -> None:
    psycopg = pytest.importorskip("psycopg")
    name = f"w_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = postgres_server.rsplit("/", 1)[0] + "/" + name
    reports = finish(*start_workers(2, url, server, tmp_path, concurrency=2, poll=0.1))
    check_every_chunk_once(reports, server, url, len(corpus()[1]))


def test_batch_and_grouped_modes_claim_too(server, tmp_path) -> None:
    docs, chunks = corpus()
    store = str(tmp_path / "batch.sqlite3")
    reports = finish(*start_workers(2, store, server, tmp_path, concurrency=2, poll=0.1, mode="batch"))
    stats = server.stats()
    assert stats["batch_messages"] + stats["messages"] == len(chunks)  # one batch request per chunk, once
    assert sum(r["report"]["generated"] for r in reports) == len(chunks)
    assert all(r["with_context"] == len(chunks) for r in reports)

    server.reset()
    store = str(tmp_path / "grouped.sqlite3")
    reports = finish(*start_workers(2, store, server, tmp_path, concurrency=2, poll=0.1, grouped=True))
    big = [d for d in docs if len(d.text) > 4 * 2048]
    per_chunk = sum(1 for c in chunks if c.document_id in {d.id for d in big})
    # one request per chunk of a cacheable document, one per small document: each paid once
    assert server.stats()["messages"] == per_chunk + (len(docs) - len(big))
    assert sum(r["report"]["generated"] for r in reports) == len(chunks)
    assert all(r["with_context"] == len(chunks) for r in reports)


def test_killed_worker_claims_are_taken_over_after_its_lease(tmp_path) -> None:
    docs, chunks = corpus(big=6, small=0)
    with FakeAnthropicServer(latency_s=0.4) as server:
        store_path = str(tmp_path / "contexts.sqlite3")
        opts = dict(corpus=(docs, chunks), concurrency=3, lease=2, renew=0.5, poll=0.2)
        (victim, survivor), outs = start_workers(2, store_path, server, tmp_path, **opts)
        with ContextStore(store_path) as store:
            deadline = time.monotonic() + 60
            while len(store) < 6 and time.monotonic() < deadline:
                time.sleep(0.05)
            held_before = {k for k, (owner, _) in store.claims().items() if f":{victim.pid}:" in owner}
            assert held_before, "the victim held no claims mid-run"
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            in_flight = 3  # the victim's concurrency: at most these requests were answered and lost
            held = {k for k, (owner, _) in store.claims().items() if f":{victim.pid}:" in owner}
            assert held  # a dead worker's claims stay until their lease runs out
            _, err = survivor.communicate(timeout=240)
            assert survivor.returncode == 0, err.decode(errors="replace")[-3000:]
            report = json.loads(outs[1].read_text())
            assert report["with_context"] == len(chunks)
            assert report["report"]["taken_over"] >= len(held)
            assert set(store.get_many(held)) == held and len(store) == len(chunks)
            assert store.claims() == {}
        requests = server.stats()["requests"]
        assert len(chunks) <= requests <= len(chunks) + in_flight


@pytest.fixture(params=["sqlite", "postgresql"])
def two_connections(request, tmp_path):
    """Two store objects on one store, as two workers hold them."""
    if request.param == "sqlite":
        where = str(tmp_path / "claims.sqlite3")
    else:
        psycopg = pytest.importorskip("psycopg")
        server = request.getfixturevalue("postgres_server")
        name = f"c_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        where = server.rsplit("/", 1)[0] + "/" + name
    with ContextStore(where) as a, ContextStore(where) as b:
        yield a, b


def test_claims_are_exclusive_end_with_the_context_and_lapse_with_the_lease(two_connections) -> None:
    a, b = two_connections
    assert a.claim(["k1", "k2", "k3"], "A", 1.0) == ({"k1", "k2", "k3"}, set())
    assert b.claim(["k2", "k3", "k4"], "B", 30.0) == ({"k4"}, set())  # A's are live: only k4
    assert a.claim(["k1"], "A", 1.0).held == {"k1"}  # an owner's own claim is renewed
    a.put("k1", "ctx", generator="g", model="m")  # a stored context ends its claim ...
    assert "k1" not in a.claims() and b.claim(["k1"], "B", 30.0).held == set()  # ... and is never claimed again
    assert b.renew_claims("B", 30.0) == 1 and a.renew_claims("nobody", 30.0) == 0
    owners = {key: owner for key, (owner, left) in b.claims().items()}
    assert owners == {"k2": "A", "k3": "A", "k4": "B"}
    # A stops renewing: its last renewal is a short lease, and once that has lapsed B takes its keys over
    assert a.renew_claims("A", 0.05) == 2
    deadline = time.monotonic() + 30
    while any(left >= 0 for owner, left in b.claims().values() if owner == "A") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert b.claim(["k2", "k3"], "B", 30.0) == ({"k2", "k3"}, {"k2", "k3"})
    assert a.claim(["k2"], "A", 1.0).held == set()
    assert b.release_claims("B") == 3 and a.claims() == {}


def test_committed_workers_benchmark_meets_issue_15() -> None:
    """benchmarks/workers.json (committed output of benchmarks/workers.py): each chunk paid once in
    every run, 4 workers <= 0.35x one worker's wall time, and RESULTS.md quotes the same figures."""
    root = TESTS.parent
    data = json.loads((root / "benchmarks" / "workers.json").read_text())
    results = (root / "benchmarks" / "RESULTS.md").read_text()
    assert {r["store"] for r in data["runs"]} >= {"sqlite"}
    for run in data["runs"]:
        assert run["requests"] == run["chunks"] == run["chunks_with_context"]
        assert f"{run['wall_s']:.2f}" in results
    for store in {r["store"] for r in data["runs"]}:
        wall = {r["workers"]: r["wall_s"] for r in data["runs"] if r["store"] == store}
        assert wall[4] <= 0.35 * wall[1]
