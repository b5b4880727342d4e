"""`AnthropicContextGenerator`: contexts from Claude, with verified prompt caching.

The request is the cookbook's prompt, verbatim by default, as two content blocks in one user
message: the document block, marked ``cache_control`` (when the document reaches the model's cache
minimum), then the chunk block, uncached. Every chunk of a document after the first then reads
the document from the cache at 0.1x the input price.

Retries are the SDK's own (408/409/429/5xx, honouring retry-after; `max_retries`). An answer that
says the spend limit is reached or the credit balance is too low (HTTP 400 invalid_request_error
or 429 rate_limit_error, matched on the error type and message) is not retried: a middleware stops
it at the first answer, and the run stops with `FatalGenerationError` carrying the API's message
(the contexts made so far are already stored). The same middleware times streaks of 429s
(`rate_limited_since`), so a run can give up on sustained rate limiting.

Async clients built here are built once per event loop: an async client's connections belong to
the loop that opened them, so two `asyncio.run(...)` calls in a row each get their own, and each
is closed when its loop shuts down.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from contextual_retrieval_core._sdk import LoopClients, env_key, import_sdk
from contextual_retrieval_core.errors import InputError, RunError
from contextual_retrieval_core.generators._anthropic_http import (
    AsyncGuard,
    SpendLimitReached,
    SyncGuard,
    guarded,
    spend_limit_message,
    translate_error,
)
from contextual_retrieval_core.generators.base import Generation, GenerationError, RateLimitClock, TokenUsage
from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT, ContextPrompt
from contextual_retrieval_core.generators.usage import ModelInfo, cache_verdict, estimate_tokens, model_info
from contextual_retrieval_core.types import Chunk, Document

_translate = translate_error  # the name the contextualizer imported

__all__ = ["AnthropicContextGenerator", "GROUPED_INSTRUCTIONS", "SpendLimitReached", "anthropic_usage", "spend_limit_message"]

_MISSING_KEY = (
    "ANTHROPIC_API_KEY is not set; pass client=anthropic.Anthropic(api_key=...) (or AsyncAnthropic, "
    "AnthropicBedrock, AnthropicVertex), or use the offline StructuralContextGenerator()"
)
#: The instructions of a grouped request (one request situates every chunk of a small document).
GROUPED_INSTRUCTIONS = (
    "The document above contains chunks marked <chunk id=\"...\">...</chunk>. For each marked chunk, "
    "give a short succinct context to situate the chunk within the overall document for the purposes "
    "of improving search retrieval of the chunk.\n"
    "Answer only with the contexts, one per line, in the form <context id=\"ID\">context</context>, "
    "all inside <contexts></contexts>, and nothing else."
)
_GROUPED_CONTEXT = re.compile(r"<context id=\"([^\"]+)\">(.*?)</context>", re.DOTALL)


@dataclass(frozen=True)
class _Request:
    params: dict[str, Any]
    windowed: bool
    cached: bool


class AnthropicContextGenerator:
    """Situates chunks with Claude through the Messages API (and Message Batches).

    Args:
        model: the Claude model (default "claude-haiku-4-5"; Bedrock / Vertex ids work with
            their clients).
        client: an `anthropic.Anthropic`, `AnthropicBedrock` or `AnthropicVertex`.
        async_client: an `anthropic.AsyncAnthropic` (or async Bedrock / Vertex) for real
            concurrency; without one, async calls run the sync client in threads.
        prompt: the `ContextPrompt` (default: the cookbook's, verbatim). A glossary goes in the
            cached document block.
        cache_ttl: "5m" (default) or "1h" (2x write price; what batches want).
        max_tokens: the answer budget per chunk (contexts are 50-100 tokens).
        max_retries: the SDK's retries for clients built here (default 6: at a 10% failure rate
            per attempt, seven attempts lose one request in ten million).
        timeout: per-request timeout in seconds for clients built here.
        count_tokens: how to tell, for a document near the cache minimum, whether it reaches it:
            "probe" (default; its first request carries cache_control and the usage settles it),
            "api" (the free count_tokens endpoint) or "estimate" (4 characters a token).

    Without a client, `ANTHROPIC_API_KEY` must be set.

    Example:
        >>> import anthropic
        >>> gen = AnthropicContextGenerator(client=anthropic.Anthropic(api_key="sk-..."))  # doctest: +SKIP
        >>> gen.generate(Document("d", doc_text), Chunk("c", "d", chunk_text)).context  # doctest: +SKIP
        "This chunk is from ACME's Q2 2023 filing; it reports revenue growth..."
    """

    name = "anthropic"
    label = "anthropic"
    is_llm = True

    def __init__(
        self,
        model: str = "claude-haiku-4-5",
        *,
        client: Any = None,
        async_client: Any = None,
        prompt: ContextPrompt = DEFAULT_PROMPT,
        cache_ttl: Literal["5m", "1h"] = "5m",
        max_tokens: int = 300,
        max_retries: int = 6,
        timeout: float = 120.0,
        count_tokens: Literal["probe", "api", "estimate"] = "probe",
    ) -> None:
        if cache_ttl not in ("5m", "1h"):
            raise InputError(f"cache_ttl must be '5m' or '1h', not {cache_ttl!r}")
        if count_tokens not in ("probe", "api", "estimate"):
            raise InputError(f"count_tokens must be 'probe', 'api' or 'estimate', not {count_tokens!r}")
        if client is None and async_client is None and not env_key("ANTHROPIC_API_KEY"):
            raise RunError(_MISSING_KEY)
        self.model = model
        self.prompt = prompt
        self.prompt_identity = prompt.identity
        self.cache_ttl = cache_ttl
        self.max_tokens = max_tokens
        self.info: ModelInfo = model_info(model)
        self.count_tokens_mode = count_tokens
        self._max_retries, self._timeout = max_retries, timeout
        self._rate_clock = RateLimitClock()
        self._client = guarded(client, SyncGuard(self._rate_clock)) if client is not None else None
        self._async_client = guarded(async_client, AsyncGuard(self._rate_clock)) if async_client is not None else None
        self._own_clients = client is None and async_client is None
        #: async clients built here, one per event loop, closed when it shuts down
        self._loop_clients = LoopClients(self._build_async)
        self._known: dict[tuple[str, int, int], bool] = {}
        self._lock = threading.Lock()

    # -- clients ----------------------------------------------------------------------------

    def _sync(self) -> Any:
        if self._client is None:
            if not self._own_clients:
                raise RunError("this generator was given only an async client; use agenerate, or pass client=")
            sdk = import_sdk("anthropic", "anthropic", "Anthropic")
            self._client = sdk.Anthropic(
                max_retries=self._max_retries, timeout=self._timeout, middleware=[SyncGuard(self._rate_clock)]
            )
        return self._client

    def _async(self) -> Any | None:
        """The async client for the running loop: the injected one, or one built for this loop."""
        if self._async_client is not None or not self._own_clients:
            return self._async_client
        return self._loop_clients.get()

    def _build_async(self) -> Any:
        sdk = import_sdk("anthropic", "anthropic", "Anthropic")
        return sdk.AsyncAnthropic(
            max_retries=self._max_retries, timeout=self._timeout, middleware=[AsyncGuard(self._rate_clock)]
        )

    @property
    def has_sync_path(self) -> bool:
        """Whether `generate` can run: a sync client was given, or clients are built here."""
        return self._client is not None or self._own_clients

    def rate_limited_since(self) -> float | None:
        """`time.monotonic()` since which every answer has been a 429 (None: the last was not)."""
        return self._rate_clock.since()

    def stop_retrying(self, stop: bool = True) -> None:
        """Refuse every further attempt (the SDK's retries included) until called with False."""
        self._rate_clock.stopped = stop

    @property
    def cache_min_tokens(self) -> int | None:
        """The model's cache minimum from the model table (None: unknown model)."""
        return self.info.cache_min_tokens

    # -- sizes --------------------------------------------------------------------------------

    @staticmethod
    def _digest(document: Document) -> tuple[str, int, int]:
        # str hashes are cached by Python: O(1) per request after the first
        return (document.id, len(document.text), hash(document.text))

    def document_tokens(self, document: Document, *, exact: bool = False) -> int:
        """Tokens of the document block (the cached prefix): an estimate, or the count_tokens
        endpoint's figure with `exact=True` (falls back to the estimate where it is missing)."""
        block = self.prompt.render_document(document.text)
        estimate = estimate_tokens(block)
        return self._count_tokens(block, estimate) if exact else estimate

    def _count_tokens(self, block: str, fallback: int) -> int:
        try:
            client = self._client or (self._sync() if self._own_clients else None)
            if client is None:
                return fallback
            result = client.messages.count_tokens(
                model=self.model, messages=[{"role": "user", "content": [{"type": "text", "text": block}]}]
            )
            return int(result.input_tokens)
        except Exception:  # count_tokens is an optimisation: Bedrock / Vertex may lack it
            return fallback

    def cacheable(self, document: Document) -> bool | None:
        """Whether the document's prefix reaches the model's cache minimum.

        True / False when sure; None when the size is too close to the minimum to tell from an
        estimate (or the model's minimum is unknown). Then, with count_tokens="probe" (default),
        the document's first request carries cache_control anyway and its usage settles it (see
        `learn_cacheable`): no extra request, and nothing is charged for a prefix the API does
        not cache. "api" asks the free count_tokens endpoint instead; "estimate" trusts 4
        characters a token.
        """
        digest = self._digest(document)
        with self._lock:
            if digest in self._known:
                return self._known[digest]
        minimum = self.info.cache_min_tokens
        if minimum is None:
            return None
        estimate = self.document_tokens(document)
        answer = cache_verdict(estimate, minimum)
        if answer is not None:
            pass
        elif self.count_tokens_mode == "estimate":
            answer = estimate >= minimum
        elif self.count_tokens_mode == "api":
            answer = self.document_tokens(document, exact=True) >= minimum
        else:
            return None
        with self._lock:
            self._known[digest] = answer
        return answer

    def learn_cacheable(self, document: Document, cacheable: bool) -> None:
        """Record what a probing request's usage showed about the document's prefix."""
        with self._lock:
            self._known[self._digest(document)] = cacheable

    def _budget(self) -> int:
        """Tokens the document may take: the window less the answer and the prompt's own text."""
        return self.info.context_window - self.max_tokens - 2_000

    # -- requests -------------------------------------------------------------------------------

    def build_request(
        self, document: Document, chunk: Chunk, *, cache_ttl: Literal["5m", "1h"] | None = None
    ) -> _Request:
        """The Messages API parameters for one chunk (`cache_ttl` overrides the generator's, as
        Message Batches do with "1h")."""
        chunk_block = {"type": "text", "text": self.prompt.render_chunk(chunk.text)}
        budget = self._budget() - estimate_tokens(chunk.text, 3.0)
        if estimate_tokens(document.text, 3.0) > budget:
            blocks = self._windowed_blocks(document, chunk, budget)
            cached = True
            windowed = True
        else:
            blocks = [{"type": "text", "text": self.prompt.render_document(document.text)}]
            cached = self.cacheable(document) is not False
            windowed = False
        if cached:
            blocks[0]["cache_control"] = self._cache_control(cache_ttl)
        params = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": [{"role": "user", "content": [*blocks, chunk_block]}],
        }
        return _Request(params, windowed, cached)

    def _cache_control(self, ttl: Literal["5m", "1h"] | None = None) -> dict[str, str]:
        ttl = ttl or self.cache_ttl
        if ttl not in ("5m", "1h"):
            raise InputError(f"cache_ttl must be '5m' or '1h', not {ttl!r}")
        return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}

    def _windowed_blocks(self, document: Document, chunk: Chunk, budget: int) -> list[dict[str, Any]]:
        """Head of the document (cached, shared by all its chunks) + the region around the chunk."""
        chars = budget * 3
        head_chars = chars // 4
        region_chars = chars - head_chars
        text = document.text
        at = text.find(chunk.text)
        if at < 0:
            at = max(0, text.find(chunk.text[:200]))
        centre = at + len(chunk.text) // 2
        start = max(head_chars, centre - region_chars // 2)
        end = min(len(text), start + region_chars)
        start = max(head_chars, end - region_chars)
        head = text[:head_chars]
        region = text[start:end]
        doc_open, doc_close = self.prompt.document_template.split("{doc_content}", 1)
        glossary = self.prompt.render_document("")[len(doc_open) + len(doc_close) :] if self.prompt.glossary else ""
        return [
            {"type": "text", "text": doc_open + head + "\n[... document continues ...]\n"},
            {"type": "text", "text": region + ("\n[... document continues ...]" if end < len(text) else "") + doc_close + glossary},
        ]

    def build_group_request(self, document: Document, chunks: Sequence[Chunk]) -> tuple[dict[str, Any], list[str]]:
        """One request that situates every chunk of `document`: chunks marked in place by id.

        Returns the parameters and the ids that were marked (chunks not found verbatim in the
        document cannot be marked and are left for per-chunk requests).
        """
        text = document.text
        spans: list[tuple[int, int, str]] = []
        for position, chunk in enumerate(chunks):
            at = text.find(chunk.text) if chunk.text else -1
            if at < 0 or any(s < at + len(chunk.text) and at < e for s, e, _ in spans):
                continue
            spans.append((at, at + len(chunk.text), str(position)))
        spans.sort()
        pieces, last = [], 0
        for start, end, ident in spans:
            pieces += [text[last:start], f'<chunk id="{ident}">', text[start:end], "</chunk>"]
            last = end
        pieces.append(text[last:])
        marked = "".join(pieces)
        answer_tokens = min(self.info.max_output_tokens, 150 * len(spans) + 100)
        params = {
            "model": self.model,
            "max_tokens": answer_tokens,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": self.prompt.render_document(marked)},
                        {"type": "text", "text": GROUPED_INSTRUCTIONS},
                    ],
                }
            ],
        }
        return params, [ident for _, _, ident in spans]

    @staticmethod
    def parse_group(text: str, ids: Iterable[str]) -> dict[str, str]:
        """Contexts by marked id from a grouped answer; missing or empty ones are left out."""
        wanted = set(ids)
        found: dict[str, str] = {}
        for ident, context in _GROUPED_CONTEXT.findall(text):
            context = " ".join(context.split())
            if ident in wanted and context and "<context" not in context and ident not in found:
                found[ident] = context
        return found

    # -- calls ----------------------------------------------------------------------------------

    def generate(self, document: Document, chunk: Chunk) -> Generation:
        request = self.build_request(document, chunk)
        message, usage = self._call(request.params)
        return Generation(_text(message), usage, request.windowed)

    async def agenerate(self, document: Document, chunk: Chunk) -> Generation:
        request = self.build_request(document, chunk)
        message, usage = await self._acall(request.params)
        return Generation(_text(message), usage, request.windowed)

    async def agenerate_group(self, document: Document, chunks: Sequence[Chunk]) -> tuple[dict[str, str], TokenUsage]:
        """Contexts for several chunks of one document in one request: chunk id -> context."""
        params, ids = self.build_group_request(document, chunks)
        if not ids:
            return {}, TokenUsage()
        message, usage = await self._acall(params)
        by_position = self.parse_group(_text(message), ids)
        return {chunks[int(i)].id: ctx for i, ctx in by_position.items()}, usage

    def generate_group(self, document: Document, chunks: Sequence[Chunk]) -> tuple[dict[str, str], TokenUsage]:
        """`agenerate_group` through the sync client."""
        params, ids = self.build_group_request(document, chunks)
        if not ids:
            return {}, TokenUsage()
        message, usage = self._call(params)
        by_position = self.parse_group(_text(message), ids)
        return {chunks[int(i)].id: ctx for i, ctx in by_position.items()}, usage

    def _call(self, params: dict[str, Any]) -> tuple[Any, TokenUsage]:
        sdk = import_sdk("anthropic", "anthropic", "Anthropic")
        try:
            raw = self._sync().messages.with_raw_response.create(**params)
            message = raw.parse()
        except Exception as exc:
            raise translate_error(exc, sdk) from exc
        return message, _usage(message, raw.retries_taken)

    async def _acall(self, params: dict[str, Any]) -> tuple[Any, TokenUsage]:
        client = self._async()
        if client is None:
            return await asyncio.to_thread(self._call, params)
        sdk = import_sdk("anthropic", "anthropic", "Anthropic")
        try:
            raw = await client.messages.with_raw_response.create(**params)
            message = await raw.parse()
        except Exception as exc:
            raise translate_error(exc, sdk) from exc
        return message, _usage(message, raw.retries_taken)

    # -- batches ----------------------------------------------------------------------------------

    def batch_client(self) -> Any:
        """The sync client's Message Batches resource (first-party API only)."""
        client = self._sync()
        batches = getattr(getattr(client, "messages", None), "batches", None)
        if batches is None:
            raise RunError("this client has no Message Batches API; use mode='realtime'")
        return batches

    @staticmethod
    def parse_message(message: Any) -> tuple[str, TokenUsage]:
        return _text(message), _usage(message, 0)


