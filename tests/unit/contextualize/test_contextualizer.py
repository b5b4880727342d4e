"""The Contextualizer against the fake Anthropic server, through the real anthropic SDK."""

from __future__ import annotations

import threading
import time
import warnings

import anthropic
import pytest

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.contextualize.contextualizer import ContextualizationError, Contextualizer
from contextual_retrieval_core.generators import (
    AnthropicContextGenerator,
    CallableContextGenerator,
    FatalGenerationError,
)
from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT, ContextPrompt
from contextual_retrieval_core.store.context_store import ContextStore
from tests.fakes.anthropic_server import FakeAnthropicServer

MODEL = "claude-3-haiku-20240307"  # cache minimum 2048 tokens, in our table and the fake's


def make_corpus(big_docs: int = 2, small_docs: int = 2, chunks_per_doc: int = 4, seed: int = 0):
    """Documents whose chunks are verbatim slices; big ones pass the 2048-token cache minimum."""
    import random

    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "executor", "fuzz", "input", "harness", "corpus", "monitor", "stage", "mutator", "feedback"]
    documents, chunks = [], []
    for d in range(big_docs + small_docs):
        size = 9_500 if d < big_docs else 1_600  # characters: ~2375 vs ~400 tokens
        text = f"doc{d} " + " ".join(rng.choice(words) + str(rng.randrange(100)) for _ in range(size // 8))
        text = text[:size]
        doc = Document(f"doc{d}", text)
        documents.append(doc)
        step = len(text) // chunks_per_doc
        for i in range(chunks_per_doc):
            chunks.append(Chunk(f"doc{d}_chunk{i}", doc.id, text[i * step : (i + 1) * step], i))
    return documents, chunks


@pytest.fixture()
def server():
    with FakeAnthropicServer(latency_s=0.02) as srv:
        yield srv


def generator(server, **kw) -> AnthropicContextGenerator:
    client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=kw.pop("max_retries", 6))
    return AnthropicContextGenerator(MODEL, client=client, **kw)


def contextualizer(server, tmp_path, **kw) -> Contextualizer:
    gen_kw = {k: kw.pop(k) for k in list(kw) if k in ("prompt", "cache_ttl", "count_tokens", "max_retries")}
    return Contextualizer(generator(server, **gen_kw), tmp_path / "contexts.sqlite3", config=ContextualizeConfig(show_progress=False, **kw))


def message_requests(server):
    return [r for r in server.requests if r.path == "/v1/messages" and r.status == 200]


def test_one_cache_write_per_cacheable_document_and_every_read(server, tmp_path):
    documents, chunks = make_corpus()
    result = contextualizer(server, tmp_path, concurrency=4).contextualize(documents, chunks)
    report = result.report
    assert [c.id for c in result.chunks] == [c.id for c in chunks]
    assert all(c.context and c.indexed_text == (c.context + "\n\n" + c.text).strip() for c in result.chunks)
    assert report.cacheable_documents == 2 and report.generated == len(chunks) and report.store_hits == 0
    # exactly one write per big document, as the server saw it
    for doc in documents[:2]:
        assert server.cache_writes_containing(doc.text) == 1
    for doc in documents[2:]:
        assert server.cache_writes_containing(doc.text) == 0
    assert report.cache_writes == 2 and report.cache_writes_per_cacheable_document == 1.0
    assert report.cache_read_share == pytest.approx(1.0) and report.cache_misses == 0
    stats = server.stats()
    assert report.usage.cache_read_tokens == stats["cache_read_tokens"]
    assert report.usage.cache_write_tokens == stats["cache_write_tokens"]
    assert report.usage.input_tokens == stats["input_tokens"] and report.usage.requests == stats["messages"]
    assert report.cost_usd() == pytest.approx(
        (stats["input_tokens"] * 0.25 + stats["cache_write_tokens"] * 0.25 * 1.25
         + stats["cache_read_tokens"] * 0.025 + stats["output_tokens"] * 1.25) / 1e6
    )
    assert "2 writes for 2 cacheable documents" in report.format()


def test_request_is_the_cookbook_prompt_in_two_blocks(server, tmp_path):
    documents, chunks = make_corpus(big_docs=1, small_docs=1, chunks_per_doc=1)
    contextualizer(server, tmp_path).contextualize(documents, chunks)
    bodies = {r.body["messages"][0]["content"][0]["text"]: r.body for r in message_requests(server)}
    big = bodies[DEFAULT_PROMPT.render_document(documents[0].text)]
    small = bodies[DEFAULT_PROMPT.render_document(documents[1].text)]
    for body, doc, chunk in ((big, documents[0], chunks[0]), (small, documents[1], chunks[1])):
        blocks = body["messages"][0]["content"]
        assert len(blocks) == 2 and body["model"] == MODEL
        verbatim = (
            f"<document>\n{doc.text}\n</document>\nHere is the chunk we want to situate within the whole document\n"
            f"<chunk>\n{chunk.text}\n</chunk>\nPlease give a short succinct context to situate this chunk within "
            "the overall document for the purposes of improving search retrieval of the chunk.\n"
            "Answer only with the succinct context and nothing else."
        )
        assert blocks[0]["text"] + "\n" + blocks[1]["text"] == verbatim
        assert "cache_control" not in blocks[1]
        assert not {"temperature", "top_p", "top_k"} & set(body)
    assert big["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in small["messages"][0]["content"][0]  # below the 2048 minimum


def test_second_run_makes_no_request(server, tmp_path):
    documents, chunks = make_corpus()
    first = contextualizer(server, tmp_path).contextualize(documents, chunks)
    before = len(server.requests)
    second = contextualizer(server, tmp_path).contextualize(documents, chunks)
    assert len(server.requests) == before
    assert second.report.store_hits == len(chunks) and second.report.generated == 0
    assert [c.context for c in second.chunks] == [c.context for c in first.chunks]


def test_1h_ttl_and_glossary_prompt(server, tmp_path):
    documents, chunks = make_corpus(big_docs=1, small_docs=0)
    prompt = ContextPrompt(DEFAULT_PROMPT.document_template, DEFAULT_PROMPT.chunk_template, glossary="fuzz: random testing")
    report = contextualizer(server, tmp_path, cache_ttl="1h", prompt=prompt).contextualize(documents, chunks).report
    assert report.usage.cache_write_1h_tokens > 0 and report.usage.cache_write_tokens == 0
    first_block = message_requests(server)[0].body["messages"][0]["content"][0]
    assert first_block["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "<glossary>\nfuzz: random testing\n</glossary>" in first_block["text"]
    # a different prompt is a different store key: the default prompt regenerates everything
    again = contextualizer(server, tmp_path).contextualize(documents, chunks).report
    assert again.store_hits == 0 and again.generated == len(chunks)


def test_ten_percent_failures_complete_and_retries_are_counted(server, tmp_path):
    server.fail_rate(0.10, statuses=(429, 529, 500), seed=3)
    documents, chunks = make_corpus(big_docs=2, small_docs=3, chunks_per_doc=6)
    result = contextualizer(server, tmp_path, concurrency=6).contextualize(documents, chunks)
    assert result.report.generated == len(chunks) and all(c.context for c in result.chunks)
    faults = server.stats()["faults"]
    assert faults > 0 and result.report.usage.retries == faults


def test_spend_limit_is_fatal_not_retried_and_keeps_what_was_made(server, tmp_path):
    documents, chunks = make_corpus(big_docs=0, small_docs=3, chunks_per_doc=4)
    c = contextualizer(server, tmp_path, concurrency=1)
    done = c.contextualize(documents[:1], [ch for ch in chunks if ch.document_id == "doc0"])
    assert done.report.generated == 4
    server.spend_limit(True)
    with pytest.raises(FatalGenerationError, match="spend limit"):
        c.contextualize(documents, chunks)
    limited = [r for r in server.requests if r.status == 429]
    assert len(limited) == 1  # not retried, and the run stopped
    assert limited[0].headers.get("x-stainless-retry-count") == "0"
    assert len(ContextStore(tmp_path / "contexts.sqlite3")) == 4


def _chunk_of(body: dict) -> str:
    text = body["messages"][0]["content"][-1]["text"]
    return text.split("<chunk>\n", 1)[1].split("\n</chunk>", 1)[0]


def test_batch_mode_half_price_one_write_per_document(tmp_path):
    with FakeAnthropicServer(shuffle_batch_results=True) as srv:  # results map back by custom_id
        documents, chunks = make_corpus()
        c = contextualizer(srv, tmp_path, mode="batch", batch_poll_interval=0.02)  # 5m generator: batches use 1h
        result = c.contextualize(documents, chunks)
        report = result.report
        assert report.generated == len(chunks) and report.batch
        assert srv.stats()["batches"] == 2 and srv.stats()["messages"] == 0  # warm-up batch, then the rest
        for doc in documents[:2]:
            assert srv.cache_writes_containing(doc.text) == 1
        assert report.cache_read_share == pytest.approx(1.0)
        assert report.usage.cache_write_1h_tokens > 0 and report.usage.cache_write_tokens == 0
        # the result texts match their chunks despite the shuffled results
        for c in result.chunks:
            assert _excerpt_words(c.text) in c.context
        full = report.usage
        from contextual_retrieval_core.generators.usage import cost_usd

        assert report.cost_usd() == pytest.approx(cost_usd(full, MODEL) / 2)
        assert "50% batch rate" in report.format()
        # results are in the store: realtime finds them all
        again = contextualizer(srv, tmp_path).contextualize(documents, chunks)
        assert again.report.store_hits == len(chunks)


def test_batch_is_picked_up_after_the_process_dies(tmp_path):
    with FakeAnthropicServer() as srv:
        documents, chunks = make_corpus(big_docs=0, small_docs=2, chunks_per_doc=3)
        srv.batch_hold.set()  # the batch does not progress: the process "dies" while it runs
        store_path = tmp_path / "contexts.sqlite3"
        first = Contextualizer(generator(srv), store_path, config=ContextualizeConfig(mode="batch", batch_poll_interval=0.02, show_progress=False))
        thread = threading.Thread(target=lambda: _swallow(first.contextualize, documents, chunks), daemon=True)
        thread.start()
        deadline = time.time() + 10
        while time.time() < deadline and not ContextStore(store_path).pending_batches(generator="anthropic", model=MODEL):
            time.sleep(0.02)
        pending = ContextStore(store_path).pending_batches(generator="anthropic", model=MODEL)
        assert len(pending) == 1
        # a new process (a new Contextualizer, fresh client) resumes once the batch ends
        srv.batch_hold.clear()
        second = Contextualizer(generator(srv), store_path, config=ContextualizeConfig(mode="batch", batch_poll_interval=0.02, show_progress=False))
        result = second.contextualize(documents, chunks)
        assert srv.stats()["batches"] == 1  # nothing submitted twice
        assert result.report.store_hits == len(chunks) and result.report.generated == 0
        assert not ContextStore(store_path).pending_batches(generator="anthropic", model=MODEL)


def _excerpt_words(text: str, words: int = 4) -> str:
    """The first words of a chunk, as the fake server quotes them in its answer."""
    return " ".join(text.replace("<", "").replace(">", "").split()[:words])


def _swallow(fn, *args):
    try:
        fn(*args)
    except Exception:
        pass


@pytest.mark.parametrize("mode", ["realtime", "batch"])
def test_grouped_mode_one_request_per_small_document_with_fallback(tmp_path, mode):
    # of each small document's grouped answer: chunk "1" is left out, "2" is empty, "3" has no
    # closing tag; only "0" is taken, the other three fall back to their own requests
    faults = dict(grouped_drop_ids={"1"}, grouped_empty_ids={"2"}, grouped_malform_ids={"3"})
    with FakeAnthropicServer(**faults) as srv:
        documents, chunks = make_corpus(big_docs=1, small_docs=3, chunks_per_doc=4)
        c = contextualizer(srv, tmp_path, grouped=True, mode=mode, batch_poll_interval=0.02)
        result = c.contextualize(documents, chunks)
        report = result.report
        assert all(c.context for c in result.chunks) and report.generated == len(chunks)
        assert report.grouped_requests == 3 and report.grouped_fallbacks == 9
        if mode == "realtime":  # 4 big-doc chunks + 3 grouped + 9 fallbacks
            assert len(message_requests(srv)) == 16
            grouped_bodies = [r.body for r in message_requests(srv) if '<chunk id="0">' in r.body["messages"][0]["content"][0]["text"]]
        else:  # the groups and the big document's first chunk, then its rest; fallbacks in realtime
            assert srv.stats()["batches"] == 2 and len(message_requests(srv)) == 9
            grouped_bodies = [
                q["params"] for r in srv.requests_to("/v1/messages/batches") if r.method == "POST"
                for q in r.body["requests"] if '<chunk id="0">' in q["params"]["messages"][0]["content"][0]["text"]
            ]
        assert len(grouped_bodies) == 3
        small = [ch for ch in result.chunks if ch.chunk.document_id != "doc0"]
        # each context: the structural header line, then the LLM's
        assert [ch.context.split("\n", 1)[1].startswith("Chunk 0 of the document") for ch in small] == [True, False, False, False] * 3
        again = contextualizer(srv, tmp_path, grouped=True).contextualize(documents, chunks)
        assert again.report.store_hits == len(chunks)


def test_oversized_document_is_windowed_never_an_error(tmp_path):
    with FakeAnthropicServer() as srv:
        text = " ".join(f"word{i}" for i in range(130_000))  # ~890k characters: past a 200k-token window
        doc = Document("huge", text)
        chunks = [Chunk("h0", "huge", text[:500], 0), Chunk("h1", "huge", text[600_000:600_500], 1)]
        result = contextualizer(srv, tmp_path).contextualize([doc], chunks)
        assert result.report.windowed_documents == 1 and all(c.context for c in result.chunks)
        for r in message_requests(srv):
            assert r.usage and r.usage["input_tokens"] + r.usage["cache_read_input_tokens"] + r.usage["cache_creation_input_tokens"] < 200_000
        assert srv.cache_writes_containing(text[:1000]) == 1  # the head is shared and cached once
        assert "1 documents windowed" in result.report.format()


def test_cache_miss_is_verified_and_warned_once(tmp_path):
    # the cache expires between requests (TTL ~10 ms; ~60 ms pass between a write becoming
    # readable and the response arriving): later chunks cannot read it
    with FakeAnthropicServer(latency_s=0.02, per_output_token_s=0.001, ttl_scale=0.01 / 300) as srv:
        documents, chunks = make_corpus(big_docs=1, small_docs=0, chunks_per_doc=4)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            report = contextualizer(srv, tmp_path, concurrency=1).contextualize(documents, chunks).report
        assert report.cache_misses == 3 and report.cache_read_share == 0.0
        assert sum("prompt cache not read" in str(w.message) for w in caught) == 1


def test_unknown_model_probes_caching_with_its_first_request(tmp_path):
    # a model missing from our table: the first request carries cache_control, its usage decides
    with FakeAnthropicServer() as srv:
        documents, chunks = make_corpus(big_docs=1, small_docs=1, chunks_per_doc=3)
        client = anthropic.Anthropic(api_key=srv.api_key, base_url=srv.url)
        gen = AnthropicContextGenerator("claude-future-9", client=client)
        report = Contextualizer(gen, tmp_path / "s.sqlite3", config=ContextualizeConfig(show_progress=False)).contextualize(documents, chunks).report
        assert report.cacheable_documents == 1 and report.cache_misses == 0  # the server's minimum is 1024
        small = [r.body for r in message_requests(srv) if documents[1].text in r.body["messages"][0]["content"][0]["text"]]
        marked = ["cache_control" in b["messages"][0]["content"][0] for b in small]
        assert sorted(marked) == [False, False, True]  # only the probe
        assert srv.cache_writes_containing(documents[0].text) == 1
        assert report.cost_usd() is None and "unknown" in report.format()


async def test_async_path_matches_sync(server, tmp_path):
    documents, chunks = make_corpus(big_docs=1, small_docs=1)
    async_client = anthropic.AsyncAnthropic(api_key=server.api_key, base_url=server.url)
    gen = AnthropicContextGenerator(MODEL, async_client=async_client)
    result = await Contextualizer(gen, tmp_path / "a.sqlite3", config=ContextualizeConfig(show_progress=False)).acontextualize(documents, chunks)
    sync = contextualizer(server, tmp_path).contextualize(documents, chunks)
    assert [c.context for c in result.chunks] == [c.context for c in sync.chunks]
    # the server's cache outlives a run: the second run (another store) reads what the first wrote
    assert server.cache_writes_containing(documents[0].text) == 1
    await async_client.close()


def test_structural_default_and_callable_generators(tmp_path):
    doc = Document("notes/setup.md", "# Setup\n\n## Linux\n\nRun make install.\n")
    chunk = Chunk("c0", doc.id, "Run make install.")
    report = Contextualizer(config=ContextualizeConfig(show_progress=False)).contextualize([doc], [chunk]).report
    assert report.generator == "structural (no LLM)" and not report.is_llm
    assert "no LLM" in report.format()
    seen = []
    gen = CallableContextGenerator(lambda d, c: seen.append(c.id) or f"about {d.id}", name="mine", model="m1")
    out = Contextualizer(gen, tmp_path / "c.sqlite3", config=ContextualizeConfig(show_progress=False)).contextualize([doc], [chunk])
    assert out.chunks[0].context == "From notes/setup.md, section: Setup > Linux.\nabout notes/setup.md" and seen == ["c0"]
    Contextualizer(gen, tmp_path / "c.sqlite3", config=ContextualizeConfig(show_progress=False)).contextualize([doc], [chunk])
    assert seen == ["c0"]


def test_bad_input(server, tmp_path, monkeypatch):
    c = contextualizer(server, tmp_path)
    doc = Document("d", "Some text here.")
    with pytest.raises(ValueError, match="empty but has chunks"):
        c.contextualize([Document("e", "   ")], [Chunk("x", "e", "text")])
    with pytest.raises(ValueError, match="looks binary"):
        c.contextualize([Document("b", "PNG\x00\x01\x02")], [Chunk("x", "b", "PNG")])
    with pytest.raises(ValueError, match="duplicate chunk id 'x'"):
        c.contextualize([doc], [Chunk("x", "d", "Some"), Chunk("x", "d", "text")])
    with pytest.raises(ValueError, match="not among the documents"):
        c.contextualize([doc], [Chunk("x", "nowhere", "Some")])
    with pytest.raises(TypeError, match="decode"):
        Document("bin", b"\xff\xd8\xff")  # type: ignore[arg-type]
    # a document with no chunks: counted, no request
    before = len(server.requests)
    result = c.contextualize([doc, Document("lonely", "nothing to do")], [Chunk("s", "d", "Some text")])
    assert result.report.documents_without_chunks == 1 and len(server.requests) == before + 1
    # a chunk not in its document: allowed and flagged
    with pytest.warns(UserWarning, match="do not occur verbatim"):
        flagged = c.contextualize([doc], [Chunk("odd", "d", "Text that is elsewhere.")])
    assert flagged.not_in_document == ["odd"] and flagged.report.chunks_not_in_document == 1
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(RuntimeError, match="ANTHROPIC_API_KEY") as info:
        AnthropicContextGenerator()
    assert "StructuralContextGenerator" in str(info.value)


def test_rejected_key_is_fatal_and_not_leaked(server, tmp_path):
    client = anthropic.Anthropic(api_key="sk-wrong-secret-123", base_url=server.url, max_retries=0)
    c = Contextualizer(AnthropicContextGenerator(MODEL, client=client), tmp_path / "k.sqlite3", config=ContextualizeConfig(show_progress=False))
    documents, chunks = make_corpus(big_docs=0, small_docs=1, chunks_per_doc=1)
    with pytest.raises(FatalGenerationError) as info:
        c.contextualize(documents, chunks)
    assert "ANTHROPIC_API_KEY" in str(info.value) and "sk-wrong-secret-123" not in str(info.value)


def test_malformed_response_fails_the_chunk_and_keeps_the_rest(server, tmp_path):
    server.malformed_next(times=1)
    documents, chunks = make_corpus(big_docs=0, small_docs=1, chunks_per_doc=3)
    c = contextualizer(server, tmp_path, concurrency=1)
    with pytest.raises(ContextualizationError) as info:
        c.contextualize(documents, chunks)
    assert len(info.value.failures) == 1
    assert len(ContextStore(tmp_path / "contexts.sqlite3")) == 2
    rerun = c.contextualize(documents, chunks)
    assert rerun.report.store_hits == 2 and rerun.report.generated == 1


def test_batches_are_split_within_the_limits(tmp_path):
    with FakeAnthropicServer(max_batch_requests=5) as srv:
        documents, chunks = make_corpus(big_docs=0, small_docs=3, chunks_per_doc=4)
        c = contextualizer(srv, tmp_path, mode="batch", batch_poll_interval=0.02, batch_max_requests=5)
        result = c.contextualize(documents, chunks)
        assert result.report.generated == 12 and srv.stats()["batches"] == 3  # 5 + 5 + 2
        sizes = sorted(len(r.body["requests"]) for r in srv.requests if r.path == "/v1/messages/batches" and r.method == "POST")
        assert sizes == [2, 5, 5]


def test_timeouts_are_retried_by_the_sdk(tmp_path):
    with FakeAnthropicServer() as srv:
        srv.hang_next(1.0, times=1)
        client = anthropic.Anthropic(api_key=srv.api_key, base_url=srv.url, max_retries=3, timeout=0.3)
        gen = AnthropicContextGenerator(MODEL, client=client)
        documents, chunks = make_corpus(big_docs=0, small_docs=1, chunks_per_doc=2)
        report = Contextualizer(gen, tmp_path / "t.sqlite3", config=ContextualizeConfig(concurrency=1, show_progress=False)).contextualize(documents, chunks).report
        assert report.generated == 2 and report.usage.retries == 1


def test_bedrock_and_vertex_clients_are_accepted():
    bedrock = anthropic.AnthropicBedrock(aws_region="us-east-1", aws_access_key="AKIAEXAMPLE", aws_secret_key="secret")
    gen = AnthropicContextGenerator("anthropic.claude-3-haiku-20240307-v1:0", client=bedrock)
    assert gen.info.cache_min_tokens == 2048 and gen.info.input_price == 0.25
    assert len(gen._client.middleware) == len(bedrock.middleware) + 1  # our guard, on a copy
    assert bedrock.middleware == ()  # the user's client is untouched
    doc = Document("d", "x " * 6000)
    params = gen.build_request(doc, Chunk("c", "d", "x x")).params
    assert params["model"] == "anthropic.claude-3-haiku-20240307-v1:0"
    vertex = anthropic.AnthropicVertex(region="us-east5", project_id="p", access_token="t")
    assert AnthropicContextGenerator("claude-3-haiku@20240307", client=vertex).info.cache_min_tokens == 2048


async def test_sync_calls_use_the_sync_client_async_calls_the_async_one(server, tmp_path):
    documents, chunks = make_corpus(big_docs=0, small_docs=1, chunks_per_doc=2)
    sync_client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url)
    async_client = anthropic.AsyncAnthropic(api_key=server.api_key, base_url=server.url)
    gen = AnthropicContextGenerator(MODEL, client=sync_client, async_client=async_client)
    # the sync entry point runs on a private loop (in a thread here, as a loop is running):
    # an async client's connections would die with that loop, so the sync client is used
    Contextualizer(gen, tmp_path / "a.sqlite3", config=ContextualizeConfig(show_progress=False)).contextualize(documents, chunks)
    Contextualizer(gen, tmp_path / "b.sqlite3", config=ContextualizeConfig(show_progress=False)).contextualize(documents, chunks)
    await Contextualizer(gen, tmp_path / "c.sqlite3", config=ContextualizeConfig(show_progress=False)).acontextualize(documents, chunks)
    kinds = [r.headers.get("x-stainless-async") for r in message_requests(server)]
    assert kinds[:4] == ["false"] * 4 and all(k.startswith("async") for k in kinds[4:]) and len(kinds) == 6
    await async_client.close()


def test_the_same_document_twice_is_situated_once_and_a_clash_is_an_error():
    doc = Document("d", "# Title\nRevenue grew by 3%.")
    result = Contextualizer(config=ContextualizeConfig(show_progress=False)).contextualize([doc, Document("d", doc.text)], [Chunk("c", "d", "Revenue grew by 3%.")])
    assert result.report.documents == 1 and result.chunks[0].context
    with pytest.raises(ValueError, match="two different documents share the id 'd'"):
        Contextualizer(config=ContextualizeConfig(show_progress=False)).contextualize([doc, Document("d", "other text")], [Chunk("c", "d", "Revenue")])


def test_build_request_takes_the_batch_ttl(server):
    gen = generator(server)  # the 5-minute TTL
    doc = Document("d", "word " * 12_000)  # well past the 2048-token minimum
    chunk = Chunk("c", "d", "word word")
    assert gen.build_request(doc, chunk).params["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    one_hour = gen.build_request(doc, chunk, cache_ttl="1h").params["messages"][0]["content"][0]["cache_control"]
    assert one_hour == {"type": "ephemeral", "ttl": "1h"}


def test_three_sync_runs_with_an_async_only_client(server, tmp_path):
    # every sync contextualize() runs on the Contextualizer's one background loop: the async
    # client's connections stay valid from one call to the next (max_retries=0: no retry hides it)
    client = anthropic.AsyncAnthropic(api_key=server.api_key, base_url=server.url, max_retries=0)
    c = Contextualizer(AnthropicContextGenerator(MODEL, async_client=client), tmp_path / "s.sqlite3", config=ContextualizeConfig(show_progress=False))
    for seed in range(3):
        documents, chunks = make_corpus(big_docs=0, small_docs=1, chunks_per_doc=2, seed=seed)
        documents = [Document(f"run{seed}", documents[0].text)]
        chunks = [Chunk(f"run{seed}_{ch.index}", f"run{seed}", ch.text, ch.index) for ch in chunks]
        result = c.contextualize(documents, chunks)
        assert result.report.generated == 2 and all(ch.context for ch in result.chunks)
    kinds = [r.headers.get("x-stainless-async") for r in message_requests(server)]
    assert len(kinds) == 6 and all(k.startswith("async") for k in kinds)
    # inside a running loop (a notebook) the same background loop serves the call
    import asyncio

    async def in_a_notebook():
        documents, chunks = make_corpus(big_docs=0, small_docs=1, chunks_per_doc=2, seed=9)
        return c.contextualize(documents, chunks)

    assert asyncio.run(in_a_notebook()).report.generated == 2
    c.close()


def test_a_blank_context_is_never_stored(tmp_path):
    doc = Document("d", "Invoices go out monthly. Support answers email.")
    chunks = [Chunk("a", "d", "Invoices go out monthly."), Chunk("b", "d", "Support answers email.")]
    answers = {"a": "About invoices.", "b": "   "}
    calls = []

    def situate(document, chunk):
        calls.append(chunk.id)
        return answers[chunk.id]

    store = tmp_path / "s.sqlite3"
    c = Contextualizer(CallableContextGenerator(situate, name="mine"), store, config=ContextualizeConfig(show_progress=False, structural_header=False))
    with pytest.raises(ContextualizationError, match="1 of 2") as info:
        c.contextualize([doc], chunks)
    assert list(info.value.failures) == ["b"] and "no text" in info.value.failures["b"]
    assert len(ContextStore(store)) == 1
    # a blank row (as an earlier version stored) counts as missing: generated again and replaced
    key = c._keys({"d": doc}, chunks)["b"]
    with ContextStore(store) as s:
        s.put(key, "", generator="mine", model="")
    answers["b"] = "About support."
    calls.clear()
    result = c.contextualize([doc], chunks)
    assert calls == ["b"] and result.report.store_hits == 1
    assert [ch.context for ch in result.chunks] == ["About invoices.", "About support."]
    assert ContextStore(store).get_many([key]) == {key: "About support."}


@pytest.mark.parametrize("mode", ["realtime", "batch"])
def test_chunks_with_the_same_text_are_generated_once(tmp_path, mode):
    text = "Revenue grew by 3%. Costs were flat. Revenue grew by 3%. Margins improved."
    doc = Document("d", text)
    chunks = [Chunk("c0", "d", "Revenue grew by 3%.", 0), Chunk("c1", "d", "Costs were flat.", 1),
              Chunk("c2", "d", "Revenue grew by 3%.", 2), Chunk("c3", "d", "Margins improved.", 3)]
    with FakeAnthropicServer() as srv:
        c = contextualizer(srv, tmp_path, mode=mode, batch_poll_interval=0.02)
        result = c.contextualize([doc], chunks)
        if mode == "realtime":
            assert len(message_requests(srv)) == 3  # one per store key
        else:  # one request per custom_id: no "duplicate custom_id" rejection
            (batch,) = [r for r in srv.requests_to("/v1/messages/batches") if r.method == "POST"]
            assert batch.status == 200 and len(batch.body["requests"]) == 3
    contexts = [ch.context for ch in result.chunks]
    assert all(contexts) and contexts[0] == contexts[2] and len(set(contexts)) == 3
    report = result.report
    assert report.generated == 3 and report.repeated_chunks == 1 and report.store_hits == 0
    assert "1 repeated chunks" in report.format()
