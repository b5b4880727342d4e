"""Windowed contextual embeddings on a LlamaIndex vector index: a node's windows as extra entries.

A node whose indexed text (context + chunk) is longer than the embedding model's window is
embedded whole (the core's `windows` and `_window_rows`): the node's own entry in the vector
store keeps the vector of its text as the model reads it (its first window), and each further
overlapping window, with the node's context, is an extra entry ``<node id> + WINDOW_MARK + n`` (a TextNode with the
node's metadata, ``window_of`` = the node id, ``window_model`` = the model that embedded it, and
its source relationship, so deleting the document deletes its windows too). `WindowedVectorRetriever` searches deep enough to cover the
extra entries and returns each node once, at its best window's score: the ranking
`HybridSearcher(windows=...)` gives. A model that reports no window (``max_tokens`` and
``count_tokens``, as `LocalMiniLMEmbedding` and `ContextualVoyageEmbedding` do through their
core embedder) is never windowed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import MetadataFilters

from contextual_retrieval_core.dense._window_rows import WINDOW_OF_KEY, max_pooling_only, plan_rows, row_owner, windowable
from contextual_retrieval_core.dense.windows import WindowConfig, fetch_sizes, first_per_owner
from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_llamaindex._compat import index_embed_model
from contextual_retrieval_llamaindex._convert import indexed_text

__all__ = ["add_windows", "windowed_vector_retriever", "index_nodes", "WindowedVectorRetriever", "WINDOW_OF_KEY",
           "WINDOW_MODEL_KEY"]


def add_windows(index: Any, nodes: Sequence[BaseNode], windows: WindowConfig) -> int:
    """Write the windows of `nodes` (already in `index`, a `VectorStoreIndex`) into its vector
    store; returns the number of extra entries. Idempotent: a node's entries are replaced, and a
    node whose rows the store holds already as they would be written (the same texts, metadata and
    document, the windows embedded by the same model: a script run again over a server's store)
    is left as it is: nothing is embedded."""
    checked = max_pooling_only(windows, "the LlamaIndex path")
    assert checked is not None  # a config in, a config out
    windows = checked
    model = index_embed_model(index)  # the model the index embedded the nodes (and embeds queries) with
    if model is None:
        raise InputTypeError(f"windows= needs a VectorStoreIndex (its embedding model embeds the windows), got {type(index).__name__}")
    chunks = [windowable(n.node_id, indexed_text(n), n.get_content(metadata_mode=MetadataMode.NONE)) for n in nodes]
    long = [(n, rows) for n, rows in zip(nodes, plan_rows(model, chunks, windows)) if len(rows) > 1]
    if not long:
        return 0
    extra = sum(len(rows) - 1 for _, rows in long)
    model_name = str(getattr(model, "model_name", type(model).__name__))
    written = _written_rows(index.vector_store, [r.id for _, rows in long for r in rows])
    long = [(n, rows) for n, rows in long if not _current(n, rows, written, model_name)]
    if not long:  # every window is in the store already, as this model embedded it (a script run again)
        return extra
    texts = [r.text for _, rows in long for r in rows]
    vectors = iter(model.get_text_embedding_batch(texts))
    entries: list[BaseNode] = []
    for node, rows in long:
        own = node.model_copy()
        own.embedding = list(next(vectors))
        entries.append(own)
        source = node.relationships.get(NodeRelationship.SOURCE)
        for row in rows[1:]:
            entries.append(TextNode(
                id_=row.id, text=row.text, embedding=list(next(vectors)),
                metadata={**node.metadata, WINDOW_OF_KEY: node.node_id, WINDOW_MODEL_KEY: model_name},
                excluded_embed_metadata_keys=list(node.excluded_embed_metadata_keys) + [WINDOW_OF_KEY, WINDOW_MODEL_KEY],
                excluded_llm_metadata_keys=list(node.excluded_llm_metadata_keys) + [WINDOW_OF_KEY, WINDOW_MODEL_KEY],
                relationships={NodeRelationship.SOURCE: source} if source is not None else {},
            ))
    index.vector_store.delete_nodes(node_ids=[e.node_id for e in entries])  # rewritten whole: idempotent
    index.insert_nodes(entries)  # embeddings set: nothing is embedded again
    return extra


#: metadata key of a window row: the embedding model that embedded it
WINDOW_MODEL_KEY = "window_model"


def _written_rows(store: Any, row_ids: Sequence[str]) -> dict[str, BaseNode]:
    """The rows `store` already holds among `row_ids`, by id (none for a store that cannot give
    its nodes back, such as `SimpleVectorStore`, or that fails to)."""
    try:
        return {n.node_id: n for n in store.get_nodes(node_ids=list(row_ids))}
    except Exception:  # noqa: BLE001 - NotImplementedError, an uninitialised collection, ...: write them all
        return {}


def _current(node: BaseNode, rows: Sequence[Any], written: dict[str, BaseNode], model_name: str) -> bool:
    """Whether the store holds `node`'s rows as this run would write them: its own row with the
    node's text, metadata and document, and each window row with its text, the node's metadata
    and document, embedded by `model_name`."""
    own = written.get(node.node_id)
    if own is None or own.get_content(metadata_mode=MetadataMode.NONE) != node.get_content(metadata_mode=MetadataMode.NONE):
        return False
    if own.metadata != node.metadata or own.ref_doc_id != node.ref_doc_id:
        return False
    meta = {**node.metadata, WINDOW_OF_KEY: node.node_id, WINDOW_MODEL_KEY: model_name}
    for row in rows[1:]:
        held = written.get(row.id)
        if held is None or held.get_content(metadata_mode=MetadataMode.NONE) != row.text or held.metadata != meta \
                or held.ref_doc_id != node.ref_doc_id:
            return False
    return True


def windowed_vector_retriever(index: Any, nodes: Sequence[BaseNode] | None, windows: WindowConfig, depth: int,
                              filters: MetadataFilters | None = None) -> WindowedVectorRetriever:
    """Write the windows of `nodes` (default: the index's docstore) into `index`; its vector side."""
    nodes = list(nodes) if nodes else index_nodes(index)
    return WindowedVectorRetriever(index, nodes, add_windows(index, nodes, windows), depth, filters)


def index_nodes(index: Any) -> list[BaseNode]:
    """The nodes of `index`'s docstore, without window entries; ValueError when it keeps none."""
    nodes = [n for n in index.docstore.docs.values() if WINDOW_OF_KEY not in n.metadata]
    if not nodes:
        raise InputError("windows= needs the nodes: the index's docstore holds none (a vector store that keeps "
                         "the text, such as Chroma); pass nodes=... from your pipeline")
    return nodes


class WindowedVectorRetriever(BaseRetriever):
    """The vector side over an index holding window entries (`add_windows`): each node once, at
    its best window's score, `depth` nodes (read from the top `2 * depth` rows, or, for a query
    whose top rows hold fewer nodes, from twice as many, up to every row it may need: the same
    nodes either way).

    Args:
        index: the `VectorStoreIndex`.
        nodes: the nodes the windows belong to (returned in place of their windows).
        extra: the number of window entries beyond one per node (`add_windows`' result).
        depth: nodes returned.
        filters: LlamaIndex `MetadataFilters` (window entries carry their node's metadata).

    Attributes:
        vector_retriever: the index's `VectorIndexRetriever` over the rows (nodes and windows).
        extra: the number of window entries beyond one per node.
        nodes_by_id: the nodes the windows belong to, by id.
    """

    def __init__(self, index: Any, nodes: Sequence[BaseNode], extra: int, depth: int,
                 filters: MetadataFilters | None = None, **kwargs: Any) -> None:
        self.vector_retriever = index.as_retriever(similarity_top_k=depth + extra, filters=filters)  # rows, not nodes
        sizes = fetch_sizes(depth, extra)  # deeper only for a query whose rows hold too few nodes
        self._steps = [index.as_retriever(similarity_top_k=n, filters=filters) for n in sizes[:-1]] + [self.vector_retriever]
        self._sizes = sizes
        self._nodes: dict[str, BaseNode] = {n.node_id: n for n in nodes}
        self.depth = depth
        self.extra = extra
        self.nodes_by_id = self._nodes
        super().__init__(**kwargs)

    def _collapse(self, results: list[NodeWithScore]) -> list[NodeWithScore]:
        """Each node once, at its best row's score (a window row stands for its node)."""
        rows = [(row_owner(r.node.node_id), r) for r in results]
        known = [(owner, r) for owner, r in rows if owner == r.node.node_id or owner in self._nodes]
        picked = first_per_owner(known, lambda row: row[0], self.depth)
        return [NodeWithScore(node=r.node if owner == r.node.node_id else self._nodes[owner], score=r.score)
                for owner, (_, r) in picked]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        for size, step in zip(self._sizes, self._steps):
            rows = step.retrieve(query_bundle)
            nodes = self._collapse(rows)
            if len(nodes) >= self.depth or len(rows) < size:
                break
        return nodes

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        for size, step in zip(self._sizes, self._steps):
            rows = await step.aretrieve(query_bundle)
            nodes = self._collapse(rows)
            if len(nodes) >= self.depth or len(rows) < size:
                break
        return nodes