def _text(message: Any) -> str:
    parts = [getattr(block, "text", "") for block in getattr(message, "content", []) or []]
    text = " ".join(p.strip() for p in parts if p and p.strip())
    if not text:
        raise GenerationError("the model returned no text for this chunk")
    return text


def _usage(message: Any, retries: int) -> TokenUsage:
    return anthropic_usage(message.usage, retries)


def anthropic_usage(usage: Any, retries: int = 0) -> TokenUsage:
    """A Messages API ``usage`` (the SDK object or its dict form) as one request's `TokenUsage`.

    Example:
        >>> anthropic_usage({"input_tokens": 12, "output_tokens": 40, "cache_read_input_tokens": 5000}).cache_read_tokens
        5000
    """
    def get(obj: Any, name: str) -> Any:
        return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)

    creation = get(usage, "cache_creation")
    write_1h = int(get(creation, "ephemeral_1h_input_tokens") or 0) if creation is not None else 0
    write_total = int(get(usage, "cache_creation_input_tokens") or 0)
    return TokenUsage(
        input_tokens=int(get(usage, "input_tokens") or 0),
        output_tokens=int(get(usage, "output_tokens") or 0),
        cache_write_tokens=write_total - write_1h,
        cache_write_1h_tokens=write_1h,
        cache_read_tokens=int(get(usage, "cache_read_input_tokens") or 0),
        requests=1,
        retries=int(retries or 0),
    )


