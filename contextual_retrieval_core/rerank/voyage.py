"""`VoyageReranker`: Voyage AI's hosted rerankers (rerank-2.5 by default).

One request takes at most 1,000 documents and at most a model-specific number of tokens, counted as
query tokens x documents + document tokens (600K for rerank-2.5 / rerank-2, 300K for rerank-1).
Longer candidate lists are split into several requests whose results are merged by score; a
cross-encoder's scores are per (query, document) pair, so they compare across requests.
Retries are the SDK's own (`voyageai.Client(max_retries=n)`, which counts attempts, not retries).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from contextual_retrieval_core._sdk import in_thread
from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.embeddings.voyage import VoyageClients, estimate_tokens, plan_batches
from contextual_retrieval_core.errors import RunError
from contextual_retrieval_core.rerank.base import RerankResult, best_first, candidate_texts, check_top_n

if TYPE_CHECKING:  # pragma: no cover - typing only
    import voyageai

__all__ = ["VoyageReranker", "VOYAGE_RERANK_TOKEN_CAPS", "MAX_DOCUMENTS_PER_REQUEST"]

#: the API's cap on documents in one rerank request
MAX_DOCUMENTS_PER_REQUEST = 1000
#: per-model cap on query tokens x documents + document tokens, from Voyage's documentation
VOYAGE_RERANK_TOKEN_CAPS: dict[str, int] = {
    "rerank-2.5": 600_000,
    "rerank-2.5-lite": 600_000,
    "rerank-2": 600_000,
    "rerank-2-lite": 600_000,
    "rerank-1": 300_000,
    "rerank-lite-1": 300_000,
}
_FALLBACK_TOKEN_CAP = 300_000
_MISSING_KEY = (
    "VOYAGE_API_KEY is not set; pass client=voyageai.Client(api_key=...) "
    "or use the offline default PassThroughReranker (no reranking)"
)


class VoyageReranker(VoyageClients):
    """Reranks candidates with Voyage AI's rerank API; returns at most `top_n`, best first.

    Args:
        model: a Voyage rerank model (default "rerank-2.5").
        client: a ready `voyageai.Client`; built from VOYAGE_API_KEY when omitted.
        async_client: a ready `voyageai.AsyncClient`; built from VOYAGE_API_KEY when omitted,
            unless `client` was given: then async calls run `client` in a worker thread.
        truncation: let the API truncate over-long queries and documents (default True).
        max_tokens_per_request: token budget per request (default: the model's published cap,
            300K for unknown models), counted with `token_estimator`.
        token_estimator: counts one text's tokens (default: the offline over-estimate).
        max_retries: attempts per request for clients built here (the SDK's own retry logic).
        timeout: per-request timeout in seconds for clients built here.
        base_url: the API endpoint for clients built here (a proxy or gateway; default: the SDK's).

    Example:
        >>> import voyageai
        >>> reranker = VoyageReranker(client=voyageai.Client(api_key="pa-..."))  # doctest: +SKIP
        >>> reranker.rerank("what is BM25?", ["BM25 is a ranking function", "cats"], top_n=1)  # doctest: +SKIP
        [RerankResult(index=0, score=0.83)]
        >>> VoyageReranker(client=voyageai.Client(api_key="x")).rerank("q", [])
        []
    """

    _missing_key = _MISSING_KEY

    def __init__(
        self,
        model: str = "rerank-2.5",
        *,
        client: voyageai.Client | None = None,
        async_client: voyageai.AsyncClient | None = None,
        truncation: bool = True,
        max_tokens_per_request: int | None = None,
        token_estimator: Callable[[str], int] | None = None,
        max_retries: int = 3,
        timeout: float | None = None,
        base_url: str | None = None,
    ) -> None:
        positive_int("max_tokens_per_request", max_tokens_per_request, allow_none=True)
        self.model_name = model
        self.truncation = truncation
        self.max_tokens_per_request = max_tokens_per_request or VOYAGE_RERANK_TOKEN_CAPS.get(
            model, _FALLBACK_TOKEN_CAP
        )
        self.token_estimator = token_estimator or estimate_tokens
        self._init_clients(client, async_client, max_retries, timeout, base_url)

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[RerankResult]:
        """Scores `texts` against `query`; returns at most `top_n` results, best first."""
        check_top_n(top_n)
        items = candidate_texts(texts)
        if not items:
            return []
        client = self._sync_client()
        results: list[RerankResult] = []
        for batch in self._plan(query, items):
            response = client.rerank(query, items[batch], self.model_name, **self._options(batch, top_n))
            results.extend(self._results(response, batch))
        return best_first(results, top_n)

    async def arerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[RerankResult]:
        """Async `rerank`; several requests (over 1,000 candidates) run concurrently. With only
        `client=` given, `rerank` runs in a worker thread instead."""
        if self._async_in_thread:
            return await in_thread(self.rerank, query, texts, top_n)
        check_top_n(top_n)
        items = candidate_texts(texts)
        if not items:
            return []
        client = self._aio_client()

        async def one(batch: slice) -> list[RerankResult]:
            response = await client.rerank(query, items[batch], self.model_name, **self._options(batch, top_n))
            return self._results(response, batch)

        parts = await asyncio.gather(*(one(b) for b in self._plan(query, items)))
        return best_first([r for part in parts for r in part], top_n)

    # -- internals ----------------------------------------------------------------------------

    def _plan(self, query: str, items: list[str]) -> list[slice]:
        query_cost = self.token_estimator(query)
        costs = [query_cost + self.token_estimator(t) for t in items]
        return plan_batches(costs, MAX_DOCUMENTS_PER_REQUEST, self.max_tokens_per_request)

    def _options(self, batch: slice, top_n: int | None) -> dict[str, Any]:
        size = batch.stop - batch.start
        return {"top_k": None if top_n is None else min(top_n, size), "truncation": self.truncation}

    @staticmethod
    def _results(response: Any, batch: slice) -> list[RerankResult]:
        size = batch.stop - batch.start
        out = []
        for item in response.results:
            if not 0 <= item.index < size:
                raise RunError(f"Voyage rerank returned index {item.index} for {size} documents")
            out.append(RerankResult(batch.start + int(item.index), float(item.relevance_score)))
        return out


