"""`CohereReranker`: Cohere's hosted rerankers through the v2 API (rerank-v3.5 by default).

All candidates go in one `ClientV2.rerank` request (Cohere recommends at most 1,000 documents per
request; retrieval candidate lists are far shorter). Long documents are truncated server-side to
`max_tokens_per_doc` tokens (Cohere's default is 4096). Retries are the SDK's own:
`cohere.ClientV2(max_retries=n)` retries 408/409/429/5xx, honouring `Retry-After`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from contextual_retrieval_core._sdk import LazyClients, in_thread
from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.errors import RunError
from contextual_retrieval_core.rerank.base import RerankResult, best_first, candidate_texts, check_top_n

if TYPE_CHECKING:  # pragma: no cover - typing only
    import cohere

__all__ = ["CohereReranker"]

_MISSING_KEY = (
    "COHERE_API_KEY is not set (nor CO_API_KEY); pass client=cohere.ClientV2(api_key=...) "
    "or use the offline default PassThroughReranker (no reranking)"
)


class CohereReranker(LazyClients):
    """Reranks candidates with Cohere's rerank API; returns at most `top_n`, best first.

    Args:
        model: a Cohere rerank model (default "rerank-v3.5").
        client: a ready `cohere.ClientV2`; built from COHERE_API_KEY (or CO_API_KEY) when omitted.
        async_client: a ready `cohere.AsyncClientV2`; built the same way when omitted, unless
            `client` was given: then async calls run `client` in a worker thread.
        max_tokens_per_doc: truncate each document to this many tokens server-side (Cohere's
            default, 4096, when None).
        max_retries: retries per request for clients built here (the SDK's own retry logic).
        timeout: per-request timeout in seconds for clients built here.
        base_url: the API endpoint for clients built here (a proxy or gateway; default: the SDK's).

    Example:
        >>> import cohere
        >>> reranker = CohereReranker(client=cohere.ClientV2(api_key="..."))  # doctest: +SKIP
        >>> reranker.rerank("what is BM25?", ["BM25 is a ranking function", "cats"], top_n=1)  # doctest: +SKIP
        [RerankResult(index=0, score=0.91)]
        >>> CohereReranker(client=object()).rerank("q", [])
        []
    """

    _sdk = ("cohere", "cohere", "Cohere")
    _sync_cls, _async_cls = "ClientV2", "AsyncClientV2"
    _key_vars = ("COHERE_API_KEY", "CO_API_KEY")
    _missing_key = _MISSING_KEY

    def __init__(
        self,
        model: str = "rerank-v3.5",
        *,
        client: cohere.ClientV2 | None = None,
        async_client: cohere.AsyncClientV2 | None = None,
        max_tokens_per_doc: int | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
        base_url: str | None = None,
    ) -> None:
        positive_int("max_tokens_per_doc", max_tokens_per_doc, allow_none=True)
        self.model_name = model
        self.max_tokens_per_doc = max_tokens_per_doc
        self._init_clients(client, async_client, max_retries, timeout, base_url)

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[RerankResult]:
        """Scores `texts` against `query`; returns at most `top_n` results, best first."""
        check_top_n(top_n)
        items = candidate_texts(texts)
        if not items:
            return []
        response = self._sync_client().rerank(**self._request(query, items, top_n))
        return self._results(response, len(items), top_n)

    async def arerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[RerankResult]:
        """Async `rerank`, through `cohere.AsyncClientV2` (or the sync client in a worker thread
        when only `client=` was given)."""
        if self._async_in_thread:
            return await in_thread(self.rerank, query, texts, top_n)
        check_top_n(top_n)
        items = candidate_texts(texts)
        if not items:
            return []
        response = await self._aio_client().rerank(**self._request(query, items, top_n))
        return self._results(response, len(items), top_n)

    # -- internals ----------------------------------------------------------------------------

    def _request(self, query: str, items: list[str], top_n: int | None) -> dict[str, Any]:
        request: dict[str, Any] = {"model": self.model_name, "query": query, "documents": items}
        if top_n is not None:
            request["top_n"] = min(top_n, len(items))
        if self.max_tokens_per_doc is not None:
            request["max_tokens_per_doc"] = self.max_tokens_per_doc
        return request

    @staticmethod
    def _results(response: Any, size: int, top_n: int | None) -> list[RerankResult]:
        out = []
        for item in response.results:
            if not 0 <= item.index < size:
                raise RunError(f"Cohere rerank returned index {item.index} for {size} documents")
            out.append(RerankResult(int(item.index), float(item.relevance_score)))
        return best_first(out, top_n)


