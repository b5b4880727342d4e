"""Any LangChain `BaseChatModel` as the core's context generator.

`chat_model_generator` turns `ChatAnthropic` into the core `AnthropicContextGenerator` on SDK
clients configured as the model's own (`_compat.chat_anthropic_clients`; prompt caching, spend
limits, Message Batches). Any other chat model is wrapped in the core `ChatContextGenerator`,
which builds the situating prompt as two plain text blocks; this module only turns them into one
`HumanMessage` and reads the usage back.
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.generators.base import ContextGenerator, TokenUsage
from contextual_retrieval_core.generators.chat import ChatContextGenerator, ContentBlocks
from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT, ContextPrompt

__all__ = ["chat_model_generator", "is_chat_anthropic", "usage_from_message"]


def is_chat_anthropic(llm: Any) -> bool:
    """Whether `llm` is langchain-anthropic's `ChatAnthropic` (which honours ``cache_control``)."""
    try:
        from langchain_anthropic import ChatAnthropic
    except ImportError:  # langchain-anthropic not installed: it cannot be one
        return False
    return isinstance(llm, ChatAnthropic)


def chat_model_generator(
    llm: BaseChatModel,
    *,
    prompt: ContextPrompt = DEFAULT_PROMPT,
    prompt_caching: bool | None = None,
    cache_ttl: Literal["5m", "1h"] = "5m",
) -> ContextGenerator:
    """A core context generator that sends the situating prompt through `llm`.

    `ChatAnthropic` becomes the core `AnthropicContextGenerator` on SDK clients configured as the
    model's own (prompt caching verified from the API's usage, spend limits, Message Batches). Any other chat
    model goes through the core `ChatContextGenerator`: the prompt as one `HumanMessage` of two
    content blocks, usage read from ``usage_metadata``.

    Args:
        llm: any LangChain chat model.
        prompt: the `ContextPrompt` (default: the cookbook's).
        prompt_caching: False sends `ChatAnthropic` through ``invoke`` like any other model
            (plain blocks, no caching); True is only for `ChatAnthropic` (it raises for others).
        cache_ttl: the prompt-cache TTL of the `ChatAnthropic` path: "5m" or "1h".

    Example:
        >>> from langchain_core.language_models import GenericFakeChatModel
        >>> from langchain_core.messages import AIMessage
        >>> from contextual_retrieval_core.types import Chunk, Document
        >>> gen = chat_model_generator(GenericFakeChatModel(messages=iter([AIMessage("About invoices.")])))
        >>> gen.generate(Document("d", "Invoices go out monthly."), Chunk("c", "d", "monthly")).context
        'About invoices.'
    """
    if not isinstance(llm, BaseChatModel):
        raise InputTypeError(f"llm must be a LangChain BaseChatModel, got {type(llm).__name__}; wrap other LLMs with CallableContextGenerator")
    anthropic = is_chat_anthropic(llm)
    if anthropic and prompt_caching is not False:
        # Claude: the core generator on SDK clients configured as ChatAnthropic's (its key, base
        # URL, retries, timeout, headers, proxy): verified caching, spend-limit stop, Message Batches, and the same store key
        # as the core and the LlamaIndex path, so a corpus is never paid for twice across them
        from contextual_retrieval_core.generators.anthropic import AnthropicContextGenerator
        from contextual_retrieval_langchain._compat import chat_anthropic_clients

        client, async_client = chat_anthropic_clients(llm)
        return AnthropicContextGenerator(
            str(getattr(llm, "model", "")), client=client, async_client=async_client, prompt=prompt, cache_ttl=cache_ttl
        )
    if prompt_caching and not anthropic:
        raise InputError(
            f"prompt_caching needs ChatAnthropic; {type(llm).__name__} does not read cache_control: "
            "pass prompt_caching=False (or leave it unset)"
        )

    # LangChain types message content as str | list[str | dict]: the content blocks go in as they are
    def send(blocks: ContentBlocks) -> tuple[str, TokenUsage]:
        return _result(llm.invoke([HumanMessage(content=list[Any](blocks))]))

    async def asend(blocks: ContentBlocks) -> tuple[str, TokenUsage]:
        return _result(await llm.ainvoke([HumanMessage(content=list[Any](blocks))]))

    model = getattr(llm, "model", None) or getattr(llm, "model_name", None) or ""
    return ChatContextGenerator(send, asend, name=f"langchain:{type(llm).__name__}", model=str(model), prompt=prompt)


def usage_from_message(message: AIMessage, cache_ttl: Literal["5m", "1h"] = "5m") -> TokenUsage:
    """`AIMessage.usage_metadata` as a core `TokenUsage` (uncached input split from cache reads/writes).

    A cache write reported only as a total (``cache_creation``) is counted at `cache_ttl`.

    Example:
        >>> msg = AIMessage("x", usage_metadata={"input_tokens": 110, "output_tokens": 5, "total_tokens": 115,
        ...                                      "input_token_details": {"cache_read": 100}})
        >>> usage_from_message(msg)
        TokenUsage(input_tokens=10, output_tokens=5, cache_write_tokens=0, cache_write_1h_tokens=0, cache_read_tokens=100, requests=1, retries=0)
    """
    meta = getattr(message, "usage_metadata", None) or {}
    details = meta.get("input_token_details") or {}
    read = int(details.get("cache_read") or 0)
    write_5m = int(details.get("ephemeral_5m_input_tokens") or 0)
    write_1h = int(details.get("ephemeral_1h_input_tokens") or 0)
    generic = int(details.get("cache_creation") or 0)
    if not (write_5m or write_1h) and generic:
        write_1h, write_5m = (generic, 0) if cache_ttl == "1h" else (0, generic)
    total_in = int(meta.get("input_tokens") or 0)
    return TokenUsage(
        input_tokens=max(total_in - read - write_5m - write_1h, 0),
        output_tokens=int(meta.get("output_tokens") or 0),
        cache_write_tokens=write_5m,
        cache_write_1h_tokens=write_1h,
        cache_read_tokens=read,
        requests=1,
    )


def _result(message: BaseMessage) -> tuple[str, TokenUsage]:
    text = message.text if isinstance(message.text, str) else message.text()  # property since langchain-core 1.0
    return text, usage_from_message(message)  # type: ignore[arg-type]
