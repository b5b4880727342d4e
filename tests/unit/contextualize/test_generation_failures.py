"""The generation failure paths of issue 12, each against the fake Anthropic server through the
real anthropic SDK, with real SQLite files: unwritable stores, kills, spend limits, failed first
chunks, forgotten batches, sustained rate limiting and text that is not UTF-8."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
import warnings

import anthropic
import pytest

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.contextualize.contextualizer import ContextualizationError, Contextualizer
from contextual_retrieval_core.generators import AnthropicContextGenerator, FatalGenerationError
from contextual_retrieval_core.generators.base import RateLimitedTooLong
from contextual_retrieval_core.store.context_store import ContextStore, ContextStoreError
from tests.fakes.anthropic_server import CREDIT_BALANCE_MESSAGE, SPEND_LIMIT_MESSAGE, USAGE_LIMIT_MESSAGE, FakeAnthropicServer
from tests.unit.contextualize.test_contextualizer import MODEL, _chunk_of, make_corpus


def _sync_gen(server, max_retries: int = 6) -> AnthropicContextGenerator:
    client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=max_retries)
    return AnthropicContextGenerator(MODEL, client=client)


def _async_gen(server, max_retries: int = 6) -> AnthropicContextGenerator:
    client = anthropic.AsyncAnthropic(api_key=server.api_key, base_url=server.url, max_retries=max_retries)
    return AnthropicContextGenerator(MODEL, async_client=client)


def _paid(server) -> list[str]:
    """Chunk texts of the message requests the server answered with 200 (paid), in order."""
    return [_chunk_of(r.body) for r in server.requests_to("/v1/messages", "POST") if r.status == 200]


# -- the store ---------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["read_only", "locked"])
def test_a_store_that_cannot_be_written_fails_before_the_first_request(tmp_path, how):
    documents, chunks = make_corpus(big_docs=1, small_docs=1, chunks_per_doc=3)
    path = tmp_path / "contexts.sqlite3"
    ContextStore(path).close()
    holder = None
    if how == "read_only":
        store = ContextStore(path, read_only=True)
        expected = r"read-only \(opened with read_only=True\)"
    else:
        store = ContextStore(path, timeout=0.2)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        expected = "database is locked"
    with FakeAnthropicServer() as srv:
        c = Contextualizer(_sync_gen(srv), store, config=ContextualizeConfig(show_progress=False))
        with pytest.raises(ContextStoreError, match=expected) as info:
            c.contextualize(documents, chunks)
        assert str(path) in str(info.value)
        assert srv.requests_to("/v1/messages") == []  # nothing was paid for
    if holder is not None:
        holder.execute("ROLLBACK")
        holder.close()


def test_a_read_only_store_still_serves_a_run_that_needs_no_request(tmp_path):
    documents, chunks = make_corpus(big_docs=0, small_docs=2, chunks_per_doc=3)
    path = tmp_path / "contexts.sqlite3"
    with FakeAnthropicServer() as srv:
        first = Contextualizer(_sync_gen(srv), path, config=ContextualizeConfig(show_progress=False)).contextualize(documents, chunks)
        before = len(srv.requests)
        again = Contextualizer(_sync_gen(srv), ContextStore(path, read_only=True), config=ContextualizeConfig(show_progress=False)).contextualize(
            documents, chunks
        )
        assert len(srv.requests) == before and again.report.store_hits == len(chunks)
        assert [c.context for c in again.chunks] == [c.context for c in first.chunks]


def test_a_commit_failure_stops_the_run_at_once_naming_the_file(tmp_path):
    documents, chunks = make_corpus(big_docs=0, small_docs=6, chunks_per_doc=5)
    path = tmp_path / "contexts.sqlite3"
    store = ContextStore(path, timeout=0.3)
    locked = threading.Event()
    release = threading.Event()

    def lock_after_three() -> None:
        with ContextStore(path) as watcher:
            while len(watcher) < 3:
                time.sleep(0.005)
        holder = sqlite3.connect(path, isolation_level=None, timeout=10)
        holder.execute("BEGIN IMMEDIATE")
        locked.set()
        release.wait(30)
        holder.execute("ROLLBACK")
        holder.close()

    concurrency = 4
    with FakeAnthropicServer(latency_s=0.03) as srv:
        thread = threading.Thread(target=lock_after_three, daemon=True)
        thread.start()
        c = Contextualizer(_sync_gen(srv), store, config=ContextualizeConfig(concurrency=concurrency, show_progress=False))
        with pytest.raises(ContextStoreError, match=rf"{path}: storing a context failed: database is locked"):
            c.contextualize(documents, chunks)
        assert locked.is_set()
        release.set()
        thread.join(10)
        time.sleep(0.2)  # requests cut off by the stop may still be answered: count them too
        paid = len(_paid(srv))
    stored = len(ContextStore(path))
    assert 3 <= stored < len(chunks)
    assert paid - stored <= concurrency  # without the fix: every chunk paid, the errors gathered at the end


# -- spend limits ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "status,message",
    [(400, CREDIT_BALANCE_MESSAGE), (400, USAGE_LIMIT_MESSAGE), (429, USAGE_LIMIT_MESSAGE), (429, SPEND_LIMIT_MESSAGE)],
    ids=["400-credit-balance", "400-usage-limits", "429-usage-limits", "429-spend-limit"],
)
def test_spend_limit_and_credit_balance_stop_the_run_at_once_in_every_form(tmp_path, status, message):
    documents, chunks = make_corpus(big_docs=0, small_docs=8, chunks_per_doc=4)
    concurrency = 3
    with FakeAnthropicServer() as srv:
        c = Contextualizer(_sync_gen(srv), tmp_path / "c.sqlite3", config=ContextualizeConfig(concurrency=concurrency, show_progress=False))
        c.contextualize(documents[:1], [ch for ch in chunks if ch.document_id == "doc0"])
        srv.spend_limit(True, status=status, message=message)
        with pytest.raises(FatalGenerationError) as info:
            c.contextualize(documents, chunks)
        assert message in str(info.value) and "run again to resume" in str(info.value)
        refused = [r for r in srv.requests_to("/v1/messages") if r.status == status]
        assert 1 <= len(refused) <= concurrency  # the requests in flight, none retried, none after
        assert all(r.headers.get("x-stainless-retry-count") == "0" for r in refused)
    assert len(ContextStore(tmp_path / "c.sqlite3")) == 4


def test_a_bad_request_that_is_not_about_money_fails_only_its_chunk(tmp_path):
    documents, chunks = make_corpus(big_docs=0, small_docs=2, chunks_per_doc=2)
    with FakeAnthropicServer() as srv:
        body = {"type": "error", "error": {"type": "invalid_request_error", "message": "messages: text content blocks must be non-empty"}}
        srv.fail_next(400, body=body)
        c = Contextualizer(_sync_gen(srv), tmp_path / "c.sqlite3", config=ContextualizeConfig(concurrency=1, show_progress=False))
        with pytest.raises(ContextualizationError) as info:
            c.contextualize(documents, chunks)
        assert len(info.value.failures) == 1 and len(ContextStore(tmp_path / "c.sqlite3")) == 3


# -- one cache write per document ---------------------------------------------------------------


def test_a_first_chunk_that_fails_for_good_hands_the_cache_write_to_the_next(tmp_path):
    documents, chunks = make_corpus(big_docs=1, small_docs=0, chunks_per_doc=6)
    with FakeAnthropicServer(latency_s=0.05) as srv:
        srv.fail_next(500, times=3)  # the first chunk, alone in flight, fails its 3 attempts
        c = Contextualizer(_sync_gen(srv, max_retries=2), tmp_path / "c.sqlite3", config=ContextualizeConfig(concurrency=4, show_progress=False, retry_backoff_s=0.01))
        result = c.contextualize(documents, chunks)  # the 500s are transient: the chunk goes again in a later round
        assert result.report.transient_failures == 1 and result.report.retry_rounds == 1
        assert srv.cache_writes_containing(documents[0].text) == 1  # was 4: the rest went out at once
        assert result.report.generated == 6 and len(ContextStore(tmp_path / "c.sqlite3")) == 6
        assert srv.stats()["messages"] == 6  # the failed chunk, retried, read the cache written since


@pytest.mark.parametrize("client", ["sync", "async"])
def test_thirty_percent_faults_one_cache_write_per_cacheable_document_every_context_stored(tmp_path, client):
    documents, chunks = make_corpus(big_docs=10, small_docs=3, chunks_per_doc=4, seed=5)
    path = tmp_path / "c.sqlite3"
    with FakeAnthropicServer(latency_s=0.02) as srv:
        srv.fail_rate(0.30, statuses=(429, 529, 500), seed=17)
        # SDK retries off: 30% of requests fail, first chunks of documents among them; one run
        # rides them out in retry rounds
        gen = _sync_gen(srv, 0) if client == "sync" else _async_gen(srv, 0)
        c = Contextualizer(gen, path, config=ContextualizeConfig(concurrency=6, show_progress=False, retry_backoff_s=0.01))
        if client == "sync":
            result = c.contextualize(documents, chunks)
        else:
            result = asyncio.run(c.acontextualize(documents, chunks))
        assert srv.stats()["faults"] > 0 and srv.stats()["messages"] == len(chunks)
        assert result.report.transient_failures == srv.stats()["faults"] and result.report.retry_rounds >= 1
        for doc in documents[:10]:
            assert srv.cache_writes_containing(doc.text) == 1, doc.id
        assert len(ContextStore(path)) == len(chunks) and all(ch.context for ch in result.chunks)


# -- Message Batches the API no longer knows ----------------------------------------------------


def test_a_stored_batch_unknown_to_the_api_is_abandoned_and_blocks_nothing(tmp_path):
    documents, chunks = make_corpus(big_docs=0, small_docs=2, chunks_per_doc=3)
    path = tmp_path / "c.sqlite3"
    with FakeAnthropicServer() as srv:
        Contextualizer(_sync_gen(srv), path, config=ContextualizeConfig(show_progress=False)).contextualize(documents, chunks)  # realtime
        store = ContextStore(path)
        store.add_batch("msgbatch_forgotten", generator="anthropic", model=MODEL,
                        manifest={"k": {"kind": "chunk", "key": "k", "chunk_id": chunks[0].id, "doc_id": "doc0"}})
        before = len(srv.requests_to("/v1/messages"))
        c = Contextualizer(_sync_gen(srv), path, config=ContextualizeConfig(mode="batch", batch_poll_interval=0.01, show_progress=False))
        with pytest.warns(UserWarning, match=r"msgbatch_forgotten is unknown to the API \(404"):
            result = c.contextualize(documents, chunks)
        assert result.report.abandoned_batches == ["msgbatch_forgotten"]
        assert "abandoned and regenerated" in result.report.format()
        assert result.report.store_hits == len(chunks) and len(srv.requests_to("/v1/messages")) == before
        assert store.batch_status("msgbatch_forgotten") == "abandoned"
        later = c.contextualize(documents, chunks)
        assert later.report.abandoned_batches == [] and srv.stats()["batches"] == 0


def test_the_chunks_of_a_forgotten_batch_are_generated_again(tmp_path):
    documents, chunks = make_corpus(big_docs=0, small_docs=2, chunks_per_doc=3)
    path = tmp_path / "c.sqlite3"
    with FakeAnthropicServer() as gone:
        gone.batch_hold.set()  # the batch never ends there; then that API "forgets" it
        # no SDK retries: once that API is gone, the first run's next poll fails at once instead of
        # backing off through six retries (about 20 s) before it ends
        first = Contextualizer(_sync_gen(gone, max_retries=0), path, config=ContextualizeConfig(mode="batch", batch_poll_interval=0.02, show_progress=False))
        thread = threading.Thread(target=lambda: _swallow(first.contextualize, documents, chunks), daemon=True)
        thread.start()
        deadline = time.time() + 10
        while time.time() < deadline and not ContextStore(path).pending_batches(generator="anthropic", model=MODEL):
            time.sleep(0.02)
        (batch_id, _), = ContextStore(path).pending_batches(generator="anthropic", model=MODEL)
        with ContextStore(path) as store:  # that run stands for a dead process: its work claims lapse
            for owner in {owner for owner, _ in store.claims().values()}:
                store.release_claims(owner)
    with FakeAnthropicServer() as srv:  # an API that does not know the batch
        c = Contextualizer(_sync_gen(srv), path, config=ContextualizeConfig(mode="batch", batch_poll_interval=0.01, show_progress=False))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = c.contextualize(documents, chunks)
        assert any(batch_id in str(w.message) for w in caught)
        assert result.report.abandoned_batches == [batch_id] and result.report.generated == len(chunks)
        assert srv.stats()["batches"] == 1 and all(ch.context for ch in result.chunks)
        assert ContextStore(path).batch_status(batch_id) == "abandoned"
        assert not ContextStore(path).pending_batches(generator="anthropic", model=MODEL)
    thread.join(30)  # the first run's API is gone: it fails and ends (a run left polling would block exit)
    assert not thread.is_alive()


def _swallow(fn, *args):
    try:
        fn(*args)
    except Exception:
        pass


# -- sustained rate limiting --------------------------------------------------------------------


def test_sustained_rate_limiting_stops_the_run_and_keeps_what_was_stored(tmp_path):
    documents, chunks = make_corpus(big_docs=0, small_docs=4, chunks_per_doc=3)
    path = tmp_path / "c.sqlite3"
    assert Contextualizer(config=ContextualizeConfig(show_progress=False)).config.give_up_after_rate_limited_s == 120.0
    with FakeAnthropicServer() as srv:
        # an SDK that retries without end: only the run's own limit can stop it
        c = Contextualizer(_sync_gen(srv, max_retries=10**6), path, config=ContextualizeConfig(concurrency=2, show_progress=False, give_up_after_rate_limited_s=0.5))
        c.contextualize(documents[:1], [ch for ch in chunks if ch.document_id == "doc0"])
        srv.fail_rate(1.0, statuses=(429,))
        outcome: dict = {}

        def run() -> None:
            try:
                c.contextualize(documents, chunks)
            except BaseException as exc:  # noqa: BLE001 - inspected below
                outcome["error"] = exc

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(60)
        assert not thread.is_alive(), "the run kept retrying 429s"
        error = outcome.get("error")
        assert isinstance(error, RateLimitedTooLong), error
        assert "nothing but 429" in str(error) and "give_up_after_rate_limited_s" in str(error)
        later = [r.status for r in srv.requests_to("/v1/messages")][3:]
        assert later and set(later) == {429}
        # the requests still retrying in the run's worker threads end too: the server's 429s carry
        # `retry-after-ms: 1`, which the SDK waits instead of its own backoff (up to 8 s), so a
        # thread still retrying sends again within milliseconds and the count never settles (an
        # attempt already under way as the run gave up, on a busy machine, arrives once); then,
        # with the API answering again, none of them sends another attempt in 500 times that wait
        sent = len(srv.requests_to("/v1/messages"))
        for _ in range(20):
            time.sleep(0.1)
            if len(srv.requests_to("/v1/messages")) == sent:
                break
            sent = len(srv.requests_to("/v1/messages"))
        srv.clear_faults()
        time.sleep(0.5)
        assert len(srv.requests_to("/v1/messages")) == sent, "a worker thread kept retrying after the run gave up"
        assert len(ContextStore(path)) == 3  # what arrived before the run gave up, kept
        # a new run on the same generator may send again
        c.give_up_after_rate_limited_s = 30.0
        assert c.contextualize(documents[:2], [ch for ch in chunks if ch.document_id in ("doc0", "doc1")]).report.generated == 3
    assert len(ContextStore(path)) == 6
    with pytest.raises(ValueError, match="give_up_after_rate_limited_s"):
        Contextualizer(config=ContextualizeConfig(show_progress=False, give_up_after_rate_limited_s=0))


# -- text that is not UTF-8 --------------------------------------------------------------------


def test_lone_surrogates_are_refused_naming_the_document_before_anything_is_sent(tmp_path):
    raw = "caf\udce9 au lait: a file read with errors='surrogateescape'. " * 20
    doc = Document("menu.txt", raw)
    with FakeAnthropicServer() as srv:
        c = Contextualizer(_sync_gen(srv), tmp_path / "c.sqlite3", config=ContextualizeConfig(show_progress=False))
        with pytest.raises(ValueError, match=r"document 'menu.txt' cannot be encoded as UTF-8.*errors='replace'"):
            c.contextualize([doc], [Chunk("m0", "menu.txt", raw[:50], 0)])
        clean = Document("menu.txt", "coffee " * 50)
        with pytest.raises(ValueError, match=r"chunk 'm1' of document 'menu.txt' cannot be encoded"):
            c.contextualize([clean], [Chunk("m1", "menu.txt", "coffee \udce9", 0)])
        assert srv.requests == []
