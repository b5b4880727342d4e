"""`FakeVoyageServer`: Voyage AI's embeddings and rerank endpoints on a loopback port.

Wire format as the `voyageai` SDK speaks it: `POST /v1/embeddings`, `POST /v1/rerank` and
`POST /v1/contextualizedembeddings` (the SDK's `contextualized_embed`), bearer
auth, errors as `{"detail": "..."}`. Point a real client at it with
`voyageai.Client(api_key=server.api_key, base_url=server.base_url)` (base_url includes `/v1`).

The API's limits are enforced: at most 1,000 texts per embeddings request and at most the model's
total tokens per request; at most 1,000 documents and the model's token budget per rerank request.
Tokens are counted as one per four UTF-8 bytes, a stand-in for Voyage's tokenizers on prose.

Embeddings are deterministic hashed bags of words (similar texts get similar vectors), L2-normalised,
nudged by a per-`input_type` marker so query and document vectors of one text differ. Rerank
scores are the cosine of the query's and document's word sets.
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
from typing import Any

import numpy as np

from .loopback import ApiError, LoopbackServer

__all__ = ["FakeVoyageServer"]

#: model -> (total tokens per request, default dimension, flexible dimensions?)
EMBED_MODELS: dict[str, tuple[int, int, bool]] = {
    "voyage-3.5-lite": (1_000_000, 1024, True),
    "voyage-3.5": (320_000, 1024, True),
    "voyage-3-large": (120_000, 1024, True),
    "voyage-code-3": (120_000, 1024, True),
    "voyage-3": (320_000, 1024, False),
    "voyage-3-lite": (1_000_000, 512, False),
    "voyage-2": (320_000, 1024, False),
    "voyage-law-2": (120_000, 1024, False),
}
RERANK_MODELS: dict[str, int] = {
    "rerank-2.5": 600_000,
    "rerank-2.5-lite": 600_000,
    "rerank-2": 600_000,
    "rerank-2-lite": 600_000,
    "rerank-1": 300_000,
    "rerank-lite-1": 300_000,
}
MAX_TEXTS = 1000
MAX_DOCUMENTS = 1000
CONTEXT_TOKENS = 32_000
FLEXIBLE_DIMENSIONS = (256, 512, 1024, 2048)
#: contextualized chunk embedding models -> default dimension
CONTEXT_MODELS: dict[str, int] = {"voyage-context-3": 1024}
#: limits of one contextualized embeddings request (Voyage API reference, contextualized
#: chunk embeddings): inputs, total chunks, total tokens, tokens of one input (document)
CONTEXT_MAX_INPUTS = 1000
CONTEXT_MAX_CHUNKS = 16_000
CONTEXT_MAX_TOKENS = 120_000
CONTEXT_MAX_INPUT_TOKENS = 32_000
_WORD = re.compile(r"\w+")


def count_tokens(text: str) -> int:
    """The fake's token count: one token per four UTF-8 bytes, at least one."""
    return max(1, math.ceil(len(text.encode("utf-8")) / 4))


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _bucket(token: str, dim: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
    return digest % dim, (1.0 if (digest >> 63) & 1 else -1.0)


def embed_text(text: str, input_type: str | None, dim: int) -> np.ndarray:
    """The vector the fake returns for one text (float32, unit length)."""
    vec = np.zeros(dim, dtype=np.float64)
    for token in words(text):
        idx, sign = _bucket(token, dim)
        vec[idx] += sign
    idx, sign = _bucket(f"<input_type:{input_type}>", dim)
    vec[idx] += sign * 0.5
    return (vec / np.linalg.norm(vec)).astype(np.float32)


def rerank_score(query: str, document: str) -> float:
    """The fake's relevance: cosine of the query's and document's word sets, in [0, 1]."""
    q, d = set(words(query)), set(words(document))
    if not q or not d:
        return 0.0
    return len(q & d) / math.sqrt(len(q) * len(d))


class FakeVoyageServer(LoopbackServer):
    """Voyage AI's `/v1/embeddings` and `/v1/rerank` on 127.0.0.1; see the module docstring.

    Example:
        >>> import voyageai
        >>> with FakeVoyageServer() as server:
        ...     client = voyageai.Client(api_key=server.api_key, base_url=server.base_url)
        ...     len(client.embed(["hi"], model="voyage-3.5").embeddings[0])
        1024
    """

    embed_text = staticmethod(embed_text)
    rerank_score = staticmethod(rerank_score)
    count_tokens = staticmethod(count_tokens)

    def __init__(self, api_key: str = "test-voyage-key") -> None:
        super().__init__(api_key)

    @property
    def base_url(self) -> str:
        """What to pass as `voyageai.Client(base_url=...)`."""
        return self.url + "/v1"

    def routes(self) -> dict[str, Any]:
        return {
            "/v1/embeddings": self._embeddings,
            "/v1/rerank": self._rerank,
            "/v1/contextualizedembeddings": self._contextualized,
        }

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"detail": message}

    def embeddings_requests(self) -> list[dict[str, Any]]:
        """Bodies of the embeddings requests, in arrival order."""
        return [r.body for r in self.requests_to("/v1/embeddings")]

    def contextualized_requests(self) -> list[dict[str, Any]]:
        """Bodies of the contextualized embeddings requests, in arrival order."""
        return [r.body for r in self.requests_to("/v1/contextualizedembeddings")]

    #: answer contextualized requests with documents and chunks in reverse order (each item keeps
    #: its `index`), as a client must not rely on the order of `data`
    shuffle_contextualized = False

    @staticmethod
    def contextualized_vector(chunks: list[str], position: int, input_type: str | None, dim: int) -> np.ndarray:
        """The fake's contextualized vector of `chunks[position]`: the chunk's own words plus,
        at a quarter weight, the words of the whole input (the "document context")."""
        own = embed_text(chunks[position], input_type, dim).astype(np.float64)
        if len(chunks) > 1:
            own = own + 0.25 * embed_text(" ".join(chunks), input_type, dim)
        return (own / np.linalg.norm(own)).astype(np.float32)

    def rerank_requests(self) -> list[dict[str, Any]]:
        """Bodies of the rerank requests, in arrival order."""
        return [r.body for r in self.requests_to("/v1/rerank")]

    # -- endpoints --------------------------------------------------------------------------

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        model = body.get("model")
        if model not in EMBED_MODELS:
            raise ApiError(400, f"Model {model} is not supported.")
        cap, dim, flexible = EMBED_MODELS[model]
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise ApiError(400, "Input must be a non-empty list of strings.")
        if len(texts) > MAX_TEXTS:
            raise ApiError(400, f"The batch size limit is {MAX_TEXTS}. Your batch size is {len(texts)}.")
        input_type = body.get("input_type")
        if input_type not in (None, "query", "document"):
            raise ApiError(400, f"input_type {input_type!r} is invalid; use None, 'query' or 'document'.")
        tokens = [count_tokens(t) for t in texts]
        if sum(tokens) > cap:
            raise ApiError(
                400,
                f"Request to model '{model}' failed. The max allowed tokens per submitted batch is {cap}. "
                f"Your batch has {sum(tokens)} tokens after truncation. Please lower the number of tokens in the batch.",
            )
        if body.get("truncation") is False and max(tokens) > CONTEXT_TOKENS:
            raise ApiError(400, f"Input text exceeds the context length of {CONTEXT_TOKENS} tokens.")
        out_dim = body.get("output_dimension")
        if out_dim is not None:
            if not flexible or out_dim not in FLEXIBLE_DIMENSIONS:
                raise ApiError(400, f"output_dimension {out_dim} is not supported by {model}.")
            dim = out_dim
        if body.get("output_dtype") not in (None, "float"):
            raise ApiError(400, "the fake only serves output_dtype 'float'.")
        encoding = body.get("encoding_format")
        if encoding not in (None, "base64"):
            raise ApiError(400, f"encoding_format {encoding!r} is invalid.")
        data = []
        for i, text in enumerate(texts):
            vec = embed_text(text, input_type, dim)
            value: Any = vec.tolist()
            if encoding == "base64":  # what the SDK asks for: little-endian float32 bytes
                value = base64.b64encode(vec.astype("<f4").tobytes()).decode()
            data.append({"object": "embedding", "embedding": value, "index": i})
        return {"object": "list", "data": data, "model": model, "usage": {"total_tokens": sum(tokens)}}

    def _rerank(self, body: dict[str, Any]) -> dict[str, Any]:
        model = body.get("model")
        if model not in RERANK_MODELS:
            raise ApiError(400, f"Model {model} is not supported.")
        query, documents = body.get("query"), body.get("documents")
        if not isinstance(query, str) or not query:
            raise ApiError(400, "query must be a non-empty string.")
        if not isinstance(documents, list) or not documents or not all(isinstance(d, str) for d in documents):
            raise ApiError(400, "documents must be a non-empty list of strings.")
        if len(documents) > MAX_DOCUMENTS:
            raise ApiError(400, f"{len(documents)} documents is more than the limit of {MAX_DOCUMENTS}.")
        total = count_tokens(query) * len(documents) + sum(count_tokens(d) for d in documents)
        if total > RERANK_MODELS[model]:
            raise ApiError(400, f"The total number of tokens is {total}, more than the limit of {RERANK_MODELS[model]}.")
        top_k = body.get("top_k")
        if top_k is not None and (not isinstance(top_k, int) or top_k <= 0):
            raise ApiError(400, "top_k must be a positive integer.")
        scored = sorted(
            ({"relevance_score": rerank_score(query, d), "index": i} for i, d in enumerate(documents)),
            key=lambda r: (-r["relevance_score"], r["index"]),
        )
        data = scored[:top_k] if top_k else scored
        return {"object": "list", "data": data, "model": model, "usage": {"total_tokens": total}}

    def _contextualized(self, body: dict[str, Any]) -> dict[str, Any]:
        model = body.get("model")
        if model not in CONTEXT_MODELS:
            raise ApiError(400, f"Model {model} is not supported.")
        dim = CONTEXT_MODELS[model]
        inputs = body.get("inputs")
        if (
            not isinstance(inputs, list) or not inputs
            or not all(isinstance(doc, list) and doc and all(isinstance(c, str) for c in doc) for doc in inputs)
        ):
            raise ApiError(400, "inputs must be a non-empty list of non-empty lists of strings.")
        if len(inputs) > CONTEXT_MAX_INPUTS:
            raise ApiError(400, f"The list must not contain more than {CONTEXT_MAX_INPUTS} inputs; got {len(inputs)}.")
        n_chunks = sum(len(doc) for doc in inputs)
        if n_chunks > CONTEXT_MAX_CHUNKS:
            raise ApiError(400, f"The total number of chunks must not exceed {CONTEXT_MAX_CHUNKS}; got {n_chunks}.")
        doc_tokens = [sum(count_tokens(c) for c in doc) for doc in inputs]
        for i, tokens in enumerate(doc_tokens):
            if tokens > CONTEXT_MAX_INPUT_TOKENS:
                raise ApiError(400, f"inputs[{i}] has {tokens} tokens, more than the context length of {CONTEXT_MAX_INPUT_TOKENS}.")
        if sum(doc_tokens) > CONTEXT_MAX_TOKENS:
            raise ApiError(400, f"The total number of tokens must not exceed {CONTEXT_MAX_TOKENS}; got {sum(doc_tokens)}.")
        input_type = body.get("input_type")
        if input_type not in (None, "query", "document"):
            raise ApiError(400, f"input_type {input_type!r} is invalid; use None, 'query' or 'document'.")
        if input_type == "query" and any(len(doc) != 1 for doc in inputs):
            raise ApiError(400, "queries must be one text per input.")
        out_dim = body.get("output_dimension")
        if out_dim is not None:
            if out_dim not in FLEXIBLE_DIMENSIONS:
                raise ApiError(400, f"output_dimension {out_dim} is not supported by {model}.")
            dim = out_dim
        dtype = body.get("output_dtype") or "float"
        if dtype not in ("float", "int8", "uint8"):
            raise ApiError(400, f"the fake serves output_dtype 'float', 'int8' or 'uint8', not {dtype!r}.")
        encoding = body.get("encoding_format")
        if encoding not in (None, "base64"):
            raise ApiError(400, f"encoding_format {encoding!r} is invalid.")
        data = []
        for i, doc in enumerate(inputs):
            items = []
            for j in range(len(doc)):
                vec = self.contextualized_vector(doc, j, input_type, dim)
                arr: np.ndarray = vec
                if dtype == "int8":
                    arr = np.round(vec * 127).astype(np.int8)
                elif dtype == "uint8":
                    arr = (np.round(vec * 127) + 128).astype(np.uint8)
                value: Any = arr.tolist()
                if encoding == "base64":
                    raw = arr.astype("<f4") if dtype == "float" else arr
                    value = base64.b64encode(raw.tobytes()).decode()
                items.append({"object": "embedding", "embedding": value, "index": j})
            if self.shuffle_contextualized:
                items.reverse()
            data.append({"object": "list", "data": items, "index": i})
        if self.shuffle_contextualized:
            data.reverse()
        return {"object": "list", "data": data, "model": model, "usage": {"total_tokens": sum(doc_tokens)}}


def quick_retry_clients() -> tuple[type, type]:
    """`voyageai.Client` and `AsyncClient` whose retries are the SDK's own (which errors, how many
    attempts) without its backoff wait (1-16 s of tenacity `wait_exponential_jitter`), so the
    tests that drive the SDK's retries against this server do not sleep through them."""
    import voyageai
    from tenacity import wait_none

    class QuickRetryClient(voyageai.Client):  # type: ignore[misc]
        def _make_retry_controller(self):  # type: ignore[no-untyped-def]
            return super()._make_retry_controller().copy(wait=wait_none())

    class QuickRetryAsyncClient(voyageai.AsyncClient):  # type: ignore[misc]
        def _make_retry_controller(self):  # type: ignore[no-untyped-def]
            return super()._make_retry_controller().copy(wait=wait_none())

    return QuickRetryClient, QuickRetryAsyncClient
