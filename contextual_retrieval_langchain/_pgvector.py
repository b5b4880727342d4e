"""langchain-postgres' `PGVector` under `ContextualEnsembleRetriever`.

- `stored_vectors`: the stored vectors of the fused top chunks the first search did not bring,
  for dense feedback: one SELECT of the embedding column by id, on the store's own engine with its table models (what its public
  ``session_maker``, ``EmbeddingStore`` and ``CollectionStore`` hold);
- `distances_by_vector`: a search by vector that selects what the ensemble reads (id, text,
  metadata, distance) in one statement. The store's own search also selects and parses every
  hit's vector (sent as text), looks its collection up first and builds ORM objects. Ranking and
  scores are the same (rows at an equal distance may come in another order, as between any two
  scans). To keep a query's server round trips few, its searches read in
  one statement what dense feedback needs (`Reads`): the first also the vectors of its nearest rows (the fused top chunks
  are most often among them: no read by id then), the second the text and metadata of the rows
  the query has not seen yet only;
- `server_address`: the server's ``host:port`` (from the store's engine URL; never its
  password), which `VectorServerUnavailable` names.

A `PGVector(async_mode=True)` refuses the sync calls the ensemble makes; these read only a sync one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document

from contextual_retrieval_core.dense import server_errors

__all__ = ["is_pgvector", "stored_vectors", "distances_by_vector", "Reads", "VECTOR_ROWS", "server_address"]


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


#: the nearest rows of a first search whose vectors come with it (`Reads.vectors`): dense feedback
#: moves the query toward the fused top chunks, most often among them, so it reads no more
VECTOR_ROWS = 10


@dataclasses.dataclass
class Reads:
    """What a search of a `PGVector` reads besides each row's id and distance.

    Attributes:
        known: Documents by store id already at hand (the query's first lists): their text and
            metadata are not read again.
        vectors: when given, filled with the vectors of the first `VECTOR_ROWS` rows (a query's
            first search: dense feedback reads the fused top chunks' vectors there).
    """

    known: Mapping[str, Document] = dataclasses.field(default_factory=dict)
    vectors: dict[str, Any] | None = None


def distances_by_vector(store: Any, vector: Sequence[float], k: int = 4, reads: Reads | None = None) -> list[tuple[Document, float]]:
    """(Document, distance) of the `k` rows nearest `vector`, nearest first: what the store's
    ``similarity_search_with_score_by_vector`` returns without a filter, in one statement that
    reads what `reads` asks for. The scan sorts ids and distances only; the `k` rows it keeps are
    joined back by id for the rest (text, metadata and vectors carried through the sort of every
    row cost more than the scan)."""
    from sqlalchemy import ARRAY, String, any_, asc, bindparam, case, func, null, select

    reads = reads or Reads()
    rows = store.EmbeddingStore
    distance = store.distance_strategy(list(vector))
    nearest = (_rows_of_collection(store, rows.id, distance.label("distance"))
               .order_by(asc("distance")).limit(k).subquery("nearest"))
    columns = [nearest.c.id, nearest.c.distance]
    if reads.known:  # text and metadata of the rows not at hand
        at_hand = nearest.c.id == any_(bindparam("known", list(reads.known), type_=ARRAY(String)))
        columns += [case((at_hand, null()), else_=rows.document), case((at_hand, null()), else_=rows.cmetadata)]
    else:
        columns += [rows.document, rows.cmetadata]
    if reads.vectors is not None:
        columns.append(case((func.row_number().over(order_by=nearest.c.distance) <= VECTOR_ROWS, rows.embedding), else_=null()))
    statement = (select(*columns).select_from(nearest.join(rows, rows.id == nearest.c.id))
                 .order_by(asc(nearest.c.distance)))
    with _engine(store).connect() as connection:
        found = connection.execute(statement).all()
    out = []
    for row in found:
        row_id = str(row[0])
        doc = reads.known.get(row_id) or Document(id=row_id, page_content=row[2], metadata=row[3])
        out.append((doc, row[1]))
        if reads.vectors is not None and row[4] is not None:
            reads.vectors[row_id] = row[4]
    return out


def _engine(store: Any) -> Any:
    """The SQLAlchemy engine of a sync `PGVector` (what its public ``session_maker`` is bound to)."""
    return store.session_maker.bind


def server_address(store: Any) -> str | None:
    """``host:port`` of the server `store` connects to; never the password."""
    return server_errors.server_address(_engine(store).url.render_as_string(hide_password=True))
