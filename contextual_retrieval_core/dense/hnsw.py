"""`HNSWIndex`: approximate dense search for large corpora, and `dense_index`, which picks it.

Exact search (`VectorIndex`) reads every vector for every query (one n x d matrix product), so
its cost grows linearly with the corpus. From `ANN_THRESHOLD` chunks on, `dense_index` builds a
calibrated `IVFIndex` (dense/ivf.py) instead; below it, exact search is used, with no extra
dependency. Where the threshold comes from: benchmarks/RESULTS.md, "Scale: 10k, 100k and 1M chunks".

Both approximate indexes use FAISS (`faiss-cpu`, the ``ann`` extra): it needs only numpy, writes
its indexes in its own binary format (no pickle) and can read them memory-mapped
(``IO_FLAG_MMAP``).

How it searches: the graph (``IndexHNSWSQ``) holds float16 copies of the L2-normalised vectors;
a query walks it (beam ef = max(`expansion_search`, candidates)) for max(2k, 64) candidates,
which are then rescored exactly against the float32 vectors. So the scores are the exact cosines (the same numbers `VectorIndex` gives);
only the candidate set is approximate (its recall of the exact top 150: benchmarks/RESULTS.md).

Saved as ``vectors.npy`` (float32, memory-mapped on load), ``vectors.json`` (ids, as
`VectorIndex`), ``hnsw.faiss`` (the graph, read with FAISS's ``IO_FLAG_MMAP | IO_FLAG_READ_ONLY``:
mapped where FAISS supports it for this index type) and ``hnsw.json`` (the parameters). `load_dense_index` opens either kind of directory.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.dense.ivf import IVFIndex, IVFParams, load_faiss
from contextual_retrieval_core.dense.vectors import VectorIndex
from contextual_retrieval_core.errors import InputError, NotFoundError

__all__ = ["ANN_THRESHOLD", "HNSWIndex", "HNSWParams", "dense_index", "load_dense_index"]

#: Corpus size (chunks) from which `dense_index` builds an `IVFIndex` instead of exact search
#: (below it exact search needs no extra dependency; why this size: benchmarks/RESULTS.md).
ANN_THRESHOLD = 20_000

_FORMAT = 1


@dataclass(frozen=True)
class HNSWParams:
    """HNSW graph parameters, saved with the index.

    Attributes:
        connectivity: edges per node (HNSW's M).
        expansion_add: candidate list size while building (ef_construction).
        expansion_search: candidate list size while searching (ef); raised to the number of
            candidates a query asks for when that is larger (default 512, above the query
            flow's candidate depth of 150).
    """

    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 512

    def __post_init__(self) -> None:
        for name in ("connectivity", "expansion_add", "expansion_search"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise InputError(f"HNSWParams.{name} must be an integer >= 2, got {value!r}")


def _faiss() -> Any:  # faiss ships no type information
    return load_faiss("HNSWIndex")


class HNSWIndex:
    """Approximate top-k by cosine similarity over an HNSW graph, rescored exactly.

    The same interface as `VectorIndex` (``search``, ``search_many``, ``save``, ``load``,
    ``add``), so either can sit behind `HybridSearcher`. Threads: FAISS's OpenMP pool (set
    ``OMP_NUM_THREADS`` to bound it).

    Args:
        ids: one id per row.
        vectors: float array (n, d).
        params: `HNSWParams` (default: M=16, ef_construction=128, ef=512).
        normalize: L2-normalise the rows on the way in (default True).

    Example:
        >>> import numpy as np
        >>> index = HNSWIndex(["a", "b", "c"], np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]]))
        >>> [i for i, _ in index.search(np.array([0.9, 0.1]), k=2)]
        ['a', 'c']
    """

    def __init__(
        self,
        ids: Sequence[str],
        vectors: np.ndarray,
        *,
        params: HNSWParams | None = None,
        normalize: bool = True,
        _graph: Any = None,
    ) -> None:
        exact = VectorIndex(ids, vectors, normalize=normalize)  # one validation, one normalisation
        self.ids, self.vectors = exact.ids, exact.vectors
        self.params = params or HNSWParams()
        self._mapped = False
        self._graph = _graph if _graph is not None else self._build(self.vectors, 0)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def _new_graph(self) -> Any:
        faiss = _faiss()
        graph = faiss.IndexHNSWSQ(self.dim, faiss.ScalarQuantizer.QT_fp16, self.params.connectivity, faiss.METRIC_INNER_PRODUCT)
        graph.hnsw.efConstruction = self.params.expansion_add
        return graph

    def _build(self, vectors: np.ndarray, start: int, graph: Any = None) -> Any:
        graph = graph if graph is not None else self._new_graph()
        if len(vectors):
            assert graph.ntotal == start, "graph rows and vector rows out of step"
            rows = np.ascontiguousarray(vectors, dtype=np.float32)
            if not graph.is_trained:
                graph.train(rows)  # fp16 needs no statistics; FAISS still asks for the call
            graph.add(rows)  # row numbers are the graph's ids
        return graph

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Append rows (new ids only); the graph grows in place."""
        more = VectorIndex(ids, vectors)
        clash = set(self.ids).intersection(more.ids)
        if clash:
            raise InputError(f"{len(clash)} ids are already indexed (e.g. {sorted(clash)[0]!r}); ids must be unique")
        if len(self) and more.vectors.shape[1] != self.dim:
            raise InputError(f"vectors are {more.vectors.shape[1]}-d; the index holds {self.dim}-d vectors")
        start = len(self.ids)
        if self._mapped:  # a graph read with IO_FLAG_READ_ONLY may not grow: copy it into memory first
            faiss = _faiss()
            self._graph = faiss.deserialize_index(faiss.serialize_index(self._graph))
            self._mapped = False
        self.vectors = np.concatenate([np.asarray(self.vectors), more.vectors])
        self.ids = self.ids + more.ids
        self._graph = self._build(more.vectors, start, self._graph)

    def search(self, query: np.ndarray, k: int = 10) -> list[tuple[str, float]]:
        """The `k` nearest (id, cosine) pairs, best first."""
        return self.search_many(np.asarray(query, dtype=np.float32)[None, :], k)[0]

    def search_many(self, queries: np.ndarray, k: int = 10) -> list[list[tuple[str, float]]]:
        """`search` for a matrix of query vectors."""
        positive_int("k", k)
        queries = np.asarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise InputError(
                f"query vectors have shape {queries.shape}; the index holds {self.dim}-d "
                "vectors: embed queries with the embedder that built the index"
            )
        if not len(self.ids):
            return [[] for _ in range(len(queries))]
        qn = queries / np.clip(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12, None)
        wanted = min(max(2 * int(k), 64), len(self.ids))
        ef = max(self.params.expansion_search, wanted)
        _, keys = self._graph.search(qn, wanted, params=_faiss().SearchParametersHNSW(efSearch=ef))
        out = []
        for q, row in zip(qn, keys):
            cand = np.sort(row[row >= 0].astype(np.int64))  # -1: fewer found; rows read in file order
            sims = np.asarray(self.vectors[cand]) @ q  # exact cosines
            order = np.lexsort((cand, -sims))[:k]
            out.append([(self.ids[cand[i]], float(sims[i])) for i in order])
        return out

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        VectorIndex(self.ids, np.asarray(self.vectors), normalize=False).save(path)
        _faiss().write_index(self._graph, str(path / "hnsw.faiss"))
        meta = {"format": _FORMAT, "kind": "hnsw", "library": "faiss", "index": "IndexHNSWSQ", "metric": "ip", "graph_dtype": "fp16",
                "count": len(self.ids), "dim": self.dim, "params": asdict(self.params)}
        (path / "hnsw.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> HNSWIndex:
        """Open a saved index: vectors.npy memory-mapped, the graph read with FAISS's mmap flag."""
        path = Path(path)
        meta_path = path / "hnsw.json"
        if not meta_path.is_file():
            raise NotFoundError(f"{path} is not a saved HNSWIndex directory (no hnsw.json)")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format") != _FORMAT or meta.get("library") != "faiss":
            raise InputError(f"{meta_path}: unknown HNSW index format {meta.get('format')!r}; rebuild the index")
        exact = VectorIndex.load(path)
        if len(exact) != meta["count"]:
            raise InputError(f"{path}: hnsw.json counts {meta['count']} vectors, vectors.json {len(exact)}; rebuild the index")
        graph_path = path / "hnsw.faiss"
        if not graph_path.is_file():
            raise NotFoundError(f"{graph_path} is missing; rebuild the index")
        faiss = _faiss()
        graph = faiss.read_index(str(graph_path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        if graph.ntotal != meta["count"] or graph.d != meta["dim"]:
            raise InputError(f"{graph_path} does not match vectors.npy ({graph.ntotal} x {graph.d}); rebuild the index")
        index = cls(exact.ids, exact.vectors, params=HNSWParams(**meta["params"]), normalize=False, _graph=graph)
        index._mapped = True
        return index


def dense_index(
    ids: Sequence[str], vectors: np.ndarray, *, threshold: int = ANN_THRESHOLD, params: IVFParams | None = None,
    show_progress: bool = False,
) -> VectorIndex | IVFIndex:
    """Exact `VectorIndex` below `threshold` rows, the calibrated `IVFIndex` from it on
    (an `HNSWIndex` is built only by hand; `load_dense_index` opens all three kinds).

    Without faiss-cpu installed, exact search at every size, with a warning naming the extra.
    `vectors` may be a memory-mapped ``.npy``: the IVF build reads it a block at a time.

    Example:
        >>> import numpy as np
        >>> type(dense_index(["a"], np.ones((1, 4)))).__name__
        'VectorIndex'
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise InputError(f"threshold must be a non-negative integer (rows), got {threshold!r}")
    if len(ids) < threshold:
        return VectorIndex(ids, vectors)
    try:
        _faiss()
    except ImportError as exc:
        warnings.warn(f"{len(ids)} vectors: exact search, which is slow at this size ({exc})", stacklevel=2)
        return VectorIndex(ids, vectors)
    return IVFIndex(ids, vectors, params=params, show_progress=show_progress)


def load_dense_index(path: str | Path) -> VectorIndex | HNSWIndex | IVFIndex:
    """Open a directory saved by any of the three (``ivf.json`` marks an IVF one, ``hnsw.json`` an HNSW one)."""
    path = Path(path)
    if (path / "ivf.json").is_file():
        return IVFIndex.load(path)
    return HNSWIndex.load(path) if (path / "hnsw.json").is_file() else VectorIndex.load(path)
