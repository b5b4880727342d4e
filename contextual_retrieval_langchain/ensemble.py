"""`ContextualEnsembleRetriever`: any retrievers fused with the core's weighted RRF, then reranked.

The design card's `EnsembleRetriever`. Each invocation runs the core's one `QueryFlow` over its
sources (`sources`), the flow `HybridSearcher` runs, so with the same candidate lists this
retriever returns exactly the core's ordering. Unlike LangChain's own `EnsembleRetriever` (c=60,
dedupes on page_content, never truncates), the RRF constant is configurable (default 0, the
cookbook's ``w / rank``), results are deduplicated by chunk id and cut to `k`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, get_type_hints

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
from langchain_core.runnables.config import ensure_config, patch_config
from langchain_core.runnables.utils import ConfigurableFieldSpec, get_unique_config_specs
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from pydantic import ConfigDict, Field, PrivateAttr, create_model, model_validator
from typing_extensions import override

from contextual_retrieval_core.checks import is_blank, positive_int, renamed_keyword
from contextual_retrieval_core.dense.windows import WindowConfig
from contextual_retrieval_core.rerank.base import Reranker
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.flow import QueryFlow
from contextual_retrieval_core.search.ranked import (
    FUSED_SCORE_KEY,
    RANKS_KEY,
    RERANK_ERROR_KEY,
    RERANK_SCORE_KEY,
    SCORE_KEY,
    RankedHit,
    unique_names,
)
from contextual_retrieval_langchain._documents import CHUNK_ID_KEY
from contextual_retrieval_langchain.bm25 import ContextualBM25Retriever, MetadataFilter, metadata_predicate
from contextual_retrieval_langchain.rerank import RerankCompressor
from contextual_retrieval_langchain.sources import Scored, SourceRun, VectorStoreSide, documents_by_id, scored_vectorstore

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

#: LangChain's names for `FusionConfig` fields (the result count is `k`, as on LangChain's
#: retrievers); every other setting keeps its `FusionConfig` name
SETTING_NAMES = {"k": "top_k"}
#: field types wider than the core's: a weights list, a reranker that may be a compressor
_FIELD_TYPES: dict[str, Any] = {"weights": list[float], "reranker": Reranker | RerankCompressor | None}

#: {source name: the source's own score (cosine, BM25, ...)} for the sources that returned it
SOURCE_SCORES_KEY = "source_scores"


def _fusion_fields() -> dict[str, Any]:
    """A pydantic field per `FusionConfig` setting, under LangChain's name, with its type,
    default and description: the flat fields are derived here, from the config's own list."""
    hints = get_type_hints(FusionConfig)
    names = {core: own for own, core in SETTING_NAMES.items()}
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(FusionConfig):
        doc = f.metadata["doc"]
        default = Field(default_factory=list, description=doc) if f.name == "weights" else Field(default=f.default, description=doc)
        fields[names.get(f.name, f.name)] = (_FIELD_TYPES.get(f.name, hints[f.name]), default)
    return fields


if TYPE_CHECKING:  # the generated fields are read through `config`; to a type checker this is the base
    _WithFusionFields = BaseRetriever
else:
    _WithFusionFields = create_model("_WithFusionFields", __base__=BaseRetriever, **_fusion_fields())


