"""Windowed contextual embeddings on any LangChain vector store: a chunk's windows as extra rows.

`WindowedVectorStore` wraps a vector store. A contextual chunk whose page_content (context +
chunk) is longer than the embeddings' window is stored as overlapping windows, each with the
chunk's context (the core's `windows` and `_window_rows`): the chunk's own row (its id) holds its
first window, each further window is a row ``<chunk id> + WINDOW_MARK + n`` with the chunk's
metadata plus ``window_of``. Searches ask the store for enough rows to cover the windows and
return each chunk once, as the Document it was added as, at its best window's score: the
ranking `HybridSearcher(windows=...)` gives. Embeddings that report no window (``max_tokens``
and ``count_tokens``, as `LocalMiniLMEmbeddings` and `ContextualVoyageEmbeddings` do through
their core embedder) are never windowed.

Example:
    >>> from langchain_core.vectorstores import InMemoryVectorStore
    >>> from contextual_retrieval_core.dense.windows import WindowConfig, first_per_owner
    >>> from contextual_retrieval_langchain import LocalMiniLMEmbeddings
    >>> embeddings = LocalMiniLMEmbeddings()
    >>> store = WindowedVectorStore(InMemoryVectorStore(embeddings), windows=WindowConfig(size=16))
    >>> store.add_documents([Document("Kitchen notes. " * 12 + "The signing key rotates on Tuesday.", id="k"),
    ...                      Document("Cats sleep all day.", id="c")])
    ['k', 'c']
    >>> [d.id for d in store.similarity_search("when does the key rotate?", k=2)]
    ['k', 'c']
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from contextual_retrieval_core.dense._window_rows import (
    WINDOW_OF_KEY,
    RowLedger,
    WindowRow,
    max_pooling_only,
    plan_rows,
    row_owner,
    windowable,
)
from contextual_retrieval_core.dense.windows import WindowConfig, fetch_sizes, first_per_owner
from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_langchain._compat import relevance_function
from contextual_retrieval_langchain._documents import CHUNK_ID_KEY, ORIGINAL_CONTENT_KEY, chunk_id_of
from contextual_retrieval_langchain._relevance import arelevance_pairs, relevance_pairs, scored_by_vector

__all__ = ["WindowedVectorStore", "WINDOW_OF_KEY"]

def _row_document(row: WindowRow, doc: Document, alone: bool, id_key: str) -> Document:
    """The store row of a chunk: the Document itself when it is the chunk's one row, else a
    window: the chunk's metadata with its chunk id, and ``window_of`` beyond its own row."""
    if alone:
        return Document(doc.page_content, metadata=doc.metadata, id=row.id)
    cid = chunk_id_of(doc, id_key)
    meta = {**doc.metadata, CHUNK_ID_KEY: cid} if not row.extra else {**doc.metadata, CHUNK_ID_KEY: cid, WINDOW_OF_KEY: cid}
    return Document(row.text, metadata=meta, id=row.id)


def _delete(store: VectorStore, ids: list[str]) -> None:
    with contextlib.suppress(NotImplementedError):  # a store that cannot delete: its rows are overwritten or kept
        store.delete(ids=ids)


