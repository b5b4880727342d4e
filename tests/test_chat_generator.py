"""ChatContextGenerator: the prompt as content blocks through a send function, caching decisions
verified end to end (the send function here calls the loopback Anthropic server with the real SDK,
as a framework chat model would)."""

from __future__ import annotations

import anthropic
import pytest

from contextual_retrieval import Chunk, Document
from contextual_retrieval.contextualizer import Contextualizer
from contextual_retrieval.generators import ChatContextGenerator, GenerationError, TokenUsage
from contextual_retrieval.generators.anthropic import anthropic_usage
from contextual_retrieval.prompts import DEFAULT_PROMPT
from fakes.anthropic_server import FakeAnthropicServer

MODEL = "claude-3-haiku-20240307"


def corpus():
    big = " ".join(f"stage{i} mutator{i % 7} feedback." for i in range(1400))  # ~40k chars
    small = "Revenue grew by 3% over the previous quarter. Headcount stayed flat."
    docs = [Document("big", big), Document("small", small)]
    chunks = [Chunk(f"big{i}", "big", big[i * 5000 : (i + 1) * 5000], i) for i in range(4)]
    chunks += [Chunk("small0", "small", small[:46], 0), Chunk("small1", "small", small[46:], 1)]
    return docs, chunks


def test_blocks_are_the_cookbook_prompt_with_cache_control_on_the_document_only():
    gen = ChatContextGenerator(lambda b: ("x", TokenUsage()), name="t", model=MODEL, prompt_caching=True)
    docs, chunks = corpus()
    blocks = gen.blocks(docs[0], chunks[0])
    assert blocks[0] == {"type": "text", "text": DEFAULT_PROMPT.render_document(docs[0].text), "cache_control": {"type": "ephemeral"}}
    assert blocks[1] == {"type": "text", "text": DEFAULT_PROMPT.render_chunk(chunks[0].text)}
    assert "cache_control" not in gen.blocks(docs[1], chunks[4])[0]  # far below the 2048-token minimum
    assert gen.cacheable(docs[0]) is True and gen.cacheable(docs[1]) is False
    plain = ChatContextGenerator(lambda b: ("x", TokenUsage()), name="t", model=MODEL)
    assert plain.cacheable(docs[0]) is False and "cache_control" not in plain.blocks(docs[0], chunks[0])[0]
    assert plain.prompt_identity == gen.prompt_identity  # caching never changes what is stored


def test_through_the_contextualizer_one_cache_write_per_document(tmp_path):
    docs, chunks = corpus()
    with FakeAnthropicServer() as srv:
        client = anthropic.Anthropic(api_key=srv.api_key, base_url=srv.url, max_retries=0)

        def send(blocks):
            message = client.messages.create(model=MODEL, max_tokens=200, messages=[{"role": "user", "content": blocks}])
            return message.content[0].text, anthropic_usage(message.usage)

        gen = ChatContextGenerator(send, name="framework:Claude", model=MODEL, prompt_caching=True)
        result = Contextualizer(gen, tmp_path / "s.sqlite3", concurrency=4, show_progress=False).contextualize(docs, chunks)
        assert len(srv.requests_to("/v1/messages")) == len(chunks)
        again = Contextualizer(gen, tmp_path / "s.sqlite3", show_progress=False).contextualize(docs, chunks)
        assert len(srv.requests_to("/v1/messages")) == len(chunks)
    report = result.report
    assert report.cache_writes == 1 and report.cache_misses == 0
    assert report.usage.cache_read_tokens == report.ideal_cache_read_tokens > 0
    assert [c.context for c in again.chunks] == [c.context for c in result.chunks]


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
