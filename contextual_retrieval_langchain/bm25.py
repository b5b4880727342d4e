"""`ContextualBM25Retriever`: the core `BM25Index` over contextualized chunks as a LangChain retriever."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from contextual_retrieval_core.checks import not_a_string, positive_int
from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.search._where import where_predicate
from contextual_retrieval_core.search.bm25 import BM25Index, load_with_records, save_with_records
from contextual_retrieval_core.search.ranked import DEFAULT_TOP_K
from contextual_retrieval_langchain._documents import CHUNK_ID_KEY, chunk_id_of

__all__ = ["ContextualBM25Retriever", "BM25_SCORE_KEY", "MetadataFilter", "metadata_predicate"]

#: metadata key of the BM25 score on returned Documents
BM25_SCORE_KEY = "bm25_score"

#: a metadata filter as LangChain vector stores take it in their ``filter`` search kwarg: a
#: Chroma-style where dict (``{"team": "web"}``, ``{"year": {"$gte": 2023}}``, ``{"$and": [...]}``)
#: or a predicate on the Document (as `InMemoryVectorStore` takes it)
MetadataFilter = Mapping[str, Any] | Callable[[LCDocument], bool]

def metadata_predicate(where: MetadataFilter) -> Callable[[LCDocument], bool]:
    """`where` as a predicate on Documents: a callable is returned as it is; a where dict is read
    on `Document.metadata` as Chroma reads it (the core's `where_predicate`).

    Example:
        >>> keep = metadata_predicate({"$and": [{"team": "web"}, {"year": {"$gte": 2023}}]})
        >>> keep(LCDocument("a", metadata={"team": "web", "year": 2024})), keep(LCDocument("b", metadata={"team": "web"}))
        (True, False)
    """
    if callable(where):
        return where  # type: ignore[return-value]
    if not isinstance(where, Mapping):
        raise InputTypeError(f"filter must be a where dict (e.g. {{'team': 'web'}}) or a callable Document -> bool, got {type(where).__name__}")
    keep = where_predicate(where)
    return lambda doc: keep(doc.metadata)


class ContextualBM25Retriever(BaseRetriever):
    """BM25 over `page_content` (context + chunk) with the core's tokenizer for code and prose.

    Returned Documents are copies of the indexed ones with ``metadata["bm25_score"]``; texts with
    score 0 are never returned. Documents need ids (`Document.id` or ``metadata[id_key]``):
    `ContextualDocumentTransformer` sets them.

    Args:
        index: a core `BM25Index` over the documents' ids.
        documents: the indexed Documents by id.
        k: how many Documents to return; ``invoke(query, k=...)`` overrides it per call.
        filter: only Documents whose metadata match: a Chroma-style where dict or a predicate on
            the Document (see `metadata_predicate`), the same value a vector store takes as its
            ``filter`` search kwarg; ``invoke(query, filter=...)`` overrides it per call. The
            search runs under the filter (the top `k` of the matching Documents), never a top-k
            cut filtered afterwards.

    Example:
        >>> from langchain_core.documents import Document
        >>> retriever = ContextualBM25Retriever.from_documents([
        ...     Document("DiffExecutor runs two executors", id="a"),
        ...     Document("a tokenizer for code", id="b")], k=5)
        >>> [(d.id, round(d.metadata["bm25_score"], 3)) for d in retriever.invoke("diff executor")]
        [('a', 0.641)]
        >>> retriever.invoke("tokenizer code executor", k=1)[0].id
        'b'
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: BM25Index = Field(description="the core BM25Index over the documents' ids")
    documents: dict[str, LCDocument] = Field(repr=False, description="the indexed Documents by id")
    k: int = Field(default=DEFAULT_TOP_K, description="Documents returned per query")
    filter: MetadataFilter | None = Field(default=None, description="metadata filter applied to every query")

    #: (the where dict as JSON, its mask over `index.ids`): the last dict filter's mask
    _mask: tuple[str, np.ndarray] | None = PrivateAttr(default=None)

    @field_validator("k", mode="before")
    @classmethod
    def _positive_k(cls, k: Any) -> int:
        return positive_int("k", k)

    @field_validator("filter", mode="before")
    @classmethod
    def _known_filter(cls, where: Any) -> Any:
        if where is not None:
            metadata_predicate(where)  # a bad where dict fails here, naming the operator
        return where

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[LCDocument],
        *,
        k: int = DEFAULT_TOP_K,
        id_key: str = CHUNK_ID_KEY,
        bm25: BM25Index | None = None,
        **kwargs: Any,
    ) -> ContextualBM25Retriever:
        """Index `documents` (their page_content) with a new `BM25Index` (or the empty `bm25` given)."""
        docs = list(not_a_string("documents", documents, "Documents"))
        if not docs:
            raise InputError("no documents to index: pass at least one Document")
        by_id: dict[str, LCDocument] = {}
        for doc in docs:
            cid = chunk_id_of(doc, id_key)
            if cid in by_id:
                raise InputError(f"duplicate document id {cid!r}: every indexed Document needs a unique id")
            by_id[cid] = doc
        index = (bm25 or BM25Index()).index(list(by_id), [d.page_content for d in by_id.values()])
        return cls(index=index, documents=by_id, k=k, **kwargs)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None,
        filter: MetadataFilter | None = None,
    ) -> list[LCDocument]:
        return self._search(query, k, filter)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None,
        filter: MetadataFilter | None = None,
    ) -> list[LCDocument]:
        return self._search(query, k, filter)  # in-process and vectorised: no I/O to await

    def _allowed(self, where: MetadataFilter | None) -> np.ndarray | None:
        """`where` as a mask over the indexed Documents (a dict filter's mask is kept for the next
        query with the same dict)."""
        if where is None:
            return None
        key = json.dumps(where, sort_keys=True, default=repr) if isinstance(where, Mapping) else None
        if key is not None and self._mask is not None and self._mask[0] == key:
            return self._mask[1]
        keep = metadata_predicate(where)
        mask = self.index.mask(lambda i: keep(self.documents[i]))
        if key is not None:
            self._mask = (key, mask)
        return mask

    def _search(self, query: str, k: int | None, where: MetadataFilter | None = None) -> list[LCDocument]:
        k = self.k if k is None else positive_int("k", k)
        out = []
        for cid, score in self.index.search(query, k, allowed=self._allowed(self.filter if where is None else where)):
            doc = self.documents[cid]
            out.append(doc.model_copy(update={"metadata": {**doc.metadata, BM25_SCORE_KEY: score}, "id": cid}))
        return out

    # -- persistence ------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the index, its documents, `k` and a where-dict `filter` to directory `path` (JSON and
        .npy; no pickle). A callable filter cannot be written: ValueError."""
        if self.filter is not None and not isinstance(self.filter, Mapping):
            raise InputError(
                "filter is a callable, which cannot be saved as JSON: save with a where dict as filter (e.g. "
                "{'team': 'web'}), or with filter=None and pass filter= again to ContextualBM25Retriever.load"
            )
        records = (
            {"id": cid, "page_content": self.documents[cid].page_content, "metadata": self.documents[cid].metadata}
            for cid in self.index.ids
        )
        settings = {"k": self.k, **({"filter": dict(self.filter)} if self.filter is not None else {})}
        return save_with_records(path, self.index, records, settings)

    @classmethod
    def load(cls, path: str | os.PathLike[str], **kwargs: Any) -> ContextualBM25Retriever:
        """Load a retriever written by `save`, with its saved `k` and `filter` (keyword arguments override them)."""
        index, records, settings = load_with_records(path)
        documents = {r["id"]: LCDocument(page_content=r["page_content"], metadata=r["metadata"], id=r["id"]) for r in records}
        missing = [i for i in index.ids if i not in documents]
        if missing:
            raise InputError(f"{path}: {len(missing)} indexed ids have no stored document (first: {missing[0]}); save the retriever again")
        return cls(index=index, documents=documents, **{**settings, **kwargs})
