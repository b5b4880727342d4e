"""`HybridRetriever`: any LlamaIndex retrievers fused with the core's weighted RRF, then reranked."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters

from contextual_retrieval_core.checks import is_blank
from contextual_retrieval_core.dense._window_rows import WINDOW_OF_KEY, requested_windows
from contextual_retrieval_core.dense.windows import WindowConfig
from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.rerank.base import Reranker
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.flow import QueryFlow
from contextual_retrieval_core.search.ranked import RankedHit, fallback_hits, unique_names
from contextual_retrieval_llamaindex._convert import indexed_text, with_result
from contextual_retrieval_llamaindex._feedback import VectorSide, vector_side
from contextual_retrieval_llamaindex._pgvector import on_this_loop, pgvector_store
from contextual_retrieval_llamaindex._sources import bound_sources, first_nodes
from contextual_retrieval_llamaindex.rerank import ContextualRerank, rerank_events

__all__ = ["HybridRetriever", "SETTING_NAMES"]

#: LlamaIndex's names for `FusionConfig` fields (the result count is `similarity_top_k`, as on
#: LlamaIndex's own retrievers); every other setting keeps its `FusionConfig` name
SETTING_NAMES = {"similarity_top_k": "top_k"}


class HybridRetriever(BaseRetriever):
    """Fuses the rankings of any LlamaIndex retrievers with weighted RRF (or relative-score fusion).

    The design card's ensemble retriever: by default a vector index retriever over contextual
    embeddings and a `ContextualBM25Retriever` (`from_defaults`), each asked for `depth`
    results, fused with the core's `fuse_sources` (weights honoured in both modes, unlike
    LlamaIndex's `QueryFusionRetriever`, whose RRF ignores them), optionally reranked, cut to
    `similarity_top_k`. Results are deduplicated by node id. Each returned node is a copy that
    carries, in its metadata (excluded from embedding and LLM text), ``fused_score``, ``ranks``
    (1-based rank per retriever name, None where one missed it) and ``rerank_score`` when
    reranked (``rerank_error`` when a failing reranker was skipped); the NodeWithScore's score is
    the final one. These keys and the default names ("dense", "bm25") are the core's, shared with
    LangChain's `ContextualEnsembleRetriever`. A blank query returns no nodes. Async queries its
    retrievers concurrently. `retrieve` may run in many threads at once on one retriever (it
    keeps no state between queries) when its retrievers and postprocessor allow it, as
    `VectorIndexRetriever` and `ContextualBM25Retriever` do.

    The fusion settings are the core's `FusionConfig` (validated there, once): pass one as
    `config`, or the settings themselves; a setting passed here (not None) overrides `config`'s.

    Args:
        retrievers: the retrievers, as a list (named "dense" for a vector index retriever,
            "bm25" for `ContextualBM25Retriever`, else the class name) or a dict name -> retriever.
        weights: one per retriever (default: (0.5, 0.5) for two, equal otherwise).
        config: a core `FusionConfig` (its `top_k` is `similarity_top_k` here).
        mode: "rrf" (default) or "relative_score".
        rrf_k: the RRF constant (default 0: the cookbook's ``w / rank``; 60: classic RRF).
        depth: results fused from each retriever (default 150, as the cookbook). Your
            retrievers are not changed: build them with their own top-k at least this large
            (`from_defaults` does).
        similarity_top_k: results returned (default 20).
        reranker: a core `Reranker` (Cohere, Voyage, cross-encoder) or `ContextualRerank` (its
            reranker and `top_n` are used), or any other LlamaIndex node postprocessor, applied to
            the fused candidates.
        rerank_depth: fused candidates the reranker sees (default: `depth`).
        on_rerank_error: "raise" (default) or "fused": when the reranker fails, return the fused
            order, each node's metadata carrying ``rerank_error`` (the error's type and message).
        dense_prf: dense pseudo-relevance feedback weight (default 0.5, the core's; 0: off). When
            a vector index retriever (or `WindowedVectorRetriever`) is fused with another
            retriever, the query is embedded once, the first fused ranking's top `prf_top` nodes'
            stored vectors are read from its vector store, and it is searched again from the
            query vector moved toward them (`feedback`): the ranking `HybridSearcher` gives. A
            store that searches by text (no query embedding) is not fed back.
            ``dense_prf=None`` is the same as not passing it (on, at 0.5); 0 turns it off.
        prf_top: how many fused nodes feed back (default 3).

    Example:
        >>> from llama_index.core.schema import TextNode
        >>> from contextual_retrieval_llamaindex import ContextualBM25Retriever
        >>> nodes = [TextNode(text="Revenue grew 3%.", id_="a"), TextNode(text="Revenue fell.", id_="b")]
        >>> hybrid = HybridRetriever({"bm25": ContextualBM25Retriever(nodes),
        ...                           "bm25-again": ContextualBM25Retriever(nodes)}, similarity_top_k=1)
        >>> [(r.node.node_id, r.node.metadata["ranks"]) for r in hybrid.retrieve("revenue grew")]
        [('a', {'bm25': 1, 'bm25-again': 1})]
    """

    def __init__(
        self,
        retrievers: Sequence[BaseRetriever] | Mapping[str, BaseRetriever],
        weights: Sequence[float] | None = None,
        *,
        config: FusionConfig | None = None,
        reranker: Reranker | BaseNodePostprocessor | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **settings: Any,
    ) -> None:
        named = dict(retrievers) if isinstance(retrievers, Mapping) else _name(list(retrievers))
        if not named:
            raise InputError("pass at least one retriever")
        for name, r in named.items():
            if not isinstance(r, BaseRetriever):
                raise InputTypeError(f"retriever {name!r} is a {type(r).__name__}, not a LlamaIndex BaseRetriever")
        self._top_n: int | None = None
        self._postprocessor: BaseNodePostprocessor | None = None
        if isinstance(reranker, ContextualRerank):  # its core reranker, through the core's rerank_hits
            self._top_n, reranker = reranker.top_n, reranker.reranker
        elif isinstance(reranker, BaseNodePostprocessor):  # any other postprocessor runs as it is
            self._postprocessor, reranker = reranker, None
        self.config = FusionConfig.from_settings(
            config, {**settings, "weights": weights, "reranker": reranker}, names=SETTING_NAMES, owner="HybridRetriever"
        )
        self.weights = list(self.config.weights_for(len(named), per="retriever"))  # the count checked here, up front
        self.retrievers: dict[str, BaseRetriever] = named
        # dense PRF: the vector sides, when fused with another retriever and the weight is not 0
        sides = {name: vector_side(r) for name, r in named.items()} if self.config.feeds_back(len(named)) else {}
        self._feedback: dict[str, VectorSide] = {name: side for name, side in sides.items() if side is not None}
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    # the settings, read from `config` (one place)
    mode = property(lambda self: self.config.mode)
    rrf_k = property(lambda self: self.config.rrf_k)
    depth = property(lambda self: self.config.depth)
    similarity_top_k = property(lambda self: self.config.top_k)
    rerank_depth = property(lambda self: self.config.effective_rerank_depth)
    reranker = property(lambda self: self._postprocessor or self.config.reranker)
    dense_prf = property(lambda self: self.config.dense_prf)
    prf_top = property(lambda self: self.config.prf_top)
    on_rerank_error = property(lambda self: self.config.on_rerank_error)

    @classmethod
    def from_defaults(
        cls,
        index: Any,
        *,
        nodes: Sequence[BaseNode] | None = None,
        bm25: BaseRetriever | None = None,
        depth: int | None = None,
        config: FusionConfig | None = None,
        filters: MetadataFilters | None = None,
        windows: WindowConfig | bool | None = None,
        **kwargs: Any,
    ) -> HybridRetriever:
        """Vector retriever of `index` (a `VectorStoreIndex`, named "dense") + contextual BM25
        ("bm25"), each returning `depth` results (default: `config`'s, 150).

        BM25 indexes `nodes` (default: the index's docstore; with a vector store that keeps text
        only, such as Chroma, pass the nodes from your pipeline) unless `bm25` is given.
        `filters` (LlamaIndex `MetadataFilters`, as `index.as_retriever(filters=...)` takes them)
        apply to both sides: the vector store filters its own search, and BM25 searches under the
        same filters as a mask, so each side returns its best `depth` matching nodes. A `bm25`
        given with `filters` must be a `ContextualBM25Retriever` holding the same filters.
        `windows`: nodes longer than the embedding model's window are embedded whole: the windows
        past the window are written into the index's vector store as extra entries pointing at
        the node (embedded each time this is called: give the embedding model a cache, e.g.
        `LocalMiniLMEmbedding(cache_path=...)`), and the vector side returns each node once at its
        best entry's score (`WindowedVectorRetriever`). None (default): so whenever the nodes are
        known (`nodes`, or the index's docstore); True or a core `WindowConfig`: so, and
        ValueError without the nodes; False: each node as the index embedded it, truncated at
        the window. Other keyword arguments are the constructor's.
        """
        from contextual_retrieval_llamaindex.bm25 import ContextualBM25Retriever

        depth = FusionConfig.merged(config, depth=depth).depth  # validated before anything is built
        if filters is not None and not isinstance(filters, MetadataFilters):
            raise InputTypeError(
                f"filters must be llama_index MetadataFilters, got {type(filters).__name__}; e.g. "
                "MetadataFilters(filters=[MetadataFilter(key='team', value='web')])"
            )
        if filters is not None and bm25 is not None and not (isinstance(bm25, ContextualBM25Retriever) and bm25.filters == filters):
            raise InputError(
                "filters= was given with a bm25 retriever that does not hold them: build it with "
                "ContextualBM25Retriever(nodes, filters=filters), or leave bm25=None and from_defaults builds it"
            )
        if windows is None:  # the default: windows where the nodes are known
            held = getattr(getattr(index, "docstore", None), "docs", {})
            known = bool(nodes) or any(WINDOW_OF_KEY not in n.metadata for n in held.values())
            windows = WindowConfig() if known else False
        windows = requested_windows(windows, None)
        if windows is not None and not nodes:
            from contextual_retrieval_llamaindex.windows import index_nodes

            nodes = index_nodes(index)  # the docstore's nodes, not their windows
        if bm25 is None:
            bm25 = ContextualBM25Retriever.from_defaults(
                nodes=nodes, index=None if nodes else index, similarity_top_k=depth, filters=filters
            )
        vector = index.as_retriever(similarity_top_k=depth, filters=filters)
        if windows is not None:
            from contextual_retrieval_llamaindex.windows import windowed_vector_retriever

            vector = windowed_vector_retriever(index, nodes, windows, depth, filters)
        return cls({"dense": vector, "bm25": bm25}, config=config, depth=depth, **kwargs)

    # -- retrieval ----------------------------------------------------------------------------------

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if _blank(query_bundle):
            return []
        sources = bound_sources(self.retrievers, self._feedback, query_bundle)
        # the flow fuses (weights resolved there); the rerank step runs here, not as the flow's last
        # step, because LlamaIndex's rerank events and postprocessors need the fused pool first
        fused = QueryFlow(self.config, sources).run([query_bundle.query_str], rerank=False)[0].fused
        nodes = first_nodes(sources)
        if self._postprocessor is not None:
            try:
                reranked = self._postprocessor.postprocess_nodes(self._pool(fused, nodes), query_bundle)
            except Exception as exc:
                return self._postprocessor_failed(exc, fused, nodes)
            return self._postprocess(fused, nodes, reranked)
        with self._rerank_events(query_bundle, fused, nodes) as out:
            hits = self.config.rerank(query_bundle.query_str, fused, lambda i: indexed_text(nodes[i]), top_k=self._k())  # type: ignore[index]
            out.extend(with_result(nodes[h.id], h) for h in hits)  # type: ignore[index]
        return out

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if _blank(query_bundle):
            return []
        stores = [s for s in map(pgvector_store, self.retrievers.values()) if s is not None]
        for store in stores:  # their async connections: this event loop's (one asyncio.run a query works)
            await on_this_loop(store)
        sources = bound_sources(self.retrievers, self._feedback, query_bundle)
        try:
            fused = (await QueryFlow(self.config, sources).arun([query_bundle.query_str], rerank=False))[0].fused
        finally:
            for store in stores:  # a store that connected during this query
                await on_this_loop(store)
        nodes = first_nodes(sources)
        if self._postprocessor is not None:
            try:
                reranked = await self._postprocessor.apostprocess_nodes(self._pool(fused, nodes), query_bundle)
            except Exception as exc:
                return self._postprocessor_failed(exc, fused, nodes)
            return self._postprocess(fused, nodes, reranked)
        with self._rerank_events(query_bundle, fused, nodes) as out:
            hits = await self.config.arerank(query_bundle.query_str, fused, lambda i: indexed_text(nodes[i]), top_k=self._k())  # type: ignore[index]
            out.extend(with_result(nodes[h.id], h) for h in hits)  # type: ignore[index]
        return out

    def _rerank_events(
        self, query_bundle: QueryBundle, fused: list[RankedHit], nodes: dict[str, BaseNode]
    ) -> AbstractContextManager[list[NodeWithScore]]:
        """LlamaIndex's rerank events around the core reranker (none without a reranker)."""
        reranker = self.config.reranker
        if reranker is None:
            return nullcontext([])
        return rerank_events(
            query_bundle, self._pool(fused, nodes), top_n=self._k(), model_name=str(reranker.model_name or ""),
            callback_manager=self.callback_manager,
        )

    def _postprocessor_failed(self, exc: Exception, fused: list[RankedHit], nodes: dict[str, BaseNode]) -> list[NodeWithScore]:
        if self.config.on_rerank_error != "fused":
            raise exc
        return [with_result(nodes[h.id], h) for h in fallback_hits(exc, fused, self.similarity_top_k)]  # type: ignore[index]

    def _k(self) -> int:
        return min(self.similarity_top_k, self._top_n) if self._top_n else self.similarity_top_k

    def _pool(self, fused: list[RankedHit], nodes: dict[str, BaseNode]) -> list[NodeWithScore]:
        # copies: a postprocessor may rewrite what it is given, never the retrievers' own nodes
        return [with_result(nodes[h.id], h) for h in fused[: self.rerank_depth]]  # type: ignore[index]

    def _postprocess(
        self, fused: list[RankedHit], nodes: dict[str, BaseNode], reranked: list[NodeWithScore]
    ) -> list[NodeWithScore]:
        by_id = {h.id: h for h in fused}
        unranked = {name: None for name in self.retrievers}
        out = []
        for r in reranked[: self.similarity_top_k]:
            hit = by_id.get(r.node.node_id) or RankedHit(r.node.node_id, 0.0, dict(unranked), 0.0)  # added by it
            score = float(r.score) if r.score is not None else hit.score
            out.append(with_result(r.node, hit._replace(score=score)))  # any postprocessor: not labelled a rerank
        return out


def _blank(query_bundle: QueryBundle) -> bool:
    """A blank query string with no embedding of its own: it matches nothing."""
    return is_blank(query_bundle.query_str) and query_bundle.embedding is None


def _name(retrievers: list[BaseRetriever]) -> dict[str, BaseRetriever]:
    from llama_index.core.indices.vector_store.retrievers import VectorIndexRetriever

    from contextual_retrieval_llamaindex.bm25 import ContextualBM25Retriever

    kinds = [
        "dense" if isinstance(r, VectorIndexRetriever) else "bm25" if isinstance(r, ContextualBM25Retriever) else type(r).__name__
        for r in retrievers
    ]
    return dict(zip(unique_names(kinds), retrievers))
