"""Dense pseudo-relevance feedback (Rocchio): move the query vector toward the chunks the first
fused ranking put on top, then search the dense side again.

``q' = unit(unit(q) + beta * mean(v_1 .. v_n))``, where ``v_i`` is the best-matching row (the
chunk's L2-normalised vector, or its best window) of each of the fused top-n chunks. The moved
vector is unit length, as the query a text embedder returns: a cosine store ranks by direction
alone, and an inner-product store (Chroma's "ip" space) reports the same scale of scores as for
the query itself. On by default (`FusionConfig.dense_prf`,
0.5) wherever a dense side is fused with another source: `HybridSearcher`, `ContextualIndex`,
LlamaIndex's `HybridRetriever` and LangChain's `ContextualEnsembleRetriever` all run it on their
own stored vectors, through the functions here: the core's indexes on their arrays (or their
Chroma collection), the frameworks on the vectors their store gives back (`StoreRead`). A stored
chunk is never embedded again at query time; where a store gives no vectors back, feedback is
skipped for it (the query flow then searches it once).

Example:
    >>> import numpy as np
    >>> rows = feedback_rows(["a", "b"], np.array([[1.0, 0.0], [0.0, 1.0]]), {})
    >>> rows.moved(np.array([[3.0, 4.0]]), [["b"]], 0.5).astype(float).round(3).tolist()
    [[0.419, 0.908]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from contextual_retrieval_core.checks import non_negative_number
from contextual_retrieval_core.errors import InputError, InputTypeError

__all__ = ["DEFAULT_DENSE_PRF", "DEFAULT_PRF_TOP", "FeedbackRows", "StoreRead", "StoredVectors", "feedback_rows", "stored_read",
           "stored_feedback_rows", "feedback_weight"]

#: the feedback weight beta, and how many fused chunks feed back (why these: benchmarks/RESULTS.md)
DEFAULT_DENSE_PRF = 0.5
DEFAULT_PRF_TOP = 3


@runtime_checkable
class StoredVectors(Protocol):
    """A vector store that gives back the vectors it holds, by row id (a framework's Milvus store):
    dense feedback reads the fused top chunks' rows through it."""

    def stored_vectors(self, ids: Sequence[str]) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class FeedbackRows:
    """The dense rows (L2-normalised) and which rows belong to each chunk."""

    vectors: np.ndarray
    rows_of_chunk: Mapping[str, list[int]]

    def moved(self, queries: np.ndarray, tops: Sequence[Sequence[str]], beta: float) -> np.ndarray:
        """Each query vector, L2-normalised, plus `beta` times the mean best row of its top chunks,
        normalised again (unchanged when none of its top chunks has a row here)."""
        out = np.array(queries, dtype=np.float32, copy=True)
        for i, (q, top) in enumerate(zip(out, tops)):
            picks = []
            for chunk in top:
                rows = self.rows_of_chunk.get(chunk)
                if rows:
                    picks.append(self.vectors[rows[int(np.argmax(self.vectors[rows] @ q))]])
            if picks:
                out[i] = _unit(_unit(q) + beta * np.mean(picks, axis=0))
        return out

    def feeds(self, top: Sequence[str]) -> bool:
        """Whether any of the `top` chunks has a row here (else `moved` leaves the query as it is)."""
        return any(self.rows_of_chunk.get(chunk) for chunk in top)

    def moved_query(self, query: Sequence[float], top: Sequence[str], beta: float) -> np.ndarray:
        """One query vector moved toward its top chunks (`moved` for a single query)."""
        return self.moved(np.asarray(query, dtype=np.float32)[None, :], [top], beta)[0]


#: rows for no chunk: `moved` leaves every query as it is
_NO_ROWS = FeedbackRows(np.zeros((0, 0), dtype=np.float32), {})


def _unit(vector: np.ndarray) -> np.ndarray:
    return vector / max(float(np.linalg.norm(vector)), 1e-12)


def feedback_rows(ids: Sequence[str], vectors: np.ndarray, owners: Mapping[str, str], *, normalized: bool = False) -> FeedbackRows:
    """`FeedbackRows` over index rows `ids` (a window row maps to its chunk through `owners`);
    `normalized`: the rows already are L2-normalised float32 (an index's own array, used as it is,
    not copied)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    normed = vectors if normalized else vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
    rows_of_chunk: dict[str, list[int]] = {}
    for i, rid in enumerate(ids):
        rows_of_chunk.setdefault(owners.get(rid, rid), []).append(i)
    return FeedbackRows(normed, rows_of_chunk)


@dataclass(frozen=True)
class StoreRead:
    """What a vector store gave back for the fused top chunks: `rows_of` each chunk's row ids
    (its own, then its windows in window order), `held` the vectors read (a row the store lacks is
    absent). Each query path reads its own store into one. A chunk the store gives no vector back
    for feeds nothing back: feedback never embeds a stored chunk again at query time."""

    top: Sequence[str]
    rows_of: Mapping[str, Sequence[str]]
    held: Mapping[str, Any]

    @classmethod
    def of_rows(cls, top: Sequence[str], held: Mapping[str, Any]) -> StoreRead:
        """The read of a store that keys each row by `row_id` (a chunk's own row under its id, its
        windows under ``<chunk id> + WINDOW_MARK + n``): `held` {row id: vector} as read back,
        grouped by chunk, each chunk's own row first, then its windows in window order."""
        from contextual_retrieval_core.dense._window_rows import row_owner, row_window

        ids = list(dict.fromkeys(top))
        order = {chunk: i for i, chunk in enumerate(ids)}
        rows_of: dict[str, list[str]] = {c: [] for c in ids}
        for row in sorted((r for r in held if row_owner(r) in order), key=lambda r: (order[row_owner(r)], row_window(r))):
            rows_of[row_owner(row)].append(row)
        return cls(ids, rows_of, held)

    def rows(self) -> FeedbackRows:
        """`FeedbackRows` of the held rows; a chunk with none feeds nothing back."""
        ids: list[str] = []
        vectors: list[Any] = []
        owners: dict[str, str] = {}
        for chunk in dict.fromkeys(self.top):
            for row in self.rows_of.get(chunk, ()):
                if row in self.held:
                    ids.append(row)
                    vectors.append(self.held[row])
                    owners[row] = chunk
        if not ids:
            return _NO_ROWS
        return feedback_rows(ids, np.asarray(vectors, dtype=np.float32), owners)


def stored_read(collection: Any, chunk_ids: Sequence[str]) -> StoreRead:
    """The rows of `chunk_ids` in a Chroma collection laid out by `_window_rows` (each chunk's own
    row, then its window rows in window order: the order `HybridSearcher` holds them); chunks it
    lacks have no rows."""
    from contextual_retrieval_core.dense._window_rows import WINDOW_OF_KEY

    ids = list(dict.fromkeys(chunk_ids))
    if not ids:
        return StoreRead([], {}, {})
    own = collection.get(ids=ids, include=["embeddings"])
    extra = collection.get(where={WINDOW_OF_KEY: {"$in": ids}}, include=["embeddings"])
    return StoreRead.of_rows(ids, dict(zip(own["ids"], own["embeddings"])) | dict(zip(extra["ids"], extra["embeddings"])))


def stored_feedback_rows(collection: Any, chunk_ids: Sequence[str]) -> FeedbackRows:
    """`FeedbackRows` of `chunk_ids` read from a Chroma collection laid out by `_window_rows`
    (`stored_read`); chunks the collection does not hold feed nothing back."""
    return stored_read(collection, chunk_ids).rows()


def feedback_weight(beta: Any) -> float:
    """A checked dense PRF weight: a number in [0, 10] (0: off); errors name the fix."""
    if beta is None:
        raise InputTypeError("dense_prf must be a number in [0, 10] (0.5 is the default, 0 turns it off), got None")
    beta = non_negative_number("dense_prf", beta)
    if beta > 10:
        raise InputError(f"dense_prf must be a number in [0, 10] (0.5 is the default, 0 turns it off), got {beta!r}")
    return beta
