"""The `ContextGenerator` protocol: (document, chunk) -> a short situating context.

A generator returns a `Generation`: the context text and the token usage of the request that made
it (zero usage for generators that call no paid API). `name`, `model` and `prompt_identity` are
part of the context-store key, so two generators, models or prompts never share a stored context.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from contextual_retrieval_core._sdk import error_chain
from contextual_retrieval_core.errors import ContextualRetrievalError
from contextual_retrieval_core.types import Chunk, Document

__all__ = [
    "ContextGenerator",
    "Generation",
    "TokenUsage",
    "GenerationError",
    "TransientGenerationError",
    "FatalGenerationError",
    "is_transient",
    "SPEND_LIMIT_WORDS",
    "RateLimitedTooLong",
    "RateLimitClock",
    "ReportsRateLimits",
    "PromptCaching",
    "BatchGeneration",
    "GroupedGeneration",
    "label_of",
    "SyncPath",
]



@dataclass
class TokenUsage:
    """Tokens of one or more requests, as the Messages API reports them.

    Attributes:
        input_tokens: uncached input tokens.
        output_tokens: generated tokens.
        cache_write_tokens: tokens written to the prompt cache with the 5-minute TTL.
        cache_write_1h_tokens: tokens written with the 1-hour TTL (priced 2x instead of 1.25x).
        cache_read_tokens: tokens read from the prompt cache (priced 0.1x).
        requests: HTTP requests that returned a result.
        retries: extra attempts the SDK made (429/5xx/timeouts) before they returned.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    cache_read_tokens: int = 0
    requests: int = 0
    retries: int = 0

    def __iadd__(self, other: TokenUsage) -> TokenUsage:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self

    def to_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: dict | None) -> TokenUsage:
        data = data or {}
        return cls(**{k: int(v) for k, v in data.items() if k in cls.__dataclass_fields__})


@dataclass
class Generation:
    """A generated context and what it cost."""

    context: str
    usage: TokenUsage = field(default_factory=TokenUsage)
    #: the document was too long for the model and was windowed (head + region around the chunk)
    windowed: bool = False


class GenerationError(ContextualRetrievalError, RuntimeError):
    """A context could not be generated (after the SDK's own retries)."""


class TransientGenerationError(GenerationError):
    """A context could not be generated for a reason that may pass: a rate limit (429), a server
    error (5xx, overloaded), a timeout or a dropped connection. The `Contextualizer` retries the
    chunk in a later round."""


#: words of an API answer that says the spend limit is reached or the credit balance is too low
#: (never transient: retrying cannot help)
SPEND_LIMIT_WORDS = re.compile(r"spend(ing)? limit|usage limits?\b|credit balance", re.IGNORECASE)
_TRANSIENT_STATUS = frozenset({408, 409, 429})
#: exception class names (any SDK's, any framework's) that mean "try again later"
_TRANSIENT_NAMES = ("RateLimit", "Timeout", "Overloaded", "InternalServer", "ServiceUnavailable", "APIConnection",
                    "ConnectError", "ConnectionError", "RemoteProtocolError", "ReadError", "WriteError")


def _timeout_errors() -> tuple[type[BaseException], ...]:
    """TimeoutError, and asyncio's where it is another class (Python 3.10) and loaded (an asyncio
    timeout cannot be raised before asyncio is imported)."""
    aio = sys.modules.get("asyncio")
    return (TimeoutError,) if aio is None else (TimeoutError, aio.TimeoutError)


def is_transient(exc: BaseException) -> bool:
    """Whether a generation failure may pass if the chunk is tried again later.

    Our own errors say so by class (`TransientGenerationError` yes, any other `GenerationError`
    no). An exception from a framework or another provider's SDK is judged by what it carries,
    following its causes: an HTTP status (``status_code`` or ``status``: 408, 409, 429 and 5xx
    are transient, other statuses are not), Python's `ConnectionError` and `TimeoutError`, or a
    class name that says rate limit, timeout, overloaded, internal server error or connection
    error. A message about a spend limit or the credit balance is never transient.

    Example:
        >>> is_transient(TransientGenerationError("529 overloaded")), is_transient(GenerationError("no text"))
        (True, False)
        >>> is_transient(ConnectionResetError("connection reset by peer"))
        True
    """
    for error in error_chain(exc):
        if isinstance(error, GenerationError):
            return isinstance(error, TransientGenerationError)
        if SPEND_LIMIT_WORDS.search(str(error)):
            return False
        if isinstance(error, (ConnectionError, *_timeout_errors())):
            return True
        status = getattr(error, "status_code", None)
        if status is None:
            status = getattr(error, "status", None)
        if isinstance(status, int) and not isinstance(status, bool):
            return status in _TRANSIENT_STATUS or 500 <= status < 600
        if any(name in type(error).__name__ for name in _TRANSIENT_NAMES):
            return True
    return False


