"""ChatContextGenerator: the prompt as content blocks through a send function, caching decisions
verified end to end (the send function here calls the loopback Anthropic server with the real SDK,
as a framework chat model would)."""

from __future__ import annotations

import anthropic
import pytest

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
from contextual_retrieval_core.generators import ChatContextGenerator, GenerationError, TokenUsage
from contextual_retrieval_core.generators.anthropic import anthropic_usage
from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT
from tests.fakes.anthropic_server import FakeAnthropicServer

MODEL = "claude-3-haiku-20240307"


def corpus():
    big = " ".join(f"stage{i} mutator{i % 7} feedback." for i in range(1400))  # ~40k chars
    small = "Revenue grew by 3% over the previous quarter. Headcount stayed flat."
    docs = [Document("big", big), Document("small", small)]
    chunks = [Chunk(f"big{i}", "big", big[i * 5000 : (i + 1) * 5000], i) for i in range(4)]
    chunks += [Chunk("small0", "small", small[:46], 0), Chunk("small1", "small", small[46:], 1)]
    return docs, chunks


def test_blocks_are_the_cookbook_prompt_as_two_plain_text_blocks():
    gen = ChatContextGenerator(lambda b: ("x", TokenUsage()), name="t", model=MODEL)
    docs, chunks = corpus()
    assert gen.blocks(docs[0], chunks[0]) == [
        {"type": "text", "text": DEFAULT_PROMPT.render_document(docs[0].text)},
        {"type": "text", "text": DEFAULT_PROMPT.render_chunk(chunks[0].text)},
    ]
    assert gen.prompt_identity == DEFAULT_PROMPT.identity and gen.label == f"t ({MODEL})"


def _clients(srv):
    sync = anthropic.Anthropic(api_key=srv.api_key, base_url=srv.url, max_retries=0)
    async_ = anthropic.AsyncAnthropic(api_key=srv.api_key, base_url=srv.url, max_retries=0)

    def send(blocks):
        message = sync.messages.create(model=MODEL, max_tokens=200, messages=[{"role": "user", "content": blocks}])
        return message.content[0].text, anthropic_usage(message.usage)

    async def asend(blocks):
        message = await async_.messages.create(model=MODEL, max_tokens=200, messages=[{"role": "user", "content": blocks}])
        return message.content[0].text, anthropic_usage(message.usage)

    return send, asend


def test_through_the_contextualizer_once_per_chunk_then_from_the_store(tmp_path):
    docs, chunks = corpus()
    with FakeAnthropicServer() as srv:
        send, _ = _clients(srv)
        gen = ChatContextGenerator(send, name="framework:Model", model=MODEL)
        result = Contextualizer(gen, tmp_path / "s.sqlite3", config=ContextualizeConfig(concurrency=4, show_progress=False)).contextualize(docs, chunks)
        assert len(srv.requests_to("/v1/messages")) == len(chunks)
        assert all("cache_control" not in b for r in srv.requests_to("/v1/messages") for b in r.body["messages"][0]["content"])
        again = Contextualizer(gen, tmp_path / "s.sqlite3", config=ContextualizeConfig(show_progress=False)).contextualize(docs, chunks)
        assert len(srv.requests_to("/v1/messages")) == len(chunks)
    assert result.report.generated == len(chunks) and result.report.usage.requests == len(chunks)
    assert result.report.cache_writes == 0 and result.report.cacheable_documents == 0
    assert again.report.store_hits == len(chunks)
    assert [c.context for c in again.chunks] == [c.context for c in result.chunks]


def _round(n):
    """A small new document each round, so every round sends requests (nothing is in the store)."""
    text = f"Round {n}: revenue grew by {n}% over the previous quarter. Headcount stayed flat."
    return [Document(f"r{n}", text)], [Chunk(f"r{n}a", f"r{n}", text[:40], 0), Chunk(f"r{n}b", f"r{n}", text[40:], 1)]


@pytest.mark.parametrize("paths", ["send+asend", "asend"])
def test_three_sync_runs_with_async_clients_all_succeed(paths):
    # every sync contextualize() runs on the Contextualizer's one background loop, so an async
    # client's connections stay valid from one call to the next (max_retries=0: no retry hides a failure)
    with FakeAnthropicServer() as srv:
        send, asend = _clients(srv)
        gen = ChatContextGenerator(send if paths == "send+asend" else None, asend, name="framework:Model", model=MODEL)
        c = Contextualizer(gen, ":memory:", config=ContextualizeConfig(concurrency=2, show_progress=False))
        for n in range(3):
            out = c.contextualize(*_round(n))
            assert out.report.generated == 2 and all(ch.context for ch in out.chunks)
        kinds = [r.headers.get("x-stainless-async") for r in srv.requests_to("/v1/messages")]
    assert len(kinds) == 6
    if paths == "send+asend":  # a sync caller takes the sync path: the async client stays off this loop
        assert set(kinds) == {"false"}
    else:
        assert all(k.startswith("async") for k in kinds)


async def test_async_send_and_empty_answers():
    async def asend(blocks):
        return "  About stages.  ", TokenUsage(requests=1)

    gen = ChatContextGenerator(None, asend, name="t", model="m")
    docs, chunks = corpus()
    assert (await gen.agenerate(docs[0], chunks[0])).context == "About stages."
    empty = ChatContextGenerator(lambda b: ("   ", TokenUsage()), name="t", model="m")
    with pytest.raises(GenerationError, match="no text"):
        empty.generate(docs[0], chunks[0])
    with pytest.raises(TypeError, match="send="):
        ChatContextGenerator(None, name="t", model="m")
