"""`VoyageEmbedder`: Voyage AI's hosted embeddings, split into requests the API accepts.

The Voyage embeddings endpoint takes at most 1,000 texts per request, and at most a model-specific
number of tokens in all of them together (1M for voyage-3.5-lite, 320K for voyage-3.5, 120K for
voyage-3-large, ...). This module packs texts into consecutive requests that respect both limits,
keeping the input order; `VoyageBatching` holds the limits a caller may lower, the token
estimator and the number of requests in flight, for both Voyage embedders.

Token counts are estimated offline. `voyageai.Client.count_tokens` is *not* used: it calls
`tokenizers.Tokenizer.from_pretrained("voyageai/<model>")`, which downloads the tokenizer from the
Hugging Face Hub on first use. `estimate_tokens` instead over-counts on purpose (one token per three
ASCII characters, one per non-ASCII character); pass ``VoyageBatching(token_estimator=...)`` to plug
in an exact count.

Retries are the SDK's own: `voyageai.Client(max_retries=n)` retries rate limits (429), 502/503/504
and timeouts with exponential back-off. Note that the SDK passes `max_retries` to tenacity's
`stop_after_attempt`, so it is the total number of attempts: 0 and 1 both mean "try once".
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from contextual_retrieval_core._sdk import LazyClients, in_thread
from contextual_retrieval_core._settings import Settings, setting
from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.embeddings.base import as_texts
from contextual_retrieval_core.errors import InputError, InputTypeError, RunError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import voyageai

__all__ = [
    "VoyageBatching",
    "VoyageEmbedder",
    "VoyageModelSpec",
    "VOYAGE_EMBEDDING_MODELS",
    "MAX_TEXTS_PER_REQUEST",
    "FALLBACK_TOKENS_PER_REQUEST",
    "estimate_tokens",
    "plan_batches",
]

InputType = Literal["document", "query"]

#: the API's cap on the number of texts in one embeddings request
MAX_TEXTS_PER_REQUEST = 1000
#: token cap assumed for models missing from `VOYAGE_EMBEDDING_MODELS` (the smallest published one)
FALLBACK_TOKENS_PER_REQUEST = 120_000

_MISSING_KEY = (
    "VOYAGE_API_KEY is not set; pass client=voyageai.Client(api_key=...) "
    "or use the offline default LocalMiniLMEmbedder"
)


@dataclass(frozen=True)
class VoyageModelSpec:
    """Published limits of one Voyage embedding model.

    Args:
        max_tokens_per_request: the total-token cap over all texts of one request.
        dimension: the default output dimension.
    """

    max_tokens_per_request: int
    dimension: int


#: per-model request token caps and default dimensions, from Voyage's documentation
VOYAGE_EMBEDDING_MODELS: dict[str, VoyageModelSpec] = {
    "voyage-3.5-lite": VoyageModelSpec(1_000_000, 1024),
    "voyage-3.5": VoyageModelSpec(320_000, 1024),
    "voyage-3-large": VoyageModelSpec(120_000, 1024),
    "voyage-code-3": VoyageModelSpec(120_000, 1024),
    "voyage-3-lite": VoyageModelSpec(1_000_000, 512),
    "voyage-3": VoyageModelSpec(320_000, 1024),
    "voyage-2": VoyageModelSpec(320_000, 1024),
    "voyage-large-2": VoyageModelSpec(120_000, 1536),
    "voyage-large-2-instruct": VoyageModelSpec(120_000, 1024),
    "voyage-code-2": VoyageModelSpec(120_000, 1536),
    "voyage-finance-2": VoyageModelSpec(120_000, 1024),
    "voyage-law-2": VoyageModelSpec(120_000, 1024),
    "voyage-multilingual-2": VoyageModelSpec(120_000, 1024),
}


def estimate_tokens(text: str) -> int:
    """A deliberately high, offline estimate of a text's token count.

    English prose runs at about four to five characters per token, so one token per three ASCII
    characters over-counts it; scripts outside ASCII (CJK, Cyrillic, ...) are counted at one token
    per character, and every text gets one more for the tokenizer's special tokens.

    Example:
        >>> estimate_tokens("contextual retrieval")
        8
    """
    ascii_chars = len(text.encode("ascii", "ignore"))  # the ASCII characters, counted in C
    return math.ceil(ascii_chars / 3) + (len(text) - ascii_chars) + 1


def plan_batches(costs: Sequence[int], max_items: int, max_tokens: int) -> list[slice]:
    """Split items into consecutive slices of at most `max_items` items and `max_tokens` cost.

    An item that alone costs more than `max_tokens` gets a slice of its own (the API truncates
    over-long inputs), so every item is always sent.

    Example:
        >>> plan_batches([5, 5, 5, 20, 1], max_items=2, max_tokens=12)
        [slice(0, 2, None), slice(2, 3, None), slice(3, 4, None), slice(4, 5, None)]
    """
    positive_int("max_items", max_items)
    positive_int("max_tokens", max_tokens)
    batches: list[slice] = []
    start, used = 0, 0
    for i, cost in enumerate(costs):
        if i > start and (i - start >= max_items or used + cost > max_tokens):
            batches.append(slice(start, i))
            start, used = i, 0
        used += cost
    if start < len(costs):
        batches.append(slice(start, len(costs)))
    return batches


@dataclass(frozen=True)
class VoyageBatching(Settings):
    """How a Voyage embedder packs texts into requests and runs them (frozen; validated when built).

    `VoyageEmbedder` and `VoyageContextualizedEmbedder` take one (``batching=``). A limit left None
    is the API's own (or the model's); a lower one sends smaller requests. Each embedder refuses a
    limit above its API's, and a setting it has no use for.

    Args:
        max_texts_per_request: texts in one request, over all its inputs (None: the API's cap:
            1,000 for `VoyageEmbedder`, 16,000 chunks for `VoyageContextualizedEmbedder`).
        max_tokens_per_request: estimated tokens in one request (None: the model's published cap,
            `VOYAGE_EMBEDDING_MODELS`, 120,000 for a model missing from it; 120,000 for
            voyage-context-3).
        max_inputs_per_request: `VoyageContextualizedEmbedder` only: inputs (a document's chunks,
            or a consecutive part of them) in one request (None: the API's 1,000).
        max_tokens_per_input: `VoyageContextualizedEmbedder` only: estimated tokens in one input
            (None: the model's context, 32,000); a longer document is sent as several inputs.
        token_estimator: counts one text's tokens (default `estimate_tokens`, offline and high).
        max_concurrency: requests in flight at once in the async methods.

    Example:
        >>> VoyageBatching(max_texts_per_request=128, max_concurrency=2).max_texts_per_request
        128
        >>> VoyageBatching(max_concurrency=0)
        Traceback (most recent call last):
        ...
        contextual_retrieval_core.errors.InputError: max_concurrency must be a positive integer, got 0
    """

    max_texts_per_request: int | None = setting(None, "texts in one request, over all its inputs (None: the API's cap)")
    max_tokens_per_request: int | None = setting(None, "estimated tokens in one request (None: the model's cap)")
    max_inputs_per_request: int | None = setting(None, "contextualized embeddings: inputs in one request (None: the API's cap)")
    max_tokens_per_input: int | None = setting(None, "contextualized embeddings: estimated tokens in one input (None: the model's context)")
    token_estimator: Callable[[str], int] = setting(estimate_tokens, "counts one text's tokens (default: an offline over-estimate)")
    max_concurrency: int = setting(4, "requests in flight at once in the async methods")

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise once, here
        for name in ("max_texts_per_request", "max_tokens_per_request", "max_inputs_per_request", "max_tokens_per_input"):
            set_(self, name, positive_int(name, getattr(self, name), allow_none=True))
        if not callable(self.token_estimator):
            raise InputTypeError(f"token_estimator must be a function from a text to its token count, got "
                                 f"{type(self.token_estimator).__name__}; e.g. estimate_tokens")
        set_(self, "max_concurrency", positive_int("max_concurrency", self.max_concurrency))

    @classmethod
    def checked(cls, batching: VoyageBatching | None, owner: str, caps: dict[str, int | None]) -> VoyageBatching:
        """`batching` (None: `VoyageBatching()`) as `owner` may use it: TypeError for another type;
        InputError when a limit is above `owner`'s API cap in `caps` (name -> cap, None for no
        known cap), or when a limit `caps` does not name is set (`owner` has no use for it)."""
        if batching is None:
            return cls()
        if not isinstance(batching, VoyageBatching):
            raise InputTypeError(f"batching must be a VoyageBatching, got {type(batching).__name__}; "
                                 "e.g. batching=VoyageBatching(max_texts_per_request=128)")
        for name in ("max_texts_per_request", "max_tokens_per_request", "max_inputs_per_request", "max_tokens_per_input"):
            value = getattr(batching, name)
            if value is None:
                continue
            if name not in caps:
                raise InputError(f"{name} is for VoyageContextualizedEmbedder (inputs of several chunks); {owner} sends "
                                 "each text as an input of its own: set max_texts_per_request instead")
            cap = caps[name]
            if cap is not None and value > cap:
                raise InputError(f"{name} must be in 1..{cap} (the Voyage API's limit for {owner}), got {value!r}")
        return batching


class VoyageClients(LazyClients):
    """Voyage AI's sync and async clients, built from VOYAGE_API_KEY unless injected."""

    _sdk = ("voyageai", "voyage", "Voyage AI")
    _sync_cls, _async_cls = "Client", "AsyncClient"
    _key_vars = ("VOYAGE_API_KEY",)


class VoyageEmbedder(VoyageClients):
    """Embeddings from Voyage AI's API; chunks as `input_type="document"`, queries as `"query"`.

    Vectors come back as float32 arrays of shape (n, dimension), L2-normalised, in input order.
    Texts are packed into requests under `batching`'s limits (by default the API's 1,000 texts and
    the model's token cap, counted with its estimator); async calls run up to its
    `max_concurrency` requests at once.

    Args:
        model: a Voyage embedding model (default "voyage-3.5").
        client: a ready `voyageai.Client`; built from VOYAGE_API_KEY when omitted.
        async_client: a ready `voyageai.AsyncClient`; built from VOYAGE_API_KEY when omitted,
            unless `client` was given: then async calls run `client` in a worker thread.
        output_dimension: a smaller/larger Matryoshka dimension, for models that offer one.
        truncation: let the API truncate texts longer than the model's context (default True).
        batching: a `VoyageBatching`: texts and tokens per request, the token estimator, requests
            in flight (default: `VoyageBatching()`, the API's limits). Its contextualized-only
            limits (`max_inputs_per_request`, `max_tokens_per_input`) are refused here.
        max_retries: attempts per request for clients built here (the SDK's own retry logic).
        timeout: per-request timeout in seconds for clients built here.
        base_url: the API endpoint for clients built here (a proxy or gateway; default: the SDK's).

    The dimension of an empty result is the model's published one (or `output_dimension`); for a
    model missing from the table it is learnt from the first response, and before that an empty
    input gives shape (0, 0).

    Example:
        >>> import voyageai
        >>> embedder = VoyageEmbedder(client=voyageai.Client(api_key="pa-..."))  # doctest: +SKIP
        >>> embedder.embed_documents(["BM25 ranks by term overlap"]).shape  # doctest: +SKIP
        (1, 1024)
        >>> small = VoyageEmbedder(client=voyageai.Client(api_key="x"), batching=VoyageBatching(max_texts_per_request=100))
        >>> small.max_texts_per_request, small.embed_queries([]).shape
        (100, (0, 1024))
    """

    _missing_key = _MISSING_KEY
    normalized = True

    def __init__(
        self,
        model: str = "voyage-3.5",
        *,
        client: voyageai.Client | None = None,
        async_client: voyageai.AsyncClient | None = None,
        output_dimension: int | None = None,
        truncation: bool = True,
        batching: VoyageBatching | None = None,
        max_retries: int = 3,
        timeout: float | None = None,
        base_url: str | None = None,
    ) -> None:
        spec = VOYAGE_EMBEDDING_MODELS.get(model)
        batching = VoyageBatching.checked(batching, "VoyageEmbedder", {
            "max_texts_per_request": MAX_TEXTS_PER_REQUEST, "max_tokens_per_request": spec.max_tokens_per_request if spec else None,
        })
        self.model_name = model
        self.output_dimension = output_dimension
        self.dimension: int | None = output_dimension or (spec.dimension if spec else None)
        self.truncation = truncation
        self.batching = batching
        #: the limits in force: `batching`'s, or the API's and the model's where it leaves them None
        self.max_texts_per_request = batching.max_texts_per_request or MAX_TEXTS_PER_REQUEST
        self.max_tokens_per_request = batching.max_tokens_per_request or (
            spec.max_tokens_per_request if spec else FALLBACK_TOKENS_PER_REQUEST)
        self._init_clients(client, async_client, max_retries, timeout, base_url)

    # -- public API ---------------------------------------------------------------------------

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for chunks to be indexed (`input_type="document"`)."""
        return self._embed(texts, "document")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for search queries (`input_type="query"`)."""
        return self._embed(texts, "query")

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Async `embed_documents`."""
        return await self._aembed(texts, "document")

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Async `embed_queries`."""
        return await self._aembed(texts, "query")

    # -- internals ----------------------------------------------------------------------------


    def _plan(self, texts: list[str]) -> list[slice]:
        costs = [self.batching.token_estimator(t) for t in texts]
        return plan_batches(costs, self.max_texts_per_request, self.max_tokens_per_request)

    def _request_kwargs(self, input_type: InputType) -> dict[str, Any]:
        return {
            "model": self.model_name,
            "input_type": input_type,
            "truncation": self.truncation,
            "output_dimension": self.output_dimension,
        }

    def _empty(self) -> np.ndarray:
        return np.empty((0, self.dimension or 0), dtype=np.float32)

    def _to_array(self, embeddings: Sequence[Sequence[float]], expected: int) -> np.ndarray:
        if len(embeddings) != expected:
            raise RunError(
                f"Voyage returned {len(embeddings)} embeddings for {expected} texts (model {self.model_name})"
            )
        return np.asarray(embeddings, dtype=np.float32).reshape(expected, -1)

    def _finish(self, parts: list[np.ndarray]) -> np.ndarray:
        vectors = np.vstack(parts) if len(parts) > 1 else parts[0]
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        self.dimension = int(vectors.shape[1])
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def _embed(self, texts: Sequence[str], input_type: InputType) -> np.ndarray:
        items = as_texts(texts)
        if not items:
            return self._empty()
        client = self._sync_client()
        kwargs = self._request_kwargs(input_type)
        parts = []
        for batch in self._plan(items):
            result = client.embed(items[batch], **kwargs)
            parts.append(self._to_array(result.embeddings, batch.stop - batch.start))
        return self._finish(parts)

    async def _aembed(self, texts: Sequence[str], input_type: InputType) -> np.ndarray:
        if self._async_in_thread:
            return await in_thread(self._embed, texts, input_type)
        items = as_texts(texts)
        if not items:
            return self._empty()
        client = self._aio_client()
        kwargs = self._request_kwargs(input_type)
        gate = asyncio.Semaphore(self.batching.max_concurrency)

        async def one(batch: slice) -> np.ndarray:
            async with gate:
                result = await client.embed(items[batch], **kwargs)
            return self._to_array(result.embeddings, batch.stop - batch.start)

        parts = await asyncio.gather(*(one(b) for b in self._plan(items)))
        return self._finish(list(parts))
