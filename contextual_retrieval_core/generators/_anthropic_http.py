"""The Anthropic SDK's edges: the middleware that stops spend-limit and credit-balance answers and
times 429 streaks, and SDK errors translated into the generator's errors."""

from __future__ import annotations

import json
from typing import Any

from contextual_retrieval_core._sdk import error_chain
from contextual_retrieval_core.errors import ContextualRetrievalError
from contextual_retrieval_core.generators.base import (
    SPEND_LIMIT_WORDS,
    FatalGenerationError,
    GenerationError,
    RateLimitClock,
    TransientGenerationError,
    is_transient,
)

__all__ = ["SpendLimitReached", "RunGaveUp", "spend_limit_message", "guarded", "SyncGuard", "AsyncGuard", "translate_error"]

#: "You have reached your specified API usage limits", "... your workspace's spend limit",
#: "Your credit balance is too low to access the Anthropic API"
_SPEND_LIMIT = SPEND_LIMIT_WORDS
_SPEND_LIMIT_TYPES = frozenset({"invalid_request_error", "rate_limit_error", "billing_error"})


class SpendLimitReached(ContextualRetrievalError):
    """Raised by the middleware on a spend-limit or credit-balance answer: never retried."""


class RunGaveUp(ContextualRetrievalError, RuntimeError):
    """Raised by the middleware before an attempt once the run gave up (`RateLimitClock.stopped`):
    never retried, so a request retrying in a worker thread ends."""


def spend_limit_message(status: int, body: str) -> str | None:
    """The API's message when an error answer says the spend limit is reached or the credit
    balance is too low (a 400 invalid_request_error or a 429 rate_limit_error), else None.

    Example:
        >>> spend_limit_message(400, '{"type": "error", "error": {"type": "invalid_request_error", '
        ...     '"message": "Your credit balance is too low to access the Anthropic API."}}')
        'Your credit balance is too low to access the Anthropic API.'
        >>> spend_limit_message(429, '{"type": "error", "error": {"type": "rate_limit_error", '
        ...     '"message": "Number of request tokens has exceeded your per-minute rate limit"}}') is None
        True
    """
    if status not in (400, 402, 403, 429):
        return None
    try:
        error = json.loads(body)["error"]
        kind, message = str(error.get("type")), str(error.get("message"))
        code = str((error.get("details") or {}).get("error_code", ""))
    except Exception:
        return None
    if kind in _SPEND_LIMIT_TYPES and (_SPEND_LIMIT.search(message) or "spend_limit" in code):
        return message
    return None


class _Guard:
    """SDK middleware: a spend-limit / credit-balance answer raises `SpendLimitReached` before the
    SDK retries it, and every status goes to the generator's `RateLimitClock`."""

    def __init__(self, clock: RateLimitClock | None = None) -> None:
        self.__name__ = "contextual_retrieval_guard"
        self.clock = clock or RateLimitClock()

    def _refuse_if_stopped(self) -> None:
        if self.clock.stopped:
            raise RunGaveUp("the run gave up (sustained rate limiting); this request is not retried")

    def _check(self, status: int, body: str) -> None:
        message = spend_limit_message(status, body)
        if message is not None:
            raise SpendLimitReached(message)


class SyncGuard(_Guard):
    def __call__(self, request: Any, call_next: Any) -> Any:
        self._refuse_if_stopped()
        response = call_next(request)
        status = response.status_code
        self.clock.saw(status)
        if status in (400, 402, 403, 429):
            self._check(status, response.http_response.read().decode("utf-8", "replace"))
        return response


class AsyncGuard(_Guard):
    async def __call__(self, request: Any, call_next: Any) -> Any:
        self._refuse_if_stopped()
        response = await call_next(request)
        status = response.status_code
        self.clock.saw(status)
        if status in (400, 402, 403, 429):
            self._check(status, (await response.http_response.aread()).decode("utf-8", "replace"))
        return response


def guarded(client: Any, guard: Any) -> Any:
    """A copy of the user's client with the spend-limit guard appended (theirs is untouched)."""
    with_options = getattr(client, "with_options", None)
    middleware = getattr(client, "middleware", None)
    if with_options is None or middleware is None:
        return client
    try:
        return with_options(middleware=[*middleware, guard])
    except TypeError:  # an SDK without middleware support
        return client


_SPEND_STOP = (
    "Anthropic stopped the run (spend limit or credit balance): {}. Contexts generated so far are "
    "stored; raise the limit or add credits, then run again to resume"
)


def translate_error(exc: Exception, sdk: Any) -> Exception:
    """SDK errors -> ours: fatal for the run (spend limit, auth) or for this chunk only."""
    for chain in error_chain(exc):
        if isinstance(chain, SpendLimitReached):
            return FatalGenerationError(_SPEND_STOP.format(chain))
        if isinstance(chain, RunGaveUp):
            return GenerationError(str(chain))
    if isinstance(exc, sdk.AuthenticationError):
        return FatalGenerationError("Anthropic rejected the API key (401); check ANTHROPIC_API_KEY")
    if isinstance(exc, sdk.PermissionDeniedError):
        return FatalGenerationError(f"Anthropic denied the request (403): {getattr(exc, 'message', exc)}")
    if isinstance(exc, sdk.APIStatusError):  # a client without our middleware (Bedrock, Vertex)
        message = spend_limit_message(exc.status_code, json.dumps(exc.body) if isinstance(exc.body, dict) else "")
        if message is not None:
            return FatalGenerationError(_SPEND_STOP.format(message))
    if isinstance(exc, sdk.NotFoundError):
        return FatalGenerationError(f"Anthropic does not know this model (404): {getattr(exc, 'message', exc)}")
    if isinstance(exc, sdk.BadRequestError):
        return GenerationError(f"Anthropic rejected the request (400): {getattr(exc, 'message', exc)}")
    if isinstance(exc, GenerationError):
        return exc
    if isinstance(exc, ValueError):  # a malformed response body (JSONDecodeError): not retried by the SDK
        return GenerationError(f"Anthropic returned an unreadable response: {exc}")
    kind = TransientGenerationError if is_transient(exc) else GenerationError
    return kind(f"context generation failed after the SDK's retries: {type(exc).__name__}: {exc}")
