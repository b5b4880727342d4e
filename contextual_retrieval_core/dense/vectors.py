"""`VectorIndex`: exact in-process cosine search over normalised vectors.

The core's own dense index, used by the evaluation runner and by anyone who needs no vector
database. The framework adapters use the frameworks' vector stores (Chroma by default) instead.
Saved as a float32 `.npy` matrix plus JSON ids, memory-mapped on load with ``allow_pickle=False``.
Above `ann.ANN_THRESHOLD` rows, `ann.dense_index` picks the approximate `HNSWIndex` instead.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from contextual_retrieval_core.checks import (
    IndexFileError,
    finite_vectors,
    non_unit_rows,
    not_a_string,
    positive_int,
    read_blocks,
    unit_tolerance,
)
from contextual_retrieval_core.errors import InputError, NotFoundError

__all__ = ["VectorIndex"]


class VectorIndex:
    """Exact top-k by cosine similarity (dot product of L2-normalised vectors).

    Args:
        ids: one id per row.
        vectors: float array (n, d).
        normalize: L2-normalise the rows on the way in (default True; a row that cannot be, all
            zeros, is a ValueError). False: the rows already are unit length (`load` checks that
            the saved rows are).

    Example:
        >>> import numpy as np
        >>> index = VectorIndex(["a", "b"], np.array([[1.0, 0.0], [0.0, 1.0]]))
        >>> index.search(np.array([0.9, 0.1]), k=1)
        [('a', 0.99...)]
    """

    def __init__(self, ids: Sequence[str], vectors: np.ndarray, *, normalize: bool = True) -> None:
        not_a_string("ids", ids, "ids")
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise InputError(f"vectors must be a 2-D array (n, d), got shape {vectors.shape}")
        if len(ids) != vectors.shape[0]:
            raise InputError(f"got {len(ids)} ids for {vectors.shape[0]} vectors; pass one id per vector")
        if len(set(ids)) != len(ids):
            raise InputError("duplicate ids: every vector needs a unique id")
        finite_vectors("vectors", vectors)
        self.ids = [str(i) for i in ids]
        if normalize:
            vectors = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
            bad = non_unit_rows(vectors, unit_tolerance(vectors.dtype))
            if bad.size:
                raise InputError(f"vectors row {int(bad[0])} has no direction (all zeros, or too small to normalise; "
                                 f"{bad.size} such rows): the embedder returned a broken vector: check its input and model")
        self.vectors = vectors

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: np.ndarray, k: int = 10) -> list[tuple[str, float]]:
        """The `k` nearest (id, cosine) pairs, best first; ties by insertion order."""
        return self.search_many(np.asarray(query, dtype=np.float32)[None, :], k)[0]

    def search_many(self, queries: np.ndarray, k: int = 10) -> list[list[tuple[str, float]]]:
        """`search` for a matrix of query vectors at once (one matrix product)."""
        k = positive_int("k", k)
        queries = np.asarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.vectors.shape[1]:
            raise InputError(
                f"query vectors have shape {queries.shape}; the index holds {self.vectors.shape[1]}-d "
                "vectors: embed queries with the embedder that built the index"
            )
        finite_vectors("query vectors", queries)
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
    def load(cls, path: str | Path) -> VectorIndex:
        """Load what `save` wrote; a missing, truncated, corrupted or inconsistent file is an
        `IndexFileError` naming it, and so is a row that is not unit length (a zero row, NaN, or a
        row part of which was zeroed or overwritten): every row is read once, a block at a time."""
        from contextual_retrieval_core.checks import read_json

        path = Path(path)
        ids_file, matrix_file = path / "vectors.json", path / "vectors.npy"
        if not ids_file.is_file():
            if (path / "ivf.faiss").is_file():  # an IVF index's folder, whose ivf.json is gone
                raise IndexFileError(path / "ivf.json", "missing (the folder holds ivf.faiss, an IVF index's lists)",
                                     "rebuild the index")
            raise NotFoundError(f"{path} is not a saved VectorIndex directory (no vectors.json)")
        meta = read_json(ids_file)
        ids = meta.get("ids") if isinstance(meta, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or len(set(ids)) != len(ids):
            raise IndexFileError(ids_file, "'ids' must be a list of distinct strings")
        if not matrix_file.is_file():
            raise IndexFileError(matrix_file, "missing")
        try:
            vectors = np.load(matrix_file, allow_pickle=False, mmap_mode="r")  # pages shared, read on demand
        except (OSError, ValueError, EOFError) as exc:
            raise IndexFileError(matrix_file, f"truncated or corrupted ({type(exc).__name__}: {exc})") from None
        if vectors.ndim != 2 or vectors.dtype.kind != "f":
            raise IndexFileError(matrix_file, f"expected a 2-D float array, got {vectors.dtype} of shape {vectors.shape}")
        if vectors.shape[0] != len(ids):
            raise IndexFileError(matrix_file, f"{vectors.shape[0]} rows for {len(ids)} ids in vectors.json")
        _check_unit_rows(matrix_file, vectors)
        index = cls.__new__(cls)  # checked above: ids distinct strings, rows finite and unit length
        index.ids, index.vectors = ids, vectors
        return index


_CHECK_BYTES = 16 << 20  # rows read at a time when a saved matrix is checked


def _check_unit_rows(file: Path, vectors: np.ndarray) -> None:
    """`IndexFileError` naming `file` unless every row is unit length (as `VectorIndex` saves them):
    a zero row, a NaN or infinity, or a row part of which was zeroed or overwritten. Reads the
    matrix once, a block at a time (`checks.read_blocks`: the pages read do not stay resident)."""
    tolerance = unit_tolerance(vectors.dtype)
    for start, block in read_blocks(vectors, _CHECK_BYTES // max(1, vectors.shape[1] * vectors.dtype.itemsize)):
        bad = non_unit_rows(block, tolerance)
        if bad.size:
            row = block[bad[0]]
            what = ("holds NaN or infinity" if not np.all(np.isfinite(row)) else "is all zeros" if not np.any(row)
                    else f"has length {float(np.linalg.norm(row)):.6g}, not 1")
            raise IndexFileError(file, f"row {start + int(bad[0])} {what} ({bad.size} such rows in rows {start}.."
                                 f"{start + len(block) - 1}; saved rows are unit length: a zeroed or overwritten block)")
