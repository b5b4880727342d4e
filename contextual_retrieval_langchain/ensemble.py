"""`ContextualEnsembleRetriever`: any retrievers fused with the core's weighted RRF, then reranked.

The design card's `EnsembleRetriever`. Each invocation runs the core's one `QueryFlow` over its
sources (`sources`), the flow `HybridSearcher` runs, so with the same candidate lists this
retriever returns exactly the core's ordering. Unlike LangChain's own `EnsembleRetriever` (c=60,
dedupes on page_content, never truncates), the RRF constant is configurable (default 0, the
cookbook's ``w / rank``), results are deduplicated by chunk id and cut to `k`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForRetrieverRun,
    CallbackManager,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import RetrieverLike
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config
from langchain_core.runnables.utils import ConfigurableFieldSpec, get_unique_config_specs
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict, Field, PrivateAttr, model_validator
from typing_extensions import override

from contextual_retrieval_core.checks import is_blank, positive_int
from contextual_retrieval_core.dense._window_rows import requested_windows
from contextual_retrieval_core.dense.windows import WindowConfig
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.flow import QueryFlow
from contextual_retrieval_core.search.ranked import FUSED_SCORE_KEY, RANKS_KEY, RERANK_ERROR_KEY, RERANK_SCORE_KEY, SCORE_KEY
from contextual_retrieval_langchain._documents import CHUNK_ID_KEY
from contextual_retrieval_langchain._settings import SETTING_NAMES, FusionFields, resolved_settings
from contextual_retrieval_langchain._sources import (
    SOURCE_SCORES_KEY,
    SourceRun,
    page_text,
    ranked_documents,
    source_runs,
)
from contextual_retrieval_langchain.bm25 import ContextualBM25Retriever, MetadataFilter, metadata_predicate
from contextual_retrieval_langchain.rerank import RerankCompressor

__all__ = [
    "ContextualEnsembleRetriever",
    "SETTING_NAMES",
    "SCORE_KEY",
    "FUSED_SCORE_KEY",
    "RANKS_KEY",
    "SOURCE_SCORES_KEY",
    "RERANK_SCORE_KEY",
    "RERANK_ERROR_KEY",
]


class ContextualEnsembleRetriever(FusionFields):
    """Fuses ranked lists from any retrievers (or runnables) by chunk id; optionally reranks.

    Each retriever returns `depth` Documents; the lists are fused with weighted reciprocal
    rank fusion (``w / (rrf_k + rank)``) or relative-score fusion, the best `rerank_depth` fused
    candidates go to the reranker when there is one, and the top `k` come back. Returned
    Documents carry ``score``, ``fused_score``, ``ranks`` (per source), ``source_scores`` and,
    when reranked, ``rerank_score`` in their metadata (``rerank_error`` instead when a failing
    reranker was skipped with ``on_rerank_error="fused"``). A blank query returns no Documents.
    Async runs the retrievers concurrently. ``batch`` (threads) and ``abatch`` may run many
    queries at once on one retriever (it keeps no state between queries) when its sources
    allow it, as vector-store retrievers and `ContextualBM25Retriever` do.

    The caller's config reaches every source as LangChain's `EnsembleRetriever` passes it (the
    same tags, metadata, configurable values and limits; child runs tagged ``retriever_1``,
    ``retriever_2``, ...); `config_specs` lists the sources' configurable fields. How each kind
    of source is searched (a vector store for its relevance scores, other retrievers with
    ``k=depth``) is `sources`'s. The process's warning filters are never changed.

    Args:
        retrievers: the sources: `BaseRetriever`s or runnables ``str -> list[Document]``.
        names: one unique name per source (default: "dense" for a vector-store retriever, "bm25"
            for `ContextualBM25Retriever`, else the runnable's name; repeats numbered "_2", ...).
        config: a core `FusionConfig`. Its settings are also fields of this class, under the
            same names but `k` for `top_k` (weights, mode, rrf_k, depth, k, rerank_depth,
            reranker, on_rerank_error, dense_prf, prf_top); a field given explicitly overrides
            `config`'s, and after construction every field holds the setting in force.
            ``invoke(query, k=...)`` overrides `k` per call. `reranker` may also be a
            `RerankCompressor` (its `top_n` caps what comes back). Dense feedback moves the
            vector-store sources (search_type "similarity" or "similarity_score_threshold",
            with embeddings) fused with another source: the ranking `HybridSearcher` gives.
        id_key: metadata key of the chunk id for Documents without `Document.id`.
        candidates_kwarg: the invoke keyword that sets a `BaseRetriever`'s result count (None for
            retrievers that take no such argument).
        filter: a metadata filter applied to every source: a vector-store retriever gets it as
            its store's ``filter`` search kwarg (so pass what the store takes: a where dict for
            Chroma, a predicate on the Document for `InMemoryVectorStore`), a
            `ContextualBM25Retriever` searches under the same filter, and any other source's
            Documents are filtered by it afterwards (see `metadata_predicate`).
            ``invoke(query, filter=...)`` overrides it per call.

    Example:
        >>> from langchain_core.documents import Document
        >>> from contextual_retrieval_langchain import LocalMiniLMEmbeddings
        >>> docs = [Document("ACME Q2 2023 filing.\\n\\nRevenue grew 3%.", id="c1"),
        ...         Document("Globex 2021 report.\\n\\nTwo new plants opened.", id="c2")]
        >>> retriever = ContextualEnsembleRetriever.from_documents(docs, LocalMiniLMEmbeddings(), k=1)
        >>> [(d.id, d.metadata["ranks"]) for d in retriever.invoke("ACME revenue")]
        [('c1', {'dense': 1, 'bm25': 1})]
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")  # a misspelt or removed setting is an error

    retrievers: list[RetrieverLike] = Field(description="the sources: retrievers or runnables str -> list[Document]")
    names: list[str] = Field(default_factory=list, description="one unique name per source (set from the sources when not given)")
    config: FusionConfig | None = Field(default=None, description="the core FusionConfig in force (built from the fields when not given)")
    id_key: str = Field(default=CHUNK_ID_KEY, description="metadata key of the chunk id for Documents without Document.id")
    candidates_kwarg: str | None = Field(default="k", description="the invoke keyword that sets a BaseRetriever's result count")
    filter: MetadataFilter | None = Field(default=None, description="a metadata filter applied to every source")
    _top_n: int | None = PrivateAttr(default=None)

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        """The configurable fields of the sources (as `EnsembleRetriever` lists them)."""
        return get_unique_config_specs(spec for retriever in self.retrievers for spec in retriever.config_specs)

    @model_validator(mode="before")
    @classmethod
    def _settings(cls, data: Any) -> Any:
        """Names and weights one per retriever; the fusion fields resolved through one
        `FusionConfig` (validated there), so each field holds the setting in force."""
        return resolved_settings(data)

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        reranker = getattr(self, "reranker", None)
        self._top_n = reranker.top_n if isinstance(reranker, RerankCompressor) else None

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[LCDocument],
        embeddings: Embeddings | None = None,
        *,
        vectorstore: VectorStore | None = None,
        id_key: str = CHUNK_ID_KEY,
        windows: WindowConfig | bool | None = None,
        **kwargs: Any,
    ) -> ContextualEnsembleRetriever:
        """The default pair: a vector store retriever ("dense") and a `ContextualBM25Retriever` ("bm25").

        Args:
            documents: contextual chunks (from `ContextualDocumentTransformer`), with ids.
            embeddings: LangChain `Embeddings` for a new embedded Chroma collection (e.g.
                `LocalMiniLMEmbeddings()`); not needed when `vectorstore` is given.
            vectorstore: a vector store that already holds `documents` under the same ids.
            windows: chunks longer than the embeddings' window are embedded whole, the windows
                past it stored as extra rows pointing at their chunk, each with the chunk's
                context, and the dense side returns each chunk once, at its best row's score
                (`WindowedVectorStore` around the store). None (default): so when this builds
                the store (no `vectorstore`); True or a core `WindowConfig`: so, around the given
                store too; False: one row per chunk, truncated at the window.
            **kwargs: fields of this class (weights, k, depth, reranker, config, ...).
        """
        docs = list(documents)
        given = vectorstore is not None
        windows = requested_windows(WindowConfig() if windows is None and not given else windows, None)
        if vectorstore is None:
            if embeddings is None:
                raise InputError("pass embeddings= (e.g. LocalMiniLMEmbeddings()) or a vectorstore= holding the documents")
            from contextual_retrieval_langchain.vectorstores import chroma_from_documents

            vectorstore = chroma_from_documents([] if windows is not None else docs, embeddings, id_key=id_key)
        if windows is not None:
            from contextual_retrieval_langchain.windows import WindowedVectorStore

            vectorstore = WindowedVectorStore(vectorstore, windows=windows, id_key=id_key)
            vectorstore.add_documents(docs, skip_fitting=given)
        config = FusionConfig.merged(kwargs.get("config"), depth=kwargs.get("depth"))  # validated before anything is built
        dense = vectorstore.as_retriever(search_kwargs={"k": config.depth})
        bm25 = ContextualBM25Retriever.from_documents(docs, k=config.depth, id_key=id_key)
        return cls(retrievers=[dense, bm25], names=["dense", "bm25"], id_key=id_key, **kwargs)

    # -- retrieval --------------------------------------------------------------------------------

    @override
    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[LCDocument]:
        """`BaseRetriever.invoke`, keeping `config` for the sources (as `EnsembleRetriever` does).
        Keywords: ``k`` (Documents returned) and ``filter`` (a metadata filter) for this call."""
        config, run_manager = self._start(CallbackManager, input, config, kwargs)
        try:
            result = self._fused(input, config, run_manager, **kwargs)
        except Exception as exc:
            run_manager.on_retriever_error(exc)
            raise
        run_manager.on_retriever_end(result)
        return result

    @override
    async def ainvoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[LCDocument]:
        """Async `invoke`: the sources run concurrently."""
        config, start = self._start(AsyncCallbackManager, input, config, kwargs)
        run_manager = await start
        try:
            result = await self._afused(input, config, run_manager, **kwargs)
        except Exception as exc:
            await run_manager.on_retriever_error(exc)
            raise
        await run_manager.on_retriever_end(result)
        return result

    def _start(
        self, manager: Any, input: str, config: RunnableConfig | None, kwargs: dict[str, Any]
    ) -> tuple[RunnableConfig, Any]:
        """The config and the run (awaitable for the async manager) that `EnsembleRetriever.invoke`
        starts: the caller's tags and metadata inherited by every source, this retriever's own local."""
        config = ensure_config(config)
        configured = manager.configure(
            config.get("callbacks"), None, verbose=kwargs.pop("verbose", False), inheritable_tags=config.get("tags"),
            local_tags=self.tags, inheritable_metadata=config.get("metadata"), local_metadata=self.metadata,
        )
        run_id = kwargs.pop("run_id", None)
        return config, configured.on_retriever_start(None, input, name=config.get("run_name") or self.get_name(), run_id=run_id)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None,
        filter: MetadataFilter | None = None,
    ) -> list[LCDocument]:
        return self._fused(query, ensure_config(None), run_manager, k=k, filter=filter)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None,
        filter: MetadataFilter | None = None,
    ) -> list[LCDocument]:
        return await self._afused(query, ensure_config(None), run_manager, k=k, filter=filter)

    def _fused(
        self, query: str, config: RunnableConfig, run_manager: CallbackManagerForRetrieverRun, *,
        k: int | None = None, filter: MetadataFilter | None = None,
    ) -> list[LCDocument]:
        k, sources = self._check_k(k), self._sources(query, config, run_manager, filter)
        if not sources:
            return []
        result = self._flow(sources).run([query], text_of=page_text(sources), top_k=k)[0]
        return ranked_documents(result, sources)

    async def _afused(
        self, query: str, config: RunnableConfig, run_manager: AsyncCallbackManagerForRetrieverRun, *,
        k: int | None = None, filter: MetadataFilter | None = None,
    ) -> list[LCDocument]:
        k, sources = self._check_k(k), self._sources(query, config, run_manager, filter)
        if not sources:
            return []
        result = (await self._flow(sources).arun([query], text_of=page_text(sources), top_k=k))[0]
        return ranked_documents(result, sources)

    @property
    def _cfg(self) -> FusionConfig:
        assert self.config is not None  # set by the validator
        return self.config

    def _flow(self, sources: Sequence[SourceRun]) -> QueryFlow:
        return QueryFlow(self._cfg, sources)  # type: ignore[arg-type]

    def _check_k(self, k: int | None) -> int:
        k = self._cfg.top_k if k is None else positive_int("k", k)
        return min(k, self._top_n) if self._top_n else k

    def _sources(self, query: str, config: RunnableConfig, run_manager: Any, where: MetadataFilter | None) -> list[SourceRun]:
        """This invocation's sources under the call's filter (checked before any source runs) or
        the retriever's; none for a blank query."""
        if where is not None:
            metadata_predicate(where)  # a bad where dict fails before any source runs
        if is_blank(query):
            return []
        return source_runs(
            self.retrievers, self.names, query, config, run_manager, self.filter if where is None else where, self._cfg,
            id_key=self.id_key, candidates_kwarg=self.candidates_kwarg,
        )
