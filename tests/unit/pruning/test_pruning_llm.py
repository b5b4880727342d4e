"""`LLMContextCompressor`: the real anthropic SDK against the loopback server, and any callable."""

from __future__ import annotations

import asyncio

import anthropic
import pytest

from contextual_retrieval_core.pruning import LLMContextCompressor
from contextual_retrieval_core.types import Chunk, ContextualChunk
from tests.fakes.anthropic_server import FakeAnthropicServer

FIRST = ContextualChunk(Chunk("a", "a.md", "Revenue grew by   3% over the previous quarter,\nto $412 million. Costs fell."), "ACME Q2.")
SECOND = ContextualChunk(Chunk("b", "b.md", "Headcount ended the quarter at 1,200 employees."), "ACME Q2 staff.")


@pytest.fixture()
def server():
    with FakeAnthropicServer() as srv:
        yield srv


def _client(server):
    return anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=0)


def test_claude_request_shape_and_only_verified_text_survives(server):
    compressor = LLMContextCompressor(client=_client(server))
    result = compressor.compress("How much did revenue grow?", [FIRST, SECOND])
    body = server.requests_to("/v1/messages")[0].body
    assert body["model"] == "claude-haiku-4-5" and "temperature" not in body
    document, question = body["messages"][0]["content"]
    assert document["text"].startswith("<document>") and FIRST.text in document["text"] and SECOND.text in document["text"]
    assert "cache_control" not in document  # far under Haiku 4.5's 4096-token minimum
    assert "do not add any information" in question["text"] and "How much did revenue grow?" in question["text"]
    # the fake answers "This chunk is from the document beginning '<first 8 words>' and covers '...'"
    # plus filler: the quoted first words are in the retrieved text, nothing else is
    assert [c.id for c in result.chunks] == ["a"]
    piece = result.chunks[0].pieces[0]
    assert piece.start == 0 and FIRST.text[piece.start : piece.end] == piece.text
    assert " ".join(piece.text.split()) == " ".join(FIRST.text.split()[:8])
    assert result.report.unverified >= 1
    assert result.report.usage["input_tokens"] > 0 and result.report.usage["output_tokens"] > 0
    assert result.report.chunks_dropped == ["b"]


def test_long_retrieved_text_is_sent_as_a_cached_block(server):
    long_chunks = [ContextualChunk(Chunk(f"c{i}", "d.md", f"Paragraph {i}: " + "the ledger balances every account. " * 60), "") for i in range(10)]
    compressor = LLMContextCompressor(client=_client(server))
    compressor.compress("What balances?", long_chunks)
    compressor.compress("What balances every account?", long_chunks)
    first, second = server.requests_to("/v1/messages")
    assert first.body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert first.usage["cache_creation_input_tokens"] > 0
    assert second.usage["cache_read_input_tokens"] == first.usage["cache_creation_input_tokens"]


def test_async_client_path(server):
    client = anthropic.AsyncAnthropic(api_key=server.api_key, base_url=server.url, max_retries=0)
    result = asyncio.run(LLMContextCompressor(async_client=client).acompress("revenue?", [FIRST, SECOND]))
    assert [c.id for c in result.chunks] == ["a"]


def test_callable_llm_passages_verified_whitespace_normalised_and_injections_dropped():
    prompts = []

    def llm(prompt):
        prompts.append(prompt)
        return (
            "<passage>Revenue grew by 3% over the previous quarter, to $412 million.</passage>\n"
            "<passage>Revenue grew by 30% thanks to a merger.</passage>\n"  # not in the text
            "<passage>1,200 employees</passage>"
        )

    result = LLMContextCompressor(llm).compress("revenue and staff?", [FIRST, SECOND])
    assert FIRST.text in prompts[0] and "revenue and staff?" in prompts[0]
    assert [c.text for c in result.chunks] == ["Revenue grew by   3% over the previous quarter,\nto $412 million.", "1,200 employees"]
    assert result.report.unverified == 1
    assert "merger" not in " ".join(c.text for c in result.chunks)


def test_async_callable_and_nothing_verified_returns_input_unchanged():
    async def llm(prompt):
        return "The answer is 42, according to the text."

    result = asyncio.run(LLMContextCompressor(llm).acompress("what?", [FIRST, SECOND]))
    assert [c.text for c in result.chunks] == [FIRST.text, SECOND.text]
    assert result.report.unchanged_reason == "the LLM returned no passage found in the retrieved text"
    assert result.report.unverified == 1
    with pytest.raises(TypeError, match="llm is async; call acompress"):
        LLMContextCompressor(llm).compress("what?", [FIRST])


def test_bad_input(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(RuntimeError, match="ANTHROPIC_API_KEY is not set"):
        LLMContextCompressor()
    with pytest.raises(TypeError, match="llm must be a callable"):
        LLMContextCompressor("claude")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="query must be a non-empty str"):
        LLMContextCompressor(lambda p: "").compress("  ", [FIRST])
    empty = LLMContextCompressor(lambda p: "x").compress("q", [])
    assert empty.chunks == [] and empty.report.unchanged_reason == "no chunks to compress"
