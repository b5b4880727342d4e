"""The fake Anthropic server itself, driven by the real `anthropic` SDK.

These tests pin down the emulation that the context-generator tests and the ingestion benchmark
rely on: the wire format, prompt-caching accounting (writes, reads, minimums, visibility, TTLs),
faults as the SDK's retry logic sees them, grouped answers, and Message Batches.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from tests.fakes.anthropic_server import FakeAnthropicServer, count_tokens

MODEL = "claude-sonnet-4-5"  # 1024-token cache minimum
HAIKU = "claude-haiku-4-5"  # 4096-token cache minimum
CHUNK_PROMPT = (
    "Here is the chunk we want to situate within the whole document\n<chunk>\n{chunk}\n</chunk>\n"
    "Please give a short succinct context to situate this chunk within the overall document for "
    "the purposes of improving search retrieval of the chunk.\n"
    "Answer only with the succinct context and nothing else."
)


def make_doc(tokens: int, seed: str = "alpha") -> str:
    """A document of about `tokens` fake tokens whose first words start with `seed`."""
    words = [f"{seed}{i}" for i in range(tokens)]
    text = " ".join(words)
    return text[: tokens * 4]


def doc_block(doc: str, ttl: str | None = None) -> dict[str, Any]:
    cc: dict[str, Any] = {"type": "ephemeral"}
    if ttl:
        cc["ttl"] = ttl
    return {"type": "text", "text": f"<document>\n{doc}\n</document>", "cache_control": cc}


def situate(
    client: anthropic.Anthropic, doc: str, chunk: str, *, model: str = MODEL, ttl: str | None = None, **kw: Any
) -> anthropic.types.Message:
    return client.messages.create(
        model=model,
        max_tokens=kw.pop("max_tokens", 300),
        messages=[
            {
                "role": "user",
                "content": [doc_block(doc, ttl), {"type": "text", "text": CHUNK_PROMPT.format(chunk=chunk)}],
            }
        ],
        **kw,
    )


def prompt_tokens(doc: str, chunk: str) -> tuple[int, int]:
    """(document block tokens, chunk block tokens) under the fake's tokenizer."""
    return count_tokens(f"<document>\n{doc}\n</document>"), count_tokens(CHUNK_PROMPT.format(chunk=chunk))


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as srv:
        yield srv


def client_for(server: FakeAnthropicServer, **kw: Any) -> anthropic.Anthropic:
    kw.setdefault("max_retries", 0)
    return anthropic.Anthropic(api_key=server.api_key, base_url=server.url, **kw)


def raw_post(server: FakeAnthropicServer, path: str, body: Any, headers: dict[str, str]) -> tuple[int, Any]:
    req = urllib.request.Request(server.url + path, data=json.dumps(body).encode(), method="POST")
    for k, v in headers.items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


# -- basics ---------------------------------------------------------------------------------------


def test_count_tokens_is_ceil_chars_over_four() -> None:
    assert [count_tokens(t) for t in ("", "a", "abcd", "abcde", "é" * 8)] == [0, 1, 1, 2, 2]