class WindowedVectorStore(VectorStore):
    """A vector store whose long chunks are stored as windows, searched one result per chunk.

    Args:
        vectorstore: the store that holds the rows (embedded Chroma, `InMemoryVectorStore`, ...).
        windows: a core `WindowConfig` (max pooling: one row per window).
        id_key: metadata key of the chunk id for Documents without `Document.id`.
    """

    def __init__(self, vectorstore: VectorStore, *, windows: WindowConfig | None = None, id_key: str = CHUNK_ID_KEY) -> None:
        if not isinstance(vectorstore, VectorStore):
            raise InputTypeError(f"vectorstore must be a LangChain VectorStore, got {type(vectorstore).__name__}")
        self.vectorstore = vectorstore
        self.windows = max_pooling_only(windows or WindowConfig(), "WindowedVectorStore")
        self.id_key = id_key
        self._ledger = RowLedger()  # each chunk's rows and store id; the payload is its Document

    @property
    def embeddings(self) -> Embeddings | None:
        return self.vectorstore.embeddings

    @property
    def extra(self) -> int:
        """Rows beyond one per chunk."""
        return self._ledger.extra

    # -- writing ----------------------------------------------------------------------------------

    def add_documents(self, documents: list[Document], *, skip_fitting: bool = False, **kwargs: Any) -> list[str]:
        """Add contextual chunks (page_content = context + chunk, the chunk in
        ``metadata["original_content"]``), long ones as windows; returns their store ids.
        `skip_fitting`: chunks that fit one row are not written (the store holds them already).

        ``ids=`` (LangChain's keyword, one per Document; the indexing API passes content hashes)
        are the store ids: a chunk's rows are written under its id (its windows under
        ``id + WINDOW_MARK + n``) and `delete` takes them. Without it a chunk's store id is its
        chunk id. Either way searches return each chunk once, as the Document it was added as,
        and `rows_of` takes the chunk id. A chunk is held in one version, under one store id:
        added again (under any id) it replaces the version before, so with the indexing API use a
        cleanup mode ("incremental", "full", "scoped_full"); with ``cleanup=None`` an edit that is
        later reverted is not written back (the record manager still lists the old version)."""
        docs = list(documents)
        given = kwargs.pop("ids", None)
        if given is not None:
            given = list(given)
            if len(given) != len(docs) or not all(isinstance(i, str) and i for i in given):
                raise InputError(f"ids= needs one non-empty string per Document ({len(docs)} Documents, {len(given)} ids); "
                                 "pass ids=None to store each chunk under its chunk id")
            docs = [d if d.id == i else d.model_copy(update={"id": i}) for d, i in zip(docs, given)]
        # a Document with no id gets its chunk id, or a fresh one, as LangChain's stores give it
        docs = [d if d.id else d.model_copy(update={"id": str(d.metadata.get(self.id_key) or uuid.uuid4())}) for d in docs]
        ids = [chunk_id_of(d, self.id_key) for d in docs]
        keys = given if given is not None else ids
        chunks = [windowable(key, d.page_content, str(d.metadata.get(ORIGINAL_CONTENT_KEY) or d.page_content))
                  for key, d in zip(keys, docs)]
        plans = plan_rows(self.embeddings, chunks, self.windows)
        change = self._ledger.stage((cid, key, rows, doc, not skip_fitting) for cid, key, doc, rows in zip(ids, keys, docs, plans))
        write = [_row_document(row, doc, alone, self.id_key) for row, doc, alone in change.write]
        if change.before:
            _delete(self.vectorstore, change.before)
        if write:  # the ledger changes only once this succeeds: a failed write leaves the version before
            self.vectorstore.add_documents(write, ids=[d.id for d in write], **kwargs)
        self._ledger.commit(change)
        if change.after:
            _delete(self.vectorstore, change.after)
        return list(keys)

    def add_texts(self, texts: Iterable[str], metadatas: list[dict] | None = None, *, ids: list[str] | None = None,
                  **kwargs: Any) -> list[str]:
        texts = list(texts)
        metadatas = metadatas or [{} for _ in texts]
        docs = [Document(t, metadata=m) for t, m in zip(texts, metadatas)]
        return self.add_documents(docs, ids=ids, **kwargs)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete chunks by store id (the chunk id unless `add_documents` was given ``ids=``), with
        their windows; an id no chunk is stored under is passed to the inner store as it is."""
        return self.vectorstore.delete(ids=self._ledger.remove(ids or []), **kwargs)

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The Documents stored under these store ids (as added; missing ids skipped)."""
        return [self._ledger.payload(c) for c in (self._ledger.chunk_of(key) for key in ids) if c is not None]

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: list[dict] | None = None, **kwargs: Any) -> WindowedVectorStore:
        raise NotImplementedError("wrap a store: WindowedVectorStore(Chroma(...) or InMemoryVectorStore(embeddings), "
                                  "windows=WindowConfig()), then add_documents(...)")

    # -- searching --------------------------------------------------------------------------------

    def _deep(self, search: Callable[[int], Sequence[tuple[Any, Any]]], k: int) -> list[tuple[Any, Any]]:
        """The top `k` chunks of `search(rows)`, rows asked for in the core's `fetch_sizes` steps."""
        for size in fetch_sizes(k, self.extra):
            pairs = search(size)
            got = self._collapse(pairs, k)  # type: ignore[arg-type]
            if len(got) >= k or len(pairs) < size:
                break
        return got  # type: ignore[return-value]

    async def _adeep(self, search: Callable[[int], Awaitable[Sequence[tuple[Any, Any]]]], k: int) -> list[tuple[Any, Any]]:
        for size in fetch_sizes(k, self.extra):
            pairs = await search(size)
            got = self._collapse(pairs, k)  # type: ignore[arg-type]
            if len(got) >= k or len(pairs) < size:
                break
        return got  # type: ignore[return-value]

    def _collapse(self, pairs: Sequence[tuple[Document, float]], k: int) -> list[tuple[Document, float]]:
        def owner(pair: tuple[Document, float]) -> str:
            return str(pair[0].metadata.get(WINDOW_OF_KEY) or row_owner(chunk_id_of(pair[0], self.id_key)))

        return [(self._ledger.payload(chunk, doc), score) for chunk, (doc, score) in first_per_owner(pairs, owner, k)]

    def _select_relevance_score_fn(self) -> Any:
        convert = relevance_function(self.vectorstore)
        if convert is None:
            raise NotImplementedError(f"{type(self.vectorstore).__name__} has no relevance function")
        return convert

    def _similarity_search_with_relevance_scores(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        # the scoring step the public similarity_search_with_relevance_scores wraps (its checks and
        # score_threshold are applied once, over the collapsed list)
        return self._deep(lambda n: relevance_pairs(self.vectorstore, query, k=n, **kwargs), k)

    async def _asimilarity_search_with_relevance_scores(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        return await self._adeep(lambda n: arelevance_pairs(self.vectorstore, query, k=n, **kwargs), k)

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        return self._deep(lambda n: self.vectorstore.similarity_search_with_score(query, k=n, **kwargs), k)

    async def asimilarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        return await self._adeep(lambda n: self.vectorstore.asimilarity_search_with_score(query, k=n, **kwargs), k)

    def rows_of(self, chunk_id: str) -> list[str]:
        """The row ids of a chunk: its own, then its windows'."""
        return self._ledger.rows_of(chunk_id)

    def scored_by_vector(self, vector: Sequence[float], k: int = 4, **kwargs: Any) -> list[tuple[Document, float | None]]:
        """Each chunk once, best first, for a search by `vector` (dense PRF's second search), with
        the relevance scores `similarity_search_with_relevance_scores` gives."""
        return self._deep(lambda n: scored_by_vector(self.vectorstore, vector, k=n, **kwargs), k)

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k=k, **kwargs)]

    async def asimilarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [d for d, _ in await self.asimilarity_search_with_score(query, k=k, **kwargs)]
