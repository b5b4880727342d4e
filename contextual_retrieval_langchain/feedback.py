"""Dense pseudo-relevance feedback on a LangChain vector store (`ContextualEnsembleRetriever`'s dense PRF).

The core's Rocchio step (`contextual_retrieval_core.feedback`) over the vectors the store already
holds: the query is embedded once with the store's embeddings, both dense searches go by vector,
and the stored rows of the fused top chunks (a chunk's own row and, in a `WindowedVectorStore`,
its window rows) are read back from the store. Stores: langchain-chroma's `Chroma` (its public
``get(include=["embeddings"])``) and `InMemoryVectorStore` (its ``store`` dict) are read
directly; any other store's Documents are embedded again (one call for the top chunks per query).
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from typing import Any, Iterator, Optional, Sequence

from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from contextual_retrieval_core.feedback import FeedbackRows, looked_up_rows

from ._compat import relevance_function

__all__ = ["scored_by_vector", "stored_rows", "oriented", "quiet_store_warnings"]

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


def scored_by_vector(store: VectorStore, vector: Sequence[float], **kwargs: Any) -> list[tuple[Document, Optional[float]]]:
    """(document, relevance or None) best first for a search by `vector`: the scores the store's
    ``similarity_search_with_relevance_scores`` gives for a search by text."""
    from .windows import WindowedVectorStore

    if isinstance(store, WindowedVectorStore):
        return store.scored_by_vector(vector, **kwargs)
    vector = [float(x) for x in vector]
    with quiet_store_warnings():
        return _scored_by_vector(store, vector, **kwargs)


def _scored_by_vector(store: VectorStore, vector: list[float], **kwargs: Any) -> list[tuple[Document, Optional[float]]]:
    for name in ("similarity_search_by_vector_with_relevance_scores", "similarity_search_with_score_by_vector"):
        search = getattr(store, name, None)
        if callable(search):  # raw scores (Chroma: distances), as similarity_search_with_score gives them
            pairs = search(vector, **kwargs)
            convert = relevance_function(store)
            return [(d, convert(s)) for d, s in pairs] if convert is not None else oriented(pairs)
    return [(d, None) for d in store.similarity_search_by_vector(vector, **kwargs)]


def stored_rows(store: VectorStore, top: Sequence[str], docs: dict[str, Document]) -> FeedbackRows:
    """The stored rows of the `top` chunk ids (own row, then window rows); a store that does not
    give its vectors back has the chunks' Documents (`docs`) embedded again."""
    from .windows import WindowedVectorStore

    rows_of = store.rows_of if isinstance(store, WindowedVectorStore) else (lambda chunk: [chunk])
    inner = store.vectorstore if isinstance(store, WindowedVectorStore) else store
    if isinstance(inner, InMemoryVectorStore):
        return looked_up_rows(top, rows_of, lambda row: (inner.store.get(row) or {}).get("vector"))
    if _is_chroma(inner):
        with quiet_store_warnings():
            got = inner.get(ids=[row for chunk in top for row in rows_of(chunk)], include=["embeddings"])
        held = dict(zip(got["ids"], got["embeddings"]))
        return looked_up_rows(top, rows_of, held.get)
    texts = {c: docs[c].page_content for c in top if c in docs}
    vectors = dict(zip(texts, store.embeddings.embed_documents(list(texts.values())))) if texts and store.embeddings else {}
    return looked_up_rows(top, lambda chunk: [chunk], vectors.get)


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
