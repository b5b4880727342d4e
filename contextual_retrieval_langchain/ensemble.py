"""`ContextualEnsembleRetriever`: any retrievers fused with the core's weighted RRF, then reranked.

The design card's `EnsembleRetriever`. Fusion and reranking are the core's `fuse_sources` and
`rerank_hits`, the same functions `HybridSearcher` runs, so with the same candidate lists this
retriever returns exactly the core's ordering. Unlike LangChain's own `EnsembleRetriever` (c=60,
dedupes on page_content, never truncates), the RRF constant is configurable (default 0, the
cookbook's ``w / rank``), results are deduplicated by chunk id and cut to `k`.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any, Callable, Optional, Sequence

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import patch_config
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import ConfigDict, Field, PrivateAttr

from contextual_retrieval_core.ensemble import (
    DEFAULT_DEPTH,
    DEFAULT_RRF_K,
    DEFAULT_TOP_K,
    FUSED_SCORE_KEY,
    RANKS_KEY,
    RERANK_SCORE_KEY,
    SCORE_KEY,
    RankedHit,
    arerank_hits,
    default_weights,
    fuse_sources,
    rerank_hits,
    unique_names,
)
from contextual_retrieval_core.fusion import FusionMode

from ._documents import CHUNK_ID_KEY, chunk_id_of
from .bm25 import BM25_SCORE_KEY, ContextualBM25Retriever
from .rerank import RELEVANCE_SCORE_KEY

__all__ = ["ContextualEnsembleRetriever", "SCORE_KEY", "FUSED_SCORE_KEY", "RANKS_KEY", "SOURCE_SCORES_KEY", "RERANK_SCORE_KEY"]

#: {source name: the source's own score (cosine, BM25, ...)} for the sources that returned it
SOURCE_SCORES_KEY = "source_scores"
#: metadata keys a source's own score may come in, first found wins
_SCORE_KEYS = (BM25_SCORE_KEY, RELEVANCE_SCORE_KEY, "similarity_score", SCORE_KEY)

_Scored = list[tuple[str, Optional[float], LCDocument]]


class ContextualEnsembleRetriever(BaseRetriever):
    """Fuses ranked lists from any retrievers (or runnables) by chunk id; optionally reranks.

    Each retriever returns `candidates` Documents; the lists are fused with weighted reciprocal
    rank fusion (``w / (rrf_k + rank)``) or relative-score fusion, the best `rerank_depth` fused
    candidates go to the reranker when there is one, and the top `k` come back. Returned
    Documents carry ``score``, ``fused_score``, ``ranks`` (per source), ``source_scores`` and,
    when reranked, ``rerank_score`` in their metadata. Async runs the retrievers concurrently.

    A `VectorStoreRetriever` (search_type "similarity") is queried through its vector store's
    ``similarity_search_with_score`` so its scores are kept (in a child run of its own, so
    callbacks and tracing still see it); other `BaseRetriever`s get ``k=candidates``
    at invoke time (set ``candidates_kwarg=None`` for retrievers that take no such argument).

    Args:
        retrievers: the sources: `BaseRetriever`s or runnables ``str -> list[Document]``.
        names: one unique name per source (default: "dense" for a vector-store retriever, "bm25"
            for `ContextualBM25Retriever`, else the runnable's name; repeats numbered "_2", ...).
        weights: one weight per source (default: 0.5 / 0.5 for two, else equal).
        mode: "rrf" (default) or "relative_score".
        rrf_k: the RRF constant (default 0, the cookbook's; LangChain's EnsembleRetriever uses 60).
        candidates: Documents taken from each source (default 150, as the cookbook).
        k: Documents returned (default 20); ``invoke(query, k=...)`` overrides it per call.
        reranker: a core `Reranker` or a `RerankCompressor` (None: no reranking); a compressor's
            `top_n` caps what comes back.
        rerank_depth: fused candidates the reranker sees (default: `candidates`).
        id_key: metadata key of the chunk id for Documents without `Document.id`.
        candidates_kwarg: the invoke keyword that sets a `BaseRetriever`'s result count.

    Example:
        >>> from langchain_core.documents import Document
        >>> from contextual_retrieval_langchain import LocalMiniLMEmbeddings
        >>> docs = [Document("ACME Q2 2023 filing.\\n\\nRevenue grew 3%.", id="c1"),
        ...         Document("Globex 2021 report.\\n\\nTwo new plants opened.", id="c2")]
        >>> retriever = ContextualEnsembleRetriever.from_documents(docs, LocalMiniLMEmbeddings(), k=1)
        >>> [(d.id, d.metadata["ranks"]) for d in retriever.invoke("ACME revenue")]
        [('c1', {'dense': 1, 'bm25': 1})]
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    retrievers: list[Any]
    names: Optional[list[str]] = None
    weights: Optional[list[float]] = None
    mode: FusionMode = "rrf"
    rrf_k: float = Field(default=DEFAULT_RRF_K, ge=0)
    candidates: int = Field(default=DEFAULT_DEPTH, gt=0)
    k: int = Field(default=DEFAULT_TOP_K, gt=0)
    reranker: Optional[Any] = None
    rerank_depth: Optional[int] = Field(default=None, gt=0)
    id_key: str = CHUNK_ID_KEY
    candidates_kwarg: Optional[str] = "k"

    _relevance_fns: dict[int, Callable[[float], float]] = PrivateAttr(default_factory=dict)
    _top_n: Optional[int] = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        n = len(self.retrievers)
        if n == 0:
            raise ValueError("no retrievers: pass at least one (e.g. a vector store retriever and a ContextualBM25Retriever)")
        if self.names is None:
            self.names = _default_names(self.retrievers)
        if len(self.names) != n or len(set(self.names)) != n:
            raise ValueError(f"names must be {n} unique names, one per retriever; got {self.names}")
        if self.weights is None:
            self.weights = default_weights(n)
        if len(self.weights) != n:
            raise ValueError(f"got {len(self.weights)} weights for {n} retrievers; pass one weight per retriever")
        if self.reranker is not None and not callable(getattr(self.reranker, "rerank", None)):
            inner = getattr(self.reranker, "reranker", None)  # a RerankCompressor: use its core reranker
            if inner is None or not callable(getattr(inner, "rerank", None)):
                raise TypeError(
                    f"reranker must be a core Reranker or a RerankCompressor, got {type(self.reranker).__name__}; "
                    "wrap other compressors in ContextualCompressionRetriever(base_retriever=this, ...)"
                )
            self._top_n = getattr(self.reranker, "top_n", None)
            self.reranker = inner

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[LCDocument],
        embeddings: Optional[Embeddings] = None,
        *,
        vectorstore: Optional[VectorStore] = None,
        id_key: str = CHUNK_ID_KEY,
        **kwargs: Any,
    ) -> "ContextualEnsembleRetriever":
        """The default pair: a vector store retriever ("dense") and a `ContextualBM25Retriever` ("bm25").

        Args:
            documents: contextual chunks (from `ContextualDocumentTransformer`), with ids.
            embeddings: LangChain `Embeddings` for a new embedded Chroma collection (e.g.
                `LocalMiniLMEmbeddings()`); not needed when `vectorstore` is given.
            vectorstore: a vector store that already holds `documents` under the same ids.
            **kwargs: fields of this class (weights, k, candidates, reranker, ...).
        """
        docs = list(documents)
        if vectorstore is None:
            if embeddings is None:
                raise ValueError("pass embeddings= (e.g. LocalMiniLMEmbeddings()) or a vectorstore= holding the documents")
            from .vectorstores import chroma_from_documents

            vectorstore = chroma_from_documents(docs, embeddings, id_key=id_key)
        candidates = kwargs.get("candidates", DEFAULT_DEPTH)
        dense = vectorstore.as_retriever(search_kwargs={"k": candidates})
        bm25 = ContextualBM25Retriever.from_documents(docs, k=candidates, id_key=id_key)
        return cls(retrievers=[dense, bm25], names=["dense", "bm25"], id_key=id_key, **kwargs)

    # -- retrieval --------------------------------------------------------------------------------

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: Optional[int] = None
    ) -> list[LCDocument]:
        k = self._check_k(k)
        lists = [
            self._run(i, r, query, patch_config(None, callbacks=run_manager.get_child(tag=f"retriever_{i + 1}")))
            for i, r in enumerate(self.retrievers)
        ]
        fused, docs = self._fuse(lists)
        hits = rerank_hits(query, fused, lambda i: docs[i].page_content, self.reranker, k=k, rerank_depth=self.rerank_depth or self.candidates)
        return self._documents(hits, docs, lists)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: Optional[int] = None
    ) -> list[LCDocument]:
        k = self._check_k(k)
        lists = await asyncio.gather(
            *(
                self._arun(i, r, query, patch_config(None, callbacks=run_manager.get_child(tag=f"retriever_{i + 1}")))
                for i, r in enumerate(self.retrievers)
            )
        )
        fused, docs = self._fuse(lists)
        hits = await arerank_hits(query, fused, lambda i: docs[i].page_content, self.reranker, k=k, rerank_depth=self.rerank_depth or self.candidates)
        return self._documents(hits, docs, lists)

    # -- one source -------------------------------------------------------------------------------

    def _run(self, i: int, retriever: Any, query: str, config: RunnableConfig) -> _Scored:
        if _scored_vectorstore(retriever):
            # the store's scored search keeps the similarity scores; a child run keeps the
            # retriever visible to callbacks and tracing, as invoke would
            run = _child_run(retriever, query, config)
            try:
                kwargs = {**retriever.search_kwargs, "k": self.candidates}
                pairs = retriever.vectorstore.similarity_search_with_score(query, **kwargs)
            except BaseException as exc:
                run.on_retriever_error(exc)
                raise
            run.on_retriever_end([d for d, _ in pairs])
            return self._from_distances(retriever.vectorstore, pairs)
        return self._from_docs(retriever.invoke(query, config, **self._invoke_kwargs(retriever)))

    async def _arun(self, i: int, retriever: Any, query: str, config: RunnableConfig) -> _Scored:
        if _scored_vectorstore(retriever):
            run = await _achild_run(retriever, query, config)
            try:
                kwargs = {**retriever.search_kwargs, "k": self.candidates}
                pairs = await retriever.vectorstore.asimilarity_search_with_score(query, **kwargs)
            except BaseException as exc:
                await run.on_retriever_error(exc)
                raise
            await run.on_retriever_end([d for d, _ in pairs])
            return self._from_distances(retriever.vectorstore, pairs)
        return self._from_docs(await retriever.ainvoke(query, config, **self._invoke_kwargs(retriever)))

    def _invoke_kwargs(self, retriever: Any) -> dict[str, Any]:
        if isinstance(retriever, BaseRetriever) and self.candidates_kwarg:
            return {self.candidates_kwarg: self.candidates}
        return {}

    def _from_distances(self, store: VectorStore, pairs: list[tuple[LCDocument, float]]) -> _Scored:
        relevance = self._relevance_fns.get(id(store))
        if relevance is None:
            relevance = self._relevance_fns[id(store)] = _relevance_fn(store)
        return [(chunk_id_of(d, self.id_key), float(relevance(s)), d) for d, s in pairs]

    def _from_docs(self, docs: Sequence[LCDocument]) -> _Scored:
        """(id, the source's own score or None, document); the core dedupes and scores a missing
        score as 1 / rank."""
        out: _Scored = []
        for doc in docs:
            score = next((doc.metadata[key] for key in _SCORE_KEYS if isinstance(doc.metadata.get(key), (int, float))), None)
            out.append((chunk_id_of(doc, self.id_key), float(score) if score is not None else None, doc))
        return out

    # -- fusion -----------------------------------------------------------------------------------

    def _fuse(self, lists: Sequence[_Scored]) -> tuple[list[RankedHit], dict[str, LCDocument]]:
        docs: dict[str, LCDocument] = {}
        for scored in lists:
            for cid, _, doc in scored:
                docs.setdefault(cid, doc)
        sources = [(name, [(cid, s) for cid, s, _ in scored], w) for name, scored, w in zip(self.names, lists, self.weights)]  # type: ignore[arg-type]
        return fuse_sources(sources, mode=self.mode, rrf_k=self.rrf_k, depth=self.candidates), docs

    def _documents(self, hits: Sequence[RankedHit], docs: dict[str, LCDocument], lists: Sequence[_Scored]) -> list[LCDocument]:
        own: list[dict[str, float]] = [{} for _ in lists]
        for scores, scored in zip(own, lists):
            for cid, score, _ in scored:
                if score is not None:
                    scores.setdefault(cid, score)  # a source's first (best) listing
        out = []
        for hit in hits:
            doc = docs[hit.id]  # type: ignore[index]
            meta = {
                **doc.metadata,
                SCORE_KEY: hit.score,
                FUSED_SCORE_KEY: hit.fused_score,
                RANKS_KEY: dict(hit.ranks),
                SOURCE_SCORES_KEY: {name: scores[hit.id] for name, scores in zip(self.names, own) if hit.id in scores},  # type: ignore[arg-type]
            }
            if hit.rerank_score is not None:
                meta[RERANK_SCORE_KEY] = hit.rerank_score
            out.append(doc.model_copy(update={"metadata": meta, "id": hit.id}))
        return out

    def _check_k(self, k: Optional[int]) -> int:
        k = self.k if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        return min(k, self._top_n) if self._top_n else k


