"""`ContextualBM25Retriever`: the core `BM25Index` over contextualized chunks as a LangChain retriever."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Optional, Union

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator

from contextual_retrieval_core.bm25 import BM25Index, load_with_records, save_with_records
from contextual_retrieval_core.checks import not_a_string, positive_int
from contextual_retrieval_core.ensemble import DEFAULT_TOP_K

from ._documents import CHUNK_ID_KEY, chunk_id_of

__all__ = ["ContextualBM25Retriever", "BM25_SCORE_KEY"]

#: metadata key of the BM25 score on returned Documents
BM25_SCORE_KEY = "bm25_score"


class ContextualBM25Retriever(BaseRetriever):
    """BM25 over `page_content` (context + chunk) with the core's tokenizer for code and prose.

    Returned Documents are copies of the indexed ones with ``metadata["bm25_score"]``; texts with
    score 0 are never returned. Documents need ids (`Document.id` or ``metadata[id_key]``):
    `ContextualDocumentTransformer` sets them.

    Args:
        index: a core `BM25Index` over the documents' ids.
        documents: the indexed Documents by id.
        k: how many Documents to return; ``invoke(query, k=...)`` overrides it per call.

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

    index: BM25Index
    documents: dict[str, LCDocument] = Field(repr=False)
    k: int = DEFAULT_TOP_K

    @field_validator("k", mode="before")
    @classmethod
    def _positive_k(cls, k: Any) -> int:
        return positive_int("k", k)

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[LCDocument],
        *,
        k: int = DEFAULT_TOP_K,
        id_key: str = CHUNK_ID_KEY,
        bm25: Optional[BM25Index] = None,
        **kwargs: Any,
    ) -> "ContextualBM25Retriever":
        """Index `documents` (their page_content) with a new `BM25Index` (or the empty `bm25` given)."""
        docs = list(not_a_string("documents", documents, "Documents"))
        if not docs:
            raise ValueError("no documents to index: pass at least one Document")
        by_id: dict[str, LCDocument] = {}
        for doc in docs:
            cid = chunk_id_of(doc, id_key)
            if cid in by_id:
                raise ValueError(f"duplicate document id {cid!r}: every indexed Document needs a unique id")
            by_id[cid] = doc
        index = (bm25 or BM25Index()).index(list(by_id), [d.page_content for d in by_id.values()])
        return cls(index=index, documents=by_id, k=k, **kwargs)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: Optional[int] = None
    ) -> list[LCDocument]:
        return self._search(query, k)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: Optional[int] = None
    ) -> list[LCDocument]:
        return self._search(query, k)  # in-process and vectorised: no I/O to await

    def _search(self, query: str, k: Optional[int]) -> list[LCDocument]:
        k = self.k if k is None else positive_int("k", k)
        out = []
        for cid, score in self.index.search(query, k):
            doc = self.documents[cid]
            out.append(doc.model_copy(update={"metadata": {**doc.metadata, BM25_SCORE_KEY: score}, "id": cid}))
        return out

    # -- persistence ------------------------------------------------------------------------------

    def save(self, path: Union[str, os.PathLike]) -> Path:
        """Write the index, its documents and `k` to directory `path` (JSON and .npy; no pickle)."""
        records = (
            {"id": cid, "page_content": self.documents[cid].page_content, "metadata": self.documents[cid].metadata}
            for cid in self.index.ids
        )
        return save_with_records(path, self.index, records, {"k": self.k})

    @classmethod
    def load(cls, path: Union[str, os.PathLike], **kwargs: Any) -> "ContextualBM25Retriever":
        """Load a retriever written by `save`, with its saved `k` (keyword arguments override it)."""
        index, records, settings = load_with_records(path)
        documents = {r["id"]: LCDocument(page_content=r["page_content"], metadata=r["metadata"], id=r["id"]) for r in records}
        missing = [i for i in index.ids if i not in documents]
        if missing:
            raise ValueError(f"{path}: {len(missing)} indexed ids have no stored document (first: {missing[0]}); save the retriever again")
        return cls(index=index, documents=documents, **{**settings, **kwargs})
