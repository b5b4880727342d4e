"""`VoyageContextualizedEmbedder`: Voyage's contextualized chunk embeddings (`voyage-context-3`).

Each document's chunks are sent together, as one inner list of the request's `inputs`, in document
order, so every chunk vector carries the context of its whole document with no LLM call. Queries
are sent one per inner list with `input_type="query"`.

Request limits (Voyage API reference, "Contextualized chunk embeddings",
https://docs.voyageai.com/reference/contextualized-embeddings-api, and the model table at
https://docs.voyageai.com/docs/contextualized-chunk-embeddings): at most 1,000 inputs per request,
at most 16,000 chunks over all inputs, at most 120,000 tokens over all inputs, and at most 32,000
tokens in one input (the model's context length). A document over 32,000 tokens (or 16,000
chunks) is sent as several consecutive inputs of its chunks, each within the limit; the rest is
packed into as few requests as the limits allow, in order. `VoyageBatching` lowers any of these
limits (its `max_texts_per_request` counts chunks), sets the token estimator and the requests in
flight.

Wire: `POST {base_url}/contextualizedembeddings` with `{"inputs": [[...], ...], "model", "input_type",
"output_dimension", "output_dtype", "encoding_format": "base64"}`; the answer's `data[i].data[j]`
is chunk j of input i, each item with its `index`. The SDK's `ContextualizedEmbeddingsObject`
numbers results by their position and drops the API's `index`, so this module calls the SDK's
resource class (`voyageai.ContextualizedEmbedding.create`) with the client's own settings and
retry controller and maps every vector back by its `index`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from contextual_retrieval_core._compat import voyage_contextualized_acreate, voyage_contextualized_create
from contextual_retrieval_core._sdk import in_thread
from contextual_retrieval_core.embeddings.base import as_texts, chunk_lists, consecutive_groups, group_positions, split_by_sizes
from contextual_retrieval_core.embeddings.voyage import VoyageBatching, VoyageClients, plan_batches
from contextual_retrieval_core.errors import InputError, RunError

__all__ = [
    "VoyageContextualizedEmbedder",
    "MAX_INPUTS_PER_REQUEST",
    "MAX_CHUNKS_PER_REQUEST",
    "MAX_TOKENS_PER_REQUEST",
    "MAX_TOKENS_PER_INPUT",
]

#: Voyage API reference, contextualized chunk embeddings: "The list must not contain more than 1,000 inputs"
MAX_INPUTS_PER_REQUEST = 1000
#: same reference: the total number of chunks across all inputs must not exceed 16K
MAX_CHUNKS_PER_REQUEST = 16_000
#: same reference: "The total number of tokens across all inputs must not exceed 120K"
MAX_TOKENS_PER_REQUEST = 120_000
#: model table (voyage-context-3): a context length of 32,000 tokens per input
MAX_TOKENS_PER_INPUT = 32_000
#: output dtypes returned as float32 vectors (binary/ubinary pack 8 dimensions a byte: not offered)
OUTPUT_DTYPES = ("float", "int8", "uint8")

_MISSING_KEY = (
    "VOYAGE_API_KEY is not set; export VOYAGE_API_KEY=... or pass "
    "client=voyageai.Client(api_key=...) to VoyageContextualizedEmbedder"
)

InputType = Literal["document", "query"]


class VoyageContextualizedEmbedder(VoyageClients):
    """Chunk vectors that carry their document's context, from Voyage's `contextualized_embed`.

    `embed_document_chunks(documents)` is the contextual call: one list of chunk texts per
    document, in document order; it returns one (n_chunks, d) array per document.
    `embed_grouped(texts, groups)` takes a flat list with a document key per text (texts of one
    key in document order) and returns the vectors in input order: the form the core's
    `HybridSearcher` and the adapters use. `embed_documents(texts)` (the plain `Embedder`
    protocol) has no grouping: each text is embedded as a document of its own.

    Args:
        model: default "voyage-context-3".
        client / async_client: ready `voyageai.Client` / `AsyncClient`; built from VOYAGE_API_KEY
            when omitted (an async client per event loop).
        output_dimension: 256, 512, 1024 (the model's default) or 2048.
        output_dtype: "float" (default), "int8" or "uint8"; vectors come back as float32,
            L2-normalised, whatever the wire dtype.
        batching: a `VoyageBatching`: chunks (`max_texts_per_request`), inputs and tokens per
            request, tokens per input, each at most the API's limit above; the token estimator;
            requests in flight (default: `VoyageBatching()`, the API's limits).
        max_retries / timeout: for clients built here (the SDK's retries: 429, 5xx, timeouts).

    Example:
        >>> import voyageai
        >>> embedder = VoyageContextualizedEmbedder(client=voyageai.Client(api_key="pa-..."))  # doctest: +SKIP
        >>> [v.shape for v in embedder.embed_document_chunks([["intro", "body"], ["other doc"]])]  # doctest: +SKIP
        [(2, 1024), (1, 1024)]
        >>> small = VoyageContextualizedEmbedder(client=voyageai.Client(api_key="x"),
        ...                                      batching=VoyageBatching(max_tokens_per_input=8_000))
        >>> small.max_tokens_per_input, small.max_inputs_per_request
        (8000, 1000)
    """

    _missing_key = _MISSING_KEY
    normalized = True

    def __init__(
        self,
        model: str = "voyage-context-3",
        *,
        client: Any = None,
        async_client: Any = None,
        output_dimension: int | None = None,
        output_dtype: str = "float",
        batching: VoyageBatching | None = None,
        max_retries: int = 3,
        timeout: float | None = None,
    ) -> None:
        batching = VoyageBatching.checked(batching, "VoyageContextualizedEmbedder", {
            "max_texts_per_request": MAX_CHUNKS_PER_REQUEST, "max_tokens_per_request": MAX_TOKENS_PER_REQUEST,
            "max_inputs_per_request": MAX_INPUTS_PER_REQUEST, "max_tokens_per_input": MAX_TOKENS_PER_INPUT,
        })
        if output_dtype not in OUTPUT_DTYPES:
            raise InputError(f"output_dtype must be one of {OUTPUT_DTYPES}, got {output_dtype!r}")
        if output_dimension is not None and output_dimension not in (256, 512, 1024, 2048):
            raise InputError(f"output_dimension must be 256, 512, 1024 or 2048, got {output_dimension!r}")
        self.model_name = model
        self.output_dimension = output_dimension
        self.output_dtype = output_dtype
        self.dimension = output_dimension or 1024
        self.batching = batching
        #: the limits in force: `batching`'s, or the API's where it leaves them None
        self.max_texts_per_request = batching.max_texts_per_request or MAX_CHUNKS_PER_REQUEST
        self.max_tokens_per_request = batching.max_tokens_per_request or MAX_TOKENS_PER_REQUEST
        self.max_inputs_per_request = batching.max_inputs_per_request or MAX_INPUTS_PER_REQUEST
        self.max_tokens_per_input = min(batching.max_tokens_per_input or MAX_TOKENS_PER_INPUT, self.max_tokens_per_request)
        self._init_clients(client, async_client, max_retries, timeout)

    # -- public API ---------------------------------------------------------------------------

    def embed_document_chunks(self, documents: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """One (n_chunks, d) array per document; each document's chunks embedded together."""
        docs = chunk_lists(documents)
        flat = self._run_sync([c for d in docs for c in d], consecutive_groups(docs), "document")
        return split_by_sizes(flat, [len(d) for d in docs])

    async def aembed_document_chunks(self, documents: Sequence[Sequence[str]]) -> list[np.ndarray]:
        docs = chunk_lists(documents)
        flat = await self._run_async([c for d in docs for c in d], consecutive_groups(docs), "document")
        return split_by_sizes(flat, [len(d) for d in docs])

    def embed_grouped(self, texts: Sequence[str], groups: Sequence[str]) -> np.ndarray:
        """Vectors of `texts` in input order, texts of one `groups` key embedded together (in the
        order they appear here: pass a document's chunks in document order)."""
        items = as_texts(texts)
        return self._run_sync(items, group_positions(items, groups), "document")

    async def aembed_grouped(self, texts: Sequence[str], groups: Sequence[str]) -> np.ndarray:
        items = as_texts(texts)
        return await self._run_async(items, group_positions(items, groups), "document")

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Each text as a document of its own (no grouping: use `embed_grouped` for context)."""
        items = as_texts(texts)
        return self._run_sync(items, [[i] for i in range(len(items))], "document")

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        items = as_texts(texts)
        return await self._run_async(items, [[i] for i in range(len(items))], "document")

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Query vectors: one query per input, `input_type="query"`."""
        items = as_texts(texts)
        return self._run_sync(items, [[i] for i in range(len(items))], "query")

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        items = as_texts(texts)
        return await self._run_async(items, [[i] for i in range(len(items))], "query")

    # -- planning -----------------------------------------------------------------------------

    def plan(self, texts: list[str], groups: list[list[int]]) -> list[list[list[int]]]:
        """Requests, each a list of inputs, each a list of positions into `texts`.

        A group over the per-input token or chunk limit is cut into consecutive inputs; one text
        alone over the per-input limit is a ValueError (the endpoint does not truncate).
        """
        costs = [self.batching.token_estimator(t) for t in texts]
        inputs: list[list[int]] = []
        for group in groups:
            for part in plan_batches([costs[i] for i in group], self.max_texts_per_request, self.max_tokens_per_input):
                piece = group[part]
                if len(piece) == 1 and costs[piece[0]] > self.max_tokens_per_input:
                    raise InputError(
                        f"a text of about {costs[piece[0]]} tokens is over the {self.max_tokens_per_input}-token "
                        "input limit of contextualized embeddings; split it into smaller chunks first"
                    )
                inputs.append(piece)
        requests: list[list[list[int]]] = []
        current: list[list[int]] = []
        chunks = tokens = 0
        for piece in inputs:
            cost = sum(costs[i] for i in piece)
            if current and (
                len(current) >= self.max_inputs_per_request
                or chunks + len(piece) > self.max_texts_per_request
                or tokens + cost > self.max_tokens_per_request
            ):
                requests.append(current)
                current, chunks, tokens = [], 0, 0
            current.append(piece)
            chunks += len(piece)
            tokens += cost
        if current:
            requests.append(current)
        return requests

    # -- requests -----------------------------------------------------------------------------

    def _kwargs(self, input_type: InputType) -> dict[str, Any]:
        return {
            "model": self.model_name,
            "input_type": input_type,
            "output_dimension": self.output_dimension,
            "output_dtype": None if self.output_dtype == "float" else self.output_dtype,
        }

    def _fill(self, out: np.ndarray | None, request: list[list[int]], response: Any) -> np.ndarray:
        """Write one response's vectors into `out` by the API's `index` fields."""
        data = list(response.data)
        if len(data) != len(request):
            raise RunError(f"Voyage returned {len(data)} inputs for {len(request)} sent (model {self.model_name})")
        for pos, doc in enumerate(data):
            i = int(doc.get("index", pos))
            piece = request[i]
            items = list(doc.data)
            if len(items) != len(piece):
                raise RunError(f"Voyage returned {len(items)} chunk vectors for {len(piece)} chunks of inputs[{i}]")
            for jpos, item in enumerate(items):
                j = int(item.get("index", jpos))
                vec = np.asarray(item.embedding, dtype=np.float32)
                if out is None:
                    raise AssertionError("unreachable")  # pragma: no cover
                if out.shape[1] == 0:
                    out = np.zeros((out.shape[0], vec.shape[0]), dtype=np.float32)
                out[piece[j]] = vec
        return out  # type: ignore[return-value]

    def _run_sync(self, texts: list[str], groups: list[list[int]], input_type: InputType) -> np.ndarray:
        out = np.zeros((len(texts), 0), dtype=np.float32)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        client = self._sync_client()
        for request in self.plan(texts, groups):
            inputs = [[texts[i] for i in piece] for piece in request]
            response = voyage_contextualized_create(client, inputs=inputs, **self._kwargs(input_type))
            out = self._fill(out, request, response)
        return _normalise(out)

    async def _run_async(self, texts: list[str], groups: list[list[int]], input_type: InputType) -> np.ndarray:
        if self._async_in_thread:
            return await in_thread(self._run_sync, texts, groups, input_type)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        client = self._aio_client()
        gate = asyncio.Semaphore(self.batching.max_concurrency)

        async def one(request: list[list[int]]) -> Any:
            inputs = [[texts[i] for i in piece] for piece in request]
            async with gate:
                return await voyage_contextualized_acreate(client, inputs=inputs, **self._kwargs(input_type))

        requests = self.plan(texts, groups)
        responses = await asyncio.gather(*(one(r) for r in requests))
        out = np.zeros((len(texts), 0), dtype=np.float32)
        for request, response in zip(requests, responses):
            out = self._fill(out, request, response)
        return _normalise(out)


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return np.ascontiguousarray(vectors, dtype=np.float32)
