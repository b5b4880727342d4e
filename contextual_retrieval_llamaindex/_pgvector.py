"""LlamaIndex's `PGVectorStore` (llama-index-vector-stores-postgres) under `HybridRetriever`.

- `stored_vectors` / `astored_vectors`: the stored vectors of the fused top nodes, for dense
  feedback, in one SELECT on the store's table (a node's own row by id; its window rows, when
  the index has any, by the node id their row id starts with); the store's ``get_nodes`` where a
  query hook changes its queries;
- `server_address`: the server's ``host:port`` (from the store's connection URL; never its
  password), which `VectorServerUnavailable` names;
- `search_again`: dense feedback's second search, the store's own (nearest rows by cosine
  distance, similarity 1 - distance; a windowed index's rows collapsed to their nodes as
  `WindowedVectorRetriever` does) as one SELECT of ids and distances, and a second of the text
  and metadata of the nodes the query has not seen yet, when there are any (the store's own
  search makes a node from the metadata of every row it returns);
- `on_this_loop`: the store's async engine bound to the running event loop (the core's
  `LoopBinding`): its connections are closed as an ``asyncio.run`` loop shuts down, so one
  ``asyncio.run`` per query works; a use from a second loop while the first is still open raises
  `OtherEventLoopError`, naming the fix.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.indices.vector_store.retrievers import VectorIndexRetriever
from llama_index.core.schema import BaseNode, NodeWithScore
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from contextual_retrieval_core.dense import server_errors
from contextual_retrieval_core.dense._window_rows import WINDOW_OF_KEY, collapse_rows, row_owner, row_window
from contextual_retrieval_core.dense.event_loops import LoopBinding
from contextual_retrieval_core.dense.windows import WINDOW_MARK
from contextual_retrieval_llamaindex._compat import (
    pgvector_async_engine,
    pgvector_table,
    plain_vector_query,
    vector_retriever_parts,
)

__all__ = ["is_pgvector_store", "pgvector_store", "stored_vectors", "astored_vectors", "server_address", "on_this_loop",
           "LeanSearch", "lean_search"]

#: one binding per async engine (a store's pool), for as long as the engine lives
_BINDINGS: weakref.WeakKeyDictionary[Any, LoopBinding] = weakref.WeakKeyDictionary()


def is_pgvector_store(store: Any) -> bool:
    """Whether `store` is llama-index's `PGVectorStore` (the pgvector extra)."""
    try:
        from llama_index.vector_stores.postgres import PGVectorStore
    except ImportError:  # pragma: no cover - the pgvector extra is not installed
        return False
    return isinstance(store, PGVectorStore)


def pgvector_store(retriever: BaseRetriever) -> Any | None:
    """The `PGVectorStore` a vector retriever (or a `WindowedVectorRetriever` around one)
    searches; None for any other retriever or store."""
    from contextual_retrieval_llamaindex.windows import WindowedVectorRetriever

    inner = retriever.vector_retriever if isinstance(retriever, WindowedVectorRetriever) else retriever
    if not isinstance(inner, VectorIndexRetriever):
        return None
    store, _ = vector_retriever_parts(inner)
    return store if is_pgvector_store(store) else None


def _window_filter(node_ids: Sequence[str]) -> MetadataFilters:
    return MetadataFilters(filters=[MetadataFilter(key=WINDOW_OF_KEY, value=list(node_ids), operator=FilterOperator.IN)])


def _vectors_statement(table: Any, node_ids: Sequence[str], windows: bool) -> Any:
    """SELECT node_id, embedding of the `node_ids`' rows (and their window rows, with `windows`)."""
    from sqlalchemy import func, or_, select

    ids = list(node_ids)
    # a window row's id is its node's id, WINDOW_MARK and its number (`row_id`): cutting the id
    # costs the scan less than reading each row's `window_of` from its metadata
    where = table.node_id.in_(ids)
    if windows:
        where = or_(where, func.split_part(table.node_id, WINDOW_MARK, 1).in_(ids))
    return select(table.node_id, table.embedding).where(where)


def stored_vectors(store: Any, node_ids: Sequence[str], windows: bool) -> dict[str, Any]:
    """{row id: vector} of the `node_ids`' rows in `store` (their window rows too with `windows`):
    one SELECT on its table (or, where its queries are changed by a hook, its ``get_nodes``)."""
    if not node_ids:
        return {}
    table = pgvector_table(store)
    if table is not None and store.client is not None:
        with store.client.connect() as connection:
            return {row: vector for row, vector in connection.execute(_vectors_statement(table, node_ids, windows)).all()}
    nodes = store.get_nodes(node_ids=list(node_ids))
    if windows:
        nodes += store.get_nodes(filters=_window_filter(node_ids))
    return {n.node_id: n.embedding for n in nodes if n.embedding is not None}


async def astored_vectors(store: Any, node_ids: Sequence[str], windows: bool) -> dict[str, Any]:
    """`stored_vectors` through the store's async engine."""
    if not node_ids:
        return {}
    table, engine = pgvector_table(store), pgvector_async_engine(store)
    if table is not None and engine is not None:
        async with engine.connect() as connection:
            found = (await connection.execute(_vectors_statement(table, node_ids, windows))).all()
        return {row: vector for row, vector in found}
    nodes = await store.aget_nodes(node_ids=list(node_ids))
    if windows:
        nodes += await store.aget_nodes(filters=_window_filter(node_ids))
    return {n.node_id: n.embedding for n in nodes if n.embedding is not None}


def server_address(store: Any) -> str | None:
    """``host:port`` of the server `store` connects to (its engine's URL, else its connection
    string); never the password."""
    engine = store.client  # the sync engine, once the store has connected
    url = engine.url.render_as_string(hide_password=True) if engine is not None else store.connection_string
    return server_errors.server_address(url)


