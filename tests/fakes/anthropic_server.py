"""`FakeAnthropicServer`: the Anthropic Messages and Message Batches APIs on a loopback port.

Point the real SDK at it::

    with FakeAnthropicServer() as server:
        client = anthropic.Anthropic(api_key=server.api_key, base_url=server.url, max_retries=2)
        msg = client.messages.create(model="claude-haiku-4-5", max_tokens=200, messages=[...])

`anthropic.AsyncAnthropic` works the same way. Everything the server knows lives in the server
object, so clients can come and go (a batch created by one client can be polled by another).

What is emulated
================

Routes (the wire format of anthropic SDK 2.16.0)
    POST   /v1/messages                          non-streaming Messages API (stream=true -> 400)
    POST   /v1/messages/count_tokens             {"input_tokens": n}
    POST   /v1/messages/batches                  create a Message Batch
    GET    /v1/messages/batches                  list (limit / after_id / before_id paging)
    GET    /v1/messages/batches/{id}             retrieve
    GET    /v1/messages/batches/{id}/results     JSONL results (the batch's `results_url`)
    POST   /v1/messages/batches/{id}/cancel      cancel
    DELETE /v1/messages/batches/{id}             delete an ended batch
Errors are `{"type": "error", "error": {"type": ..., "message": ...}, "request_id": ...}`.

Authentication
    The key may come as `x-api-key: KEY` or `Authorization: Bearer KEY` (SDK 2.16 sends
    `api_key` as a Bearer token); anything else is 401 authentication_error. The
    `anthropic-version` header is required (400 otherwise).

Validation (400 invalid_request_error unless said otherwise)
    model (non-empty string; 404 not_found_error when `models` is given and it is not listed),
    max_tokens (int >= 1), messages (non-empty list of {role: user|assistant, content: str |
    non-empty list of blocks}), non-empty text blocks, cache_control ({"type": "ephemeral",
    "ttl"?: "5m"|"1h"}), at most 4 cache breakpoints, no 1h breakpoint after a 5m one, prompt
    within `context_window` tokens, unknown top-level fields ("Extra inputs are not permitted"),
    and ANY `temperature`, `top_p` or `top_k` field -> "sampling parameters are not supported
    for this model". Bodies over `max_request_bytes` are 413 request_too_large.

Tokens
    `count_tokens(text) = ceil(len(text) / 4)` (characters, not bytes). A request's input is the
    sum over its blocks, in prompt order: tools (each tool's JSON), system blocks, then every
    message's content blocks (text blocks count their text, image blocks `image_tokens(w, h)`,
    other blocks their JSON).

Images
    An image block is `{"type": "image", "source": {"type": "base64", "media_type": ..., "data":
    ...}}`: media_type image/jpeg, png, gif or webp and matching the decoded bytes (Pillow), at
    most 5 MB and 8000 pixels a side, else 400 ("Could not process image" for bytes that do not
    decode). URL sources are refused (nothing is fetched). It costs `image_tokens(w, h)` =
    ceil(w * h / 750) after scaling to 1568 pixels a side and 1.15 megapixels, and it enters a
    cache prefix's key by the sha256 of its bytes, so the same image in the same place is a cache
    hit and any other image is not. `<frame>...</frame>` and `<crop>...</crop>` are read as a
    document and a chunk when answering.

Prompt caching
    * Breakpoints are blocks carrying `cache_control` (a top-level `cache_control` marks the last
      block). A breakpoint's prefix is the model plus every block up to and including it; its key
      is a sha256 over (model, each block's role, message index, type and text) and ignores the
      cache_control values. Only exact prefixes match.
    * A prefix shorter than the model's minimum (`min_cache_tokens`; defaults: claude-haiku-4-5*
      4096, claude-3-haiku* / claude-3-5-haiku* 2048, claude-sonnet-4* / claude-opus-4* 1024,
      anything else 1024) is silently never cached: no error, no write, no read.
    * Read: the LAST eligible breakpoint whose entry is live is read (its prefix tokens become
      `cache_read_input_tokens`, and its TTL is refreshed from now); none -> no read.
    * Write: every eligible breakpoint after the read one is written; the tokens between the read
      point (or 0) and the last eligible breakpoint are `cache_creation_input_tokens`, each
      segment booked under the TTL of the breakpoint that ends it (`cache_creation`
      `ephemeral_5m_input_tokens` / `ephemeral_1h_input_tokens`).
    * The rest of the prompt is `input_tokens`; input_tokens + read + write == the prompt's tokens.
    * An entry becomes readable only when the response that wrote it STARTS: after its
      `latency_s` sleep (before the per-output-token sleep). Requests processed before that each
      pay the write again (each one counts in `writes_per_prefix`). Batch requests publish at once.
    * Entries live 5 min / 1 h (times `ttl_scale`) from their last use, measured on `clock`.
    The lookup happens when the request is processed (after auth and any injected fault), at
    `clock()`.

Answers
    Deterministic, 60-100 tokens: "This chunk is from the document beginning '<first 8 words of
    the <document>...</document> text>' and covers '<first 8 words of the last <chunk>...</chunk>
    in the final user text block>'." plus filler sentences. GROUPED prompts, whose document
    (else final block) holds one or more `<chunk id="ID">...</chunk>` markers, are answered as
    `<contexts>` + one `<context id="ID">...</context>` line (30-60 tokens each, naming the
    chunk's first words) per marker + `</contexts>`. Faults: `grouped_drop_ids` are left out,
    `grouped_malform_ids` have no closing tag, `grouped_empty_ids` are empty (these are sets on the
    server; edit them at any time). `stop_sequences` cut the answer (stop_reason
    "stop_sequence"); an answer longer than max_tokens is cut to max_tokens*4 characters
    (stop_reason "max_tokens"); an assistant prefill is not repeated. output_tokens =
    count_tokens(answer). `<` and `>` are dropped from the quoted excerpts.

Latency and concurrency
    Each successful message response sleeps `latency_s` (then its cache writes become visible),
    then `per_output_token_s * output_tokens`, then is sent. Requests are served concurrently
    (ThreadingHTTPServer, daemon threads, listen backlog 128); `stats()["max_in_flight"]`.

Faults (on POST /v1/messages unless a `path` is given; served after auth, before validation)
    fail_next(status, times, headers, body, path)  queued error responses (default header
                                                   retry-after-ms: 1, so SDK retries are instant)
    malformed_next(times)                          a 200 whose body is truncated JSON
    hang_next(seconds, times)                      sleep, then serve normally (and bill)
    fail_rate(p, statuses, seed)                   a seeded random fraction p of requests fail
                                                   (each with retry-after-ms: 1)
    spend_limit(on=True)                           every following POST /v1/messages and batch
                                                   create: 429 rate_limit_error "You have reached
                                                   your workspace's spend limit..." with
                                                   details.error_code "enforced_spend_limit_reached"
                                                   (the SDK raises EnforcedSpendLimitReachedError,
                                                   a RateLimitError, after its retries)
    spend_limit(on, status=400, message=CREDIT_BALANCE_MESSAGE)  the same with another answer, e.g.
                                                   the API's 400 invalid_request_error for an empty
                                                   credit balance or a reached usage limit
    Injected faults do not bill tokens and do not touch the cache (a hang is not a fault response:
    it is served normally afterwards). NOTE: the SDK treats `retry-after: 0` as "no advice" and
    backs off 0.5 s * jitter; use `retry-after-ms: 1` for instant retries.

Message Batches
    Create validates custom_id (^[a-zA-Z0-9_-]{1,64}$), uniqueness, count (`max_batch_requests`)
    and body size (`max_batch_bytes`, 413). Requests are processed in order on a background
    thread with the same cache emulation (usage.service_tier "batch"), `batch_delay_s` apart;
    while `server.batch_hold` (a threading.Event) is SET, processing pauses. request_counts show
    every request as `processing` until the batch ends (as the real API does); then
    processing_status "ended", `ended_at`, and `results_url = {server.url}/v1/messages/batches/
    {id}/results`, which serves JSONL (content-type application/binary) of {"custom_id",
    "result": {"type": "succeeded", "message": ...} | {"type": "errored", "error": {...}} |
    {"type": "canceled"}}, in request order (or seeded-shuffled with `shuffle_batch_results`).
    A request that fails validation is "errored" (invalid_request_error).

Inspection
    server.requests            every request (RecordedRequest: method, path, headers without the
                               key, body, arrival on `clock`, status, usage of a 200 message)
    server.requests_to(path)   a snapshot for one path
    server.stats()             a dict, see `FakeAnthropicServer.stats`
    server.cache_writes_containing(text)  writes of prefixes whose breakpoint block contains text
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import random
import re
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .loopback import open_connections, serve_in_thread, stop_server

__all__ = [
    "DEFAULT_MIN_CACHE_TOKENS",
    "FakeAnthropicServer",
    "RecordedRequest",
    "count_tokens",
    "image_tokens",
]

#: model-name prefix -> minimum cacheable prefix length in tokens (longest matching prefix wins).
DEFAULT_MIN_CACHE_TOKENS: dict[str, int] = {
    "claude-haiku-4-5": 4096,
    "claude-3-haiku": 2048,
    "claude-3-5-haiku": 2048,
    "claude-sonnet-4": 1024,
    "claude-opus-4": 1024,
}
FALLBACK_MIN_CACHE_TOKENS = 1024
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
MAX_BREAKPOINTS = 4
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
SAMPLING_FIELDS = ("temperature", "top_p", "top_k")
KNOWN_FIELDS = frozenset(
    {
        "model", "messages", "max_tokens", "system", "stop_sequences", "stream", "metadata", "tools",
        "tool_choice", "thinking", "service_tier", "cache_control", "container", "diagnostics",
        "inference_geo", "output_config", "speed", "mcp_servers", "context_management",
    }
)  # fmt: skip
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
FAULT_MESSAGES = {
    429: "Number of request tokens has exceeded your per-minute rate limit (injected fault)",
    500: "Internal server error (injected fault)",
    529: "Overloaded (injected fault)",
}
SPEND_LIMIT_MESSAGE = (
    "You have reached your workspace's spend limit for this month. Raise the limit in the Console "
    "or wait until it resets."
)
CREDIT_BALANCE_MESSAGE = (
    "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to "
    "upgrade or purchase credits."
)
USAGE_LIMIT_MESSAGE = (
    "You have reached your specified API usage limits. You will regain access on 2026-01-01 at 00:00 UTC."
)
MESSAGES_PATH = "/v1/messages"
IMAGE_MEDIA_TYPES = {"image/jpeg": "JPEG", "image/png": "PNG", "image/gif": "GIF", "image/webp": "WEBP"}
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_IMAGE_EDGE = 8000
BATCHES_PATH = "/v1/messages/batches"

_DOCUMENT = re.compile(r"<(?:document|frame)>(.*?)</(?:document|frame)>", re.DOTALL)
_CHUNK = re.compile(r"<(?:chunk|crop)>(.*?)</(?:chunk|crop)>", re.DOTALL)
_GROUPED_CHUNK = re.compile(r'<chunk id="([^"]*)">(.*?)</chunk>', re.DOTALL)
_FILLERS = (
    "It gives the surrounding section and purpose of the passage so that a search for its topic "
    "finds it.",
    "The passage continues the document's discussion and refers to names and terms introduced "
    "earlier on.",
    "Read with the rest of the document, it explains what the chunk describes and why it matters "
    "there.",
)
_SHORT_FILLER = "It situates this chunk within the document for retrieval."


def image_tokens(width: int, height: int) -> int:
    """The fake's image price, the API's published rule: ``ceil(w * h / 750)`` once the image is
    scaled to at most 1568 pixels a side and about 1.15 megapixels."""
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    return math.ceil(round(width * scale) * round(height * scale) / 750)


def _image_size(raw: bytes, media_type: str) -> tuple[int, int] | None:
    """(width, height) of an encoded image of `media_type`, or None when it does not decode as one."""
    import io

    from PIL import Image

    try:
        with Image.open(io.BytesIO(raw)) as img:
            img.load()
            if IMAGE_MEDIA_TYPES.get(media_type) != img.format:
                return None
            return img.size
    except Exception:
        return None


def count_tokens(text: str) -> int:
    """The fake's tokenizer: ceil(len(text) / 4) characters per token (0 for "")."""
    return math.ceil(len(text) / 4)


