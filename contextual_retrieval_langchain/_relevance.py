"""Relevance scores from LangChain vector stores, as their public
``similarity_search_with_relevance_scores`` gives them, without changing warning filters.

`ContextualEnsembleRetriever` reads a vector store's own scores through these (so fusion can use
them, and relevance-score fusion scales them), and `WindowedVectorStore` collapses them per
chunk. A store with no relevance function has its raw scores read by their order (`oriented`).
A sync `PGVector` searched without a filter is searched by `pgvector.distances_by_vector` (by
text: the query embedded with the store's embeddings first), the same search selecting only
what is read.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.documents import Document
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import VectorStore

from contextual_retrieval_langchain._compat import arelevance_scores, relevance_function, relevance_scores
from contextual_retrieval_langchain._pgvector import Reads, distances_by_vector, is_pgvector

__all__ = ["ScoresByVector", "relevance_scored", "arelevance_scored", "relevance_pairs", "arelevance_pairs",
           "scored_by_vector", "oriented", "is_chroma"]


@runtime_checkable
class ScoresByVector(Protocol):
    """A store that scores a search by vector itself (`WindowedVectorStore`: each chunk once)."""

    def scored_by_vector(self, vector: Sequence[float], k: int = 4, **kwargs: Any) -> list[tuple[Document, float | None]]: ...


# No warning filters are changed here: `warnings.catch_warnings` swaps the process's filter list,
# so around an await or in concurrent threads (``batch``) it can leave filters behind or drop the
# caller's. The searches below call the methods that compute the scores, not the public wrapper
# that warns (its warning prints the retrieved documents).


def relevance_scored(store: VectorStore, query: str, **kwargs: Any) -> list[tuple[Document, float | None]]:
    """(document, relevance) best first: what the store's public
    ``similarity_search_with_relevance_scores`` returns, its ``score_threshold`` applied the same
    way, without that method's warning for scores outside [0, 1] (fusion scales the scores). A
    store without a relevance function (`InMemoryVectorStore`) is searched with
    ``similarity_search_with_score``, its scores read by their order (`oriented`) and the
    threshold applied to them, as `scored_by_vector` does."""
    threshold = kwargs.pop("score_threshold", None)
    pairs: list[tuple[Document, float | None]]
    if _lean(store, kwargs):  # the query embedded by the store's embeddings, then `scored_by_vector`'s search
        pairs = scored_by_vector(store, store.embeddings.embed_query(query), **kwargs)  # type: ignore[union-attr]
    elif _scores_by_order(store, "similarity_search_with_relevance_scores"):
        pairs = oriented(store.similarity_search_with_score(query, **kwargs))
    else:
        pairs = list(relevance_pairs(store, query, threshold, **kwargs))
    return _at_or_above(pairs, threshold)


async def arelevance_scored(store: VectorStore, query: str, **kwargs: Any) -> list[tuple[Document, float | None]]:
    """Async `relevance_scored`."""
    threshold = kwargs.pop("score_threshold", None)
    pairs: list[tuple[Document, float | None]]
    if _lean(store, kwargs):
        vector = await store.embeddings.aembed_query(query)  # type: ignore[union-attr]
        pairs = await run_in_executor(None, functools.partial(scored_by_vector, store, vector, **kwargs))
    elif _scores_by_order(store, "asimilarity_search_with_relevance_scores"):
        pairs = oriented(await store.asimilarity_search_with_score(query, **kwargs))
    else:
        pairs = list(await arelevance_pairs(store, query, threshold, **kwargs))
    return _at_or_above(pairs, threshold)


def relevance_pairs(store: VectorStore, query: str, threshold: float | None = None, **kwargs: Any) -> list[tuple[Document, float]]:
    """The relevance scores of a search: the store's own public relevance search where it has one
    (given `threshold`), else the scoring step LangChain's public method wraps, before its
    threshold (which raises NotImplementedError for a store without a relevance function, as the
    public method does)."""
    if _overrides(store, "similarity_search_with_relevance_scores"):
        return store.similarity_search_with_relevance_scores(query, **_with_threshold(kwargs, threshold))
    return relevance_scores(store, query, **kwargs)


async def arelevance_pairs(store: VectorStore, query: str, threshold: float | None = None, **kwargs: Any) -> list[tuple[Document, float]]:
    """Async `relevance_pairs`."""
    if _overrides(store, "asimilarity_search_with_relevance_scores"):
        return await store.asimilarity_search_with_relevance_scores(query, **_with_threshold(kwargs, threshold))
    return await arelevance_scores(store, query, **kwargs)


def _scores_by_order(store: VectorStore, public: str) -> bool:
    """No relevance search of its own (`public`) and no relevance function: raw scores, read by their order."""
    return not _overrides(store, public) and relevance_function(store) is None


def _overrides(store: VectorStore, method: str) -> bool:
    return getattr(type(store), method, None) is not getattr(VectorStore, method)


def _with_threshold(kwargs: dict[str, Any], threshold: float | None) -> dict[str, Any]:
    return kwargs if threshold is None else {**kwargs, "score_threshold": threshold}


def _at_or_above(pairs: list, threshold: float | None) -> list:
    if threshold is None:
        return pairs
    return [(d, s) for d, s in pairs if s is not None and s >= threshold]


def scored_by_vector(store: VectorStore, vector: Sequence[float], reads: Reads | None = None,
                     **kwargs: Any) -> list[tuple[Document, float | None]]:
    """(document, relevance or None) best first for a search by `vector`: the scores the store's
    ``similarity_search_with_relevance_scores`` gives for a search by text, its
    ``score_threshold`` search kwarg applied the same way (relevance at or above it kept).
    `reads`: what a `PGVector` reads besides ids and distances (`pgvector.Reads`)."""
    threshold = kwargs.pop("score_threshold", None)
    if isinstance(store, ScoresByVector):
        pairs = store.scored_by_vector(vector, **kwargs)
    else:
        pairs = _scored_by_vector(store, [float(x) for x in vector], reads, **kwargs)
    return _at_or_above(pairs, threshold)


def _scored_by_vector(store: VectorStore, vector: list[float], reads: Reads | None = None,
                      **kwargs: Any) -> list[tuple[Document, float | None]]:
    # langchain-chroma names its raw search by vector "..._with_relevance_scores" but returns
    # distances (as its similarity_search_with_score does); other stores give raw scores from
    # similarity_search_with_score_by_vector (InMemoryVectorStore, FAISS, ...)
    search = (store.similarity_search_by_vector_with_relevance_scores if is_chroma(store)  # type: ignore[attr-defined]
              else getattr(store, "similarity_search_with_score_by_vector", None))
    if _lean(store, kwargs):
        search = functools.partial(distances_by_vector, store, reads=reads)
    if callable(search):
        pairs = search(vector, **kwargs)
        convert = relevance_function(store)
        return [(d, convert(s)) for d, s in pairs] if convert is not None else oriented(pairs)
    return [(d, None) for d in store.similarity_search_by_vector(vector, **kwargs)]


def _lean(store: VectorStore, kwargs: dict[str, Any]) -> bool:
    """Whether a search of `store` runs as `pgvector.distances_by_vector` (a sync `PGVector`
    searched without a filter): the store's own search, selecting only what is read."""
    return is_pgvector(store) and kwargs.keys() <= {"k"}


def oriented(pairs: list[tuple[Document, float]]) -> list[tuple[Document, float | None]]:
    """A store returns its best match first, so scores that rise down the list are distances
    (negated: higher is better), scores that fall are similarities (kept); scores in no order say
    nothing of their direction and are dropped (fusion then uses 1 / rank)."""
    scores = [float(s) for _, s in pairs]
    rising = any(b > a for a, b in zip(scores, scores[1:]))
    falling = any(b < a for a, b in zip(scores, scores[1:]))
    if rising and falling:
        return [(d, None) for d, _ in pairs]
    return [(d, -s if rising else s) for (d, _), s in zip(pairs, scores)]


def is_chroma(store: Any) -> bool:
    try:
        from langchain_chroma import Chroma
    except ImportError:  # pragma: no cover - the chroma extra is not installed
        return False
    return isinstance(store, Chroma)