async def on_this_loop(store: Any) -> None:
    """Bind `store`'s async engine to the running event loop (`LoopBinding.enter`); nothing while
    the store has not made one yet."""
    engine = pgvector_async_engine(store)
    if engine is None:
        return
    binding = _BINDINGS.get(engine)
    if binding is None:
        binding = _BINDINGS[engine] = LoopBinding(f"LlamaIndex's PGVectorStore (table {store.table_name!r})")
    await binding.enter(engine.dispose, lambda: engine.dispose(close=False))


@dataclasses.dataclass(frozen=True)
class LeanSearch:
    """Dense feedback's second search on a `PGVectorStore` (`search_again`): the store, its table
    model, the rows to fetch, the nodes to return, and the nodes of a windowed index by id."""

    store: Any
    table: Any
    rows: int
    depth: int
    windowed: bool
    nodes: Mapping[str, BaseNode]

    def _nearest(self, vector: Sequence[float]) -> Any:
        """SELECT the node ids, cosine distances and row keys of the `rows` rows nearest `vector`."""
        from sqlalchemy import asc, select

        distance = self.table.embedding.cosine_distance(list(vector)).label("distance")
        return select(self.table.node_id, distance, self.table.id).order_by(asc("distance")).limit(self.rows)

    def _hits(self, found: Sequence[Any]) -> list[tuple[str, float]]:
        """(id, similarity) best first; on a windowed index each node once, at its best row (a
        window row stands for its node), as `WindowedVectorRetriever` returns them."""
        hits = [(row, 1 - float(distance)) for row, distance, _ in found]
        if self.windowed:
            hits = collapse_rows([(r, s) for r, s in hits if row_window(r) == 0 or row_owner(r) in self.nodes], self.depth)
        return hits

    def _unseen(self, hits: Sequence[tuple[str, float]], found: Sequence[Any], known: Mapping[str, BaseNode]) -> Any:
        """SELECT the text and metadata of the rows of the hits whose node is not at hand, by their
        row keys (None when all are: always on a windowed index built from its nodes, most often
        otherwise)."""
        from sqlalchemy import select

        missing = {node_id for node_id, _ in hits if node_id not in known and node_id not in self.nodes}
        if not missing:
            return None
        keys = list({node_id: key for node_id, _, key in reversed(found) if node_id in missing}.values())  # each one's nearest row
        return select(self.table.node_id, self.table.text, self.table.metadata_).where(self.table.id.in_(keys))

    def _results(self, hits: Sequence[tuple[str, float]], unseen: Sequence[Any], known: Mapping[str, BaseNode]) -> list[NodeWithScore]:
        """The hits as nodes with their similarity; a node not at hand is made from its row as the
        store makes it."""
        nodes = {**self.nodes, **known, **{row: _node(row, text, metadata) for row, text, metadata in unseen}}
        return [NodeWithScore(node=nodes[node_id], score=score) for node_id, score in hits if node_id in nodes]

    def search_again(self, vector: Sequence[float], known: Mapping[str, BaseNode]) -> list[NodeWithScore]:
        """The nodes nearest `vector` with their similarity, best first; `known`: nodes by id
        already at hand (the others are made from their rows). The ids and distances in one
        SELECT, and the rows of the nodes not at hand, when there are any, in a second (reading
        the text and metadata of every row the scan passes, to skip the ones at hand, cost more
        than the scan)."""
        with self.store.client.connect() as connection:
            found = connection.execute(self._nearest(vector)).all()
            hits = self._hits(found)
            unseen = self._unseen(hits, found, known)
            return self._results(hits, connection.execute(unseen).all() if unseen is not None else [], known)

    async def asearch_again(self, vector: Sequence[float], known: Mapping[str, BaseNode]) -> list[NodeWithScore]:
        """`search_again` through the store's async engine."""
        engine: Any = pgvector_async_engine(self.store)  # made with the sync one, when the store connected
        async with engine.connect() as connection:
            found = (await connection.execute(self._nearest(vector))).all()
            hits = self._hits(found)
            unseen = self._unseen(hits, found, known)
            rows = (await connection.execute(unseen)).all() if unseen is not None else []
        return self._results(hits, rows, known)


def _node(node_id: str, text: str, metadata: Any) -> BaseNode:
    """A node from its row, as `PGVectorStore` makes one from a query's row."""
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores.utils import metadata_dict_to_node

    try:
        node = metadata_dict_to_node(metadata)
        node.set_content(str(text))
    except Exception:  # a row written without LlamaIndex's node metadata: the store's own fallback
        node = TextNode(id_=node_id, text=text, metadata=metadata)
    return node


def lean_search(retriever: BaseRetriever) -> LeanSearch | None:
    """The `LeanSearch` of a vector retriever (or a `WindowedVectorRetriever` around one) over a
    `PGVectorStore` whose query nothing narrows or changes (no filters, ids, HNSW settings or
    query hook); None otherwise (the retriever's own search runs)."""
    from contextual_retrieval_llamaindex.windows import WindowedVectorRetriever

    store = pgvector_store(retriever)
    if store is None or store.hnsw_kwargs is not None or store.client is None:
        return None
    table = pgvector_table(store)
    if isinstance(retriever, WindowedVectorRetriever):
        if table is None or not plain_vector_query(retriever.vector_retriever):
            return None
        return LeanSearch(store, table, retriever.depth + retriever.extra, retriever.depth, True, retriever.nodes_by_id)
    if table is None or not isinstance(retriever, VectorIndexRetriever) or not plain_vector_query(retriever):
        return None
    return LeanSearch(store, table, retriever.similarity_top_k, retriever.similarity_top_k, False, {})
