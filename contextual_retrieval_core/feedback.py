"""Dense pseudo-relevance feedback (Rocchio): move the query vector toward the chunks the first
fused ranking put on top, then search the dense side again.

``q' = q + beta * mean(v_1 .. v_n)``, where ``v_i`` is the best-matching row (the chunk's vector,
or its best window) of each of the fused top-n chunks. `HybridSearcher(dense_prf=beta)` runs it.

Example:
    >>> import numpy as np
    >>> rows = feedback_rows(["a", "b"], np.array([[1.0, 0.0], [0.0, 1.0]]), {})
    >>> rows.moved(np.array([[1.0, 1.0]]), [["b"]], 0.5).tolist()
    [[1.0, 1.5]]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .checks import positive_int

__all__ = ["DEFAULT_PRF_TOP", "FeedbackRows", "feedback_rows", "stored_feedback_rows", "prf_settings"]

#: how many fused chunks feed back (the outside probe's setting, named in issue 14)
DEFAULT_PRF_TOP = 3


@dataclass(frozen=True)
class FeedbackRows:
    """The dense rows (L2-normalised) and which rows belong to each chunk."""

    vectors: np.ndarray
    rows_of_chunk: Mapping[str, list[int]]

    def moved(self, queries: np.ndarray, tops: Sequence[Sequence[str]], beta: float) -> np.ndarray:
        """Each query vector plus `beta` times the mean best row of its top chunks (unchanged
        when it has none)."""
        out = np.array(queries, dtype=np.float32, copy=True)
        for i, (q, top) in enumerate(zip(queries, tops)):
            picks = []
            for chunk in top:
                rows = self.rows_of_chunk.get(chunk)
                if rows:
                    picks.append(self.vectors[rows[int(np.argmax(self.vectors[rows] @ q))]])
            if picks:
                out[i] = q + beta * np.mean(picks, axis=0)
        return out


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


def stored_feedback_rows(collection: Any, chunk_ids: Sequence[str]) -> FeedbackRows:
    """`FeedbackRows` of `chunk_ids` read from a Chroma collection laid out by `window_rows`: each
    chunk's own row, then its window rows in window order (the order `HybridSearcher` holds them)."""
    from .window_rows import WINDOW_OF_KEY, row_owner
    from .windows import WINDOW_MARK

    ids = list(dict.fromkeys(chunk_ids))
    if not ids:
        return FeedbackRows(np.zeros((0, 0), dtype=np.float32), {})
    own = collection.get(ids=ids, include=["embeddings"])
    extra = collection.get(where={WINDOW_OF_KEY: {"$in": ids}}, include=["embeddings"])
    rows = list(zip(own["ids"], own["embeddings"])) + list(zip(extra["ids"], extra["embeddings"]))
    rows.sort(key=lambda r: (ids.index(row_owner(r[0])), int(r[0].split(WINDOW_MARK, 1)[1] or 0) if WINDOW_MARK in r[0] else 0))
    return feedback_rows([r for r, _ in rows], np.asarray([v for _, v in rows], dtype=np.float32),
                         {r: row_owner(r) for r, _ in rows})


def prf_settings(beta: float | None, top: int) -> tuple[float | None, int]:
    """Checked (beta, top): beta a positive number or None (off), top a positive integer."""
    if beta is not None and (isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 < beta <= 10):
        raise ValueError(f"dense_prf must be a weight in (0, 10] (0.5 is usual) or None for off, got {beta!r}")
    return (None if beta is None else float(beta)), positive_int("prf_top", top)
