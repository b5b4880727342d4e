"""Transient API errors with whatever client the user passes: the `Contextualizer` retries a chunk
whose failure is transient (429, 5xx, overloaded, connection reset, timeout) in later rounds, so
one run completes; non-transient errors still fail their chunk at once.

Every case runs the real SDK (or framework client) against the loopback Anthropic server, which
answers a seeded random share of requests with 429 / 500 / 529; the server counts what was paid.
"""

from __future__ import annotations

import asyncio
import random

import anthropic
import pytest

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.contextualize.contextualizer import ContextualizationError, Contextualizer
from contextual_retrieval_core.generators import AnthropicContextGenerator
from contextual_retrieval_core.generators.base import GenerationError, TransientGenerationError, is_transient
from contextual_retrieval_core.generators.callable import CallableContextGenerator
from contextual_retrieval_core.store.context_store import ContextStore
from tests.fakes.anthropic_server import FakeAnthropicServer

MODEL = "claude-haiku-4-5"
_WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega", "parser", "index", "token", "vector", "cache", "store", "query", "shard", "lease"]


def corpus(big: int, small: int, per_big: int, per_small: int, seed: int = 1) -> tuple[list[Document], list[Chunk]]:
    """`big` documents over the cache minimum (haiku 4.5: 4096 tokens) and `small` under it."""
    rng = random.Random(seed)
    documents, chunks = [], []
    for d in range(big + small):
        n, size = (per_big, 26_000) if d < big else (per_small, 2_000)
        text = f"document {d}: " + " ".join(rng.choices(_WORDS, k=size // 6))
        doc = Document(f"doc{d}", text)
        documents.append(doc)
        step = len(text) // n
        for i in range(n):
            chunks.append(Chunk(f"doc{d}-c{i}", doc.id, text[i * step : (i + 1) * step].strip(), i))
    return documents, chunks


def _direct(server: FakeAnthropicServer):
    # the user's own client, with the SDK's default retries (2)
    return AnthropicContextGenerator(MODEL, client=anthropic.Anthropic(api_key=server.api_key, base_url=server.url))


def _langchain(server: FakeAnthropicServer):
    from langchain_anthropic import ChatAnthropic

    from contextual_retrieval_langchain.chat import chat_model_generator

    return chat_model_generator(ChatAnthropic(model=MODEL, api_key=server.api_key, base_url=server.url, max_tokens=300))


def _langchain_uncached(server: FakeAnthropicServer):
    # ChatAnthropic through `invoke` like any other chat model: its SDK errors reach the run raw
    from langchain_anthropic import ChatAnthropic

    from contextual_retrieval_langchain.chat import chat_model_generator

    llm = ChatAnthropic(model=MODEL, api_key=server.api_key, base_url=server.url, max_tokens=300)
    return chat_model_generator(llm, prompt_caching=False)


def _llamaindex(server: FakeAnthropicServer):
    from llama_index.llms.anthropic import Anthropic

    from contextual_retrieval_llamaindex.llm import llm_context_generator

    return llm_context_generator(Anthropic(model=MODEL, api_key=server.api_key, base_url=server.url, max_retries=2))


CLIENTS = {"anthropic": _direct, "langchain": _langchain, "llamaindex": _llamaindex}


@pytest.mark.parametrize("rate", [0.10, 0.30])
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_one_run_rides_out_random_transient_faults_with_a_default_retry_client(tmp_path, client, rate):
    documents, chunks = corpus(big=10, small=30, per_big=10, per_small=3)  # 190 chunks
    with FakeAnthropicServer() as server:
        server.fail_rate(rate, statuses=(429, 500, 529), seed=11)
        gen = CLIENTS[client](server)
        store = tmp_path / "c.sqlite3"
        result = Contextualizer(gen, store, config=ContextualizeConfig(concurrency=8, show_progress=False, retry_backoff_s=0.01)).contextualize(
            documents, chunks)
        stats = server.stats()
    report = result.report
    assert report.generated == len(chunks) and all(c.context for c in result.chunks)
    assert stats["faults"] > 0
    assert stats["messages"] == len(chunks), "a context was paid for twice"  # one paid answer per chunk
    assert report.cacheable_documents == 10
    assert max(stats["writes_per_prefix"].values()) == 1 and report.cache_writes == 10  # one write per cacheable document
    assert len(ContextStore(store)) == len(chunks)
    if rate == 0.30:  # some requests outlive the client's 2 retries: they failed the run before the rounds
        assert report.transient_failures > 0
    if report.transient_failures:
        assert report.retry_rounds >= 1
        assert f"{report.transient_failures} transient failures ridden out in {report.retry_rounds}" in report.format()


def test_framework_errors_that_reach_the_run_raw_are_classified(tmp_path):
    """A chat model called through the framework (no translation into our errors): its SDK's
    429 / 500 exceptions are retried in rounds, not raised out of the run."""
    documents, chunks = corpus(big=0, small=20, per_big=0, per_small=4)
    with FakeAnthropicServer() as server:
        server.fail_rate(0.30, statuses=(429, 500, 529), seed=5)
        gen = _langchain_uncached(server)
        result = Contextualizer(gen, tmp_path / "c.sqlite3", config=ContextualizeConfig(concurrency=4, show_progress=False, retry_backoff_s=0.01)).contextualize(documents, chunks)
        stats = server.stats()
    assert result.report.generated == len(chunks) and stats["messages"] == len(chunks)
    assert result.report.transient_failures > 0


def test_async_run_with_the_users_async_client_rides_out_faults(tmp_path):
    documents, chunks = corpus(big=4, small=20, per_big=8, per_small=3)
    with FakeAnthropicServer() as server:
        server.fail_rate(0.30, statuses=(429, 500, 529), seed=3)
        gen = AnthropicContextGenerator(
            MODEL, async_client=anthropic.AsyncAnthropic(api_key=server.api_key, base_url=server.url, max_retries=0))
        c = Contextualizer(gen, tmp_path / "c.sqlite3", config=ContextualizeConfig(concurrency=6, show_progress=False, retry_backoff_s=0.01))
        result = asyncio.run(c.acontextualize(documents, chunks))
        stats = server.stats()
    assert result.report.generated == len(chunks) and stats["messages"] == len(chunks)
    assert result.report.retry_rounds >= 1 and max(stats["writes_per_prefix"].values()) == 1


def test_a_non_transient_error_fails_its_chunk_at_once(tmp_path):
    documents, chunks = corpus(big=0, small=3, per_big=0, per_small=2)
    with FakeAnthropicServer() as server:
        body = {"type": "error", "error": {"type": "invalid_request_error", "message": "messages: bad block"}}
        server.fail_next(400, body=body)
        c = Contextualizer(_direct(server), tmp_path / "c.sqlite3", config=ContextualizeConfig(concurrency=1, show_progress=False, retry_backoff_s=0.01))
        with pytest.raises(ContextualizationError) as info:
            c.contextualize(documents, chunks)
        assert len(server.requests_to("/v1/messages")) == len(chunks)  # the 400 was not sent again
    assert len(info.value.failures) == 1 and info.value.failures[chunks[0].id].startswith("Anthropic rejected")


def test_rounds_back_off_and_give_up_when_nothing_but_transient_errors_come(tmp_path):
    """A generator that always fails transiently: rounds back off (doubling from retry_backoff_s)
    and the run gives up once it has seen nothing else for give_up_after_rate_limited_s."""
    calls: list[str] = []

    def down(document, chunk):
        calls.append(chunk.id)
        raise ConnectionResetError("connection reset by peer")

    documents, chunks = corpus(big=0, small=2, per_big=0, per_small=2)
    c = Contextualizer(CallableContextGenerator(down, name="down"), tmp_path / "c.sqlite3", config=ContextualizeConfig(concurrency=2, show_progress=False, retry_backoff_s=0.02, give_up_after_rate_limited_s=0.3))
    with pytest.raises(ContextualizationError, match=r"transient") as info:
        c.contextualize(documents, chunks)
    rounds = len(calls) // len(chunks)
    assert 2 <= rounds <= 6, calls  # backoff 0.02, 0.04, 0.08, 0.16 ... within 0.3 s
    assert set(info.value.failures) == {ch.id for ch in chunks}
    assert "connection reset" in next(iter(info.value.failures.values()))


def test_classification():
    assert is_transient(TransientGenerationError("x"))
    assert is_transient(ConnectionResetError()) and is_transient(TimeoutError()) and is_transient(asyncio.TimeoutError())
    assert not is_transient(GenerationError("the model returned no text"))
    assert not is_transient(ValueError("bad"))

    class Status(Exception):
        def __init__(self, status_code):
            self.status_code = status_code

    assert [is_transient(Status(s)) for s in (408, 409, 429, 500, 503, 529, 400, 401, 404)] == [True] * 6 + [False] * 3
    wrapped = RuntimeError("wrapped")
    wrapped.__cause__ = Status(503)
    assert is_transient(wrapped)
