"""`VectorIndex`: exact in-process cosine search over normalised vectors.

The core's own dense index, used by the evaluation runner and by anyone who needs no vector
database. The framework adapters use the frameworks' vector stores (Chroma by default) instead.
Saved as a float32 `.npy` matrix plus JSON ids, memory-mapped on load with ``allow_pickle=False``.
Above ~20k rows, `ann.dense_index` picks the approximate `HNSWIndex` instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

__all__ = ["VectorIndex"]


class VectorIndex:
    """Exact top-k by cosine similarity (dot product of L2-normalised vectors).

    Args:
        ids: one id per row.
        vectors: float array (n, d).
        normalize: L2-normalise the rows on the way in (default True; `load` skips it, the saved
            rows already are).

    Example:
        >>> import numpy as np
        >>> index = VectorIndex(["a", "b"], np.array([[1.0, 0.0], [0.0, 1.0]]))
        >>> index.search(np.array([0.9, 0.1]), k=1)
        [('a', 0.99...)]
    """

    def __init__(self, ids: Sequence[str], vectors: np.ndarray, *, normalize: bool = True) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise ValueError(f"vectors must be a 2-D array (n, d), got shape {vectors.shape}")
        if len(ids) != vectors.shape[0]:
            raise ValueError(f"got {len(ids)} ids for {vectors.shape[0]} vectors; pass one id per vector")
        if len(set(ids)) != len(ids):
            raise ValueError("duplicate ids: every vector needs a unique id")
        self.ids = [str(i) for i in ids]
        if normalize:
            vectors = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        self.vectors = vectors

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: np.ndarray, k: int = 10) -> list[tuple[str, float]]:
        """The `k` nearest (id, cosine) pairs, best first; ties by insertion order."""
        return self.search_many(np.asarray(query, dtype=np.float32)[None, :], k)[0]

    def search_many(self, queries: np.ndarray, k: int = 10) -> list[list[tuple[str, float]]]:
        """`search` for a matrix of query vectors at once (one matrix product)."""
        if isinstance(k, bool) or k <= 0:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        queries = np.asarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.vectors.shape[1]:
            raise ValueError(
                f"query vectors have shape {queries.shape}; the index holds {self.vectors.shape[1]}-d "
                "vectors: embed queries with the embedder that built the index"
            )
        if not len(self.ids):
            return [[] for _ in range(len(queries))]
        qn = queries / np.clip(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12, None)
        sims = qn @ self.vectors.T
        k = min(k, sims.shape[1])
        out = []
        for row in sims:
            top = np.argpartition(-row, k - 1)[:k] if k < row.size else np.arange(row.size)
            top = top[np.lexsort((top, -row[top]))]
            out.append([(self.ids[i], float(row[i])) for i in top])
        return out

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        np.save(path / "vectors.npy", self.vectors, allow_pickle=False)
        (path / "vectors.json").write_text(json.dumps({"ids": self.ids}), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> "VectorIndex":
        path = Path(path)
        if not (path / "vectors.json").is_file():
            raise FileNotFoundError(f"{path} is not a saved VectorIndex directory (no vectors.json)")
        ids = json.loads((path / "vectors.json").read_text(encoding="utf-8"))["ids"]
        # memory-mapped: a large index opens at once and its pages are shared between processes
        return cls(ids, np.load(path / "vectors.npy", allow_pickle=False, mmap_mode="r"), normalize=False)
