"""LlamaIndex's `MilvusVectorStore` holding both sides of the contextual hybrid, fused by `HybridRetriever`.

`ContextualMilvusVectorStore` is llama-index-vector-stores-milvus's `MilvusVectorStore` with a
dense field and Milvus's BM25 function (its `BM25BuiltInFunction`) in one collection. Fed by
`ContextualNodeParser`, the contextual text (context + chunk) is what is embedded and what BM25
scores. With ``analysis="ours"`` (the default) the BM25 function reads the core tokenizer's terms
of each node's text (a ``bm25_terms`` field filled on every write; a text-search query is
tokenized the same way), so Milvus scores the terms the in-process `ContextualBM25Retriever`
scores; ``analysis="milvus"``: Milvus's own analyzer over the text field.

`milvus_hybrid_retriever` fuses the store's two legs, each a `VectorIndexRetriever` on the server
(the default mode: the dense field; ``text_search``: the BM25 function), both under the same
`MetadataFilters` (Milvus expressions), with the core's weighted RRF at `depth` candidates a
side, dense feedback from the vectors read back from Milvus (`stored_vectors`), and reranking.
A server that does not answer is `MilvusServerUnavailable` naming its URI.

Example:
    >>> from llama_index.core import StorageContext, VectorStoreIndex
    >>> store = ContextualMilvusVectorStore(uri="http://127.0.0.1:19530", collection_name="chunks", dim=384)  # doctest: +SKIP
    >>> index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store),
    ...                          embed_model=LocalMiniLMEmbedding())  # doctest: +SKIP
    >>> milvus_hybrid_retriever(index, similarity_top_k=5).retrieve("how is the cache invalidated?")  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import MetadataFilters, VectorStoreQuery, VectorStoreQueryMode, VectorStoreQueryResult

from contextual_retrieval_core.chunking.tokenizer import Tokenizer
from contextual_retrieval_core.errors import InputError, MissingDependencyError
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.milvus import (
    ANALYSES,
    ANALYZER,
    BM25_INDEX_PARAMS,
    GRPC_OPTIONS,
    TERMS,
    milvus_call,
    milvus_terms,
)
from contextual_retrieval_llamaindex._convert import indexed_text
from contextual_retrieval_llamaindex.hybrid import HybridRetriever

try:
    from llama_index.vector_stores.milvus import MilvusVectorStore
    from llama_index.vector_stores.milvus.utils import BM25BuiltInFunction
except ImportError as exc:  # pragma: no cover - the milvus extra is not installed
    raise MissingDependencyError("contextual_retrieval_llamaindex.milvus needs llama-index-vector-stores-milvus: "
                                 "pip install 'contextual-retrieval-kit[milvus]'") from exc

__all__ = ["ContextualMilvusVectorStore", "milvus_hybrid_retriever"]

#: the modes that search the BM25 function by the query's text
_TEXT_MODES = (VectorStoreQueryMode.TEXT_SEARCH, VectorStoreQueryMode.SPARSE)


class ContextualMilvusVectorStore(MilvusVectorStore):
    """`MilvusVectorStore` with a dense field and a BM25 function over the contextual text.

    Args:
        uri: the Milvus server (``http://host:19530``), named in errors.
        collection_name, dim, ...: `MilvusVectorStore`'s own (``token``, ``overwrite``,
            ``upsert_mode``, ...). Set here: sparse search on, the BM25 function, the dense index
            (FLAT, inner product: exact, on unit vectors a cosine; pass ``index_config`` for
            another) and the BM25 index (with the in-process BM25's k1 and b for "ours").
        analysis: what the BM25 function reads: "ours" (default: the core tokenizer's terms, in a
            ``bm25_terms`` field) or "milvus" (Milvus's standard analyzer over the text field).
        timeout: seconds a search may take, pymilvus's retries of a server that does not answer
            included, before `MilvusServerUnavailable`.

    Its queries are `MilvusVectorStore`'s: the default mode searches the dense field, ``text_search``
    (or ``sparse``) the BM25 function; the ``bm25_terms`` field is filled on every `add` and never
    shows in a returned node. The async methods run the sync ones in a worker thread (no async
    client is opened). `stored_vectors` reads dense vectors back by node id (dense feedback).
    """

    analysis: str = "ours"
    timeout: float = 10.0
    _tokenizer: Tokenizer = PrivateAttr(default_factory=Tokenizer)
    _uri: str = PrivateAttr(default="")

    def __init__(self, uri: str = "http://127.0.0.1:19530", *, analysis: Literal["ours", "milvus"] = "ours",
                 tokenizer: Tokenizer | None = None, timeout: float = 10.0, **kwargs: Any) -> None:
        if analysis not in ANALYSES:
            raise InputError(f"analysis must be one of {ANALYSES}, got {analysis!r}")
        text_key = kwargs.get("text_key", "text")
        ours = analysis == "ours"
        kwargs.setdefault("index_config", {"index_type": "FLAT"})
        kwargs.setdefault("similarity_metric", "IP")
        kwargs.setdefault("grpc_options", dict(GRPC_OPTIONS))
        if ours:
            from pymilvus import DataType

            kwargs["scalar_field_names"] = [*(kwargs.get("scalar_field_names") or []), TERMS]
            kwargs["scalar_field_types"] = [*(kwargs.get("scalar_field_types") or []), DataType.VARCHAR]
            kwargs.setdefault("sparse_index_config", dict(BM25_INDEX_PARAMS))
        super().__init__(
            uri=uri, enable_sparse=True, use_async_client=False,
            sparse_embedding_function=BM25BuiltInFunction(input_field_names=TERMS if ours else text_key,
                                                          output_field_names="sparse_embedding", analyzer_params=dict(ANALYZER)),
            **kwargs,
        )
        self.analysis, self.timeout = analysis, float(timeout)
        self._tokenizer = tokenizer or Tokenizer()
        self._uri = uri

    @classmethod
    def class_name(cls) -> str:
        return "ContextualMilvusVectorStore"

    def _call(self, call: Any) -> Any:
        return milvus_call(self._uri, self.client, self.collection_name, call)

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        return self._call(lambda: MilvusVectorStore.add(self, self._with_terms(nodes), **add_kwargs))

    async def async_add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.add, nodes, **add_kwargs)

    def _with_terms(self, nodes: Sequence[BaseNode]) -> list[BaseNode]:
        """Copies of `nodes` carrying the terms of their indexed text (what they were embedded from,
        as `ContextualBM25Retriever` reads them) in ``bm25_terms`` ("ours"), kept out of their
        embedding and LLM text; the nodes themselves unchanged."""
        if self.analysis != "ours":
            return list(nodes)
        out = []
        for node in nodes:
            copy = node.model_copy()
            copy.metadata = {**node.metadata, TERMS: milvus_terms(self._tokenizer, indexed_text(node))}
            copy.excluded_embed_metadata_keys = [*node.excluded_embed_metadata_keys, TERMS]
            copy.excluded_llm_metadata_keys = [*node.excluded_llm_metadata_keys, TERMS]
            out.append(copy)
        return out

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        if query.mode in _TEXT_MODES and self.analysis == "ours" and query.query_str:
            terms = milvus_terms(self._tokenizer, query.query_str)
            if not terms.strip():
                return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
            query = dataclasses.replace(query, query_str=terms)
        if query.output_fields is None and not self.output_fields:  # the nodes, not the vectors and terms ("*" sends those too)
            query = dataclasses.replace(query, output_fields=["$meta", self.doc_id_field])
        result = self._call(lambda: MilvusVectorStore.query(self, query, **kwargs))
        for node in result.nodes or ():
            node.metadata.pop(TERMS, None)
            for keys in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
                while TERMS in keys:
                    keys.remove(TERMS)
        if result.similarities is not None:  # Milvus Lite reports a BM25 score as its negative
            result.similarities = [abs(float(s)) if query.mode in _TEXT_MODES else float(s) for s in result.similarities]
        return result

    def _default_search(self, query: VectorStoreQuery, string_expr: str, output_fields: list[str],
                        **kwargs: Any) -> tuple[list[BaseNode], list[float], list[str]]:
        """The dense field's top ``similarity_top_k`` for the query's vector (the store's own search,
        with a deadline: `timeout`)."""
        found = self.client.search(
            collection_name=self.collection_name, data=[query.query_embedding], anns_field=self.embedding_field,
            limit=query.similarity_top_k, filter=string_expr, output_fields=output_fields,
            search_params=kwargs.get("milvus_search_config", self.search_config),
            partition_names=kwargs.get("milvus_partition_names"), timeout=self.timeout,
        )
        return self._parse_from_milvus_results(found)

    def _sparse_search(self, query: VectorStoreQuery, string_expr: str, output_fields: list[str],
                       **kwargs: Any) -> tuple[list[BaseNode], list[float], list[str]]:
        """The BM25 function's top ``similarity_top_k`` for the query's text, every query term kept
        (the store's own search drops the lowest fifth of the query's weights: drop_ratio_search 0.2)."""
        found = self.client.search(
            collection_name=self.collection_name, data=[query.query_str], anns_field=self.sparse_embedding_field,
            limit=query.similarity_top_k, filter=string_expr, output_fields=output_fields,
            search_params={"metric_type": "BM25"}, partition_names=kwargs.get("milvus_partition_names"), timeout=self.timeout,
        )
        return self._parse_from_milvus_results(found)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return await asyncio.to_thread(self.query, query, **kwargs)

    def stored_vectors(self, ids: Sequence[str]) -> dict[str, Any]:
        """{node id: stored dense vector} of the `ids` the collection holds (`StoredVectors`)."""
        if not ids:
            return {}
        rows = self._call(lambda: self.client.get(self.collection_name, ids=list(ids), output_fields=["id", self.embedding_field],
                                                  timeout=self.timeout))
        return {str(r["id"]): np.asarray(r[self.embedding_field], dtype=np.float32) for r in rows}


def milvus_hybrid_retriever(index: Any, *, depth: int | None = None, filters: MetadataFilters | None = None,
                            config: FusionConfig | None = None, **kwargs: Any) -> HybridRetriever:
    """`HybridRetriever` over the two legs of `index` (a `VectorStoreIndex` on a
    `ContextualMilvusVectorStore`): "dense" (its default mode) and "bm25" (``text_search``), each
    returning `depth` nodes (default: `config`'s, 150) under the same `filters`; other keywords
    are `HybridRetriever`'s (``similarity_top_k``, ``weights``, ``reranker``, ...)."""
    depth = FusionConfig.merged(config, depth=depth).depth
    dense = index.as_retriever(similarity_top_k=depth, filters=filters)
    bm25 = index.as_retriever(similarity_top_k=depth, filters=filters, vector_store_query_mode=VectorStoreQueryMode.TEXT_SEARCH)
    return HybridRetriever({"dense": dense, "bm25": bm25}, config=config, depth=depth, **kwargs)
