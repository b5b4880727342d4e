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
from pydantic import ConfigDict, PrivateAttr, model_validator

from contextual_retrieval_core.checks import is_blank, positive_int, renamed_keyword
from contextual_retrieval_core.ensemble import (
    DEFAULT_TOP_K,
    FUSED_SCORE_KEY,
    RANKS_KEY,
    RERANK_ERROR_KEY,
    RERANK_SCORE_KEY,
    SCORE_KEY,
    RankedHit,
    unique_names,
)
from contextual_retrieval_core.fusion import DEFAULT_DEPTH, DEFAULT_RRF_K, FusionMode
from contextual_retrieval_core.fusion_config import FusionConfig
from contextual_retrieval_core.rerank.base import OnRerankError

from ._documents import CHUNK_ID_KEY, chunk_id_of
from .bm25 import BM25_SCORE_KEY, ContextualBM25Retriever
from .rerank import RELEVANCE_SCORE_KEY

__all__ = [
    "ContextualEnsembleRetriever",
    "SCORE_KEY",
    "FUSED_SCORE_KEY",
    "RANKS_KEY",
    "SOURCE_SCORES_KEY",
    "RERANK_SCORE_KEY",
    "RERANK_ERROR_KEY",
]

#: the fields that are `FusionConfig` settings (LangChain's `k` is its `top_k`)
_FUSION_FIELDS = {"weights": "weights", "mode": "mode", "rrf_k": "rrf_k", "depth": "depth", "k": "top_k",
                  "reranker": "reranker", "rerank_depth": "rerank_depth", "on_rerank_error": "on_rerank_error"}

#: {source name: the source's own score (cosine, BM25, ...)} for the sources that returned it
SOURCE_SCORES_KEY = "source_scores"
#: metadata keys a source's own score may come in, first found wins
_SCORE_KEYS = (BM25_SCORE_KEY, RELEVANCE_SCORE_KEY, "similarity_score", SCORE_KEY)

_Scored = list[tuple[str, Optional[float], LCDocument]]


