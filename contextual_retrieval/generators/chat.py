"""`ChatContextGenerator`: the situating prompt through a framework's chat model.

The LlamaIndex and LangChain adapters wrap their chat models with it; it holds everything the two
share: the prompt as two content blocks in the Anthropic shape (the document block marked for
prompt caching when the model supports it), whether a document is worth caching, and the store
identity. An adapter supplies only ``send(blocks) -> (text, TokenUsage)``: turning the blocks into
its framework's message and reading the usage back.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, Callable, Literal, Optional

from ..prompts import DEFAULT_PROMPT, ContextPrompt
from ..types import Chunk, Document
from ..usage import cache_verdict, estimate_tokens, model_info
from .base import Generation, GenerationError, TokenUsage

__all__ = ["ChatContextGenerator", "ContentBlocks", "SendFn", "AsyncSendFn"]

#: one user message's content: ``[{"type": "text", "text": ..., "cache_control"?: {...}}, ...]``
ContentBlocks = list[dict[str, Any]]
SendFn = Callable[[ContentBlocks], "tuple[str, TokenUsage]"]
AsyncSendFn = Callable[[ContentBlocks], Awaitable["tuple[str, TokenUsage]"]]


class ChatContextGenerator:
    """A `ContextGenerator` over a chat model reached through ``send`` / ``asend``.

    Args:
        send: ``blocks -> (text, TokenUsage)``, sending one user message.
        asend: the async counterpart (default: `send` in a worker thread).
        name: the generator kind, part of the store key (e.g. "llamaindex:Anthropic").
        model: the model id, part of the store key.
        prompt: the `ContextPrompt` (default: the cookbook's).
        prompt_caching: mark the document block with ``cache_control`` (Anthropic models).
        cache_ttl: "5m" or "1h".

    With prompt caching on and a Claude model whose cache minimum is known, documents clearly
    below the minimum go without ``cache_control`` and the rest have their first chunk sent alone
    (the `Contextualizer` waits for it to write the cache before fanning out).

    Example:
        >>> def send(blocks):
        ...     return "About invoices.", TokenUsage(input_tokens=40, output_tokens=4, requests=1)
        >>> gen = ChatContextGenerator(send, name="demo", model="m")
        >>> gen.generate(Document("d", "Invoices go out monthly."), Chunk("c", "d", "monthly")).context
        'About invoices.'
    """

    is_llm = True

    def __init__(
        self,
        send: Optional[SendFn],
        asend: Optional[AsyncSendFn] = None,
        *,
        name: str,
        model: str,
        prompt: ContextPrompt = DEFAULT_PROMPT,
        prompt_caching: bool = False,
        cache_ttl: Literal["5m", "1h"] = "5m",
    ) -> None:
        if send is None and asend is None:
            raise TypeError("ChatContextGenerator needs send=blocks -> (text, usage), or asend=")
        if cache_ttl not in ("5m", "1h"):
            raise ValueError(f"cache_ttl must be '5m' or '1h', not {cache_ttl!r}")
        self._send, self._asend = send, asend
        self.name, self.model = name, model
        self.prompt = prompt
        self.prompt_identity = prompt.identity
        self.prompt_caching = prompt_caching
        self.cache_ttl = cache_ttl
        self._known: dict[tuple[str, int, int], bool] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ChatContextGenerator(name={self.name!r}, model={self.model!r}, prompt_caching={self.prompt_caching})"

    @property
    def label(self) -> str:
        return f"{self.name} ({self.model})" if self.model else self.name

    # -- caching decisions ------------------------------------------------------------------------

    def cacheable(self, document: Document) -> bool | None:
        """False without prompt caching; else the estimate's verdict (None: the first request probes)."""
        if not self.prompt_caching:
            return False
        key = (document.id, len(document.text), hash(document.text))
        with self._lock:
            if key in self._known:
                return self._known[key]
        tokens = estimate_tokens(self.prompt.render_document(document.text))
        return cache_verdict(tokens, model_info(self.model).cache_min_tokens)

    def learn_cacheable(self, document: Document, cacheable: bool) -> None:
        with self._lock:
            self._known[(document.id, len(document.text), hash(document.text))] = cacheable

    def blocks(self, document: Document, chunk: Chunk) -> ContentBlocks:
        """The user message: the document block (cache-marked when caching) and the chunk block."""
        doc_block: dict[str, Any] = {"type": "text", "text": self.prompt.render_document(document.text)}
        if self.prompt_caching and self.cacheable(document) is not False:
            doc_block["cache_control"] = {"type": "ephemeral", "ttl": "1h"} if self.cache_ttl == "1h" else {"type": "ephemeral"}
        return [doc_block, {"type": "text", "text": self.prompt.render_chunk(chunk.text)}]

    # -- ContextGenerator ---------------------------------------------------------------------------

    def generate(self, document: Document, chunk: Chunk) -> Generation:
        if self._send is None:
            return asyncio.run(self.agenerate(document, chunk))
        return _generation(*self._send(self.blocks(document, chunk)))

    async def agenerate(self, document: Document, chunk: Chunk) -> Generation:
        blocks = self.blocks(document, chunk)
        if self._asend is None:
            return _generation(*await asyncio.to_thread(self._send, blocks))  # type: ignore[arg-type]
        return _generation(*await self._asend(blocks))


def _generation(text: str, usage: TokenUsage) -> Generation:
    if not isinstance(text, str) or not text.strip():
        raise GenerationError("the chat model returned no text for this chunk")
    return Generation(text.strip(), usage)