class FatalGenerationError(GenerationError):
    """Generation must stop for the whole run: spend limit reached, invalid API key, ...

    Contexts generated before it stay in the store; the next run resumes from there.
    """


class RateLimitedTooLong(FatalGenerationError):
    """The API answered nothing but rate-limit errors (429) for longer than the run allows."""


class RateLimitClock:
    """Since when a client's answers have been nothing but 429s (thread-safe).

    Its SDK middleware calls `saw` with every HTTP status, retries included; any other status
    ends the streak.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: float | None = None
        #: set when a run gave up: the middleware then refuses every further attempt, so a request
        #: still retrying in a worker thread ends instead of retrying on (and blocking exit)
        self.stopped = False

    def saw(self, status: int) -> None:
        with self._lock:
            if status != 429:
                self._since = None
            elif self._since is None:
                self._since = time.monotonic()

    def since(self) -> float | None:
        """`time.monotonic()` of the first 429 of the current streak; None when the last answer
        was not a 429 (or none came yet)."""
        with self._lock:
            return self._since


@runtime_checkable
class ReportsRateLimits(Protocol):
    """A generator that can tell since when its API has answered only 429s."""

    def rate_limited_since(self) -> float | None:
        ...

    def stop_retrying(self, stop: bool = True) -> None:
        """Refuse (True) or allow again (False) every further request attempt of this generator:
        a run that gave up ends the requests still retrying in its worker threads."""
        ...


@runtime_checkable
class ContextGenerator(Protocol):
    """Writes a short context that situates a chunk within its document.

    Attributes:
        name: a stable name of the generator kind ("anthropic", "structural", ...).
        model: the model id ("" when none).
        prompt_identity: a hash of the prompt (see `ContextPrompt.identity`), "" when none.
        is_llm: False for generators that call no language model (labelled in reports).
    """

    name: str
    model: str
    prompt_identity: str
    is_llm: bool

    @property
    def label(self) -> str:
        """How usage reports name the generator (e.g. "structural (no LLM)"); `name` when absent."""
        ...

    def generate(self, document: Document, chunk: Chunk) -> Generation:
        ...

    async def agenerate(self, document: Document, chunk: Chunk) -> Generation:
        ...


def label_of(generator: Any) -> str:
    """The generator's `label`; its `name` for a generator that declares no `label`."""
    return str(getattr(generator, "label", None) or generator.name)


# -- optional capabilities: declared by implementing them, checked with isinstance ----------------


@runtime_checkable
class SyncPath(Protocol):
    """A generator that may hold a synchronous path besides its async one.

    The synchronous `Contextualizer.contextualize` runs on the Contextualizer's own background
    event loop; for a generator whose `has_sync_path` is True it calls `generate` in threads
    instead of awaiting `agenerate`, so the generator's async clients stay on the loops their
    owner awaits them on. A generator with only an async path is awaited on the background loop,
    which outlives the call, so its connections stay valid from one call to the next.
    """

    @property
    def has_sync_path(self) -> bool:
        ...


@runtime_checkable
class PromptCaching(Protocol):
    """A generator whose requests cache the document (one cache write per document)."""

    #: the shortest prefix the model caches (None: unknown; the first request then probes)
    cache_min_tokens: int | None

    def cacheable(self, document: Document) -> bool | None:
        """Whether the document's prefix reaches the cache minimum (None: not known yet)."""
        ...

    def learn_cacheable(self, document: Document, cacheable: bool) -> None:
        """Record what a probing request's usage showed."""
        ...

    def document_tokens(self, document: Document, *, exact: bool = False) -> int:
        """Tokens of the cached document block."""
        ...


@runtime_checkable
class BatchGeneration(Protocol):
    """A generator with a Message Batches API (`Contextualizer(mode="batch")`)."""

    def batch_client(self) -> Any:
        """The SDK's batches resource (create / retrieve / results)."""
        ...

    def build_request(self, document: Document, chunk: Chunk, *, cache_ttl: Any = None) -> Any:
        """One chunk's request: `.params` (the Messages API body) and `.windowed`."""
        ...

    def parse_message(self, message: Any) -> tuple[str, TokenUsage]:
        """A batch result's message as (context, usage)."""
        ...


@runtime_checkable
class GroupedGeneration(Protocol):
    """A generator that can situate several chunks of one document in one request."""

    async def agenerate_group(self, document: Document, chunks: Sequence[Chunk]) -> tuple[dict[str, str], TokenUsage]:
        ...

    def generate_group(self, document: Document, chunks: Sequence[Chunk]) -> tuple[dict[str, str], TokenUsage]:
        ...

    def build_group_request(self, document: Document, chunks: Sequence[Chunk]) -> tuple[dict[str, Any], list[str]]:
        ...

    def parse_group(self, text: str, ids: Any) -> dict[str, str]:
        ...
