"""`FakeCohereServer`: Cohere's v2 rerank endpoint on a loopback port.

Wire format as the `cohere` SDK's `ClientV2.rerank` speaks it: `POST /v2/rerank` with a JSON body
(`model`, `query`, `documents`, optional `top_n`, `max_tokens_per_doc`), bearer auth, errors as
`{"id": ..., "message": ...}`. Point a real client at it with
`cohere.ClientV2(api_key=server.api_key, base_url=server.base_url)`.

Scores are the Voyage fake's (the cosine of the query's and document's word sets, see
`voyage_server.rerank_score`), after each document is truncated to its first `max_tokens_per_doc`
words (4096 by default), as the API truncates long documents.
"""

from __future__ import annotations

import uuid
from typing import Any

from . import voyage_server
from .loopback import ApiError, LoopbackServer

__all__ = ["FakeCohereServer"]

MODELS = ("rerank-v3.5", "rerank-english-v3.0", "rerank-multilingual-v3.0")
MAX_DOCUMENTS = 10_000
DEFAULT_MAX_TOKENS_PER_DOC = 4096


def rerank_score(query: str, document: str, max_tokens_per_doc: int = DEFAULT_MAX_TOKENS_PER_DOC) -> float:
    """The fake's relevance of `document` (truncated to its first words) to `query`, in [0, 1]."""
    kept = voyage_server.words(document)[:max_tokens_per_doc]
    return voyage_server.rerank_score(query, " ".join(kept))


class FakeCohereServer(LoopbackServer):
    """Cohere's `/v2/rerank` on 127.0.0.1; see the module docstring.

    Example:
        >>> import cohere
        >>> with FakeCohereServer() as server:
        ...     client = cohere.ClientV2(api_key=server.api_key, base_url=server.base_url)
        ...     [r.index for r in client.rerank(model="rerank-v3.5", query="red", documents=["blue", "red"]).results]
        [1, 0]
    """

    rerank_score = staticmethod(rerank_score)

    def __init__(self, api_key: str = "test-cohere-key") -> None:
        super().__init__(api_key)

    @property
    def base_url(self) -> str:
        """What to pass as `cohere.ClientV2(base_url=...)`."""
        return self.url

    def reranker(self, *, max_retries: int = 0, **options: Any) -> Any:
        """A core `CohereReranker` on real `cohere` SDK clients (sync and async) pointed here."""
        import cohere

        from contextual_retrieval_core.rerank.cohere import CohereReranker

        return CohereReranker(
            client=cohere.ClientV2(api_key=self.api_key, base_url=self.base_url, max_retries=max_retries),
            async_client=cohere.AsyncClientV2(api_key=self.api_key, base_url=self.base_url, max_retries=max_retries),
            **options,
        )

    def routes(self) -> dict[str, Any]:
        return {"/v2/rerank": self._rerank}

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"id": str(uuid.uuid4()), "message": message}

    def rerank_requests(self) -> list[dict[str, Any]]:
        """Bodies of the rerank requests, in arrival order."""
        return [r.body for r in self.requests_to("/v2/rerank")]

    def _rerank(self, body: dict[str, Any]) -> dict[str, Any]:
        model = body.get("model")
        if model not in MODELS:
            raise ApiError(404, f"model '{model}' not found, make sure the correct model ID was used")
        query, documents = body.get("query"), body.get("documents")
        if not isinstance(query, str) or not query:
            raise ApiError(400, "invalid request: query must be a non-empty string")
        if not isinstance(documents, list) or not documents:
            raise ApiError(400, "invalid request: list of documents must not be empty")
        if not all(isinstance(d, str) for d in documents):
            raise ApiError(400, "invalid request: documents must be strings")
        if len(documents) > MAX_DOCUMENTS:
            raise ApiError(400, f"invalid request: cannot rerank more than {MAX_DOCUMENTS} documents")
        top_n = body.get("top_n")
        if top_n is not None and (not isinstance(top_n, int) or top_n <= 0):
            raise ApiError(400, "invalid request: top_n must be a positive integer")
        max_tokens = body.get("max_tokens_per_doc")
        if max_tokens is None:
            max_tokens = DEFAULT_MAX_TOKENS_PER_DOC
        elif not isinstance(max_tokens, int) or max_tokens <= 0:
            raise ApiError(400, "invalid request: max_tokens_per_doc must be a positive integer")
        results = sorted(
            ({"index": i, "relevance_score": rerank_score(query, d, max_tokens)} for i, d in enumerate(documents)),
            key=lambda r: (-r["relevance_score"], r["index"]),
        )
        return {
            "id": str(uuid.uuid4()),
            "results": results[:top_n] if top_n else results,
            "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
        }
