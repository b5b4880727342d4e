"""A LlamaIndex `LLM` as a core `ContextGenerator` (llama-index's Anthropic gets the core
`AnthropicContextGenerator`, with prompt caching; other LLMs the plain `ChatContextGenerator`)."""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock
from llama_index.core.llms import LLM

from contextual_retrieval_core.errors import InputTypeError
from contextual_retrieval_core.generators.base import ContextGenerator, TokenUsage
from contextual_retrieval_core.generators.chat import ChatContextGenerator, ContentBlocks
from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT, ContextPrompt
from contextual_retrieval_llamaindex._compat import anthropic_llm_clients

__all__ = ["as_context_generator", "llm_context_generator"]


def _is_anthropic(llm: Any) -> bool:
    return type(llm).__module__.startswith("llama_index.llms.anthropic")


def _message(blocks: ContentBlocks) -> list[ChatMessage]:
    return [ChatMessage(role=MessageRole.USER, blocks=[TextBlock(text=block["text"]) for block in blocks])]


def _usage(response: Any) -> TokenUsage:
    """Token counts where the response reports them in OpenAI's shape; else just the request
    (the report then counts requests, and prices nothing it cannot see)."""
    extra = getattr(response, "additional_kwargs", None) or {}
    prompt, completion = extra.get("prompt_tokens"), extra.get("completion_tokens")
    if isinstance(prompt, int) and isinstance(completion, int):
        return TokenUsage(input_tokens=prompt, output_tokens=completion, requests=1)
    return TokenUsage(requests=1)


def llm_context_generator(llm: LLM, prompt: ContextPrompt = DEFAULT_PROMPT) -> ContextGenerator:
    """Situate chunks with any LlamaIndex LLM.

    llama-index's `Anthropic` LLM becomes the core `AnthropicContextGenerator` on the LLM's own
    SDK clients (Anthropic, Bedrock or Vertex) and model: the document block is prompt-cached,
    cacheability is verified from the usage the API reports, spend limits stop the run, and
    Message Batches are available. (This also sidesteps llama-index-llms-anthropic 0.12's message
    conversion, which fails with anthropic SDK 2.x.) Other LLMs get the same two text blocks
    through ``chat`` / ``achat`` without caching; their token usage is reported when the response
    carries OpenAI-style counts.

    Example:
        >>> from llama_index.core.llms import MockLLM
        >>> from contextual_retrieval_core.types import Chunk, Document
        >>> gen = llm_context_generator(MockLLM(max_tokens=5))
        >>> gen.name, gen.generate(Document("d", "Invoices go out monthly."), Chunk("c", "d", "monthly")).usage.requests
        ('llamaindex:MockLLM', 1)
    """
    client, async_client = anthropic_llm_clients(llm) if _is_anthropic(llm) else (None, None)
    if client is not None:
        from contextual_retrieval_core.generators.anthropic import AnthropicContextGenerator

        return AnthropicContextGenerator(str(llm.model), client=client, async_client=async_client, prompt=prompt)  # type: ignore[attr-defined]

    def send(blocks: ContentBlocks) -> tuple[str, TokenUsage]:
        response = llm.chat(_message(blocks))
        return response.message.content or "", _usage(response)

    async def asend(blocks: ContentBlocks) -> tuple[str, TokenUsage]:
        response = await llm.achat(_message(blocks))
        return response.message.content or "", _usage(response)

    model = getattr(llm, "model", None) or llm.metadata.model_name or type(llm).__name__
    return ChatContextGenerator(
        send, asend, name=f"llamaindex:{type(llm).__name__}", model=str(model), prompt=prompt
    )


def as_context_generator(generator: Any, prompt: ContextPrompt = DEFAULT_PROMPT) -> ContextGenerator:
    """A core ContextGenerator as it is; a LlamaIndex LLM wrapped by `llm_context_generator`."""
    if isinstance(generator, LLM):
        return llm_context_generator(generator, prompt)
    if isinstance(generator, ContextGenerator):
        return generator
    raise InputTypeError(
        f"generator must be a contextual_retrieval_core ContextGenerator or a LlamaIndex LLM, got "
        f"{type(generator).__name__}; e.g. AnthropicContextGenerator() or llama_index.llms.anthropic.Anthropic()"
    )
