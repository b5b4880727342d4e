"""LangChain retrievers and runnables as the sources of the core's `QueryFlow` (one invocation each).

`ContextualEnsembleRetriever` wraps each of its sources for one query, with the caller's config
(a child run per source, tagged as `EnsembleRetriever` tags them) and the metadata filter:

- a `VectorStoreRetriever` (search_type "similarity" or "similarity_score_threshold") is
  searched for its store's relevance scores (`relevance`), in a child run of its own so
  callbacks and tracing still see it; when dense feedback moves it, it is a `VectorStoreSide`:
  the query embedded once with the store's embeddings, searched by vector, its stored rows of
  the fused top chunks read back (`feedback`);
- any other `BaseRetriever` gets ``k=depth`` at invoke time unless the caller's config sets its
  result count; any runnable ``str -> list[Document]`` is invoked as it is, its Documents
  filtered here when it took no filter.

Each source keeps what it returned (`found`: chunk id, its own score or None, Document): the
reranker reads those Documents (`page_text`) and the fused hits come back as them, scored
(`ranked_documents`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np
from langchain_core.callbacks import AsyncCallbackManager, CallbackManager
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import patch_config, run_in_executor
from langchain_core.runnables.configurable import RunnableConfigurableFields
from langchain_core.vectorstores import VectorStoreRetriever

from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.feedback import FeedbackRows
from contextual_retrieval_core.search.flow import FlowResult, Hits
from contextual_retrieval_core.search.ranked import (
    SCORE_KEY,
)
from contextual_retrieval_langchain._compat import retriever_ls_params
from contextual_retrieval_langchain._documents import chunk_id_of
from contextual_retrieval_langchain._feedback import astored_rows, stored_rows
from contextual_retrieval_langchain._pgvector import Reads, is_pgvector, server_address
from contextual_retrieval_langchain._relevance import arelevance_scored, relevance_scored, scored_by_vector
from contextual_retrieval_langchain.bm25 import BM25_SCORE_KEY, ContextualBM25Retriever, MetadataFilter, metadata_predicate
from contextual_retrieval_langchain.rerank import RELEVANCE_SCORE_KEY
from contextual_retrieval_langchain.windows import WindowedVectorStore

__all__ = [
    "SOURCE_SCORES_KEY",
    "Scored",
    "SourceRun",
    "VectorStoreSide",
    "documents_by_id",
    "feedback_sides",
    "page_text",
    "ranked_documents",
    "scored_vectorstore",
    "source_runs",
]

#: (chunk id, the source's own score or None, Document), best first
Scored = list[tuple[str, float | None, Document]]

#: metadata keys a source's own score may come in, first found wins
_SCORE_KEYS = (BM25_SCORE_KEY, RELEVANCE_SCORE_KEY, "similarity_score", SCORE_KEY)
#: {source name: the source's own score (cosine, BM25, ...)} for the sources that returned it
SOURCE_SCORES_KEY = "source_scores"


class SourceRun:
    """One source of one invocation, as a flow `Source`."""

    def __init__(
        self, name: str, retriever: Any, query: str, config: RunnableConfig, where: MetadataFilter | None, *,
        depth: int, id_key: str, candidates_kwarg: str | None, sources: list[SourceRun],
    ) -> None:
        self.name, self.retriever, self.query, self.config, self.where = name, retriever, query, config, where
        self.depth, self.id_key, self.candidates_kwarg = depth, id_key, candidates_kwarg
        self.sources = sources  # every source of this invocation (their Documents carry the store ids)
        self.found: Scored = []

    def _keep(self, found: Scored) -> list[Hits]:
        self.found = found
        return [[(cid, s) for cid, s, _ in found]]

    def search(self, queries: Sequence[str]) -> list[Hits]:
        return self._keep(self._run(None))

    def server_address(self) -> str | None:
        """``host:port`` of the PostgreSQL server a `PGVector` source searches (the flow names it
        when the server does not answer); None for any other source."""
        store = self.retriever.vectorstore if isinstance(self.retriever, VectorStoreRetriever) else None
        if isinstance(store, WindowedVectorStore):
            store = store.vectorstore
        return server_address(store) if is_pgvector(store) else None

    async def asearch(self, queries: Sequence[str]) -> list[Hits]:
        return self._keep(await self._arun(None))

    def _run(self, vector: list[float] | None, reads: Reads | None = None) -> Scored:
        retriever = self.retriever
        if scored_vectorstore(retriever):
            # the store's scored search keeps the scores; a child run configured as
            # BaseRetriever.invoke configures one keeps the retriever visible to callbacks and tracing
            kwargs = self._search_kwargs()
            run = _child_run(CallbackManager, retriever, self.query, self.config)
            try:
                pairs = (relevance_scored(retriever.vectorstore, self.query, **kwargs) if vector is None
                         else scored_by_vector(retriever.vectorstore, vector, reads, **kwargs))
            except BaseException as exc:
                run.on_retriever_error(exc)
                raise
            run.on_retriever_end([d for d, _ in pairs])
            return self._from_pairs(pairs)
        return self._from_docs(retriever.invoke(self.query, self.config, **self._invoke_kwargs()))

    async def _arun(self, vector: list[float] | None, reads: Reads | None = None) -> Scored:
        retriever = self.retriever
        if scored_vectorstore(retriever):
            kwargs = self._search_kwargs()
            run = await _child_run(AsyncCallbackManager, retriever, self.query, self.config)
            try:
                pairs = (await arelevance_scored(retriever.vectorstore, self.query, **kwargs) if vector is None
                         else await run_in_executor(None, lambda: scored_by_vector(retriever.vectorstore, vector, reads, **kwargs)))
            except BaseException as exc:
                await run.on_retriever_error(exc)
                raise
            await run.on_retriever_end([d for d, _ in pairs])
            return self._from_pairs(pairs)
        return self._from_docs(await retriever.ainvoke(self.query, self.config, **self._invoke_kwargs()))

    def _search_kwargs(self) -> dict[str, Any]:
        kwargs = {**self.retriever.search_kwargs, "k": self.depth}
        if self.where is not None:
            kwargs["filter"] = self.where
        return kwargs

    def _invoke_kwargs(self) -> dict[str, Any]:
        """``k=depth`` for a `BaseRetriever` unless the caller's config sets its result count; the
        filter for the sources that take one."""
        kwargs: dict[str, Any] = {}
        retriever = self.retriever
        target = retriever.default if isinstance(retriever, RunnableConfigurableFields) else retriever
        if self.candidates_kwarg and isinstance(target, BaseRetriever) and not _count_configured(retriever, self.candidates_kwarg, self.config):
            kwargs[self.candidates_kwarg] = self.depth
        if self.where is not None and isinstance(target, (VectorStoreRetriever, ContextualBM25Retriever)):
            kwargs["filter"] = self.where
        return kwargs

    def _from_pairs(self, pairs: list[tuple[Document, float | None]]) -> Scored:
        return [(chunk_id_of(d, self.id_key), s, d) for d, s in pairs]

    def _from_docs(self, docs: Sequence[Document]) -> Scored:
        """(id, the source's own score or None, document); the core dedupes and scores a missing
        score as 1 / rank. A source that took no filter is filtered here."""
        retriever = self.retriever
        target = retriever.default if isinstance(retriever, RunnableConfigurableFields) else retriever
        if self.where is not None and not isinstance(target, (VectorStoreRetriever, ContextualBM25Retriever)):
            keep = metadata_predicate(self.where)
            docs = [d for d in docs if keep(d)]
        out: Scored = []
        for doc in docs:
            score = next((doc.metadata[key] for key in _SCORE_KEYS if isinstance(doc.metadata.get(key), (int, float))), None)
            out.append((chunk_id_of(doc, self.id_key), float(score) if score is not None else None, doc))
        return out


class VectorStoreSide(SourceRun):
    """A vector-store source dense feedback moves, as a flow `DenseSide`."""

    #: the vectors a `PGVector`'s first search brought back, by store id (`pgvector.Reads`)
    vectors: dict[str, Any] | None = None

    def embed_queries(self, queries: Sequence[str]) -> list[Any]:
        return [self.retriever.vectorstore.embeddings.embed_query(self.query)]

    async def aembed_queries(self, queries: Sequence[str]) -> list[Any]:
        return [await self.retriever.vectorstore.embeddings.aembed_query(self.query)]

    def search_vectors(self, vectors: Sequence[Any]) -> list[Hits]:
        return self._keep(self._run(_as_list(vectors[0]), self._reads()))

    async def asearch_vectors(self, vectors: Sequence[Any]) -> list[Hits]:
        return self._keep(await self._arun(_as_list(vectors[0]), self._reads()))

    def _reads(self) -> Reads:
        """What a `PGVector` search reads besides ids and distances: the first, also the vectors
        of its nearest rows (kept for `feedback_rows`); dense feedback's second, the text and
        metadata only of the rows this invocation's sources did not return."""
        if not self.found:
            self.vectors = {}
            return Reads(vectors=self.vectors)
        return Reads(known={d.id: d for source in (*reversed(self.sources), self) for _, _, d in reversed(source.found) if d.id})

    def feedback_rows(self, top: Sequence[str]) -> FeedbackRows:
        return stored_rows(self.retriever.vectorstore, top, self._documents(), self.vectors)

    async def afeedback_rows(self, top: Sequence[str]) -> FeedbackRows:
        return await astored_rows(self.retriever.vectorstore, top, self._documents(), self.vectors)

    def _documents(self) -> dict[str, Document]:
        # its own list first: its Documents carry the store ids its vectors are read back under
        return documents_by_id([self.found, *(s.found for s in self.sources)])


def source_runs(
    retrievers: Sequence[Any], names: Sequence[str], query: str, config: RunnableConfig, run_manager: Any,
    where: MetadataFilter | None, fusion: FusionConfig, *, id_key: str, candidates_kwarg: str | None,
) -> list[SourceRun]:
    """One invocation's sources, each with a child config tagged ``retriever_1``, ... (as
    `EnsembleRetriever` tags them); the vector stores dense feedback moves are `VectorStoreSide`s."""
    fed = {i for i, _ in feedback_sides(retrievers, fusion)}
    sources: list[SourceRun] = []
    for i, (name, retriever) in enumerate(zip(names, retrievers)):
        child = patch_config(config, callbacks=run_manager.get_child(tag=f"retriever_{i + 1}"))
        sources.append((VectorStoreSide if i in fed else SourceRun)(
            name, retriever, query, child, where, depth=fusion.depth, id_key=id_key, candidates_kwarg=candidates_kwarg,
            sources=sources,
        ))
    return sources


def feedback_sides(retrievers: Sequence[Any], fusion: FusionConfig) -> list[tuple[int, VectorStoreRetriever]]:
    """The vector-store sources dense PRF searches again (scored, with embeddings to embed the
    query), when the weight is not 0 and they are fused with another source."""
    if not fusion.feeds_back(len(retrievers)):
        return []
    return [(i, r) for i, r in enumerate(retrievers)
            if isinstance(r, VectorStoreRetriever) and scored_vectorstore(r) and r.vectorstore.embeddings is not None]


def page_text(sources: Sequence[SourceRun]) -> Callable[[Hashable], str]:
    """The text the reranker reads for a chunk id: the page_content of the first Document listed
    under it, looked up once the sources have run."""
    docs: dict[Hashable, Document] = {}

    def text_of(cid: Hashable) -> str:
        if cid not in docs:
            docs.update(documents_by_id([s.found for s in sources]))
        return docs[cid].page_content

    return text_of


def ranked_documents(result: FlowResult, sources: Sequence[SourceRun]) -> list[Document]:
    """The flow's hits as Documents (the first listed under each chunk id, with its id) carrying
    ``score``, ``fused_score``, ``ranks``, ``source_scores`` (each source's first, best, score)
    and ``rerank_score`` or ``rerank_error`` when there is one in their metadata."""
    docs = documents_by_id([s.found for s in sources])
    own: list[dict[str, float]] = [{} for _ in sources]
    for scores, source in zip(own, sources):
        for cid, score, _ in source.found:
            if score is not None:
                scores.setdefault(cid, score)  # a source's first (best) listing
    out = []
    for hit in result.hits or ():
        doc = docs[hit.id]  # type: ignore[index]
        meta = {
            **doc.metadata,
            SCORE_KEY: hit.score,
            **hit.result_metadata(),
            SOURCE_SCORES_KEY: {s.name: scores[hit.id] for s, scores in zip(sources, own) if hit.id in scores},  # type: ignore[index]
        }
        out.append(doc.model_copy(update={"metadata": meta, "id": hit.id}))
    return out


def _as_list(vector: Any) -> list[float]:
    return vector.tolist() if isinstance(vector, np.ndarray) else list(vector)


def documents_by_id(lists: Sequence[Scored]) -> dict[str, Document]:
    """{chunk id: the first Document listed under it}, lists in order."""
    docs: dict[str, Document] = {}
    for scored in lists:
        for cid, _, doc in scored:
            docs.setdefault(cid, doc)
    return docs


def scored_vectorstore(retriever: Any) -> bool:
    """A vector-store retriever whose store's scores are read (search_type "similarity" or
    "similarity_score_threshold")."""
    return isinstance(retriever, VectorStoreRetriever) and retriever.search_type in ("similarity", "similarity_score_threshold")


def _count_configured(retriever: Any, kwarg: str, config: RunnableConfig) -> bool:
    """Whether the caller's config sets `retriever`'s result count: a source made with
    ``configurable_fields(k=ConfigurableField(id=...))`` (or ``search_kwargs=...`` holding "k")
    whose id the config's "configurable" names."""
    if not isinstance(retriever, RunnableConfigurableFields):
        return False
    configurable = config.get("configurable") or {}
    count = retriever.fields.get(kwarg)
    if count is not None and count.id in configurable:
        return True
    search = retriever.fields.get("search_kwargs")
    return search is not None and isinstance(configurable.get(search.id), dict) and kwarg in configurable[search.id]


def _child_run(manager: Any, retriever: VectorStoreRetriever, query: str, config: RunnableConfig) -> Any:
    """The run `retriever.invoke(query, config)` would start (its tags, metadata and tracing params)."""
    configured = manager.configure(
        config.get("callbacks"), None, inheritable_tags=config.get("tags"), local_tags=retriever.tags,
        inheritable_metadata={**(config.get("metadata") or {}), **retriever_ls_params(retriever)},
        local_metadata=retriever.metadata,
    )
    return configured.on_retriever_start(None, query, name=config.get("run_name") or retriever.get_name())
