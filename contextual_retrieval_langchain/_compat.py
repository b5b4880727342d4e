"""SDK clients configured as a LangChain model's own, from its public fields.

langchain-anthropic's `ChatAnthropic` keeps its SDK clients private (``_client``); the core
`AnthropicContextGenerator` needs clients with the same key, base URL, retries, timeout, headers
and proxy, so they are built here from the model's public fields (tested against the fake
Messages API in tests/unit/project/test_compat.py, which pins the supported versions). The one private member
read in this package is a retriever's tracing parameters (`retriever_ls_params`), for the
ensemble's own child run, and a vector store's relevance function (`relevance_function`), so
a search by vector (dense PRF) reports the scores a search by text does, and the scoring step
that a store's public relevance search wraps (`relevance_scores`), so the ensemble gets those
scores without the public method's warning; nothing else reads another package's private members.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["chat_anthropic_clients", "retriever_ls_params", "relevance_function", "relevance_scores", "arelevance_scores"]


def chat_anthropic_clients(llm: Any) -> tuple[Any, Any]:
    """(anthropic.Anthropic, anthropic.AsyncAnthropic) configured as `llm` (a `ChatAnthropic`) is."""
    import anthropic

    params: dict[str, Any] = {
        "api_key": llm.anthropic_api_key.get_secret_value(),
        "base_url": llm.anthropic_api_url,
        "max_retries": llm.max_retries,
    }
    if llm.default_headers:
        params["default_headers"] = dict(llm.default_headers)
    timeout = llm.default_request_timeout
    if timeout is None or timeout > 0:  # ChatAnthropic's rule: <= 0 means "not set"
        params["timeout"] = timeout
    if not llm.anthropic_proxy:
        return anthropic.Anthropic(**params), anthropic.AsyncAnthropic(**params)
    return (
        anthropic.Anthropic(**params, http_client=anthropic.DefaultHttpxClient(proxy=llm.anthropic_proxy)),
        anthropic.AsyncAnthropic(**params, http_client=anthropic.DefaultAsyncHttpxClient(proxy=llm.anthropic_proxy)),
    )


def retriever_ls_params(retriever: Any, **kwargs: Any) -> dict[str, Any]:
    """The tracing metadata (``ls_retriever_name``, ``ls_vector_store_provider``, ...) that
    `BaseRetriever.invoke` adds to a retriever's run, for the one run the ensemble starts itself
    (a vector store searched with scores). langchain-core computes it in a private method."""
    return dict(retriever._get_ls_params(**kwargs))


def relevance_function(store: Any) -> Callable[[float], float] | None:
    """The function a langchain-core `VectorStore` (0.3 - 1.x) turns its raw scores into relevance
    with (``_select_relevance_score_fn``, what its public ``similarity_search_with_relevance_scores``
    applies); None when the store has none (`InMemoryVectorStore`)."""
    select = getattr(store, "_select_relevance_score_fn", None)
    if select is None:
        return None
    try:
        return select()
    except NotImplementedError:
        return None


def relevance_scores(store: Any, query: str, **kwargs: Any) -> list:
    """(document, relevance) as a langchain-core `VectorStore`'s public
    ``similarity_search_with_relevance_scores`` computes them, before its range check (a warning
    whose text holds the retrieved documents) and its ``score_threshold``: the private
    ``_similarity_search_with_relevance_scores`` it wraps (which a store may override)."""
    return store._similarity_search_with_relevance_scores(query, **kwargs)


async def arelevance_scores(store: Any, query: str, **kwargs: Any) -> list:
    """Async `relevance_scores` (``_asimilarity_search_with_relevance_scores``)."""
    return await store._asimilarity_search_with_relevance_scores(query, **kwargs)
