"""langchain-milvus's `Milvus` holding both sides of the contextual hybrid, fused by `ContextualEnsembleRetriever`.

`ContextualMilvus` is langchain-milvus's `Milvus` with a dense field and Milvus's BM25 function
(`BM25BuiltInFunction`) in one collection. Fed by `ContextualDocumentTransformer`, the contextual
text (context + chunk) is what is embedded and what BM25 scores. With ``analysis="ours"`` (the
default) the BM25 function reads the core tokenizer's terms of each text (a ``bm25_terms`` field
filled on every write; queries are tokenized the same way), so Milvus scores the terms the
in-process `ContextualBM25Retriever` scores; ``analysis="milvus"``: Milvus's own analyzer over
the text field, as a stock ``BM25BuiltInFunction()``.

`milvus_retrievers` gives the two legs as vector-store retrievers (`MilvusLeg`: the dense field
searched by query vector, the BM25 function by query text; both on the server, under the
ensemble's metadata filter as a Milvus expression), so `ContextualEnsembleRetriever` fuses them
with the core's weighted RRF at `depth` candidates a side, moves the dense leg by dense feedback
from the vectors read back from Milvus, and reranks; `milvus_ensemble` builds that retriever.
A server that does not answer is `MilvusServerUnavailable` naming its URI.

Example:
    >>> from contextual_retrieval_langchain import LocalMiniLMEmbeddings
    >>> store = ContextualMilvus(LocalMiniLMEmbeddings(), connection_args={"uri": "http://127.0.0.1:19530"},
    ...                          collection_name="chunks")  # doctest: +SKIP
    >>> store.add_documents(contextual_docs, ids=[d.id for d in contextual_docs])  # doctest: +SKIP
    >>> retriever = milvus_ensemble(store, k=5)  # doctest: +SKIP
    >>> retriever.invoke("how is the cache invalidated?")  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever

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
    milvus_filter,
    milvus_terms,
)
from contextual_retrieval_langchain.ensemble import ContextualEnsembleRetriever

try:
    from langchain_milvus import BM25BuiltInFunction, Milvus
except ImportError as exc:  # pragma: no cover - the milvus extra is not installed
    raise MissingDependencyError("contextual_retrieval_langchain.milvus needs langchain-milvus: "
                                 "pip install 'contextual-retrieval-kit[milvus]'") from exc

__all__ = ["ContextualMilvus", "MilvusLeg", "milvus_ensemble", "milvus_retrievers"]

#: the collection's vector fields
Field = Literal["dense", "sparse"]
DENSE: Field = "dense"
SPARSE: Field = "sparse"


class ContextualMilvus(Milvus):
    """langchain-milvus's `Milvus` with a dense field and a BM25 function in one collection.

    Args:
        embedding_function: the LangChain `Embeddings` of the dense field.
        analysis: what the BM25 function reads: "ours" (default: the core tokenizer's terms of
            each text, in a ``bm25_terms`` field filled on every write, scored with the in-process
            BM25's k1 and b) or "milvus" (Milvus's standard analyzer over the text field).
        tokenizer: the core tokenizer of "ours" (default `Tokenizer()`).
        **kwargs: `Milvus`'s own (``connection_args={"uri": ...}``, ``collection_name``,
            ``drop_old``, ...). The fields, the functions and the indexes are set here: the dense
            field "dense" (exact inner product: FLAT, IP; pass ``index_params`` for another) and
            the BM25 output "sparse"; metadata in dynamic fields.

    Adding, searching and deleting are `Milvus`'s own; its searches (``similarity_search``...)
    are its hybrid search with Milvus's ranker. `milvus_retrievers` searches each leg on its own,
    for the core's fusion.
    """

    def __init__(
        self, embedding_function: Embeddings, *, analysis: Literal["ours", "milvus"] = "ours", tokenizer: Tokenizer | None = None,
        **kwargs: Any,
    ) -> None:
        if analysis not in ANALYSES:
            raise InputError(f"analysis must be one of {ANALYSES}, got {analysis!r}")
        self.analysis = analysis
        self.tokenizer = tokenizer or Tokenizer()
        text_field = kwargs.get("text_field", "text")
        kwargs["connection_args"] = {"grpc_options": dict(GRPC_OPTIONS), **(kwargs.get("connection_args") or {})}
        kwargs.setdefault("index_params", [{"index_type": "FLAT", "metric_type": "IP", "params": {}},
                                           {"index_type": "SPARSE_INVERTED_INDEX", "metric_type": "BM25",
                                            "params": dict(BM25_INDEX_PARAMS) if analysis == "ours" else {}}])
        # outside an event loop `Milvus` cannot open its async client and logs a warning saying so;
        # the legs' async searches run the sync client in a worker thread and never need it
        log = logging.getLogger("langchain_milvus.vectorstores.milvus")
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            super().__init__(
                embedding_function,
                builtin_function=BM25BuiltInFunction(input_field_names=TERMS if analysis == "ours" else text_field,
                                                     output_field_names=SPARSE, analyzer_params=dict(ANALYZER)),
                vector_field=[DENSE, SPARSE], enable_dynamic_field=True, **kwargs,
            )
        finally:
            log.setLevel(level)

    @property
    def uri(self) -> str:
        """The server's URI (as given in ``connection_args``)."""
        return str(self._connection_args.get("uri", ""))

    def query_text(self, query: str) -> str:
        """What the BM25 leg sends for `query`: its terms ("ours") or the text itself."""
        return milvus_terms(self.tokenizer, query) if self.analysis == "ours" else query

    # -- the terms field: declared with the collection, filled on every write, never shown --------

    def _add_metadata_fields(self, schema: Any, metadatas: list[dict] | None = None) -> None:
        super()._add_metadata_fields(schema, metadatas)
        if self.analysis == "ours":
            from pymilvus import DataType

            schema.add_field(field_name=TERMS, datatype=DataType.VARCHAR, max_length=65_535,
                             enable_analyzer=True, analyzer_params=dict(ANALYZER))

    def _prepare_insert_list(self, texts: list[str], *args: Any, **kwargs: Any) -> list[dict]:
        rows = super()._prepare_insert_list(texts, *args, **kwargs)
        if self.analysis == "ours":
            for row, text in zip(rows, texts):
                row[TERMS] = milvus_terms(self.tokenizer, text)
        return rows

    @property
    def primary_field(self) -> str:
        """The collection's primary key field (the Documents' ids)."""
        return self._primary_field

    def document_of(self, entity: Mapping[str, Any], pk: Any) -> Document:
        """The Document of a search hit's `entity` (fields and dynamic metadata) with id `pk`."""
        return self._parse_document({**entity, self._primary_field: pk})

    def _parse_document(self, data: dict) -> Document:
        data.pop(TERMS, None)
        pk = data.get(self._primary_field)
        doc = super()._parse_document(data)
        if pk is not None and doc.id is None:
            doc.id = str(pk)
        return doc