def _now_rfc3339(dt: datetime | None = None) -> str:
    dt = dt or datetime.now(timezone.utc)
    return dt.isoformat().replace("+00:00", "Z")


def _excerpt(text: str, words: int = 8, limit: int = 60) -> str:
    out = " ".join(text.split()[:words]).replace("<", "").replace(">", "")
    return out if len(out) <= limit else out[: limit - 3] + "..."


# -- records and internal state ---------------------------------------------------------------


@dataclass
class RecordedRequest:
    """One HTTP request as the server saw it.

    Attributes:
        method: "GET", "POST" or "DELETE".
        path: the path without the query string, e.g. "/v1/messages".
        query: the query string's parameters (first value of each).
        headers: lower-cased header names to values, without x-api-key and authorization.
        body: the parsed JSON body (None when absent or not JSON).
        arrival: `clock()` when the request arrived.
        wall_time: `time.time()` when the request arrived.
        status: the status answered (0 until answered).
        usage: the `usage` object of a 200 /v1/messages answer, else None.
        fault: "status" / "malformed" / "hang" / "spend_limit" / "rate" when a fault was injected.
    """

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    arrival: float
    wall_time: float
    status: int = 0
    usage: dict[str, Any] | None = None
    fault: str | None = None


@dataclass
class _Fault:
    kind: str  # "status" | "malformed" | "hang"
    path: str | None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    seconds: float = 0.0


