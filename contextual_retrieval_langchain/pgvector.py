"""langchain-postgres' `PGVector` under `ContextualEnsembleRetriever`.

- `stored_vectors`: the stored vectors of the fused top chunks, for dense feedback: one SELECT of
  the embedding column by id, on the store's own engine with its table models (what its public
  ``session_maker``, ``EmbeddingStore`` and ``CollectionStore`` hold);
- `distances_by_vector`: a search by vector that selects what the ensemble reads (id, text,
  metadata, distance) in one statement. The store's own search also selects and parses every
  hit's vector (150 vectors of 384 numbers, sent as text), looks its collection up first and
  builds ORM objects. Ranking, order and scores are the same. Dense feedback's second search
  selects ids and distances only, taking the Documents of the first search and reading the
  others by id;
- `server_address`: the server's ``host:port`` (from the store's engine URL; never its
  password), which `VectorServerUnavailable` names.

A `PGVector(async_mode=True)` refuses the sync calls the ensemble makes; these read only a sync one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from contextual_retrieval_core.dense import server_errors

__all__ = ["is_pgvector", "stored_vectors", "distances_by_vector", "server_address"]


def is_pgvector(store: Any) -> bool:
    """Whether `store` is a sync langchain-postgres `PGVector` (the pgvector extra)."""
    try:
        from langchain_postgres import PGVector
    except ImportError:  # pragma: no cover - the pgvector extra is not installed
        return False
    return isinstance(store, PGVector) and not store.async_mode


def _rows_of_collection(store: Any, *columns: Any) -> Any:
    """SELECT `columns` of the rows of `store`'s collection."""
    from sqlalchemy import select

    rows, collections = store.EmbeddingStore, store.CollectionStore
    return (select(*columns).join(collections, rows.collection_id == collections.uuid)
            .where(collections.name == store.collection_name))


def stored_vectors(store: Any, ids: Sequence[str]) -> dict[str, Any]:
    """{row id: vector} of the `ids` `store` holds in its collection."""
    if not ids:
        return {}
    rows = store.EmbeddingStore
    statement = _rows_of_collection(store, rows.id, rows.embedding).where(rows.id.in_(list(ids)))
    with _engine(store).connect() as connection:
        return {row_id: vector for row_id, vector in connection.execute(statement).all()}


def distances_by_vector(store: Any, vector: Sequence[float], k: int = 4,
                        known: Mapping[str, Document] | None = None) -> list[tuple[Document, float]]:
    """(Document, distance) of the `k` rows nearest `vector`, nearest first: what the store's
    ``similarity_search_with_score_by_vector`` returns without a filter. `known`: Documents by
    store id already at hand (a query's first search): then the search selects ids and distances
    only, and reads the Documents of the other rows by id."""
    from sqlalchemy import asc

    rows = store.EmbeddingStore
    distance = store.distance_strategy(list(vector)).label("distance")
    columns = (rows.id,) if known is not None else (rows.id, rows.document, rows.cmetadata)
    statement = _rows_of_collection(store, *columns, distance).order_by(asc("distance")).limit(k)
    with _engine(store).connect() as connection:
        found = connection.execute(statement).all()
        if known is None:
            return [(Document(id=str(row_id), page_content=text, metadata=meta), score) for row_id, text, meta, score in found]
        missing = [str(row_id) for row_id, _ in found if str(row_id) not in known]
        read = dict(known)
        if missing:
            wanted = _rows_of_collection(store, rows.id, rows.document, rows.cmetadata).where(rows.id.in_(missing))
            read.update((str(i), Document(id=str(i), page_content=text, metadata=meta))
                        for i, text, meta in connection.execute(wanted).all())
    return [(read[str(row_id)], score) for row_id, score in found if str(row_id) in read]


def _engine(store: Any) -> Any:
    """The SQLAlchemy engine of a sync `PGVector` (what its public ``session_maker`` is bound to)."""
    return store.session_maker.bind


def server_address(store: Any) -> str | None:
    """``host:port`` of the server `store` connects to; never the password."""
    return server_errors.server_address(_engine(store).url.render_as_string(hide_password=True))