def test_basic_message_shape_and_usage(server: FakeAnthropicServer) -> None:
    client = client_for(server)
    doc = "Acme Corp reported strong results in the second quarter of the year. " * 3
    chunk = "Revenue grew by 3% over the previous quarter."
    raw = client.messages.with_raw_response.create(
        model=MODEL,
        max_tokens=200,
        system="You situate chunks.",
        messages=[{"role": "user", "content": f"<document>\n{doc}\n</document>\n" + CHUNK_PROMPT.format(chunk=chunk)}],
    )
    data = json.loads(raw.http_response.text)
    assert set(data) == {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
    assert data["id"].startswith("msg_") and data["type"] == "message" and data["role"] == "assistant"
    assert data["model"] == MODEL and data["stop_reason"] == "end_turn" and data["stop_sequence"] is None
    assert raw.http_response.headers["request-id"].startswith("req_")
    msg = raw.parse()
    text = msg.content[0].text
    assert msg.content[0].type == "text"
    assert "Acme Corp reported strong results" in text and "Revenue grew by 3%" in text
    assert 50 <= count_tokens(text) <= 100
    u = msg.usage
    user_text = f"<document>\n{doc}\n</document>\n" + CHUNK_PROMPT.format(chunk=chunk)
    assert u.input_tokens == count_tokens("You situate chunks.") + count_tokens(user_text)
    assert u.output_tokens == count_tokens(text)
    assert u.cache_creation_input_tokens == 0 and u.cache_read_input_tokens == 0
    assert u.cache_creation.ephemeral_5m_input_tokens == 0 and u.cache_creation.ephemeral_1h_input_tokens == 0
    assert u.service_tier == "standard"
    # deterministic
    assert client.messages.create(**json.loads(json.dumps(server.requests[0].body))).content[0].text == text
    rec = server.requests_to("/v1/messages")[0]
    assert "authorization" not in rec.headers and "x-api-key" not in rec.headers
    assert rec.headers["anthropic-version"] and rec.status == 200 and rec.usage["output_tokens"] == u.output_tokens
    stats = server.stats()
    assert stats["requests"] == stats["messages"] == 2 and stats["output_tokens"] == 2 * u.output_tokens


def test_count_tokens_endpoint(server: FakeAnthropicServer) -> None:
    res = client_for(server).messages.count_tokens(
        model=MODEL, system="abcdefgh", messages=[{"role": "user", "content": "x" * 10}]
    )
    assert res.input_tokens == 2 + 3


def test_sampling_parameters_are_rejected(server: FakeAnthropicServer) -> None:
    client = client_for(server)
    for name, value in (("temperature", 0.0), ("top_p", 0.9), ("top_k", 5)):
        with pytest.raises(anthropic.BadRequestError, match="sampling parameters are not supported") as info:
            client.messages.create(
                model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}], extra_body={name: value}
            )
        assert info.value.type == "invalid_request_error"
    assert server.stats()["messages"] == 0 and server.stats()["invalid"] == 3


def test_validation_errors(server: FakeAnthropicServer) -> None:
    client = client_for(server)
    user = [{"role": "user", "content": "hi"}]
    with pytest.raises(anthropic.BadRequestError, match="streaming"):
        client.messages.create(model=MODEL, max_tokens=10, messages=user, extra_body={"stream": True})
    with pytest.raises(anthropic.BadRequestError, match="Extra inputs"):
        client.messages.create(model=MODEL, max_tokens=10, messages=user, extra_body={"temprature": 1})
    with pytest.raises(anthropic.BadRequestError, match="non-empty"):
        empty = [{"role": "user", "content": [{"type": "text", "text": ""}]}]
        client.messages.create(model=MODEL, max_tokens=10, messages=empty)
    five = [{"type": "text", "text": f"block {i}", "cache_control": {"type": "ephemeral"}} for i in range(5)]
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4 blocks with cache_control"):
        client.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": five}])
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
        client.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x" * 800_004}])


def test_authentication(server: FakeAnthropicServer) -> None:
    with pytest.raises(anthropic.AuthenticationError) as info:
        anthropic.Anthropic(api_key="wrong", base_url=server.url, max_retries=0).messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert info.value.type == "authentication_error"
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    ok_headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    assert raw_post(server, "/v1/messages", body, {**ok_headers, "x-api-key": "test-key"})[0] == 200
    status, err = raw_post(server, "/v1/messages", body, ok_headers)
    assert status == 401 and err["type"] == "error" and err["error"]["type"] == "authentication_error"
    status, err = raw_post(server, "/v1/messages", body, {"content-type": "application/json", "x-api-key": "test-key"})
    assert status == 400 and "anthropic-version" in err["error"]["message"]


# -- prompt caching ------------------------------------------------------------------------------


def test_cache_write_then_read(server: FakeAnthropicServer) -> None:
    client = client_for(server)
    doc = make_doc(2000)
    first = situate(client, doc, "the first chunk")
    dtok, ctok = prompt_tokens(doc, "the first chunk")
    assert first.usage.cache_creation_input_tokens == dtok
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == dtok
    assert first.usage.cache_read_input_tokens == 0 and first.usage.input_tokens == ctok
    second = situate(client, doc, "another chunk of it")
    assert second.usage.cache_read_input_tokens == dtok
    assert second.usage.cache_creation_input_tokens == 0
    assert second.usage.input_tokens == prompt_tokens(doc, "another chunk of it")[1]
    stats = server.stats()
    assert stats["cache_write_tokens"] == dtok and stats["cache_read_tokens"] == dtok
    assert list(stats["writes_per_prefix"].values()) == [1]
    assert server.cache_writes_containing("alpha0 alpha1") == 1
    # another model does not share the entry
    assert situate(client, doc, "x", model="claude-opus-4-1").usage.cache_creation_input_tokens == dtok


def test_prefix_below_the_model_minimum_is_not_cached(server: FakeAnthropicServer) -> None:
    client = client_for(server)
    small = make_doc(900)  # under 1024
    for _ in range(2):
        u = situate(client, small, "c").usage
        assert u.cache_creation_input_tokens == 0 and u.cache_read_input_tokens == 0
        assert u.input_tokens == sum(prompt_tokens(small, "c"))
    mid = make_doc(2000, seed="beta")  # cacheable on Sonnet, not on Haiku 4.5 (4096)
    for _ in range(2):
        u = situate(client, mid, "c", model=HAIKU).usage
        assert u.cache_creation_input_tokens == 0 and u.cache_read_input_tokens == 0
    assert server.min_cache_tokens("claude-3-5-haiku-20241022") == 2048
    assert server.min_cache_tokens("claude-3-haiku-20240307") == 2048
    assert server.min_cache_tokens("claude-opus-4-1") == 1024 and server.min_cache_tokens("other") == 1024
    assert server.stats()["cache_write_tokens"] == 0 and server.stats()["writes_per_prefix"] == {}


def test_min_cache_tokens_override() -> None:
    with FakeAnthropicServer(min_cache_tokens={"claude-haiku-4-5": 100}) as srv:
        assert situate(client_for(srv), make_doc(200), "c", model=HAIKU).usage.cache_creation_input_tokens > 0
    with FakeAnthropicServer(min_cache_tokens=5000) as srv:
        assert srv.min_cache_tokens(MODEL) == 5000
        assert situate(client_for(srv), make_doc(2000), "c").usage.cache_creation_input_tokens == 0


def test_concurrent_first_requests_both_write() -> None:
    with FakeAnthropicServer(latency_s=0.2) as srv:
        client = client_for(srv)
        doc = make_doc(1500)
        usages: list[Any] = []
        barrier = threading.Barrier(2)

        def go(chunk: str) -> None:
            barrier.wait()
            usages.append(situate(client, doc, chunk).usage)

        threads = [threading.Thread(target=go, args=(c,)) for c in ("one", "two")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        dtok = prompt_tokens(doc, "one")[0]
        assert [u.cache_creation_input_tokens for u in usages] == [dtok, dtok]
        assert [u.cache_read_input_tokens for u in usages] == [0, 0]
        assert list(srv.stats()["writes_per_prefix"].values()) == [2]
        assert srv.stats()["max_in_flight"] == 2
        third = situate(client, doc, "three").usage
        assert third.cache_read_input_tokens == dtok and third.cache_creation_input_tokens == 0


def test_entry_becomes_visible_when_the_writing_response_starts() -> None:
    # latency 0.2 s, then 0.005 s per output token (~0.4 s): a request sent 0.3 s after the first
    # arrives after the first response started (cache visible) but before it finished.
    with FakeAnthropicServer(latency_s=0.2, per_output_token_s=0.005) as srv:
        client = client_for(srv)
        doc = make_doc(1500)
        result: dict[str, Any] = {}

        def first() -> None:
            result["first"] = situate(client, doc, "one")
            result["done"] = time.monotonic()

        t = threading.Thread(target=first)
        t.start()
        time.sleep(0.3)
        second = situate(client, doc, "two")
        t.join()
        arrivals = [r.arrival for r in srv.requests_to("/v1/messages")]
        assert arrivals[1] < result["done"]  # the second arrived while the first was still "generating"
        assert result["first"].usage.cache_creation_input_tokens > 0
        assert second.usage.cache_read_input_tokens == result["first"].usage.cache_creation_input_tokens


def test_ttl_expiry_with_ttl_scale() -> None:
    with FakeAnthropicServer(ttl_scale=0.001) as srv:  # 5m -> 0.3 s
        client = client_for(srv)
        doc = make_doc(1500)
        assert situate(client, doc, "a").usage.cache_creation_input_tokens > 0
        assert situate(client, doc, "b").usage.cache_read_input_tokens > 0
        time.sleep(0.45)
        u = situate(client, doc, "c").usage
        assert u.cache_read_input_tokens == 0 and u.cache_creation_input_tokens > 0
        assert list(srv.stats()["writes_per_prefix"].values()) == [2]


def test_ttl_refreshes_on_read_and_1h_ttl() -> None:
    now = [0.0]
    with FakeAnthropicServer(clock=lambda: now[0]) as srv:
        client = client_for(srv)
        doc = make_doc(1500)
        dtok = prompt_tokens(doc, "a")[0]
        assert situate(client, doc, "a").usage.cache_creation_input_tokens == dtok
        now[0] = 290.0
        assert situate(client, doc, "b").usage.cache_read_input_tokens == dtok  # refreshed to 590
        now[0] = 580.0
        assert situate(client, doc, "c").usage.cache_read_input_tokens == dtok
        now[0] = 881.0
        assert situate(client, doc, "d").usage.cache_creation_input_tokens == dtok  # expired
        # a 1h entry is booked under ephemeral_1h_input_tokens and outlives 5 minutes
        doc2 = make_doc(1500, seed="gamma")
        u = situate(client, doc2, "a", ttl="1h").usage
        assert u.cache_creation.ephemeral_1h_input_tokens == dtok and u.cache_creation.ephemeral_5m_input_tokens == 0
        now[0] += 3000.0
        assert situate(client, doc2, "b", ttl="1h").usage.cache_read_input_tokens == dtok
        assert srv.stats()["cache_write_1h_tokens"] == dtok


def test_multiple_breakpoints_split_by_ttl_and_read_the_longest_live_prefix(server: FakeAnthropicServer) -> None:
    client = client_for(server)
    system_text = "S" * 4800  # 1200 tokens
    system = [{"type": "text", "text": system_text, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    doc = make_doc(1000)
    dtok = prompt_tokens(doc, "x")[0]

    def ask(d: str) -> Any:
        return client.messages.create(
            model=MODEL,
            max_tokens=100,
            system=system,
            messages=[{"role": "user", "content": [doc_block(d), {"type": "text", "text": "<chunk>x</chunk>"}]}],
        ).usage

    u = ask(doc)
    assert u.cache_creation.ephemeral_1h_input_tokens == 1200 and u.cache_creation.ephemeral_5m_input_tokens == dtok
    u = ask(doc)
    assert u.cache_read_input_tokens == 1200 + dtok and u.cache_creation_input_tokens == 0
    u = ask(make_doc(1000, seed="delta"))  # the system prefix is read, the new document written
    assert u.cache_read_input_tokens == 1200 and u.cache_creation.ephemeral_5m_input_tokens == dtok
    with pytest.raises(anthropic.BadRequestError, match="ttl='1h' must not come after"):
        client.messages.create(
            model=MODEL,
            max_tokens=10,
            system=[{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
            messages=[{"role": "user", "content": [doc_block("d", ttl="1h")]}],
        )


# -- faults --------------------------------------------------------------------------------------


def test_fail_next_429_is_retried_by_the_sdk(server: FakeAnthropicServer) -> None:
    server.fail_next(429, headers={"retry-after-ms": "1"})
    msg = situate(client_for(server, max_retries=2), "short doc", "c")
    assert msg.stop_reason == "end_turn"
    reqs = server.requests_to("/v1/messages")
    assert [r.status for r in reqs] == [429, 200]
    assert [r.headers["x-stainless-retry-count"] for r in reqs] == ["0", "1"]
    assert server.stats()["faults"] == 1 and server.stats()["fault_statuses"] == {429: 1}


def test_fail_next_statuses_and_exhausted_retries(server: FakeAnthropicServer) -> None:
    client = client_for(server, max_retries=1)
    server.fail_next(529, times=2)
    with pytest.raises(anthropic.InternalServerError) as info:
        situate(client, "d", "c")
    assert info.value.status_code == 529 and info.value.type == "overloaded_error"
    server.fail_next(500)
    assert situate(client, "d", "c").usage.output_tokens > 0
    server.fail_next(400, body={"type": "error", "error": {"type": "invalid_request_error", "message": "nope"}})
    with pytest.raises(anthropic.BadRequestError, match="nope"):
        situate(client, "d", "c")
    assert server.stats()["fault_statuses"] == {529: 2, 500: 1, 400: 1}


def test_spend_limit(server: FakeAnthropicServer) -> None:
    server.spend_limit()
    with pytest.raises(anthropic.RateLimitError) as info:
        situate(client_for(server, max_retries=2), "d", "c")
    assert "spend limit" in info.value.message and info.value.type == "rate_limit_error"
    assert info.value.error_code == "enforced_spend_limit_reached"
    assert server.stats()["faults"] == 3  # the SDK retried twice
    server.spend_limit(False)
    assert situate(client_for(server), "d", "c").stop_reason == "end_turn"


def test_malformed_body_makes_the_sdk_raise(server: FakeAnthropicServer) -> None:
    server.malformed_next()
    with pytest.raises(ValueError):  # json.JSONDecodeError; the SDK does not retry it
        situate(client_for(server, max_retries=2), "d", "c")
    assert len(server.requests_to("/v1/messages")) == 1 and server.stats()["faults"] == 1


def test_hang_and_client_timeout(server: FakeAnthropicServer) -> None:
    server.hang_next(2.0, times=2)
    client = client_for(server, max_retries=1, timeout=0.2)
    with pytest.raises(anthropic.APITimeoutError):
        situate(client, "d", "c")
    assert len(server.requests_to("/v1/messages")) == 2 and server.stats()["hangs"] == 2
    assert situate(client, "d", "c").stop_reason == "end_turn"


def test_fail_rate(server: FakeAnthropicServer) -> None:
    server.fail_rate(0.5, seed=1)
    client = client_for(server, max_retries=10)
    for i in range(10):
        situate(client, "d", f"c{i}")
    stats = server.stats()
    assert stats["messages"] == 10 and stats["faults"] > 0 and stats["requests"] == 10 + stats["faults"]
    assert set(stats["fault_statuses"]) <= {429, 529, 500}


async def test_async_client_concurrency() -> None:
    with FakeAnthropicServer(latency_s=0.1) as srv:
        client = anthropic.AsyncAnthropic(api_key=srv.api_key, base_url=srv.url, max_retries=0)
        doc = make_doc(1500)
        def ask(i: int) -> Any:
            content = [doc_block(doc), {"type": "text", "text": f"<chunk>{i}</chunk>"}]
            return client.messages.create(model=MODEL, max_tokens=200, messages=[{"role": "user", "content": content}])

        first = await ask(0)
        assert first.usage.cache_creation_input_tokens > 0
        rest = await asyncio.gather(*(ask(i) for i in range(1, 9)))
        assert all(m.usage.cache_read_input_tokens == first.usage.cache_creation_input_tokens for m in rest)
        assert srv.stats()["max_in_flight"] >= 4
        await client.close()


# -- answers -------------------------------------------------------------------------------------


GROUPED_DOC = (
    '<chunk id="c0">The first chunk talks about revenue.</chunk>\n'
    '<chunk id="c1">The second chunk covers headcount numbers.</chunk>\n'
    '<chunk id="c2">The third chunk is about new plants.</chunk>'
)


def grouped(client: anthropic.Anthropic, max_tokens: int = 1000) -> anthropic.types.Message:
    return client.messages.create(
        model=MODEL,
        max_tokens=max_tokens,
        messages=[
            {
                "role": "user",
                "content": [
                    doc_block(GROUPED_DOC),
                    {"type": "text", "text": "Situate every chunk; answer in <contexts>."},
                ],
            }
        ],
    )


def test_grouped_answers_and_faults(server: FakeAnthropicServer) -> None:
    client = client_for(server)
    text = grouped(client).content[0].text
    lines = text.splitlines()
    assert lines[0] == "<contexts>" and lines[-1] == "</contexts>" and len(lines) == 5
    for i, line in enumerate(lines[1:-1]):
        assert line.startswith(f'<context id="c{i}">') and line.endswith("</context>")
        inner = line[len(f'<context id="c{i}">') : -len("</context>")]
        assert 30 <= count_tokens(inner) <= 60
    assert "The second chunk covers headcount" in lines[2]
    server.grouped_drop_ids.add("c1")
    server.grouped_malform_ids.add("c2")
    server.grouped_empty_ids.add("c0")
    lines = grouped(client).content[0].text.splitlines()
    assert lines[1] == '<context id="c0"></context>'
    assert lines[2].startswith('<context id="c2">') and "</context>" not in lines[2]
    assert not any('id="c1"' in line for line in lines)
    short = grouped(client, max_tokens=20)
    assert short.stop_reason == "max_tokens" and short.usage.output_tokens == 20


def test_stop_sequences_and_prefill(server: FakeAnthropicServer) -> None:
    client = client_for(server)
    msg = client.messages.create(
        model=MODEL,
        max_tokens=100,
        stop_sequences=["covers"],
        messages=[{"role": "user", "content": "<document>d</document><chunk>c</chunk>"}],
    )
    assert msg.stop_reason == "stop_sequence" and msg.stop_sequence == "covers"
    assert msg.content[0].text.endswith("and ")
    msg = client.messages.create(
        model=MODEL,
        max_tokens=100,
        messages=[
            {"role": "user", "content": "<document>d</document><chunk>c</chunk>"},
            {"role": "assistant", "content": "This chunk is"},
        ],
    )
    assert msg.content[0].text.startswith(" from the document")


# -- message batches -----------------------------------------------------------------------------


def wait_ended(client: anthropic.Anthropic, batch_id: str, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        batch = client.messages.batches.retrieve(batch_id)
        if batch.processing_status == "ended":
            return batch
        assert time.monotonic() < deadline, "batch did not end"
        time.sleep(0.02)


def batch_request(custom_id: str, doc: str, chunk: str, **extra: Any) -> dict[str, Any]:
    return {
        "custom_id": custom_id,
        "params": {
            "model": MODEL,
            "max_tokens": 300,
            "messages": [
                {
                    "role": "user",
                    "content": [doc_block(doc), {"type": "text", "text": CHUNK_PROMPT.format(chunk=chunk)}],
                }
            ],
            **extra,
        },
    }


def test_batch_lifecycle_and_results(server: FakeAnthropicServer) -> None:
    client = client_for(server)
    doc = make_doc(1500)
    dtok = prompt_tokens(doc, "c")[0]
    requests = [batch_request(f"doc1_chunk{i}", doc, f"chunk number {i}") for i in range(3)]
    requests.append(batch_request("bad-one", doc, "x", temperature=0.0))
    created = client.messages.batches.create(requests=requests)
    assert created.id.startswith("msgbatch_") and created.type == "message_batch"
    assert created.processing_status == "in_progress" and created.results_url is None
    assert created.request_counts.processing == 4 and created.ended_at is None
    batch = wait_ended(client, created.id)
    assert batch.results_url == f"{server.url}/v1/messages/batches/{batch.id}/results"
    assert batch.ended_at is not None
    counts = batch.request_counts
    assert (counts.processing, counts.succeeded, counts.errored, counts.canceled) == (0, 3, 1, 0)
    results = {r.custom_id: r.result for r in client.messages.batches.results(batch.id)}
    assert list(results) == ["doc1_chunk0", "doc1_chunk1", "doc1_chunk2", "bad-one"]
    first, *later = (results[f"doc1_chunk{i}"] for i in range(3))
    assert first.type == "succeeded" and first.message.usage.service_tier == "batch"
    assert first.message.usage.cache_creation_input_tokens == dtok
    assert all(r.type == "succeeded" and r.message.usage.cache_read_input_tokens == dtok for r in later)
    assert "chunk number 1" in later[0].message.content[0].text
    assert results["bad-one"].type == "errored"
    assert results["bad-one"].error.error.type == "invalid_request_error"
    stats = server.stats()
    assert stats["batch_messages"] == 3 and stats["by_tier"]["batch"]["cache_read_tokens"] == 2 * dtok
    assert stats["by_tier"]["standard"]["input_tokens"] == 0
    assert [b.id for b in client.messages.batches.list()] == [batch.id]


def test_batch_hold_survives_the_client(server: FakeAnthropicServer) -> None:
    server.batch_hold.set()
    first_client = client_for(server)
    created = first_client.messages.batches.create(requests=[batch_request("a", "doc", "c")])
    first_client.close()  # "the process dies"
    time.sleep(0.05)
    later_client = client_for(server)
    assert later_client.messages.batches.retrieve(created.id).processing_status == "in_progress"
    with pytest.raises(anthropic.AnthropicError, match="results_url"):
        list(later_client.messages.batches.results(created.id))
    server.batch_hold.clear()
    assert wait_ended(later_client, created.id).request_counts.succeeded == 1
    assert [r.result.type for r in later_client.messages.batches.results(created.id)] == ["succeeded"]


def test_batch_cancel(server: FakeAnthropicServer) -> None:
    server.batch_hold.set()
    client = client_for(server)
    created = client.messages.batches.create(requests=[batch_request(f"r{i}", "doc", "c") for i in range(3)])
    assert client.messages.batches.cancel(created.id).processing_status == "canceling"
    batch = wait_ended(client, created.id)
    assert batch.request_counts.canceled == 3 and batch.cancel_initiated_at is not None
    assert {r.result.type for r in client.messages.batches.results(created.id)} == {"canceled"}


def test_batch_validation() -> None:
    with FakeAnthropicServer(max_batch_requests=3, max_batch_bytes=20_000) as srv:
        client = client_for(srv)
        with pytest.raises(anthropic.BadRequestError, match="custom_id"):
            client.messages.batches.create(requests=[batch_request("has space", "d", "c")])
        with pytest.raises(anthropic.BadRequestError, match="custom_id"):
            client.messages.batches.create(requests=[batch_request("x" * 65, "d", "c")])
        with pytest.raises(anthropic.BadRequestError, match="unique"):
            client.messages.batches.create(requests=[batch_request("a", "d", "c"), batch_request("a", "d", "c")])
        with pytest.raises(anthropic.BadRequestError, match="at most 3"):
            client.messages.batches.create(requests=[batch_request(f"r{i}", "d", "c") for i in range(4)])
        with pytest.raises(anthropic.APIStatusError) as info:
            client.messages.batches.create(requests=[batch_request("big", "x" * 30_000, "c")])
        assert info.value.status_code == 413
        with pytest.raises(anthropic.NotFoundError):
            client.messages.batches.retrieve("msgbatch_nope")
        assert srv.stats()["batches"] == 0
