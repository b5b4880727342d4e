"""`ContextualEnsembleRetriever`: any retrievers fused with the core's weighted RRF, then reranked.

The design card's `EnsembleRetriever`. Fusion and reranking are the core's `fuse_sources` and
`rerank_hits`, the same functions `HybridSearcher` runs, so with the same candidate lists this
retriever returns exactly the core's ordering. Unlike LangChain's own `EnsembleRetriever` (c=60,
dedupes on page_content, never truncates), the RRF constant is configurable (default 0, the
cookbook's ``w / rank``), results are deduplicated by chunk id and cut to `k`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional, Sequence, Union

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForRetrieverRun,
    CallbackManager,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever, RetrieverLike
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config, patch_config, run_in_executor
from langchain_core.runnables.configurable import RunnableConfigurableFields
from langchain_core.runnables.utils import ConfigurableFieldSpec, get_unique_config_specs
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import ConfigDict, Field, model_validator
from typing_extensions import override

from contextual_retrieval_core.checks import is_blank, positive_int, renamed_keyword
from contextual_retrieval_core.search.ranked import (
    DEFAULT_TOP_K,
    FUSED_SCORE_KEY,
    RANKS_KEY,
    RERANK_ERROR_KEY,
    RERANK_SCORE_KEY,
    SCORE_KEY,
    RankedHit,
    unique_names,
)
from contextual_retrieval_core.search.feedback import DEFAULT_DENSE_PRF, DEFAULT_PRF_TOP
from contextual_retrieval_core.search.rank_fusion import DEFAULT_DEPTH, DEFAULT_RRF_K, FusionMode
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.rerank.base import OnRerankError, Reranker
from contextual_retrieval_core.dense.windows import WindowConfig

from contextual_retrieval_langchain._compat import retriever_ls_params
from contextual_retrieval_langchain._documents import CHUNK_ID_KEY, chunk_id_of
from contextual_retrieval_langchain.feedback import astored_rows, stored_rows
from contextual_retrieval_langchain.relevance import arelevance_scored, relevance_scored, scored_by_vector
from contextual_retrieval_langchain.bm25 import BM25_SCORE_KEY, ContextualBM25Retriever, MetadataFilter, metadata_predicate
from contextual_retrieval_langchain.rerank import RELEVANCE_SCORE_KEY, RerankCompressor

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
                  "reranker": "reranker", "rerank_depth": "rerank_depth", "on_rerank_error": "on_rerank_error",
                  "dense_prf": "dense_prf", "prf_top": "prf_top"}

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

    The caller's config reaches every source as LangChain's `EnsembleRetriever` passes it: the
    same tags, metadata, configurable values and limits, with the callbacks of a child run
    tagged ``retriever_1``, ``retriever_2``, ...; `config_specs` lists the sources' configurable
    fields.

    The fusion settings are the core's `FusionConfig`, validated there once: pass one as
    `config`, or the fields themselves; a field given explicitly overrides `config`'s setting, and
    after construction every field holds the setting in force.

    A `VectorStoreRetriever` (search_type "similarity" or "similarity_score_threshold") is
    searched for the scores its vector store's public ``similarity_search_with_relevance_scores``
    gives (a ``score_threshold`` in its search_kwargs applied the same way, without that method's
    warning for scores outside [0, 1]) so its scores are kept (in a child run of its own, so
    callbacks and tracing still see it); a store without a relevance function (such as
    `InMemoryVectorStore`) is searched with ``similarity_search_with_score``, its scores read as
    similarities or distances by the order the store returned them in. The process's warning
    filters are never changed (not safe around an await or across ``batch`` threads). Other
    `BaseRetriever`s get ``k=depth`` at invoke time (set ``candidates_kwarg=None`` for
    retrievers that take no such argument), except where the caller's config sets that value
    (a source made with ``configurable_fields(k=ConfigurableField(...))``).

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
        filter: a metadata filter applied to every source: a vector-store retriever gets it as
            its store's ``filter`` search kwarg (so pass what the store takes: a where dict for
            Chroma, a predicate on the Document for `InMemoryVectorStore`), a
            `ContextualBM25Retriever` searches under the same filter, and any other source's
            Documents are filtered by it afterwards (see `metadata_predicate`).
            ``invoke(query, filter=...)`` overrides it per call.
        dense_prf: dense pseudo-relevance feedback weight (default 0.5, the core's; 0: off). When
            a vector-store retriever (search_type "similarity" or
            "similarity_score_threshold") is fused with another source, the
            query is embedded once with the store's embeddings, the store is searched by vector,
            the first fused ranking's top `prf_top` chunks' stored vectors are read back from it,
            and it is searched again from the query vector moved toward them (`feedback`): the
            ranking `HybridSearcher` gives. Sources of search_type "mmr" and sources made
            configurable (``configurable_fields``) are invoked as they are and not fed back.
            ``dense_prf=None`` is the same as not passing it (on, at 0.5); 0 turns it off.
        prf_top: how many fused chunks feed back (default 3).

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

    retrievers: list[RetrieverLike] = Field(description="the sources: retrievers or runnables str -> list[Document]")
    names: list[str] = Field(default_factory=list, description="one unique name per source (set from the sources when not given)")
    weights: list[float] = Field(default_factory=list, description="one fusion weight per source (the defaults when not given)")
    config: Optional[FusionConfig] = Field(default=None, description="the core FusionConfig in force (built from the fields when not given)")
    mode: FusionMode = Field(default="rrf", description='"rrf" or "relative_score"')
    rrf_k: float = Field(default=DEFAULT_RRF_K, description="the RRF constant (0: the cookbook's w / rank)")
    depth: int = Field(default=DEFAULT_DEPTH, description="Documents taken from each source before fusion")
    k: int = Field(default=DEFAULT_TOP_K, description="Documents returned (invoke(query, k=...) overrides it)")
    reranker: Union[Reranker, RerankCompressor, None] = Field(default=None, description="a core Reranker or a RerankCompressor, or None")
    rerank_depth: Optional[int] = Field(default=None, description="fused candidates the reranker sees (None: depth)")
    on_rerank_error: OnRerankError = Field(default="raise", description='"raise", or "fused" to keep the fused order when the reranker fails')
    id_key: str = Field(default=CHUNK_ID_KEY, description="metadata key of the chunk id for Documents without Document.id")
    candidates_kwarg: Optional[str] = Field(default="k", description="the invoke keyword that sets a BaseRetriever's result count")
    filter: Optional[MetadataFilter] = Field(default=None, description="a metadata filter applied to every source")
    dense_prf: float = Field(default=DEFAULT_DENSE_PRF, description="dense pseudo-relevance feedback weight (0: off)")
    prf_top: int = Field(default=DEFAULT_PRF_TOP, description="fused chunks that feed back")

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The configurable fields of the sources (as `EnsembleRetriever` lists them)."""
        return get_unique_config_specs(spec for retriever in self.retrievers for spec in retriever.config_specs)

    @model_validator(mode="before")
    @classmethod
    def _settings(cls, data: Any) -> Any:
        """Names and weights one per retriever; the fusion fields resolved through one
        `FusionConfig` (validated there), so each field holds the setting in force."""
        if not isinstance(data, dict) or not isinstance(data.get("retrievers"), (list, tuple)):
            return data  # the field validation names what is wrong
        data = dict(data)
        if "candidates" in data:
            data["depth"] = renamed_keyword("ContextualEnsembleRetriever", "candidates", "depth", data.pop("candidates"), data.get("depth"))
        retrievers = data["retrievers"]
        n = len(retrievers)
        if n == 0:
            raise ValueError("no retrievers: pass at least one (e.g. a vector store retriever and a ContextualBM25Retriever)")
        names = data.get("names") or _default_names(retrievers)
        if len(names) != n or len(set(names)) != n:
            raise ValueError(f"names must be {n} unique names, one per retriever; got {names}")
        reranker = data.get("reranker")
        if isinstance(reranker, RerankCompressor):
            reranker = reranker.reranker  # a compressor: its core reranker (its top_n caps k)
        elif reranker is not None and not isinstance(reranker, Reranker):
            raise TypeError(
                f"reranker must be a core Reranker or a RerankCompressor, got {type(reranker).__name__}; "
                "wrap other compressors in ContextualCompressionRetriever(base_retriever=this, ...)"
            )
        given = {setting: data.get(name) for name, setting in _FUSION_FIELDS.items()}
        given["reranker"] = reranker
        config = FusionConfig.merged(data.get("config"), **given)
        config = config.replace(weights=config.weights_for(n, per="retriever"))
        if data.get("filter") is not None:
            metadata_predicate(data["filter"])  # a bad where dict fails here, naming the operator
        data.update(
            names=list(names), config=config, weights=list(config.weights), mode=config.mode, rrf_k=config.rrf_k,
            depth=config.depth, k=config.top_k, rerank_depth=config.rerank_depth, on_rerank_error=config.on_rerank_error,
            dense_prf=config.dense_prf, prf_top=config.prf_top,
        )
        return data

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[LCDocument],
        embeddings: Optional[Embeddings] = None,
        *,
        vectorstore: Optional[VectorStore] = None,
        id_key: str = CHUNK_ID_KEY,
        windows: Optional[WindowConfig] = None,
        **kwargs: Any,
    ) -> "ContextualEnsembleRetriever":
        """The default pair: a vector store retriever ("dense") and a `ContextualBM25Retriever` ("bm25").

        Args:
            documents: contextual chunks (from `ContextualDocumentTransformer`), with ids.
            embeddings: LangChain `Embeddings` for a new embedded Chroma collection (e.g.
                `LocalMiniLMEmbeddings()`); not needed when `vectorstore` is given.
            vectorstore: a vector store that already holds `documents` under the same ids.
            windows: a core `WindowConfig`: chunks longer than the embeddings' window are stored
                as overlapping windows (extra rows pointing at their chunk, each with the
                chunk's context) and the dense side returns each chunk once, at its best
                window's score (`WindowedVectorStore` around the store).
            **kwargs: fields of this class (weights, k, depth, reranker, config, ...).
        """
        docs = list(documents)
        if windows is not None:
            from contextual_retrieval_langchain.windows import WindowedVectorStore

            given = vectorstore is not None
            if vectorstore is None:
                if embeddings is None:
                    raise ValueError("pass embeddings= (e.g. LocalMiniLMEmbeddings()) or a vectorstore= holding the documents")
                from contextual_retrieval_langchain.vectorstores import chroma_from_documents

                vectorstore = chroma_from_documents([], embeddings, id_key=id_key)
            vectorstore = WindowedVectorStore(vectorstore, windows=windows, id_key=id_key)
            vectorstore.add_documents(docs, skip_fitting=given)
        if vectorstore is None:
            if embeddings is None:
                raise ValueError("pass embeddings= (e.g. LocalMiniLMEmbeddings()) or a vectorstore= holding the documents")
            from contextual_retrieval_langchain.vectorstores import chroma_from_documents

            vectorstore = chroma_from_documents(docs, embeddings, id_key=id_key)
        if "candidates" in kwargs:
            kwargs["depth"] = renamed_keyword("ContextualEnsembleRetriever.from_documents", "candidates", "depth", kwargs.pop("candidates"), kwargs.get("depth"))
        config = FusionConfig.merged(kwargs.get("config"), depth=kwargs.get("depth"))  # validated before anything is built
        dense = vectorstore.as_retriever(search_kwargs={"k": config.depth})
        bm25 = ContextualBM25Retriever.from_documents(docs, k=config.depth, id_key=id_key)
        return cls(retrievers=[dense, bm25], names=["dense", "bm25"], id_key=id_key, **kwargs)

    # -- retrieval --------------------------------------------------------------------------------

    @override
    def invoke(self, input: str, config: Optional[RunnableConfig] = None, **kwargs: Any) -> list[LCDocument]:
        """`BaseRetriever.invoke`, keeping `config` for the sources (as `EnsembleRetriever` does).
        Keywords: ``k`` (Documents returned) and ``filter`` (a metadata filter) for this call."""
        config = ensure_config(config)
        run_manager = self._callback_manager(CallbackManager, config, kwargs).on_retriever_start(
            None, input, name=config.get("run_name") or self.get_name(), run_id=kwargs.pop("run_id", None)
        )
        try:
            result = self._fused(input, config, run_manager, **kwargs)
        except Exception as exc:
            run_manager.on_retriever_error(exc)
            raise
        run_manager.on_retriever_end(result)
        return result

    @override
    async def ainvoke(self, input: str, config: Optional[RunnableConfig] = None, **kwargs: Any) -> list[LCDocument]:
        """Async `invoke`: the sources run concurrently."""
        config = ensure_config(config)
        run_manager = await self._callback_manager(AsyncCallbackManager, config, kwargs).on_retriever_start(
            None, input, name=config.get("run_name") or self.get_name(), run_id=kwargs.pop("run_id", None)
        )
        try:
            result = await self._afused(input, config, run_manager, **kwargs)
        except Exception as exc:
            await run_manager.on_retriever_error(exc)
            raise
        await run_manager.on_retriever_end(result)
        return result

    def _callback_manager(self, manager: Any, config: RunnableConfig, kwargs: dict[str, Any]) -> Any:
        """This run's callback manager, configured as `EnsembleRetriever.invoke` configures it (the
        caller's tags and metadata inherited by every source, this retriever's own kept local)."""
        return manager.configure(
            config.get("callbacks"), None, verbose=kwargs.pop("verbose", False), inheritable_tags=config.get("tags"),
            local_tags=self.tags, inheritable_metadata=config.get("metadata"), local_metadata=self.metadata,
        )

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: Optional[int] = None,
        filter: Optional[MetadataFilter] = None,
    ) -> list[LCDocument]:
        return self._fused(query, ensure_config(None), run_manager, k=k, filter=filter)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: Optional[int] = None,
        filter: Optional[MetadataFilter] = None,
    ) -> list[LCDocument]:
        return await self._afused(query, ensure_config(None), run_manager, k=k, filter=filter)

    def _fused(
        self, query: str, config: RunnableConfig, run_manager: CallbackManagerForRetrieverRun, *,
        k: Optional[int] = None, filter: Optional[MetadataFilter] = None,
    ) -> list[LCDocument]:
        k, where = self._check_k(k), self._where(filter)
        if is_blank(query):
            return []
        configs = [patch_config(config, callbacks=run_manager.get_child(tag=f"retriever_{i + 1}")) for i in range(len(self.retrievers))]
        vectors = {i: r.vectorstore.embeddings.embed_query(query) for i, r in self._feedback_sides()}
        lists = [self._run(r, query, c, where, vectors.get(i)) for i, (r, c) in enumerate(zip(self.retrievers, configs))]
        top = self.config.feedback_top(self._sources(lists)) if vectors else []  # type: ignore[union-attr]
        if top:  # dense PRF: the vector sides searched again from the query moved toward the fused top
            for i, vector in vectors.items():
                store = self.retrievers[i].vectorstore  # type: ignore[union-attr]
                moved = stored_rows(store, top, _documents_by_id([lists[i], *lists])).moved_query(vector, top, self.dense_prf)
                lists[i] = self._run(self.retrievers[i], query, configs[i], where, moved.tolist())
        fused, docs = self._fuse(lists)
        hits = self.config.rerank(query, fused, lambda i: docs[i].page_content, top_k=k)  # type: ignore[union-attr]
        return self._documents(hits, docs, lists)

    async def _afused(
        self, query: str, config: RunnableConfig, run_manager: AsyncCallbackManagerForRetrieverRun, *,
        k: Optional[int] = None, filter: Optional[MetadataFilter] = None,
    ) -> list[LCDocument]:
        k, where = self._check_k(k), self._where(filter)
        if is_blank(query):
            return []
        configs = [patch_config(config, callbacks=run_manager.get_child(tag=f"retriever_{i + 1}")) for i in range(len(self.retrievers))]
        sides = self._feedback_sides()
        found = await asyncio.gather(*(r.vectorstore.embeddings.aembed_query(query) for _, r in sides))
        vectors = {i: v for (i, _), v in zip(sides, found)}
        lists = list(await asyncio.gather(
            *(self._arun(r, query, c, where, vectors.get(i)) for i, (r, c) in enumerate(zip(self.retrievers, configs)))
        ))
        top = self.config.feedback_top(self._sources(lists)) if vectors else []  # type: ignore[union-attr]
        if top:  # dense PRF, as in _fused
            rows = await asyncio.gather(*(astored_rows(self.retrievers[i].vectorstore, top, _documents_by_id([lists[i], *lists])) for i in vectors))  # type: ignore[union-attr]
            moved = {i: r.moved_query(v, top, self.dense_prf) for (i, v), r in zip(vectors.items(), rows)}
            again = await asyncio.gather(*(self._arun(self.retrievers[i], query, configs[i], where, m.tolist()) for i, m in moved.items()))
            for i, scored in zip(moved, again):
                lists[i] = scored
        fused, docs = self._fuse(lists)
        hits = await self.config.arerank(query, fused, lambda i: docs[i].page_content, top_k=k)  # type: ignore[union-attr]
        return self._documents(hits, docs, lists)

    # -- one source -------------------------------------------------------------------------------

    def _feedback_sides(self) -> list[tuple[int, VectorStoreRetriever]]:
        """The vector-store sources dense PRF searches again (with embeddings to embed the query),
        when the weight is not 0 and they are fused with another source."""
        if not self.dense_prf or len(self.retrievers) < 2:
            return []
        return [(i, r) for i, r in enumerate(self.retrievers) if _scored_vectorstore(r) and r.vectorstore.embeddings is not None]

    def _run(self, retriever: Any, query: str, config: RunnableConfig, where: Optional[MetadataFilter],
             vector: Optional[Sequence[float]] = None) -> _Scored:
        if _scored_vectorstore(retriever):
            # the store's scored search keeps the scores; a child run configured as
            # BaseRetriever.invoke configures one keeps the retriever visible to callbacks and tracing
            kwargs = self._search_kwargs(retriever, where)
            run = _child_run(CallbackManager, retriever, query, config)
            try:
                pairs = (relevance_scored(retriever.vectorstore, query, **kwargs) if vector is None
                         else scored_by_vector(retriever.vectorstore, vector, **kwargs))
            except BaseException as exc:
                run.on_retriever_error(exc)
                raise
            run.on_retriever_end([d for d, _ in pairs])
            return self._from_pairs(pairs)
        docs = retriever.invoke(query, config, **self._invoke_kwargs(retriever, config, where))
        return self._from_docs(docs, retriever, where)

    async def _arun(self, retriever: Any, query: str, config: RunnableConfig, where: Optional[MetadataFilter],
                    vector: Optional[Sequence[float]] = None) -> _Scored:
        if _scored_vectorstore(retriever):
            kwargs = self._search_kwargs(retriever, where)
            run = await _child_run(AsyncCallbackManager, retriever, query, config)
            try:
                pairs = (await arelevance_scored(retriever.vectorstore, query, **kwargs) if vector is None
                         else await run_in_executor(None, lambda: scored_by_vector(retriever.vectorstore, vector, **kwargs)))
            except BaseException as exc:
                await run.on_retriever_error(exc)
                raise
            await run.on_retriever_end([d for d, _ in pairs])
            return self._from_pairs(pairs)
        docs = await retriever.ainvoke(query, config, **self._invoke_kwargs(retriever, config, where))
        return self._from_docs(docs, retriever, where)

    def _search_kwargs(self, retriever: VectorStoreRetriever, where: Optional[MetadataFilter]) -> dict[str, Any]:
        kwargs = {**retriever.search_kwargs, "k": self.depth}
        if where is not None:
            kwargs["filter"] = where
        return kwargs

    def _invoke_kwargs(self, retriever: Any, config: RunnableConfig, where: Optional[MetadataFilter]) -> dict[str, Any]:
        """``k=depth`` for a `BaseRetriever` unless the caller's config sets its result count; the
        filter for the sources that take one."""
        kwargs: dict[str, Any] = {}
        target = retriever.default if isinstance(retriever, RunnableConfigurableFields) else retriever
        if self.candidates_kwarg and isinstance(target, BaseRetriever) and not _count_configured(retriever, self.candidates_kwarg, config):
            kwargs[self.candidates_kwarg] = self.depth
        if where is not None and isinstance(target, (VectorStoreRetriever, ContextualBM25Retriever)):
            kwargs["filter"] = where
        return kwargs

    def _from_pairs(self, pairs: list[tuple[LCDocument, Optional[float]]]) -> _Scored:
        return [(chunk_id_of(d, self.id_key), s, d) for d, s in pairs]

    def _from_docs(self, docs: Sequence[LCDocument], retriever: Any, where: Optional[MetadataFilter]) -> _Scored:
        """(id, the source's own score or None, document); the core dedupes and scores a missing
        score as 1 / rank. A source that took no filter is filtered here."""
        target = retriever.default if isinstance(retriever, RunnableConfigurableFields) else retriever
        if where is not None and not isinstance(target, (VectorStoreRetriever, ContextualBM25Retriever)):
            keep = metadata_predicate(where)
            docs = [d for d in docs if keep(d)]
        out: _Scored = []
        for doc in docs:
            score = next((doc.metadata[key] for key in _SCORE_KEYS if isinstance(doc.metadata.get(key), (int, float))), None)
            out.append((chunk_id_of(doc, self.id_key), float(score) if score is not None else None, doc))
        return out

    # -- fusion -----------------------------------------------------------------------------------

    def _sources(self, lists: Sequence[_Scored]) -> list[tuple[str, list[tuple[str, Optional[float]]]]]:
        return [(name, [(cid, s) for cid, s, _ in scored]) for name, scored in zip(self.names, lists)]

    def _fuse(self, lists: Sequence[_Scored]) -> tuple[list[RankedHit], dict[str, LCDocument]]:
        return self.config.fuse(self._sources(lists)), _documents_by_id(lists)  # type: ignore[union-attr]

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
                SOURCE_SCORES_KEY: {name: scores[hit.id] for name, scores in zip(self.names, own) if hit.id in scores},  # type: ignore[index]
            }
            if hit.rerank_score is not None:
                meta[RERANK_SCORE_KEY] = hit.rerank_score
            if hit.rerank_error is not None:
                meta[RERANK_ERROR_KEY] = hit.rerank_error
            out.append(doc.model_copy(update={"metadata": meta, "id": hit.id}))
        return out

    def _check_k(self, k: Optional[int]) -> int:
        k = self.k if k is None else positive_int("k", k)
        top_n = self.reranker.top_n if isinstance(self.reranker, RerankCompressor) else None
        return min(k, top_n) if top_n else k

    def _where(self, where: Optional[MetadataFilter]) -> Optional[MetadataFilter]:
        if where is None:
            return self.filter
        metadata_predicate(where)  # a bad where dict fails before any source runs
        return where


def _documents_by_id(lists: Sequence[_Scored]) -> dict[str, LCDocument]:
    """{chunk id: the first Document listed under it}, lists in order (a vector source's own list
    first: its Documents carry the store ids its vectors are read back under)."""
    docs: dict[str, LCDocument] = {}
    for scored in lists:
        for cid, _, doc in scored:
            docs.setdefault(cid, doc)
    return docs


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


def _scored_vectorstore(retriever: Any) -> bool:
    return isinstance(retriever, VectorStoreRetriever) and retriever.search_type in ("similarity", "similarity_score_threshold")


def _default_names(retrievers: Sequence[Any]) -> list[str]:
    kinds = [
        "dense" if isinstance(r, VectorStoreRetriever)
        else "bm25" if isinstance(r, ContextualBM25Retriever)
        else r.get_name() if callable(getattr(r, "get_name", None)) else type(r).__name__
        for r in retrievers
    ]
    return unique_names(kinds)
