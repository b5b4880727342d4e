"""Dense pseudo-relevance feedback on a LangChain vector store (`ContextualEnsembleRetriever`'s dense PRF).

The core's Rocchio step (`contextual_retrieval_core.search.feedback`) over the vectors the store already
holds: the query is embedded once with the store's embeddings, both dense searches go by vector,
and the stored rows of the fused top chunks (a chunk's own row and, in a `WindowedVectorStore`,
its window rows) are read back from the store under the Documents' store ids. Stores:
langchain-chroma's `Chroma` (its public ``get(include=["embeddings"])``) and
`InMemoryVectorStore` (its ``store`` dict) are read directly; a chunk any other store holds (or
one of these does not give back) has its Document embedded again (one call for the top chunks
per query). The async paths read the store in a worker thread and embed with the async call.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from contextual_retrieval_core.search.feedback import FeedbackRows, StoreRead
from contextual_retrieval_langchain.relevance import is_chroma
from contextual_retrieval_langchain.windows import WindowedVectorStore

__all__ = ["stored_rows", "astored_rows"]


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
    read = await run_in_executor(None, _read, store, top, docs)
    texts = {c: docs[c].page_content for c in read.unheld() if c in docs}
    vectors = await store.embeddings.aembed_documents(list(texts.values())) if texts else []  # type: ignore[union-attr]
    return read.rows(dict(zip(texts, vectors)))


def _read(store: VectorStore, top: Sequence[str], docs: dict[str, Document]) -> StoreRead:
    """The vectors the store gives back for the `top` chunks' rows (InMemoryVectorStore and
    Chroma; none from any other store)."""
    # Any: which stores can be read back is decided below by class (langchain-chroma is optional)
    inner: Any
    rows: dict[str, list[str]]
    if isinstance(store, WindowedVectorStore):
        inner, rows = store.vectorstore, {c: store.rows_of(c) for c in top}
    else:
        inner, rows = store, {c: [_store_id(docs, c)] for c in top}
    wanted = [row for chunk in top for row in rows[chunk]]
    held: dict[str, Any] = {}
    if isinstance(inner, InMemoryVectorStore):
        held = {row: inner.store[row]["vector"] for row in wanted if row in inner.store}
    elif is_chroma(inner):
        got = inner.get(ids=wanted, include=["embeddings"])
        held = dict(zip(got["ids"], got["embeddings"]))
    return StoreRead(top, rows, held)


def _store_id(docs: dict[str, Document], chunk: str) -> str:
    """The id a chunk's row is stored under: its Document's id, else the chunk id."""
    doc = docs.get(chunk)
    return doc.id if doc is not None and doc.id else chunk
