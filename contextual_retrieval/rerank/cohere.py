"""`CohereReranker`: Cohere's hosted rerankers through the v2 API (rerank-v3.5 by default).

All candidates go in one `ClientV2.rerank` request (Cohere recommends at most 1,000 documents per
request; retrieval candidate lists are far shorter). Long documents are truncated server-side to
`max_tokens_per_doc` tokens (Cohere's default is 4096). Retries are the SDK's own:
`cohere.ClientV2(max_retries=n)` retries 408/409/429/5xx, honouring `Retry-After`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence

from contextual_retrieval.rerank.base import RerankResult

if TYPE_CHECKING:  # pragma: no cover - typing only
    import cohere

__all__ = ["CohereReranker"]

_MISSING_KEY = (
    "COHERE_API_KEY is not set (nor CO_API_KEY); pass client=cohere.ClientV2(api_key=...) "
    "or use the offline default PassThroughReranker (no reranking)"
)
_INSTALL_HINT = "the Cohere SDK is not installed; pip install 'contextual-retrieval[cohere]'"


def _check_top_n(top_n: int | None) -> None:
    if top_n is not None and top_n <= 0:
        raise ValueError(f"top_n must be a positive integer or None, got {top_n}")


def _as_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("pass a list of candidate texts, not a single string")
    return list(texts)


class CohereReranker:
    """Reranks candidates with Cohere's rerank API; returns at most `top_n`, best first.

    Args:
        model: a Cohere rerank model (default "rerank-v3.5").
        client: a ready `cohere.ClientV2`; built from COHERE_API_KEY (or CO_API_KEY) when omitted.
        async_client: a ready `cohere.AsyncClientV2`; built the same way when omitted.
        max_tokens_per_doc: truncate each document to this many tokens server-side (Cohere's
            default, 4096, when None).
        max_retries: retries per request for clients built here (the SDK's own retry logic).
        timeout: per-request timeout in seconds for clients built here.

    Example:
        >>> import cohere
        >>> reranker = CohereReranker(client=cohere.ClientV2(api_key="..."))  # doctest: +SKIP
        >>> reranker.rerank("what is BM25?", ["BM25 is a ranking function", "cats"], top_n=1)  # doctest: +SKIP
        [RerankResult(index=0, score=0.91)]
        >>> CohereReranker(client=object()).rerank("q", [])
        []
    """

    def __init__(
        self,
        model: str = "rerank-v3.5",
        *,
        client: cohere.ClientV2 | None = None,
        async_client: cohere.AsyncClientV2 | None = None,
        max_tokens_per_doc: int | None = None,
        max_retries: int = 2,
        timeout: float | None = None,
    ) -> None:
        if max_tokens_per_doc is not None and max_tokens_per_doc <= 0:
            raise ValueError(f"max_tokens_per_doc must be positive, got {max_tokens_per_doc}")
        self.model_name = model
        self.max_tokens_per_doc = max_tokens_per_doc
        self._max_retries = max_retries
        self._timeout = timeout
        self._client = client
        self._async_client = async_client
        if client is None and async_client is None and not _env_key():
            raise RuntimeError(_MISSING_KEY)

    def rerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[RerankResult]:
        """Scores `texts` against `query`; returns at most `top_n` results, best first."""
        _check_top_n(top_n)
        items = _as_texts(texts)
        if not items:
            return []
        response = self._sync_client().rerank(**self._request(query, items, top_n))
        return self._results(response, len(items), top_n)

    async def arerank(self, query: str, texts: Sequence[str], top_n: int | None = None) -> list[RerankResult]:
        """Async `rerank`, through `cohere.AsyncClientV2`."""
        _check_top_n(top_n)
        items = _as_texts(texts)
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
                raise RuntimeError(f"Cohere rerank returned index {item.index} for {size} documents")
            out.append(RerankResult(int(item.index), float(item.relevance_score)))
        out.sort(key=lambda r: (-r.score, r.index))
        return out if top_n is None else out[:top_n]

    def _sync_client(self) -> cohere.ClientV2:
        if self._client is None:
            self._client = _import_cohere().ClientV2(
                api_key=_require_key(), max_retries=self._max_retries, timeout=self._timeout
            )
        return self._client

    def _aio_client(self) -> cohere.AsyncClientV2:
        if self._async_client is None:
            self._async_client = _import_cohere().AsyncClientV2(
                api_key=_require_key(), max_retries=self._max_retries, timeout=self._timeout
            )
        return self._async_client


def _env_key() -> str | None:
    return os.environ.get("COHERE_API_KEY") or os.environ.get("CO_API_KEY") or None


def _require_key() -> str:
    key = _env_key()
    if not key:
        raise RuntimeError(_MISSING_KEY)
    return key


def _import_cohere() -> Any:
    try:
        import cohere
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(_INSTALL_HINT) from exc
    return cohere