class ContextualEnsembleRetriever(BaseRetriever):
    """Fuses ranked lists from any retrievers (or runnables) by chunk id; optionally reranks.

    Each retriever returns `depth` Documents; the lists are fused with weighted reciprocal
    rank fusion (``w / (rrf_k + rank)``) or relative-score fusion, the best `rerank_depth` fused
    candidates go to the reranker when there is one, and the top `k` come back. Returned
    Documents carry ``score``, ``fused_score``, ``ranks`` (per source), ``source_scores`` and,
    when reranked, ``rerank_score`` in their metadata (``rerank_error`` instead when a failing
    reranker was skipped with ``on_rerank_error="fused"``). A blank query returns no Documents.
    Async runs the retrievers concurrently.

    The fusion settings are the core's `FusionConfig`, validated there once: pass one as
    `config`, or the fields themselves; a field given explicitly overrides `config`'s setting, and
    after construction every field holds the setting in force.

    A `VectorStoreRetriever` (search_type "similarity") is queried through its vector store's
    ``similarity_search_with_score`` so its scores are kept (in a child run of its own, so
    callbacks and tracing still see it); other `BaseRetriever`s get ``k=depth``
    at invoke time (set ``candidates_kwarg=None`` for retrievers that take no such argument).

    Args:
        retrievers: the sources: `BaseRetriever`s or runnables ``str -> list[Document]``.
        names: one unique name per source (default: "dense" for a vector-store retriever, "bm25"
            for `ContextualBM25Retriever`, else the runnable's name; repeats numbered "_2", ...).
        weights: one weight per source (default: 0.5 / 0.5 for two, else equal).
        config: a core `FusionConfig` (its `top_k` is `k` here).
        mode: "rrf" (default) or "relative_score".
        rrf_k: the RRF constant (default 0, the cookbook's; LangChain's EnsembleRetriever uses 60).
        depth: Documents taken from each source (default 150, as the cookbook); `candidates` is
            its old name (deprecated).
        k: Documents returned (default 20); ``invoke(query, k=...)`` overrides it per call.
        reranker: a core `Reranker` or a `RerankCompressor` (None: no reranking); a compressor's
            `top_n` caps what comes back.
        rerank_depth: fused candidates the reranker sees (default: `depth`).
        on_rerank_error: "raise" (default) or "fused": when the reranker fails, return the fused
            order with ``rerank_error`` (the error's type and message) in each Document's metadata.
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
    config: Optional[FusionConfig] = None
    mode: FusionMode = "rrf"
    rrf_k: float = DEFAULT_RRF_K
    depth: int = DEFAULT_DEPTH
    k: int = DEFAULT_TOP_K
    reranker: Optional[Any] = None
    rerank_depth: Optional[int] = None
    on_rerank_error: OnRerankError = "raise"
    id_key: str = CHUNK_ID_KEY
    candidates_kwarg: Optional[str] = "k"

    _relevance_fns: dict[int, Callable[[float], float]] = PrivateAttr(default_factory=dict)
    _top_n: Optional[int] = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _renamed_fields(cls, data: Any) -> Any:
        if isinstance(data, dict) and "candidates" in data:
            data = dict(data)
            data["depth"] = renamed_keyword("ContextualEnsembleRetriever", "candidates", "depth", data.pop("candidates"), data.get("depth"))
        return data

    @model_validator(mode="after")
    def _fusion_settings(self) -> "ContextualEnsembleRetriever":
        """Names and weights one per retriever; the fusion fields resolved through one
        `FusionConfig` (validated there) and written back, so each field holds what is used."""
        n = len(self.retrievers)
        if n == 0:
            raise ValueError("no retrievers: pass at least one (e.g. a vector store retriever and a ContextualBM25Retriever)")
        if self.names is None:
            self.names = _default_names(self.retrievers)
        if len(self.names) != n or len(set(self.names)) != n:
            raise ValueError(f"names must be {n} unique names, one per retriever; got {self.names}")
        reranker = self.reranker
        if reranker is not None and not callable(getattr(reranker, "rerank", None)):
            inner = getattr(reranker, "reranker", None)  # a RerankCompressor: use its core reranker
            if inner is None or not callable(getattr(inner, "rerank", None)):
                raise TypeError(
                    f"reranker must be a core Reranker or a RerankCompressor, got {type(reranker).__name__}; "
                    "wrap other compressors in ContextualCompressionRetriever(base_retriever=this, ...)"
                )
            self._top_n, reranker = getattr(reranker, "top_n", None), inner
        given = {setting: getattr(self, name) for name, setting in _FUSION_FIELDS.items() if name in self.model_fields_set}
        given["reranker"] = reranker
        config = FusionConfig.merged(self.config, **given)
        config = config.replace(weights=config.weights_for(n, per="retriever"))
        self.__dict__.update(
            config=config, weights=list(config.weights), mode=config.mode, rrf_k=config.rrf_k, depth=config.depth,
            k=config.top_k, reranker=config.reranker, rerank_depth=config.rerank_depth, on_rerank_error=config.on_rerank_error,
        )
        return self

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
            **kwargs: fields of this class (weights, k, depth, reranker, config, ...).
        """
        docs = list(documents)
        if vectorstore is None:
            if embeddings is None:
                raise ValueError("pass embeddings= (e.g. LocalMiniLMEmbeddings()) or a vectorstore= holding the documents")
            from .vectorstores import chroma_from_documents

            vectorstore = chroma_from_documents(docs, embeddings, id_key=id_key)
        if "candidates" in kwargs:
            kwargs["depth"] = renamed_keyword("ContextualEnsembleRetriever.from_documents", "candidates", "depth", kwargs.pop("candidates"), kwargs.get("depth"))
        config = FusionConfig.merged(kwargs.get("config"), depth=kwargs.get("depth"))  # validated before anything is built
        dense = vectorstore.as_retriever(search_kwargs={"k": config.depth})
        bm25 = ContextualBM25Retriever.from_documents(docs, k=config.depth, id_key=id_key)
        return cls(retrievers=[dense, bm25], names=["dense", "bm25"], id_key=id_key, **kwargs)

    # -- retrieval --------------------------------------------------------------------------------

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: Optional[int] = None
    ) -> list[LCDocument]:
        k = self._check_k(k)
        if is_blank(query):
            return []
        lists = [
            self._run(i, r, query, patch_config(None, callbacks=run_manager.get_child(tag=f"retriever_{i + 1}")))
            for i, r in enumerate(self.retrievers)
        ]
        fused, docs = self._fuse(lists)
        hits = self.config.rerank(query, fused, lambda i: docs[i].page_content, top_k=k)  # type: ignore[union-attr]
        return self._documents(hits, docs, lists)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: Optional[int] = None
    ) -> list[LCDocument]:
        k = self._check_k(k)
        if is_blank(query):
            return []
        lists = await asyncio.gather(
            *(
                self._arun(i, r, query, patch_config(None, callbacks=run_manager.get_child(tag=f"retriever_{i + 1}")))
                for i, r in enumerate(self.retrievers)
            )
        )
        fused, docs = self._fuse(lists)
        hits = await self.config.arerank(query, fused, lambda i: docs[i].page_content, top_k=k)  # type: ignore[union-attr]
        return self._documents(hits, docs, lists)

    # -- one source -------------------------------------------------------------------------------

    def _run(self, i: int, retriever: Any, query: str, config: RunnableConfig) -> _Scored:
        if _scored_vectorstore(retriever):
            # the store's scored search keeps the similarity scores; a child run keeps the
            # retriever visible to callbacks and tracing, as invoke would
            run = _child_run(retriever, query, config)
            try:
                kwargs = {**retriever.search_kwargs, "k": self.depth}
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
                kwargs = {**retriever.search_kwargs, "k": self.depth}
                pairs = await retriever.vectorstore.asimilarity_search_with_score(query, **kwargs)
            except BaseException as exc:
                await run.on_retriever_error(exc)
                raise
            await run.on_retriever_end([d for d, _ in pairs])
            return self._from_distances(retriever.vectorstore, pairs)
        return self._from_docs(await retriever.ainvoke(query, config, **self._invoke_kwargs(retriever)))

    def _invoke_kwargs(self, retriever: Any) -> dict[str, Any]:
        if isinstance(retriever, BaseRetriever) and self.candidates_kwarg:
            return {self.candidates_kwarg: self.depth}
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
        sources = [(name, [(cid, s) for cid, s, _ in scored]) for name, scored in zip(self.names, lists)]  # type: ignore[arg-type]
        return self.config.fuse(sources), docs  # type: ignore[union-attr]

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
            if hit.rerank_error is not None:
                meta[RERANK_ERROR_KEY] = hit.rerank_error
            out.append(doc.model_copy(update={"metadata": meta, "id": hit.id}))
        return out

    def _check_k(self, k: Optional[int]) -> int:
        k = self.k if k is None else positive_int("k", k)
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