class MilvusLeg(VectorStore):
    """One leg of a `ContextualMilvus` as a LangChain vector store: ``"dense"`` (the dense field,
    searched by the query's vector; its stored vectors read back for dense feedback) or
    ``"sparse"`` (the BM25 function, searched by the query's text). A ``filter`` search kwarg is a
    where dict (`search/_where.py`'s language) sent to the server as a Milvus expression on the
    metadata. Writes go to the store's own ``add_texts``. `timeout`: seconds a search may take,
    pymilvus's retries of a server that does not answer included, before `MilvusServerUnavailable`."""

    def __init__(self, store: ContextualMilvus, field: Field = DENSE, *, timeout: float = 10.0) -> None:
        if field not in (DENSE, SPARSE):
            raise InputError(f"field must be 'dense' or 'sparse', got {field!r}")
        self.store, self.field, self.timeout = store, field, float(timeout)

    @property
    def embeddings(self) -> Embeddings | None:
        """The dense field's embeddings (None for the BM25 leg: nothing to embed or feed back)."""
        return self.store.embeddings if self.field == DENSE else None  # type: ignore[return-value]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return float  # inner products and BM25 scores, higher is better; fusion reads ranks

    def _search(self, data: Any, k: int, filter: Mapping[str, Any] | None) -> list[tuple[Document, float]]:
        store = self.store
        # the Documents' fields and metadata, not the vectors and terms ("*" would send those too)
        outputs = [f for f in store.fields if f not in (DENSE, SPARSE, TERMS)] + (["$meta"] if store.enable_dynamic_field else [])
        params = {"metric_type": "IP"} if self.field == DENSE else {"metric_type": "BM25"}
        found = milvus_call(store.uri, store.client, store.collection_name, lambda: store.client.search(
            store.collection_name, data=[data], anns_field=self.field, limit=k, filter=milvus_filter(filter, "$meta"),
            output_fields=outputs, search_params=params, timeout=self.timeout,
        ))
        return [(store.document_of(hit["entity"], hit[store.primary_field]), abs(float(hit["distance"])))
                for hit in (found[0] if found else [])]

    def similarity_search_with_score(self, query: str, k: int = 4, filter: Mapping[str, Any] | None = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        if self.field == DENSE:
            embeddings: Any = self.store.embeddings
            return self.similarity_search_with_score_by_vector(embeddings.embed_query(query), k, filter)
        text = self.store.query_text(query)
        return self._search(text, k, filter) if text.strip() else []

    def similarity_search_with_score_by_vector(self, embedding: Sequence[float], k: int = 4,
                                               filter: Mapping[str, Any] | None = None, **kwargs: Any) -> list[tuple[Document, float]]:
        if self.field != DENSE:
            raise InputError("the BM25 leg searches by text, not by vector")
        return self._search([float(x) for x in embedding], k, filter)

    def scored_by_vector(self, vector: Sequence[float], k: int = 4, **kwargs: Any) -> list[tuple[Document, float | None]]:
        """(Document, inner product) of the dense leg's top `k` for `vector` (`ScoresByVector`)."""
        return list(self.similarity_search_with_score_by_vector(vector, k, **kwargs))

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [d for d, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def stored_vectors(self, ids: Sequence[str]) -> dict[str, Any]:
        """{id: stored dense vector} of the `ids` the collection holds (`StoredVectors`, for dense feedback)."""
        if self.field != DENSE or not ids:
            return {}
        store = self.store
        rows = milvus_call(store.uri, store.client, store.collection_name, lambda: store.client.get(
            store.collection_name, ids=list(ids), output_fields=[store.primary_field, DENSE], timeout=self.timeout))
        return {str(r[store.primary_field]): np.asarray(r[DENSE], dtype=np.float32) for r in rows}

    def add_texts(self, texts: Iterable[str], metadatas: list[dict] | None = None, **kwargs: Any) -> list[str]:
        return self.store.add_texts(texts, metadatas, **kwargs)

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: list[dict] | None = None, **kwargs: Any) -> MilvusLeg:
        raise NotImplementedError("build a ContextualMilvus (ContextualMilvus.from_documents) and take its legs: "
                                  "milvus_retrievers(store)")


def milvus_retrievers(store: ContextualMilvus, depth: int | None = None, *, timeout: float = 10.0) -> list[VectorStoreRetriever]:
    """The store's two legs as retrievers, (dense, BM25), each returning `depth` Documents
    (default: `FusionConfig`'s, 150): the sources of `ContextualEnsembleRetriever`."""
    depth = FusionConfig.merged(None, depth=depth).depth
    return [MilvusLeg(store, DENSE, timeout=timeout).as_retriever(search_kwargs={"k": depth}),
            MilvusLeg(store, SPARSE, timeout=timeout).as_retriever(search_kwargs={"k": depth})]


def milvus_ensemble(store: ContextualMilvus, *, timeout: float = 10.0, **kwargs: Any) -> ContextualEnsembleRetriever:
    """`ContextualEnsembleRetriever` over the store's two legs, named "dense" and "bm25" (its
    fields as keywords: ``weights``, ``k``, ``depth``, ``reranker``, ``filter``, ``config``, ...;
    `timeout`: `MilvusLeg`'s)."""
    config = FusionConfig.merged(kwargs.get("config"), depth=kwargs.get("depth"))
    return ContextualEnsembleRetriever(retrievers=milvus_retrievers(store, config.depth, timeout=timeout),
                                       names=["dense", "bm25"], **kwargs)
