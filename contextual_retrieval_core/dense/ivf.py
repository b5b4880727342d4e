"""`IVFIndex`: cluster-pruned dense search over float16 vectors, with a probe count set by a rule.

The corpus is cut into ``nlist`` = ceil(sqrt(n)) clusters (FAISS k-means on a seeded sample of
at most 64 rows a cluster); each vector is stored once, as float16, in its cluster's list
(FAISS ``IndexIVFScalarQuantizer`` with ``QT_fp16``, inner product). A query scores the
``nlist`` centroids, then every vector of its ``nprobe`` best clusters, exactly (float16 rows,
float32 arithmetic): the scores are the cosines of the stored rows, and only the candidate set is
approximate.

How ``nprobe`` is chosen (`IVFParams.target_recall`, `IVFParams.calibration_queries`): at build,
the smallest power of two whose recall of the exact top-`depth` reaches the target on seeded
pseudo-queries, each the normalised sum of four random indexed vectors (a query between topics
is the hard case for cluster pruning: its neighbours spread over the most clusters). The exact
reference is the same index probing every cluster. The chosen value and the recall it reached
are saved with the index; `calibrate` repeats the choice on real queries when a caller has them.
A query asking for more than `depth` candidates probes proportionally more clusters.

Memory: the float16 lists take 2 bytes a dimension of every vector; `load` maps the saved
file (FAISS ``IO_FLAG_MMAP``), so a query process reads only the clusters its queries probe.
Saved as ``ivf.faiss`` (FAISS's own binary format, no pickle) and ``ivf.json`` (ids, parameters,
calibration). Install FAISS with the ``ann`` extra.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from contextual_retrieval_core.checks import (
    IndexFileError,
    finite_vectors,
    mapped_file,
    non_unit_rows,
    not_a_string,
    positive_int,
    read_blocks,
    read_json,
    unit_tolerance,
)
from contextual_retrieval_core.errors import InputError, MissingDependencyError, NotFoundError

__all__ = ["IVFIndex", "IVFParams", "load_faiss"]

_FORMAT = 1
_INSTALL_HINT = "install faiss-cpu: pip install 'contextual-retrieval-kit[ann]'"


@dataclass(frozen=True)
class IVFParams:
    """How an `IVFIndex` is built and how its probe count is chosen; saved with the index.

    Attributes:
        depth: the candidate depth the probe count is calibrated for (the query flow's 150).
        target_recall: recall of the exact top-`depth` the probe count must reach (0.99).
        calibration_queries: pseudo-queries the recall is measured on (200).
        seed: seeds the k-means sample and the pseudo-queries.
    """

    depth: int = 150
    target_recall: float = 0.99
    calibration_queries: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("depth", "calibration_queries"):
            positive_int(f"IVFParams.{name}", getattr(self, name))
        if not 0.0 < float(self.target_recall) <= 1.0:
            raise InputError(f"IVFParams.target_recall must be in (0, 1], got {self.target_recall!r}")


def load_faiss(what: str = "IVFIndex") -> Any:  # faiss ships no type information
    """The `faiss` module, or an ImportError saying that `what` needs it and how to install it."""
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise MissingDependencyError(f"{what} needs the faiss-cpu package; {_INSTALL_HINT}") from exc
    return faiss


_faiss = load_faiss


def _normalised(vectors: np.ndarray, what: str) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise InputError(f"{what} must be a 2-D array (n, d), got shape {vectors.shape}")
    finite_vectors(what, vectors)
    return np.ascontiguousarray(vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None))


def _unit_rows(vectors: np.ndarray, start: int) -> np.ndarray:
    """Rows to index (the rows from `start` of the caller's vectors), normalised; a row that cannot
    be (all zeros) is a ValueError, as in `VectorIndex`."""
    rows = _normalised(vectors, "vectors" if start == 0 else f"vectors[{start}:]")
    bad = non_unit_rows(rows, unit_tolerance(rows.dtype))
    if bad.size:
        raise InputError(f"vectors row {start + int(bad[0])} has no direction (all zeros, or too small to normalise; "
                         f"{bad.size} such rows): the embedder returned a broken vector: check its input and model")
    return rows


def _recall(exact: np.ndarray, found: np.ndarray) -> float:
    hit = sum(len(set(e[e >= 0].tolist()) & set(f[f >= 0].tolist())) for e, f in zip(exact, found))
    return hit / max(int((exact >= 0).sum()), 1)


class IVFIndex:
    """Approximate top-k by cosine similarity: float16 clusters, probe count set by calibration.

    The same interface as `VectorIndex` (``search``, ``search_many``, ``save``, ``load``,
    ``add``), so either can sit behind `HybridSearcher`. Building holds the float16 lists and one
    64 MB block of float32 rows at a time; `vectors` may be a memory-mapped
    ``.npy`` (``np.load(path, mmap_mode="r")``), which is read through its file, so vectors that do
    not fit in memory can be indexed.

    Args:
        ids: one id per row.
        vectors: float array (n, d); L2-normalised on the way in.
        params: `IVFParams` (default: calibrated for depth 150 at recall 0.99).
        show_progress: a progress bar while the vectors are added.

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> vectors = rng.standard_normal((500, 8)).astype("float32")
        >>> index = IVFIndex([f"v{i}" for i in range(500)], vectors, params=IVFParams(depth=10))
        >>> index.search(vectors[7], k=1)[0][0]
        'v7'
    """

    ids: list[str]
    params: IVFParams
    nprobe: int
    calibration: dict[str, Any]
    _graph: Any
    _mapped: Path | None

    def __init__(self, ids: Sequence[str], vectors: np.ndarray, *, params: IVFParams | None = None,
                 show_progress: bool = False) -> None:
        not_a_string("ids", ids, "ids")
        if not isinstance(vectors, np.ndarray):
            vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise InputError(f"vectors must be a 2-D array (n, d), got shape {vectors.shape}")
        if len(ids) != vectors.shape[0]:
            raise InputError(f"got {len(ids)} ids for {vectors.shape[0]} vectors; pass one id per vector")
        if not len(ids):
            raise InputError("cannot build an IVFIndex from no vectors: pass at least one")
        if len(set(ids)) != len(ids):
            raise InputError("duplicate ids: every vector needs a unique id")
        self.params = params or IVFParams()
        self.ids, self.nprobe, self.calibration, self._mapped = [str(i) for i in ids], 1, {}, None
        n, dim = vectors.shape
        nlist = max(1, math.ceil(math.sqrt(n)))
        rng = np.random.default_rng(self.params.seed)
        faiss = _faiss()
        quantizer = faiss.IndexFlatIP(dim)
        graph = faiss.IndexIVFScalarQuantizer(quantizer, dim, nlist, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
        graph.cp.seed = self.params.seed
        graph.cp.spherical = True  # unit-length centroids (FAISS's default for inner product; `load` checks them)
        graph.train(_normalised(_take(vectors, np.sort(rng.choice(n, size=min(n, 64 * nlist), replace=False))), "vectors"))
        from tqdm.auto import tqdm

        with tqdm(total=n, desc="dense index (IVF)", unit="vector", disable=not show_progress) as bar:
            for start, rows in _row_blocks(vectors):  # one block of float32 rows at a time beside the float16 lists
                graph.add(_unit_rows(rows, start))
                bar.update(len(rows))
        self._graph = graph
        self._calibrate(_pseudo_queries(vectors, self.params.calibration_queries, rng),
                        "pseudo-queries: normalised sums of 4 random indexed vectors")

    @classmethod
    def _empty(cls, params: IVFParams) -> IVFIndex:
        index = cls.__new__(cls)
        index.ids, index.params, index.nprobe, index.calibration = [], params, 1, {}
        index._graph, index._mapped = None, None
        return index

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def dim(self) -> int:
        return int(self._graph.d)

    @property
    def nlist(self) -> int:
        return int(self._graph.nlist)

    def calibrate(self, queries: np.ndarray) -> float:
        """Choose the probe count again on real query vectors; returns the recall it reached."""
        return self._calibrate(_normalised(queries, "query vectors"), "caller's queries")

    def _calibrate(self, queries: np.ndarray, source: str) -> float:
        depth = min(self.params.depth, len(self.ids))
        _, exact = self._search(queries, depth, self.nlist)
        nprobe, reached = 1, 0.0
        while True:
            _, found = self._search(queries, depth, nprobe)
            reached = _recall(exact, found)
            if reached >= self.params.target_recall or nprobe >= self.nlist:
                break
            nprobe = min(2 * nprobe, self.nlist)
        self.nprobe = nprobe
        self.calibration = {"queries": int(len(queries)), "source": source, "depth": depth,
                            "recall": round(reached, 4), "nprobe": nprobe, "nlist": self.nlist}
        return reached

    def _search(self, queries: np.ndarray, k: int, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        faiss = _faiss()
        return self._graph.search(queries, k, params=faiss.SearchParametersIVF(nprobe=min(nprobe, self.nlist)))

    def add(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Append rows (new ids only) to the clusters they fall in; the probe count stays."""
        not_a_string("ids", ids, "ids")
        rows = _unit_rows(vectors, 0)
        if len(ids) != rows.shape[0]:
            raise InputError(f"got {len(ids)} ids for {rows.shape[0]} vectors; pass one id per vector")
        if rows.shape[1] != self.dim:
            raise InputError(f"vectors are {rows.shape[1]}-d; the index holds {self.dim}-d vectors")
        clash = set(self.ids).intersection(str(i) for i in ids)
        if clash:
            raise InputError(f"{len(clash)} ids are already indexed (e.g. {sorted(clash)[0]!r}); ids must be unique")
        if self._mapped:  # mapped lists may not grow: read the saved file into memory first
            self._graph = _faiss().read_index(str(self._mapped))
            self._mapped = None
        self._graph.add(rows)
        self.ids.extend(str(i) for i in ids)

    def search(self, query: np.ndarray, k: int = 10) -> list[tuple[str, float]]:
        """The `k` nearest (id, cosine) pairs, best first."""
        return self.search_many(np.asarray(query, dtype=np.float32)[None, :], k)[0]

    def search_many(self, queries: np.ndarray, k: int = 10) -> list[list[tuple[str, float]]]:
        """`search` for a matrix of query vectors; ties by insertion order."""
        k = positive_int("k", k)
        queries = np.asarray(queries, dtype=np.float32)
        if queries.ndim != 2 or queries.shape[1] != self.dim:
            raise InputError(
                f"query vectors have shape {queries.shape}; the index holds {self.dim}-d "
                "vectors: embed queries with the embedder that built the index"
            )
        qn = _normalised(queries, "query vectors")
        k = min(k, len(self.ids))
        nprobe = self.nprobe * max(1, math.ceil(k / self.params.depth))
        sims, rows = self._search(qn, k, nprobe)
        out = []
        for s, r in zip(sims, rows):
            keep = r >= 0
            s, r = s[keep], r[keep]
            order = np.lexsort((r, -s))
            out.append([(self.ids[int(r[i])], float(s[i])) for i in order])
        return out

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        _faiss().write_index(self._graph, str(path / "ivf.faiss"))
        meta = {"format": _FORMAT, "kind": "ivf", "library": "faiss", "index": "IndexIVFScalarQuantizer", "metric": "ip",
                "dtype": "fp16", "count": len(self.ids), "dim": self.dim, "nlist": self.nlist, "nprobe": self.nprobe,
                "params": asdict(self.params), "calibration": self.calibration, "ids": self.ids}
        (path / "ivf.json").write_text(json.dumps(meta), encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> IVFIndex:
        """Open a saved index with its lists memory-mapped; a damaged file is an `IndexFileError`
        naming it: ``ivf.json`` unreadable or with a bad field (``nprobe`` a positive integer),
        ``ivf.faiss`` unreadable, of another kind or size, or with a centroid that is not unit
        length (`_check_centroids`; the lists themselves are read only where queries probe)."""
        path = Path(path)
        meta_path, graph_path = path / "ivf.json", path / "ivf.faiss"
        if not meta_path.is_file():
            raise NotFoundError(f"{path} is not a saved IVFIndex directory (no ivf.json)")
        meta = read_json(meta_path)
        if not isinstance(meta, dict) or meta.get("format") != _FORMAT or meta.get("library") != "faiss":
            raise IndexFileError(meta_path, "not an IVF index this version can read", "rebuild the index")
        ids = meta.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids) or len(set(ids)) != len(ids):
            raise IndexFileError(meta_path, "'ids' must be a list of distinct strings", "rebuild the index")
        if not graph_path.is_file():
            raise IndexFileError(graph_path, "missing", "rebuild the index")
        nprobe, calibration = meta.get("nprobe"), meta.get("calibration") or {}
        try:
            positive_int("nprobe", nprobe)
        except (TypeError, ValueError):
            raise IndexFileError(meta_path, f"'nprobe' must be how many clusters a query probes, a whole number from 1, got {nprobe!r}",
                                 "rebuild the index") from None
        if not isinstance(calibration, dict):
            raise IndexFileError(meta_path, f"'calibration' must be a JSON object, got {calibration!r}", "rebuild the index")
        try:
            params = IVFParams(**meta["params"])
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexFileError(meta_path, f"bad parameters ({exc})", "rebuild the index") from None
        faiss = _faiss()
        try:
            graph = faiss.read_index(str(graph_path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError as exc:
            raise IndexFileError(graph_path, f"truncated or corrupted ({exc})", "rebuild the index") from None
        if not isinstance(graph, faiss.IndexIVFScalarQuantizer):
            raise IndexFileError(graph_path, f"holds a {type(graph).__name__}, not the IVF index of ivf.json", "rebuild the index")
        if graph.ntotal != len(ids) or graph.d != meta.get("dim") or graph.nlist != meta.get("nlist", graph.nlist):
            raise IndexFileError(graph_path, f"{graph.ntotal} x {graph.d} vectors in {graph.nlist} clusters for {len(ids)} ids "
                                 f"of {meta.get('dim')} dimensions in {meta.get('nlist')} clusters (ivf.json)", "rebuild the index")
        _check_centroids(graph_path, graph)
        index = cls._empty(params)
        index.ids, index._graph, index._mapped = ids, graph, graph_path
        index.nprobe, index.calibration = int(nprobe), dict(calibration)  # type: ignore[arg-type]
        return index


def _check_centroids(file: Path, graph: Any) -> None:
    """`IndexFileError` naming `file` unless every centroid is unit length: FAISS trains the
    clusters of an inner-product IVF index spherically (each centroid normalised), so a zero, NaN
    or overwritten centroid is damage (it would send queries to the wrong clusters). Reads the
    ``nlist`` x ``dim`` float32 centroids, held in memory."""
    quantizer = _faiss().downcast_index(graph.quantizer)
    centroids = quantizer.reconstruct_n(0, quantizer.ntotal) if quantizer.ntotal else np.zeros((0, graph.d), np.float32)
    bad = non_unit_rows(centroids, unit_tolerance(np.dtype(np.float32)))
    if quantizer.ntotal != graph.nlist or bad.size:
        where = f"centroid {int(bad[0])} is not unit length ({bad.size} of {len(centroids)})" if bad.size else \
            f"{quantizer.ntotal} centroids for {graph.nlist} clusters"
        raise IndexFileError(file, f"{where}: a zeroed or overwritten block", "rebuild the index")


def _pseudo_queries(rows: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """`m` normalised sums of 4 distinct random rows, each normalised first (fewer when there are fewer rows)."""
    picks = np.sort(rng.choice(len(rows), size=min(len(rows), 4 * m), replace=False))
    picked = _normalised(_take(rows, picks), "vectors")[rng.permutation(len(picks))]
    count = max(1, len(picks) // 4)
    summed = picked[: 4 * count].reshape(count, 4, -1).sum(axis=1) if len(picks) >= 4 else picked
    return _normalised(summed, "pseudo-queries")


_BLOCK_BYTES = 64 << 20  # rows read at a time while building: 64 MB of them


def _row_blocks(matrix: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, rows) blocks of a 2-D array, 64 MB at a time (`checks.read_blocks`)."""
    return read_blocks(matrix, _BLOCK_BYTES // max(1, matrix.shape[1] * matrix.dtype.itemsize))


def _take(matrix: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`matrix[rows]` (rows sorted), read through the file for a memory-mapped ``.npy``."""
    source = mapped_file(matrix)
    if source is None:
        return np.asarray(matrix[rows])
    path, offset = source
    width = matrix.shape[1] * matrix.dtype.itemsize
    out = np.empty((len(rows), matrix.shape[1]), dtype=matrix.dtype)
    with open(path, "rb") as fh:
        for i, row in enumerate(rows.tolist()):
            fh.seek(offset + row * width)
            out[i] = np.fromfile(fh, dtype=matrix.dtype, count=matrix.shape[1])
    return out