class ContextualEnsembleRetriever(_WithFusionFields):
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
            `candidates` is the old name of `depth` (deprecated).
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

    model_config = ConfigDict(arbitrary_types_allowed=True)

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
        fields = [own for own in _fusion_fields()]
        given = {name: data.get(name) for name in fields}
        given["reranker"] = reranker
        config = FusionConfig.from_settings(data.get("config"), given, names=SETTING_NAMES, owner="ContextualEnsembleRetriever")
        config = config.replace(weights=config.weights_for(n, per="retriever"))
        if data.get("filter") is not None:
            metadata_predicate(data["filter"])  # a bad where dict fails here, naming the operator
        in_force = {own: getattr(config, SETTING_NAMES.get(own, own)) for own in fields if own != "reranker"}
        data.update(in_force, names=list(names), config=config, weights=list(config.weights or ()))
        return data

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
        windows: WindowConfig | None = None,
        **kwargs: Any,
    ) -> ContextualEnsembleRetriever:
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
    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[LCDocument]:
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
    async def ainvoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[LCDocument]:
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
        k, where = self._check_k(k), self._where(filter)
        if is_blank(query):
            return []
        sources = self._sources(query, config, run_manager, where)
        result = self._flow(sources).run([query], rerank=False)[0]
        docs = documents_by_id([s.found for s in sources])
        hits = self._cfg.rerank(query, result.fused, lambda i: docs[i].page_content, top_k=k)  # type: ignore[index]
        return self._documents(hits, docs, [s.found for s in sources])

    async def _afused(
        self, query: str, config: RunnableConfig, run_manager: AsyncCallbackManagerForRetrieverRun, *,
        k: int | None = None, filter: MetadataFilter | None = None,
    ) -> list[LCDocument]:
        k, where = self._check_k(k), self._where(filter)
        if is_blank(query):
            return []
        sources = self._sources(query, config, run_manager, where)
        result = (await self._flow(sources).arun([query], rerank=False))[0]
        docs = documents_by_id([s.found for s in sources])
        hits = await self._cfg.arerank(query, result.fused, lambda i: docs[i].page_content, top_k=k)  # type: ignore[index]
        return self._documents(hits, docs, [s.found for s in sources])

    @property
    def _cfg(self) -> FusionConfig:
        assert self.config is not None  # set by the validator
        return self.config

    def _flow(self, sources: Sequence[SourceRun]) -> QueryFlow:
        return QueryFlow(self._cfg, sources)  # type: ignore[arg-type]

    def _sources(self, query: str, config: RunnableConfig, run_manager: Any, where: MetadataFilter | None) -> list[SourceRun]:
        """This invocation's sources, each with a child config tagged ``retriever_1``, ... (as
        `EnsembleRetriever` tags them); the vector stores dense feedback moves as `VectorStoreSide`s."""
        fed = {i for i, _ in self._feedback_sides()}
        sources: list[SourceRun] = []
        for i, (name, retriever) in enumerate(zip(self.names, self.retrievers)):
            child = patch_config(config, callbacks=run_manager.get_child(tag=f"retriever_{i + 1}"))
            kind = VectorStoreSide if i in fed else SourceRun
            sources.append(kind(name, retriever, query, child, where, depth=self._cfg.depth, id_key=self.id_key,
                                candidates_kwarg=self.candidates_kwarg, sources=sources))
        return sources

    def _feedback_sides(self) -> list[tuple[int, VectorStoreRetriever]]:
        """The vector-store sources dense PRF searches again (with embeddings to embed the query),
        when the weight is not 0 and they are fused with another source."""
        if not self._cfg.dense_prf or len(self.retrievers) < 2:
            return []
        return [(i, r) for i, r in enumerate(self.retrievers)
                if isinstance(r, VectorStoreRetriever) and scored_vectorstore(r) and r.vectorstore.embeddings is not None]

    def _documents(self, hits: Sequence[RankedHit], docs: dict[str, LCDocument], lists: Sequence[Scored]) -> list[LCDocument]:
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

    def _check_k(self, k: int | None) -> int:
        k = self._cfg.top_k if k is None else positive_int("k", k)
        return min(k, self._top_n) if self._top_n else k

    def _where(self, where: MetadataFilter | None) -> MetadataFilter | None:
        if where is None:
            return self.filter
        metadata_predicate(where)  # a bad where dict fails before any source runs
        return where


def _default_names(retrievers: Sequence[Any]) -> list[str]:
    kinds = [
        "dense" if isinstance(r, VectorStoreRetriever)
        else "bm25" if isinstance(r, ContextualBM25Retriever)
        else r.get_name() if callable(getattr(r, "get_name", None)) else type(r).__name__
        for r in retrievers
    ]
    return unique_names(kinds)