def _relevance_fn(store: VectorStore) -> Callable[[float], float]:
    """The store's distance -> relevance function (cosine: 1 - distance), else -distance."""
    try:
        with warnings.catch_warnings():  # chromadb warns about its own legacy config on every read
            warnings.filterwarnings("ignore", message="legacy embedding function config", category=DeprecationWarning)
            return store._select_relevance_score_fn()
    except (NotImplementedError, AttributeError, ValueError):
        return lambda distance: -distance  # smaller distance, higher score


def _child_run(retriever: Any, query: str, config: RunnableConfig) -> Any:
    from langchain_core.callbacks import CallbackManager

    manager = CallbackManager.configure(config.get("callbacks"), getattr(retriever, "callbacks", None), inheritable_tags=config.get("tags"),
                                        local_tags=retriever.tags, inheritable_metadata=config.get("metadata"), local_metadata=retriever.metadata)
    return manager.on_retriever_start(None, query, name=retriever.get_name())


async def _achild_run(retriever: Any, query: str, config: RunnableConfig) -> Any:
    from langchain_core.callbacks import AsyncCallbackManager

    manager = AsyncCallbackManager.configure(config.get("callbacks"), getattr(retriever, "callbacks", None), inheritable_tags=config.get("tags"),
                                             local_tags=retriever.tags, inheritable_metadata=config.get("metadata"), local_metadata=retriever.metadata)
    return await manager.on_retriever_start(None, query, name=retriever.get_name())


def _scored_vectorstore(retriever: Any) -> bool:
    return isinstance(retriever, VectorStoreRetriever) and retriever.search_type == "similarity"


def _default_names(retrievers: Sequence[Any]) -> list[str]:
    kinds = [
        "dense" if isinstance(r, VectorStoreRetriever)
        else "bm25" if isinstance(r, ContextualBM25Retriever)
        else r.get_name() if callable(getattr(r, "get_name", None)) else type(r).__name__
        for r in retrievers
    ]
    return unique_names(kinds)
