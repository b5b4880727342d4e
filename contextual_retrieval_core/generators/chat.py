"""`ChatContextGenerator`: the situating prompt through a framework's chat model.

The LlamaIndex and LangChain adapters wrap chat models other than Claude with it (Claude goes
through `AnthropicContextGenerator` on the model's own SDK clients, which does the prompt caching).
It holds what the two adapters share: the prompt as two plain text blocks (document, then chunk)
and the store identity. An adapter supplies only ``send(blocks) -> (text, TokenUsage)`` (and
optionally ``asend``): turning the blocks into its framework's message and reading the usage back.
The sync/async dispatch is `CallableContextGenerator`'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from contextual_retrieval_core.errors import InputTypeError
from contextual_retrieval_core.generators.base import Generation, GenerationError, TokenUsage
from contextual_retrieval_core.generators.callable import CallableContextGenerator
from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT, ContextPrompt
from contextual_retrieval_core.types import Chunk, Document

__all__ = ["ChatContextGenerator", "ContentBlocks", "SendFn", "AsyncSendFn"]

#: one user message's content: ``[{"type": "text", "text": ...}, {"type": "text", "text": ...}]``
ContentBlocks = list[dict[str, Any]]
SendFn = Callable[[ContentBlocks], "tuple[str, TokenUsage]"]
AsyncSendFn = Callable[[ContentBlocks], Awaitable["tuple[str, TokenUsage]"]]


class ChatContextGenerator(CallableContextGenerator):
    """A `ContextGenerator` over a chat model reached through ``send`` / ``asend``.

    `generate` calls `send` (or, with only `asend`, runs it with `asyncio.run`, outside a running
    loop); `agenerate` awaits `asend` (or runs `send` in a worker thread), as
    `CallableContextGenerator` does. Blank answers raise `GenerationError`.

    Args:
        send: ``blocks -> (text, TokenUsage)``, sending one user message.
        asend: the async counterpart.
        name: the generator kind, part of the store key (e.g. "llamaindex:OpenAI").
        model: the model id, part of the store key.
        prompt: the `ContextPrompt` (default: the cookbook's).

    Example:
        >>> def send(blocks):
        ...     return "About invoices.", TokenUsage(input_tokens=40, output_tokens=4, requests=1)
        >>> gen = ChatContextGenerator(send, name="demo", model="m")
        >>> gen.generate(Document("d", "Invoices go out monthly."), Chunk("c", "d", "monthly")).context
        'About invoices.'
    """

    def __init__(
        self,
        send: SendFn | None,
        asend: AsyncSendFn | None = None,
        *,
        name: str,
        model: str,
        prompt: ContextPrompt = DEFAULT_PROMPT,
    ) -> None:
        if send is None and asend is None:
            raise InputTypeError("ChatContextGenerator needs send=blocks -> (text, usage), or asend=")
        self._send, self._asend = send, asend
        super().__init__(
            self._situate if send is not None else None,
            afn=self._asituate if asend is not None else None,
            name=name,
            model=model,
            prompt=prompt,
        )

    def __repr__(self) -> str:
        return f"ChatContextGenerator(name={self.name!r}, model={self.model!r})"

    @property
    def label(self) -> str:
        return f"{self.name} ({self.model})" if self.model else self.name

    def blocks(self, document: Document, chunk: Chunk) -> ContentBlocks:
        """The user message: the document block, then the chunk block."""
        return [
            {"type": "text", "text": self.prompt.render_document(document.text)},
            {"type": "text", "text": self.prompt.render_chunk(chunk.text)},
        ]

    def _situate(self, document: Document, chunk: Chunk) -> Generation:
        assert self._send is not None
        return _generation(*self._send(self.blocks(document, chunk)))

    async def _asituate(self, document: Document, chunk: Chunk) -> Generation:
        assert self._asend is not None
        return _generation(*await self._asend(self.blocks(document, chunk)))


def _generation(text: str, usage: TokenUsage) -> Generation:
    if not isinstance(text, str) or not text.strip():
        raise GenerationError("the chat model returned no text for this chunk")
    return Generation(text.strip(), usage)
