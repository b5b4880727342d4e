"""Dense pseudo-relevance feedback on a LangChain vector store (`ContextualEnsembleRetriever`'s dense PRF).

The core's Rocchio step (`contextual_retrieval_core.search.feedback`) over the vectors the store already
holds: the query is embedded once with the store's embeddings, both dense searches go by vector,
and the stored rows of the fused top chunks (a chunk's own row and, in a `WindowedVectorStore`,
its window rows) are read back from the store under the Documents' store ids. Stores read:
`InMemoryVectorStore` (its ``store`` dict), langchain-chroma's `Chroma` (its public
``get(include=["embeddings"])``), langchain-postgres' `PGVector` (one SELECT of the embedding
column by id, in the store's own session: `pgvector`) and any store that gives its vectors back
itself (`StoredVectors`: `milvus.MilvusLeg`, one get by id). Nothing is embedded again at query time: a chunk the
store gives no vector back for feeds nothing back, and on any other store feedback is skipped
(the dense side is searched once), as on a `PGVector(async_mode=True)`, which refuses the sync
calls the ensemble makes. The async path reads the store in a worker thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from contextual_retrieval_core.search.feedback import FeedbackRows, StoredVectors, StoreRead
from contextual_retrieval_langchain._pgvector import is_pgvector, stored_vectors
from contextual_retrieval_langchain._relevance import is_chroma
from contextual_retrieval_langchain.windows import WindowedVectorStore

__all__ = ["stored_rows", "astored_rows"]


def stored_rows(store: VectorStore, top: Sequence[str], docs: dict[str, Document], brought: Mapping[str, Any] | None = None) -> FeedbackRows:
    """The stored rows of the `top` chunk ids (own row, then window rows), read from the store
    under each Document's store id (`Document.id`; the chunk id when it has none, `docs`); a chunk
    the store gives no vector back for has none. `brought`: vectors by store id a `PGVector`'s
    search already brought back (`pgvector.Reads`), not read again."""
    return _read(store, top, docs, brought or {}).rows()


async def astored_rows(store: VectorStore, top: Sequence[str], docs: dict[str, Document],
                       brought: Mapping[str, Any] | None = None) -> FeedbackRows:
    """`stored_rows` without blocking the event loop: the store read in a worker thread."""
    return (await run_in_executor(None, _read, store, top, docs, brought or {})).rows()


def _read(store: VectorStore, top: Sequence[str], docs: dict[str, Document], brought: Mapping[str, Any]) -> StoreRead:
    """The vectors the store gives back for the `top` chunks' rows (InMemoryVectorStore, Chroma
    and PGVector; none from any other store)."""
    # Any: which stores can be read back is decided below by class (langchain-chroma is optional)
    inner: Any
    rows: dict[str, list[str]]
    if isinstance(store, WindowedVectorStore):
        inner, rows = store.vectorstore, {c: store.rows_of(c) for c in top}
    else:
        inner, rows = store, {c: [_store_id(docs, c)] for c in top}
    wanted = list(dict.fromkeys(row for chunk in top for row in rows[chunk]))
    held: dict[str, Any] = {}
    if isinstance(inner, InMemoryVectorStore):
        held = {row: inner.store[row]["vector"] for row in wanted if row in inner.store}
    elif is_chroma(inner):
        got = inner.get(ids=wanted, include=["embeddings"])
        held = dict(zip(got["ids"], got["embeddings"]))
    elif is_pgvector(inner):
        held = {row: brought[row] for row in wanted if row in brought}
        held |= stored_vectors(inner, [row for row in wanted if row not in held])
    elif isinstance(inner, StoredVectors):  # a store that reads its vectors back itself (`milvus.MilvusLeg`)
        held = dict(inner.stored_vectors(wanted))
    return StoreRead(top, rows, held)


def _store_id(docs: dict[str, Document], chunk: str) -> str:
    """The id a chunk's row is stored under: its Document's id, else the chunk id."""
    doc = docs.get(chunk)
    return doc.id if doc is not None and doc.id else chunk
