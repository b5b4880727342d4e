"""Dense pseudo-relevance feedback on a LangChain vector store (`ContextualEnsembleRetriever`'s dense PRF).

The core's Rocchio step (`contextual_retrieval_core.feedback`) over the vectors the store already
holds: the query is embedded once with the store's embeddings, both dense searches go by vector,
and the stored rows of the fused top chunks (a chunk's own row and, in a `WindowedVectorStore`,
its window rows) are read back from the store under the Documents' store ids. Stores:
langchain-chroma's `Chroma` (its public ``get(include=["embeddings"])``) and
`InMemoryVectorStore` (its ``store`` dict) are read directly; a chunk any other store holds (or
one of these does not give back) has its Document embedded again (one call for the top chunks
per query). The async paths read the store in a worker thread and embed with the async call.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager, nullcontext
from typing import Any, Iterator, Optional, Sequence

from langchain_core.documents import Document
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from contextual_retrieval_core.feedback import FeedbackRows, StoreRead

from ._compat import relevance_function

__all__ = ["scored_by_vector", "stored_rows", "astored_rows", "oriented", "quiet_store_warnings"]

#: warnings a vector-store read may raise that say nothing to our caller
_QUIET = (
    ("Relevance scores must be between", UserWarning),  # a store's relevance outside [0, 1]: fusion normalises it
    ("legacy embedding function config", DeprecationWarning),  # chromadb, on every read
)


@contextmanager
def quiet_store_warnings() -> Iterator[None]:
    """The store's own chatter (`_QUIET`) silenced around a search or a read."""
    with warnings.catch_warnings():
        for message, category in _QUIET:
            warnings.filterwarnings("ignore", message=message, category=category)
        yield


def scored_by_vector(store: VectorStore, vector: Sequence[float], *, quiet: bool = True,
                     **kwargs: Any) -> list[tuple[Document, Optional[float]]]:
    """(document, relevance or None) best first for a search by `vector`: the scores the store's
    ``similarity_search_with_relevance_scores`` gives for a search by text, its
    ``score_threshold`` search kwarg applied the same way (relevance at or above it kept).
    `quiet`: silence the store's chatter (`quiet_store_warnings`); off in worker threads, where
    changing the process's warning filters is not safe."""
    from .windows import WindowedVectorStore

    threshold = kwargs.pop("score_threshold", None)
    if isinstance(store, WindowedVectorStore):
        pairs = store.scored_by_vector(vector, quiet=quiet, **kwargs)
    else:
        with quiet_store_warnings() if quiet else nullcontext():
            pairs = _scored_by_vector(store, [float(x) for x in vector], **kwargs)
    if threshold is None:
        return pairs
    return [(d, s) for d, s in pairs if s is not None and s >= threshold]


def _scored_by_vector(store: VectorStore, vector: list[float], **kwargs: Any) -> list[tuple[Document, Optional[float]]]:
    # langchain-chroma names its raw search by vector "..._with_relevance_scores" but returns
    # distances (as its similarity_search_with_score does); other stores give raw scores from
    # similarity_search_with_score_by_vector (InMemoryVectorStore, FAISS, ...)
    search = (store.similarity_search_by_vector_with_relevance_scores if _is_chroma(store)
              else getattr(store, "similarity_search_with_score_by_vector", None))
    if callable(search):
        pairs = search(vector, **kwargs)
        convert = relevance_function(store)
        return [(d, convert(s)) for d, s in pairs] if convert is not None else oriented(pairs)
    return [(d, None) for d in store.similarity_search_by_vector(vector, **kwargs)]


def stored_rows(store: VectorStore, top: Sequence[str], docs: dict[str, Document]) -> FeedbackRows:
    """The stored rows of the `top` chunk ids (own row, then window rows), read from the store
    under each Document's store id (`Document.id`; the chunk id when it has none); a chunk the
    store gives no vector back for has its Document (`docs`) embedded again."""
    read = _read(store, top, docs)
    texts = {c: docs[c].page_content for c in read.unheld() if c in docs}
    vectors = store.embeddings.embed_documents(list(texts.values())) if texts else []  # type: ignore[union-attr]
    return read.rows(dict(zip(texts, vectors)))


async def astored_rows(store: VectorStore, top: Sequence[str], docs: dict[str, Document]) -> FeedbackRows:
    """`stored_rows` without blocking the event loop: the store read in a worker thread, the
    chunks embedded again with the embeddings' async call."""
    read = await run_in_executor(None, _read, store, top, docs, False)
    texts = {c: docs[c].page_content for c in read.unheld() if c in docs}
    vectors = await store.embeddings.aembed_documents(list(texts.values())) if texts else []  # type: ignore[union-attr]
    return read.rows(dict(zip(texts, vectors)))


def _read(store: VectorStore, top: Sequence[str], docs: dict[str, Document], quiet: bool = True) -> StoreRead:
    """The vectors the store gives back for the `top` chunks' rows (InMemoryVectorStore and
    Chroma; none from any other store)."""
    from .windows import WindowedVectorStore

    if isinstance(store, WindowedVectorStore):
        inner, rows = store.vectorstore, {c: store.rows_of(c) for c in top}
    else:
        inner, rows = store, {c: [docs[c].id if c in docs and docs[c].id else c] for c in top}
    wanted = [row for chunk in top for row in rows[chunk]]
    held: dict[str, Any] = {}
    if isinstance(inner, InMemoryVectorStore):
        held = {row: inner.store[row]["vector"] for row in wanted if row in inner.store}
    elif _is_chroma(inner):
        with quiet_store_warnings() if quiet else nullcontext():
            got = inner.get(ids=wanted, include=["embeddings"])
        held = dict(zip(got["ids"], got["embeddings"]))
    return StoreRead(top, rows, held)


def oriented(pairs: list[tuple[Document, float]]) -> list[tuple[Document, Optional[float]]]:
    """A store returns its best match first, so scores that rise down the list are distances
    (negated: higher is better), scores that fall are similarities (kept); scores in no order say
    nothing of their direction and are dropped (fusion then uses 1 / rank)."""
    scores = [float(s) for _, s in pairs]
    rising = any(b > a for a, b in zip(scores, scores[1:]))
    falling = any(b < a for a, b in zip(scores, scores[1:]))
    if rising and falling:
        return [(d, None) for d, _ in pairs]
    return [(d, -s if rising else s) for (d, _), s in zip(pairs, scores)]


def _is_chroma(store: Any) -> bool:
    try:
        from langchain_chroma import Chroma
    except ImportError:  # pragma: no cover - the chroma extra is not installed
        return False
    return isinstance(store, Chroma)