@dataclass
class _Block:
    role: str  # "tools" | "system" | "user" | "assistant"
    message: int  # message index; -1 for tools and system
    type: str
    text: str
    tokens: int
    cache_control: dict[str, Any] | None


@dataclass
class _Parsed:
    model: str
    max_tokens: int
    blocks: list[_Block]
    stop_sequences: list[str]


@dataclass
class _Entry:
    ttl: float
    available_at: float | None = None  # None while the writing response has not started
    expires_at: float = math.inf

    def live(self, now: float) -> bool:
        return self.available_at is not None and self.available_at <= now < self.expires_at


@dataclass
class _Batch:
    id: str
    created: datetime
    items: list[tuple[str, Any]]
    results: list[dict[str, Any]] = field(default_factory=list)
    status: str = "in_progress"
    ended: datetime | None = None
    cancel_initiated: datetime | None = None
    cancel_requested: bool = False
    counts: Counter = field(default_factory=Counter)


class _ApiError(Exception):
    def __init__(
        self, status: int, message: str, error_type: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        fallback = "api_error" if status >= 500 else "invalid_request_error"
        self.error_type = error_type or ERROR_TYPES.get(status, fallback)
        self.details = details


@dataclass
class _Reply:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def _error_object(error_type: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"type": error_type, "message": message}
    if details is not None:
        error["details"] = details
    return error


# -- the server -------------------------------------------------------------------------------


class FakeAnthropicServer:
    """The Messages + Message Batches APIs with prompt-caching emulation on 127.0.0.1.

    Args:
        api_key: the key requests must carry (x-api-key or Authorization: Bearer).
        min_cache_tokens: an int for every model, or {model prefix: minimum} merged over
            `DEFAULT_MIN_CACHE_TOKENS` (longest matching prefix wins; fallback 1024).
        latency_s: sleep before a message response starts (cache writes become visible after it).
        per_output_token_s: further sleep per output token before the response is sent.
        clock: the clock for arrival times, cache visibility and TTLs (default time.monotonic).
        ttl_scale: multiplies the 5 min / 1 h TTLs (0.001 -> 0.3 s / 3.6 s).
        models: when given, the only accepted model names (others -> 404 not_found_error).
        context_window: the most input tokens a request may have.
        max_request_bytes: the largest /v1/messages body (413 above it).
        max_batch_requests / max_batch_bytes: Message Batch limits (400 / 413 above them).
        batch_delay_s: sleep before each batch request is processed.
        batch_hold: an Event; while it is set, batch processing pauses (default: a fresh Event,
            available as `server.batch_hold`).
        shuffle_batch_results: serve batch results in a seeded random order, not request order.
        grouped_drop_ids / grouped_malform_ids / grouped_empty_ids: grouped-answer faults.
        answerer: `(document, chunk, final user text) -> answer or None` for single-chunk prompts
            (e.g. a corpus's own golden questions); None answers as usual. Tokens, caching and
            limits apply to its answers as to the usual ones.

    Use as a context manager (or `start()` / `stop()`); `url` is the base_url for the SDK.
    """

    def __init__(
        self,
        api_key: str = "test-key",
        *,
        min_cache_tokens: Mapping[str, int] | int | None = None,
        latency_s: float = 0.0,
        per_output_token_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        ttl_scale: float = 1.0,
        models: Iterable[str] | None = None,
        context_window: int = 200_000,
        max_request_bytes: int = 32 * 1024 * 1024,
        max_batch_requests: int = 100_000,
        max_batch_bytes: int = 256 * 1024 * 1024,
        batch_delay_s: float = 0.0,
        batch_hold: threading.Event | None = None,
        shuffle_batch_results: bool = False,
        grouped_drop_ids: Iterable[str] = (),
        grouped_malform_ids: Iterable[str] = (),
        grouped_empty_ids: Iterable[str] = (),
        answerer: Callable[[str, str, str], str | None] | None = None,
    ) -> None:
        self.api_key = api_key
        self.answerer = answerer
        if isinstance(min_cache_tokens, int):
            self._min_default: int = min_cache_tokens
            self._min_by_prefix: dict[str, int] = {}
        else:
            self._min_default = FALLBACK_MIN_CACHE_TOKENS
            self._min_by_prefix = {**DEFAULT_MIN_CACHE_TOKENS, **dict(min_cache_tokens or {})}
        self.latency_s = latency_s
        self.per_output_token_s = per_output_token_s
        self.clock = clock
        self.ttl_scale = ttl_scale
        self.models = set(models) if models is not None else None
        self.context_window = context_window
        self.max_request_bytes = max_request_bytes
        self.max_batch_requests = max_batch_requests
        self.max_batch_bytes = max_batch_bytes
        self.batch_delay_s = batch_delay_s
        self.batch_hold = batch_hold if batch_hold is not None else threading.Event()
        self.shuffle_batch_results = shuffle_batch_results
        self.grouped_drop_ids: set[str] = set(grouped_drop_ids)
        self.grouped_malform_ids: set[str] = set(grouped_malform_ids)
        self.grouped_empty_ids: set[str] = set(grouped_empty_ids)

        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []  # tracebacks of bugs in the fake itself (answered as 500)
        self._lock = threading.RLock()
        self._stopping = threading.Event()
        self._faults: list[_Fault] = []
        self._spend_limit = False
        self._spend_answer: tuple[int, str, str, dict[str, Any] | None] = (
            429, "rate_limit_error", SPEND_LIMIT_MESSAGE, {"error_code": "enforced_spend_limit_reached"}
        )
        self._fail_p = 0.0
        self._fail_statuses: tuple[int, ...] = (429, 529, 500)
        self._fail_rng = random.Random(0)
        self._cache: dict[str, _Entry] = {}
        self._prefix_text: dict[str, str] = {}
        self._batches: dict[str, _Batch] = {}
        self._batch_order: list[str] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._in_flight = 0
        self._reset_stats()

    # -- lifecycle --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """http://127.0.0.1:<port>, the base_url for `anthropic.Anthropic`."""
        if self._httpd is None:
            raise RuntimeError("the server is not running; use it as a context manager")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> FakeAnthropicServer:
        self._stopping.clear()
        self._httpd, self._thread = serve_in_thread(_Server(("127.0.0.1", 0), _Handler), self, "FakeAnthropicServer")
        return self

    def stop(self) -> None:
        self._stopping.set()
        stop_server(self._httpd, self._thread)
        self._httpd, self._thread = None, None

    def open_connections(self) -> int:
        """How many client connections the server holds open now (kept alive between requests)."""
        return open_connections(self._httpd)

    def __enter__(self) -> FakeAnthropicServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- fault control ------------------------------------------------------------------------

    def fail_next(
        self,
        status: int,
        times: int = 1,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        *,
        path: str | None = MESSAGES_PATH,
    ) -> None:
        """Answer the next `times` requests to `path` (None: any path) with `status`.

        `headers` default to {"retry-after-ms": "1"}; pass {} for none. `body` (a dict -> JSON,
        or str/bytes sent as is) defaults to the API's error JSON for the status (429
        rate_limit_error, 500 api_error, 529 overloaded_error, ...).
        """
        hdrs = {"retry-after-ms": "1"} if headers is None else dict(headers)
        with self._lock:
            self._faults.extend(_Fault("status", path, status, hdrs, body) for _ in range(times))

    def malformed_next(self, times: int = 1, *, path: str | None = MESSAGES_PATH) -> None:
        """Answer the next `times` requests with a 200 whose JSON body is cut short."""
        with self._lock:
            self._faults.extend(_Fault("malformed", path) for _ in range(times))

    def hang_next(self, seconds: float, times: int = 1, *, path: str | None = MESSAGES_PATH) -> None:
        """Sleep `seconds` before handling the next `times` requests (then serve them normally)."""
        with self._lock:
            self._faults.extend(_Fault("hang", path, seconds=seconds) for _ in range(times))

    def fail_rate(self, p: float, statuses: Iterable[int] = (429, 529, 500), seed: int = 0) -> None:
        """Fail a seeded random fraction `p` of /v1/messages requests (retry-after-ms: 1); 0 stops."""
        with self._lock:
            self._fail_p = float(p)
            self._fail_statuses = tuple(statuses)
            self._fail_rng = random.Random(seed)

    def spend_limit(
        self, on: bool = True, *, status: int = 429, message: str = SPEND_LIMIT_MESSAGE, error_type: str | None = None
    ) -> None:
        """From now on (until `spend_limit(False)`), answer every message and batch-create request
        with a spend-limit error: by default the 429 "spend limit" answer; `status=400` with
        `message=CREDIT_BALANCE_MESSAGE` or `USAGE_LIMIT_MESSAGE` gives the API's 400
        invalid_request_error forms."""
        kind = error_type or ERROR_TYPES.get(status, "invalid_request_error")
        details = {"error_code": "enforced_spend_limit_reached"} if status == 429 and message == SPEND_LIMIT_MESSAGE else None
        with self._lock:
            self._spend_limit = on
            self._spend_answer = (status, kind, message, details)

    def clear_faults(self) -> None:
        """Drop queued faults and stop fail_rate and spend_limit."""
        with self._lock:
            self._faults.clear()
            self._fail_p = 0.0
            self._spend_limit = False

    # -- inspection ---------------------------------------------------------------------------

    def requests_to(self, path: str, method: str | None = None) -> list[RecordedRequest]:
        """The recorded requests for one path (and method), in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path == path and (method is None or r.method == method)]

    def min_cache_tokens(self, model: str) -> int:
        """The minimum cacheable prefix length for `model`."""
        best, best_len = self._min_default, -1
        for prefix, value in self._min_by_prefix.items():
            if model.startswith(prefix) and len(prefix) > best_len:
                best, best_len = value, len(prefix)
        return best

    def stats(self) -> dict[str, Any]:
        """Totals since start (or `reset`), as a new dict.

        Keys:
            requests: HTTP requests to POST /v1/messages (every outcome, retries included).
            messages: 200 message answers on /v1/messages.
            batch_messages: succeeded batch requests.
            invalid: /v1/messages requests rejected by validation or auth (4xx).
            faults: injected fault responses served (status, malformed, spend limit, fail_rate).
            fault_statuses: {status: count} of those (200 for malformed).
            hangs: hang faults served (these requests were then answered normally).
            input_tokens, output_tokens, cache_write_tokens, cache_write_5m_tokens,
            cache_write_1h_tokens, cache_read_tokens: token totals over messages + batch messages.
            cache_writes / cache_reads: answers with a write / a read.
            by_tier: {"standard": {...}, "batch": {...}} with the same token totals per tier.
            writes_per_prefix: {prefix key: times that prefix was written (paid for)}.
            max_in_flight: the most /v1/messages requests in progress at once.
            batches: Message Batches created.
            cache_entries: entries in the cache now (live, pending or expired-but-kept).
        """
        with self._lock:
            out = json.loads(json.dumps(self._stats))
            out["writes_per_prefix"] = dict(self._writes_per_prefix)
            out["fault_statuses"] = {int(k): v for k, v in self._stats["fault_statuses"].items()}
            out["max_in_flight"] = self._max_in_flight
            out["cache_entries"] = len(self._cache)
            return out

    def cache_writes_containing(self, text: str) -> int:
        """How many cache writes were paid for prefixes whose breakpoint block contains `text`."""
        with self._lock:
            return sum(n for key, n in self._writes_per_prefix.items() if text in self._prefix_text.get(key, ""))

    def clear_cache(self) -> None:
        """Forget every cache entry (as if all had expired)."""
        with self._lock:
            self._cache.clear()

    def reset(self) -> None:
        """Forget recorded requests, stats, faults and the cache (batches are kept)."""
        with self._lock:
            self.requests.clear()
            self._faults.clear()
            self._fail_p = 0.0
            self._spend_limit = False
            self._cache.clear()
            self._prefix_text.clear()
            self._reset_stats()

    def _reset_stats(self) -> None:
        tokens = {
            "input_tokens": 0,
            "output_tokens": 0,
            "cache_write_tokens": 0,
            "cache_write_5m_tokens": 0,
            "cache_write_1h_tokens": 0,
            "cache_read_tokens": 0,
        }
        self._stats: dict[str, Any] = {
            "requests": 0,
            "messages": 0,
            "batch_messages": 0,
            "invalid": 0,
            "faults": 0,
            "fault_statuses": {},
            "hangs": 0,
            **tokens,
            "cache_writes": 0,
            "cache_reads": 0,
            "by_tier": {"standard": dict(tokens), "batch": dict(tokens)},
            "batches": 0,
        }
        self._writes_per_prefix: Counter = Counter()
        self._max_in_flight = 0

    # -- HTTP dispatch ------------------------------------------------------------------------

    def _handle(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> _Reply:
        parts = urlsplit(target)
        path = parts.path.rstrip("/") or "/"
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        key_header = headers.pop("x-api-key", None)
        authorization = headers.pop("authorization", None)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        record = RecordedRequest(method, path, query, headers, body, self.clock(), time.time())
        is_messages = method == "POST" and path == MESSAGES_PATH
        with self._lock:
            self.requests.append(record)
            if is_messages:
                self._stats["requests"] += 1
                self._in_flight += 1
                self._max_in_flight = max(self._max_in_flight, self._in_flight)
        try:
            reply = self._route(record, raw, key_header, authorization)
        except _ApiError as exc:
            reply = self._error_reply(exc)
            if is_messages and exc.status < 500:
                with self._lock:
                    self._stats["invalid"] += 1
        except Exception:  # a bug in the fake: answer 500 and keep the traceback
            tb = traceback.format_exc()
            with self._lock:
                self.errors.append(tb)
            reply = self._error_reply(_ApiError(500, "fake server error: " + tb.splitlines()[-1]))
        finally:
            if is_messages:
                with self._lock:
                    self._in_flight -= 1
        record.status = reply.status
        return reply

    def _error_reply(self, exc: _ApiError, headers: Mapping[str, str] | None = None) -> _Reply:
        request_id = "req_" + uuid.uuid4().hex[:24]
        payload = {
            "type": "error",
            "error": _error_object(exc.error_type, exc.message, exc.details),
            "request_id": request_id,
        }
        return _Reply(exc.status, json.dumps(payload).encode(), headers={"request-id": request_id, **(headers or {})})

    def _json_reply(self, payload: Any, status: int = 200) -> _Reply:
        return _Reply(status, json.dumps(payload).encode(), headers={"request-id": "req_" + uuid.uuid4().hex[:24]})

    def _authorize(self, key_header: str | None, authorization: str | None) -> None:
        bearer = authorization[7:] if authorization and authorization.lower().startswith("bearer ") else None
        if key_header is None and bearer is None:
            raise _ApiError(401, "x-api-key header is required")
        if key_header != self.api_key and bearer != self.api_key:
            raise _ApiError(401, "invalid x-api-key")

    def _route(
        self, record: RecordedRequest, raw: bytes, key_header: str | None, authorization: str | None
    ) -> _Reply:
        self._authorize(key_header, authorization)
        if not record.headers.get("anthropic-version"):
            raise _ApiError(400, "anthropic-version: header is required")
        method, path = record.method, record.path
        segments = path.strip("/").split("/")
        if method == "POST" and path == MESSAGES_PATH:
            fault = self._take_fault(record)
            if fault is not None:
                return fault
            if len(raw) > self.max_request_bytes:
                raise _ApiError(413, "Request exceeds the maximum allowed number of bytes.")
            return self._messages(record)
        if method == "POST" and path == MESSAGES_PATH + "/count_tokens":
            fault = self._take_fault(record)
            if fault is not None:
                return fault
            parsed = self._parse(self._body_object(record), require_max_tokens=False)
            return self._json_reply({"input_tokens": sum(b.tokens for b in parsed.blocks)})
        if path == BATCHES_PATH and method in ("POST", "GET"):
            fault = self._take_fault(record)
            if fault is not None:
                return fault
            if method == "POST":
                return self._batch_create(record, raw)
            return self._batch_list(record.query)
        if segments[:3] == ["v1", "messages", "batches"] and len(segments) in (4, 5):
            fault = self._take_fault(record)
            if fault is not None:
                return fault
            batch_id = segments[3]
            tail = segments[4] if len(segments) == 5 else None
            if method == "GET" and tail is None:
                return self._json_reply(self._batch_object(self._get_batch(batch_id)))
            if method == "GET" and tail == "results":
                return self._batch_results(batch_id)
            if method == "POST" and tail == "cancel":
                return self._batch_cancel(batch_id)
            if method == "DELETE" and tail is None:
                return self._batch_delete(batch_id)
        raise _ApiError(404, f"Not found: {method} {path}")

    def _body_object(self, record: RecordedRequest) -> dict[str, Any]:
        if not isinstance(record.body, dict):
            raise _ApiError(400, "There was an error parsing the body: expected a JSON object")
        return record.body

    def _take_fault(self, record: RecordedRequest) -> _Reply | None:
        """Pop an injected fault that applies to this request, serve hangs; None to go on."""
        with self._lock:
            if self._spend_limit and record.method == "POST" and record.path in (MESSAGES_PATH, BATCHES_PATH):
                record.fault = "spend_limit"
                status, kind, message, details = self._spend_answer
                self._count_fault(status)
                exc = _ApiError(status, message, kind, details)
                return self._error_reply(exc, {"retry-after-ms": "1"})
            fault = None
            for i, f in enumerate(self._faults):
                if f.path is None or f.path == record.path:
                    fault = self._faults.pop(i)
                    break
            if (fault is None and self._fail_p > 0 and record.path == MESSAGES_PATH
                    and self._fail_rng.random() < self._fail_p):
                status = self._fail_rng.choice(self._fail_statuses)
                fault = _Fault("status", MESSAGES_PATH, status, {"retry-after-ms": "1"})
                record.fault = "rate"
        if fault is None:
            return None
        if fault.kind == "hang":
            record.fault = "hang"
            with self._lock:
                self._stats["hangs"] += 1
            self._stopping.wait(fault.seconds)
            if self._stopping.is_set():
                raise _ApiError(503, "the fake server is stopping", "api_error")
            return None
        with self._lock:
            self._count_fault(fault.status)
        if fault.kind == "malformed":
            record.fault = "malformed"
            return _Reply(200, b'{"id": "msg_truncated", "type": "message", "role": "assis')
        record.fault = record.fault or "status"
        if fault.body is None:
            message = FAULT_MESSAGES.get(fault.status, f"Injected fault {fault.status}")
            return self._error_reply(_ApiError(fault.status, message), fault.headers)
        data = fault.body if isinstance(fault.body, bytes) else (
            fault.body.encode() if isinstance(fault.body, str) else json.dumps(fault.body).encode()
        )
        return _Reply(fault.status, data, headers=dict(fault.headers))

    def _count_fault(self, status: int) -> None:
        self._stats["faults"] += 1
        counts = self._stats["fault_statuses"]
        counts[status] = counts.get(status, 0) + 1

    # -- messages -----------------------------------------------------------------------------

    def _messages(self, record: RecordedRequest) -> _Reply:
        params = self._body_object(record)
        if params.get("stream"):
            raise _ApiError(400, "stream: streaming is not supported by this fake server")
        parsed = self._parse(params)
        message, written = self._complete(parsed, "standard")
        record.usage = message["usage"]
        if self.latency_s > 0:
            self._stopping.wait(self.latency_s)
        self._publish(written)  # the response has started: its cache writes become visible
        delay = self.per_output_token_s * message["usage"]["output_tokens"]
        if delay > 0:
            self._stopping.wait(delay)
        return self._json_reply(message)

    def _parse(self, params: Any, *, require_max_tokens: bool = True) -> _Parsed:
        if not isinstance(params, dict):
            raise _ApiError(400, "There was an error parsing the body: expected a JSON object")
        for name in SAMPLING_FIELDS:
            if name in params:
                raise _ApiError(400, f"{name}: sampling parameters are not supported for this model")
        for name in params:
            if name not in KNOWN_FIELDS:
                raise _ApiError(400, f"{name}: Extra inputs are not permitted")
        model = params.get("model")
        if not isinstance(model, str) or not model:
            raise _ApiError(400, "model: Field required")
        if self.models is not None and model not in self.models:
            raise _ApiError(404, f"model: {model}")
        max_tokens = params.get("max_tokens")
        if require_max_tokens:
            if max_tokens is None:
                raise _ApiError(400, "max_tokens: Field required")
            if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
                raise _ApiError(400, "max_tokens: Input should be an integer greater than or equal to 1")
        stop_sequences = params.get("stop_sequences") or []
        if not isinstance(stop_sequences, list) or not all(isinstance(s, str) and s for s in stop_sequences):
            raise _ApiError(400, "stop_sequences: Input should be a list of non-empty strings")

        blocks: list[_Block] = []
        tools = params.get("tools")
        if tools is not None:
            if not isinstance(tools, list):
                raise _ApiError(400, "tools: Input should be a valid list")
            for i, tool in enumerate(tools):
                if not isinstance(tool, dict):
                    raise _ApiError(400, f"tools.{i}: Input should be a valid dictionary")
                blocks.append(self._block("tools", -1, tool, f"tools.{i}", kind="tool"))
        system = params.get("system")
        if isinstance(system, str):
            if system:
                blocks.append(_Block("system", -1, "text", system, count_tokens(system), None))
        elif isinstance(system, list):
            for i, block in enumerate(system):
                if not isinstance(block, dict) or block.get("type") != "text":
                    raise _ApiError(400, f"system.{i}: Input should be a text block")
                blocks.append(self._block("system", -1, block, f"system.{i}"))
        elif system is not None:
            raise _ApiError(400, "system: Input should be a valid string or list of text blocks")
        messages = params.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _ApiError(
                400, "messages: Field required" if messages is None else "messages: at least one message is required"
            )
        for m, message in enumerate(messages):
            if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
                raise _ApiError(400, f"messages.{m}.role: Input should be 'user' or 'assistant'")
            role, content = message["role"], message.get("content")
            if isinstance(content, str):
                if not content and not (m == len(messages) - 1 and role == "assistant"):
                    raise _ApiError(400, f"messages.{m}: all messages must have non-empty content")
                if content:
                    blocks.append(_Block(role, m, "text", content, count_tokens(content), None))
            elif isinstance(content, list) and content:
                for j, block in enumerate(content):
                    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                        raise _ApiError(400, f"messages.{m}.content.{j}: Input should be a content block")
                    blocks.append(self._block(role, m, block, f"messages.{m}.content.{j}"))
            else:
                raise _ApiError(400, f"messages.{m}: all messages must have non-empty content")

        top_cc = params.get("cache_control")
        if top_cc is not None:
            self._check_cache_control(top_cc, "cache_control")
            if blocks and blocks[-1].cache_control is None:
                blocks[-1].cache_control = top_cc
        breakpoints = [b for b in blocks if b.cache_control is not None]
        if len(breakpoints) > MAX_BREAKPOINTS:
            raise _ApiError(
                400,
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(breakpoints)}.",
            )
        seen_5m = False
        for b in breakpoints:
            ttl = b.cache_control.get("ttl", "5m")  # type: ignore[union-attr]
            if ttl == "1h" and seen_5m:
                raise _ApiError(
                    400, "a cache_control block with ttl='1h' must not come after one with ttl='5m'"
                )
            seen_5m = seen_5m or ttl == "5m"
        total = sum(b.tokens for b in blocks)
        if total > self.context_window:
            raise _ApiError(400, f"prompt is too long: {total} tokens > {self.context_window} maximum")
        return _Parsed(model, int(max_tokens or 0), blocks, list(stop_sequences))

    def _block(self, role: str, message: int, block: dict[str, Any], where: str, kind: str | None = None) -> _Block:
        cc = block.get("cache_control")
        if cc is not None:
            self._check_cache_control(cc, f"{where}.cache_control")
        btype = kind or block["type"]
        if btype == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise _ApiError(400, f"{where}.text: Field required")
            if not text:
                raise _ApiError(400, "messages: text content blocks must be non-empty")
        elif btype == "image":
            text, tokens = self._image(block, where)
            return _Block(role, message, btype, text, tokens, cc)
        else:
            text = json.dumps({k: v for k, v in block.items() if k != "cache_control"}, sort_keys=True)
        return _Block(role, message, btype, text, count_tokens(text), cc)

    def _image(self, block: dict[str, Any], where: str) -> tuple[str, int]:
        """An image block's key text ("image <media type> sha256:<digest of the bytes>") and tokens."""
        if set(block) - {"type", "source", "cache_control"}:
            raise _ApiError(400, f"{where}: Extra inputs are not permitted")
        source = block.get("source")
        if not isinstance(source, dict) or source.get("type") not in ("base64", "url"):
            raise _ApiError(400, f"{where}.source: Input tag does not match any of the expected tags: 'base64', 'url'")
        if source["type"] == "url":
            raise _ApiError(400, f"{where}.source: URL images cannot be fetched by this server; send base64")
        media_type = source.get("media_type")
        if media_type not in IMAGE_MEDIA_TYPES:
            raise _ApiError(
                400, f"{where}.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
            )
        data = source.get("data")
        if not isinstance(data, str) or not data:
            raise _ApiError(400, f"{where}.source.data: Field required")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise _ApiError(400, f"{where}.source.data: invalid base64 data") from None
        if len(raw) > MAX_IMAGE_BYTES:
            raise _ApiError(400, f"{where}.source: image exceeds 5 MB maximum: {len(raw)} bytes > {MAX_IMAGE_BYTES} bytes")
        size = _image_size(raw, media_type)
        if size is None:
            raise _ApiError(400, f"{where}.source: Could not process image")
        width, height = size
        if max(width, height) > MAX_IMAGE_EDGE:
            raise _ApiError(400, f"{where}.source: image dimensions exceed max allowed size: {MAX_IMAGE_EDGE} pixels")
        return f"image {media_type} sha256:{hashlib.sha256(raw).hexdigest()}", image_tokens(width, height)

    @staticmethod
    def _check_cache_control(cc: Any, where: str) -> None:
        if not isinstance(cc, dict) or cc.get("type") != "ephemeral":
            raise _ApiError(400, f"{where}.type: Input should be 'ephemeral'")
        if set(cc) - {"type", "ttl"}:
            raise _ApiError(400, f"{where}: Extra inputs are not permitted")
        if cc.get("ttl", "5m") not in TTL_SECONDS:
            raise _ApiError(400, f"{where}.ttl: Input should be '5m' or '1h'")

    def _complete(self, parsed: _Parsed, tier: str) -> tuple[dict[str, Any], list[tuple[str, _Entry, float]]]:
        """Account the cache, build the answer and the Message; returns it and the pending writes."""
        usage, written = self._account(parsed, tier)
        text, stop_reason, stop_sequence = self._answer(parsed)
        output_tokens = count_tokens(text)
        usage["output_tokens"] = output_tokens
        with self._lock:
            self._stats["output_tokens"] += output_tokens
            self._stats["by_tier"][tier]["output_tokens"] += output_tokens
            self._stats["messages" if tier == "standard" else "batch_messages"] += 1
        message = {
            "id": "msg_" + uuid.uuid4().hex[:24],
            "type": "message",
            "role": "assistant",
            "model": parsed.model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "usage": usage,
        }
        return message, written

    def _account(self, parsed: _Parsed, tier: str) -> tuple[dict[str, Any], list[tuple[str, _Entry, float]]]:
        blocks = parsed.blocks
        cum: list[int] = []
        running = 0
        keys: dict[int, str] = {}
        h = hashlib.sha256(json.dumps(["contextual-retrieval/fake-cache/v1", parsed.model]).encode())
        for i, b in enumerate(blocks):
            running += b.tokens
            cum.append(running)
            h.update(json.dumps([b.role, b.message, b.type, b.text]).encode("utf-8", "surrogatepass"))
            h.update(b"\x00")
            if b.cache_control is not None:
                keys[i] = h.copy().hexdigest()
        total = running
        minimum = self.min_cache_tokens(parsed.model)
        eligible = [i for i in keys if cum[i] >= minimum]
        read_tokens, read_idx = 0, -1
        written: list[tuple[str, _Entry, float]] = []
        w5 = w1 = 0
        with self._lock:
            now = self.clock()
            for i in reversed(eligible):
                entry = self._cache.get(keys[i])
                if entry is not None and entry.live(now):
                    read_tokens, read_idx = cum[i], i
                    entry.expires_at = max(entry.expires_at, now + entry.ttl)
                    break
            prev = read_tokens
            for i in eligible:
                if i <= read_idx:
                    continue
                segment, prev = cum[i] - prev, cum[i]
                ttl_name = blocks[i].cache_control.get("ttl", "5m")  # type: ignore[union-attr]
                if ttl_name == "1h":
                    w1 += segment
                else:
                    w5 += segment
                ttl = TTL_SECONDS[ttl_name] * self.ttl_scale
                key = keys[i]
                entry = self._cache.get(key)
                if entry is None or (entry.available_at is not None and not entry.live(now)):
                    entry = self._cache[key] = _Entry(ttl)
                else:
                    entry.ttl = max(entry.ttl, ttl)
                written.append((key, entry, ttl))
                self._writes_per_prefix[key] += 1
                self._prefix_text.setdefault(key, blocks[i].text)
            write = w5 + w1
            usage = {
                "input_tokens": total - read_tokens - write,
                "output_tokens": 0,
                "cache_creation_input_tokens": write,
                "cache_read_input_tokens": read_tokens,
                "cache_creation": {"ephemeral_5m_input_tokens": w5, "ephemeral_1h_input_tokens": w1},
                "service_tier": tier,
            }
            for scope in (self._stats, self._stats["by_tier"][tier]):
                scope["input_tokens"] += usage["input_tokens"]
                scope["cache_write_tokens"] += write
                scope["cache_write_5m_tokens"] += w5
                scope["cache_write_1h_tokens"] += w1
                scope["cache_read_tokens"] += read_tokens
            self._stats["cache_writes"] += write > 0
            self._stats["cache_reads"] += read_tokens > 0
        return usage, written

    def _publish(self, written: list[tuple[str, _Entry, float]]) -> None:
        """The writing response has started: make its entries readable from now on."""
        if not written:
            return
        with self._lock:
            now = self.clock()
            for key, entry, ttl in written:
                if self._cache.get(key) is not entry:
                    continue  # cleared or replaced meanwhile
                if entry.available_at is None:
                    entry.available_at = now
                    entry.expires_at = now + ttl
                else:
                    entry.expires_at = max(entry.expires_at, now + ttl)

    # -- answers ------------------------------------------------------------------------------

    def _answer(self, parsed: _Parsed) -> tuple[str, str, str | None]:
        blocks = parsed.blocks
        user_texts = [b for b in blocks if b.role == "user" and b.type == "text"]
        last_user = max((b.message for b in user_texts), default=None)
        final = next((b.text for b in reversed(user_texts) if b.message == last_user), "")
        document = ""
        for b in [*user_texts, *(b for b in blocks if b.role == "system")]:
            m = _DOCUMENT.search(b.text)
            if m:
                document = m.group(1)
                break
        markers = _GROUPED_CHUNK.findall(document) or _GROUPED_CHUNK.findall(final)
        if markers:
            text = self._grouped_answer(document, markers)
        else:
            chunks = _CHUNK.findall(final)
            chunk = chunks[-1] if chunks else final
            custom = self.answerer(document, chunk, final) if self.answerer is not None else None
            text = custom if custom is not None else self._single_answer(document, chunk)
        # an assistant prefill is continued, not repeated
        last_msg = max((b.message for b in blocks), default=-1)
        prefill = "".join(
            b.text for b in blocks if b.message == last_msg and b.role == "assistant" and b.type == "text"
        )
        if prefill.strip() and text.startswith(prefill.strip()):
            text = text[len(prefill.strip()) :]
        stop_reason, stop_sequence = "end_turn", None
        hits = [(text.find(s), s) for s in parsed.stop_sequences if s in text]
        if hits:
            pos, stop_sequence = min(hits)
            text, stop_reason = text[:pos], "stop_sequence"
        if parsed.max_tokens and count_tokens(text) > parsed.max_tokens:
            text, stop_reason, stop_sequence = text[: parsed.max_tokens * 4], "max_tokens", None
        return text, stop_reason, stop_sequence

    @staticmethod
    def _single_answer(document: str, chunk: str) -> str:
        text = (
            f"This chunk is from the document beginning '{_excerpt(document)}' "
            f"and covers '{_excerpt(chunk)}'."
        )
        i = 0
        while count_tokens(text) < 60:
            text += " " + _FILLERS[i % len(_FILLERS)]
            i += 1
        return text

    def _grouped_answer(self, document: str, markers: list[tuple[str, str]]) -> str:
        lines, seen = [], set()
        doc = _excerpt(document, limit=40)
        for chunk_id, chunk in markers:
            if chunk_id in seen or chunk_id in self.grouped_drop_ids:
                continue
            seen.add(chunk_id)
            body = f"Chunk {chunk_id} of the document beginning '{doc}' covers '{_excerpt(chunk, limit=40)}'."
            while count_tokens(body) < 30:
                body += " " + _SHORT_FILLER
            if chunk_id in self.grouped_empty_ids:
                lines.append(f'<context id="{chunk_id}"></context>')
            elif chunk_id in self.grouped_malform_ids:
                lines.append(f'<context id="{chunk_id}">{body}')
            else:
                lines.append(f'<context id="{chunk_id}">{body}</context>')
        return "<contexts>\n" + "\n".join(lines) + "\n</contexts>"

    # -- message batches ----------------------------------------------------------------------

    def _batch_create(self, record: RecordedRequest, raw: bytes) -> _Reply:
        if len(raw) > self.max_batch_bytes:
            raise _ApiError(413, "Request exceeds the maximum allowed number of bytes.")
        body = self._body_object(record)
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            raise _ApiError(
                400, "requests: Field required" if requests is None else "requests: at least one request is required"
            )
        if len(requests) > self.max_batch_requests:
            raise _ApiError(
                400, f"requests: too many requests ({len(requests)}); a batch holds at most {self.max_batch_requests}"
            )
        seen: set[str] = set()
        items: list[tuple[str, Any]] = []
        for i, item in enumerate(requests):
            if not isinstance(item, dict):
                raise _ApiError(400, f"requests.{i}: Input should be a valid dictionary")
            custom_id = item.get("custom_id")
            if not isinstance(custom_id, str) or not CUSTOM_ID.match(custom_id):
                raise _ApiError(400, f"requests.{i}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
            if custom_id in seen:
                raise _ApiError(
                    400,
                    f"requests.{i}.custom_id: duplicate custom_id {custom_id!r}; "
                    "custom_id values must be unique within a batch",
                )
            seen.add(custom_id)
            if not isinstance(item.get("params"), dict):
                raise _ApiError(400, f"requests.{i}.params: Field required")
            items.append((custom_id, item["params"]))
        batch = _Batch("msgbatch_" + uuid.uuid4().hex[:24], datetime.now(timezone.utc), items)
        with self._lock:
            self._batches[batch.id] = batch
            self._batch_order.append(batch.id)
            self._stats["batches"] += 1
        reply = self._json_reply(self._batch_object(batch))  # as created: always in_progress
        threading.Thread(target=self._run_batch, args=(batch,), name=f"fake-batch-{batch.id}", daemon=True).start()
        return reply

    def _run_batch(self, batch: _Batch) -> None:
        try:
            for custom_id, params in batch.items:
                while self.batch_hold.is_set() and not self._stopping.is_set() and not batch.cancel_requested:
                    self._stopping.wait(0.01)
                if self._stopping.is_set():
                    return
                if batch.cancel_requested:
                    break
                if self.batch_delay_s > 0:
                    self._stopping.wait(self.batch_delay_s)
                try:
                    if isinstance(params, dict) and params.get("stream"):
                        raise _ApiError(400, "stream: streaming is not supported in Message Batches")
                    message, written = self._complete(self._parse(params), "batch")
                    self._publish(written)
                    result: dict[str, Any] = {"type": "succeeded", "message": message}
                except _ApiError as exc:
                    result = {
                        "type": "errored",
                        "error": {"type": "error", "error": _error_object(exc.error_type, exc.message, exc.details)},
                    }
                with self._lock:
                    batch.results.append({"custom_id": custom_id, "result": result})
        except Exception:
            with self._lock:
                self.errors.append(traceback.format_exc())
        with self._lock:
            done = {r["custom_id"] for r in batch.results}
            for custom_id, _ in batch.items:
                if custom_id not in done:
                    batch.results.append({"custom_id": custom_id, "result": {"type": "canceled"}})
            batch.counts = Counter(r["result"]["type"] for r in batch.results)
            batch.status = "ended"
            batch.ended = datetime.now(timezone.utc)

    def _get_batch(self, batch_id: str) -> _Batch:
        with self._lock:
            batch = self._batches.get(batch_id)
        if batch is None:
            raise _ApiError(404, f"message batch {batch_id!r} not found")
        return batch

    def _batch_object(self, batch: _Batch) -> dict[str, Any]:
        with self._lock:
            ended = batch.status == "ended"
            counts = {
                "processing": 0 if ended else len(batch.items),
                "succeeded": batch.counts.get("succeeded", 0),
                "errored": batch.counts.get("errored", 0),
                "canceled": batch.counts.get("canceled", 0),
                "expired": batch.counts.get("expired", 0),
            }
            return {
                "id": batch.id,
                "type": "message_batch",
                "processing_status": batch.status,
                "request_counts": counts,
                "created_at": _now_rfc3339(batch.created),
                "expires_at": _now_rfc3339(batch.created + timedelta(hours=24)),
                "ended_at": _now_rfc3339(batch.ended) if batch.ended else None,
                "archived_at": None,
                "cancel_initiated_at": _now_rfc3339(batch.cancel_initiated) if batch.cancel_initiated else None,
                "results_url": f"{self.url}{BATCHES_PATH}/{batch.id}/results" if ended else None,
            }

    def _batch_results(self, batch_id: str) -> _Reply:
        batch = self._get_batch(batch_id)
        with self._lock:
            if batch.status != "ended":
                raise _ApiError(400, f"message batch {batch_id!r} has not ended; results are not available yet")
            results = list(batch.results)
        if self.shuffle_batch_results:
            random.Random(batch_id).shuffle(results)
        data = "".join(json.dumps(r) + "\n" for r in results).encode()
        request_id = "req_" + uuid.uuid4().hex[:24]
        return _Reply(200, data, content_type="application/binary", headers={"request-id": request_id})

    def _batch_cancel(self, batch_id: str) -> _Reply:
        batch = self._get_batch(batch_id)
        with self._lock:
            if batch.status == "in_progress":
                batch.cancel_requested = True
                batch.cancel_initiated = datetime.now(timezone.utc)
                batch.status = "canceling"
        return self._json_reply(self._batch_object(batch))

    def _batch_delete(self, batch_id: str) -> _Reply:
        batch = self._get_batch(batch_id)
        with self._lock:
            if batch.status != "ended":
                raise _ApiError(400, f"message batch {batch_id!r} is still processing; cancel it before deleting")
            del self._batches[batch_id]
            self._batch_order.remove(batch_id)
        return self._json_reply({"id": batch_id, "type": "message_batch_deleted"})

    def _batch_list(self, query: dict[str, str]) -> _Reply:
        try:
            limit = int(query.get("limit", 20))
        except ValueError:
            raise _ApiError(400, "limit: Input should be a valid integer") from None
        if not 1 <= limit <= 1000:
            raise _ApiError(400, "limit: Input should be between 1 and 1000")
        with self._lock:
            ids = list(reversed(self._batch_order))  # newest first
        if "after_id" in query and query["after_id"] in ids:
            ids = ids[ids.index(query["after_id"]) + 1 :]
            page = ids[:limit]
            has_more = len(ids) > limit
        elif "before_id" in query and query["before_id"] in ids:
            ids = ids[: ids.index(query["before_id"])]
            page = ids[-limit:]
            has_more = len(ids) > limit
        else:
            page = ids[:limit]
            has_more = len(ids) > limit
        data = [self._batch_object(self._get_batch(i)) for i in page]
        return self._json_reply(
            {
                "data": data,
                "has_more": has_more,
                "first_id": page[0] if page else None,
                "last_id": page[-1] if page else None,
            }
        )


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that drops its connection (a closed event loop, a killed process) is normal."""
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else keep-alive responses stall ~40 ms on delayed ACKs
    server: _Server

    def _dispatch(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        owner: FakeAnthropicServer = self.server.owner  # type: ignore[attr-defined]
        reply = owner._handle(self.command, self.path, headers, raw)
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", reply.content_type)
            self.send_header("Content-Length", str(len(reply.body)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(reply.body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (e.g. timed out)
            self.close_connection = True

    do_GET = _dispatch
    do_POST = _dispatch
    do_DELETE = _dispatch

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass
