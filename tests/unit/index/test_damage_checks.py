"""Damaged arrays are found at load, before they give different answers (issue 43): a zeroed or
overwritten block of a saved BM25 index's ``norms.npy``, ``idf.npy`` or ``term_max.npy``, rows
of a `VectorIndex`'s ``vectors.npy`` that are zero or not unit length, an `IVFIndex`'s damaged
centroids or ``ivf.json``. Each is an error naming the file and the fix."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from contextual_retrieval_core.checks import IndexFileError
from contextual_retrieval_core.search.bm25 import BM25Index

BLOCK = 4096


def texts(n: int, seed: int = 0) -> list[str]:
    """`n` texts of 5 to 60 words drawn (Zipf-like) from 3,000: a vocabulary of a few KB of bounds."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(3000)]
    p = 1 / np.arange(1, 3001)
    p /= p.sum()
    return [" ".join(words[j] for j in rng.choice(3000, size=int(rng.integers(5, 60)), p=p)) for _ in range(n)]


@pytest.fixture(scope="module", params=["lucene", "robertson"])
def saved_bm25(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus = texts(3000)
    index = BM25Index(method=request.param).index([f"c{i}" for i in range(len(corpus))], corpus)
    assert len(index.vocab) > 2 * BLOCK // 8  # term_max.npy spans several 4 KB blocks
    return index.save(tmp_path_factory.mktemp(f"bm25-{request.param}") / "bm25")


def damaged_copy(source: Path, target: Path, name: str, change: Callable[[np.ndarray], None]) -> Path:
    """A copy of the saved index `source` at `target`, with `change` applied to the data of
    ``name`` in place (the bytes of the file, past its header, as float64)."""
    target.mkdir()
    for file in source.iterdir():
        target.joinpath(file.name).write_bytes(file.read_bytes())
    array = np.load(target / name, mmap_mode="r+")
    change(array)
    array.flush()
    return target


def zero_block(at: int) -> Callable[[np.ndarray], None]:
    """Zero the 4 KB block that starts `at` bytes into the array's data."""
    def change(array: np.ndarray) -> None:
        raw = array.reshape(-1).view(np.uint8)
        raw[at : at + BLOCK] = 0
    return change


def assert_names(exc: pytest.ExceptionInfo[IndexFileError], file: Path) -> None:
    assert Path(exc.value.path) == file and str(exc.value).startswith(str(file))
    assert "build and save it again" in str(exc.value)


def test_an_undamaged_index_loads_and_answers_the_same(saved_bm25: Path) -> None:
    loaded = BM25Index.load(saved_bm25)
    corpus = texts(3000)
    fresh = BM25Index(method=loaded.method).index([f"c{i}" for i in range(len(corpus))], corpus)
    for query in ("w1 w17 w300", "w2999 w5", "w0"):
        assert loaded.search(query, k=20) == fresh.search(query, k=20) != []


@pytest.mark.parametrize("at", [0, 1000, 8192])
def test_a_zeroed_block_of_norms_is_found(saved_bm25: Path, tmp_path: Path, at: int) -> None:
    folder = damaged_copy(saved_bm25, tmp_path / "ix", "norms.npy", zero_block(at))
    with pytest.raises(IndexFileError, match=r"below k1 \* \(1 - b\)") as caught:
        BM25Index.load(folder)
    assert_names(caught, folder / "norms.npy")


def test_scaled_norms_are_found_by_their_mean(saved_bm25: Path, tmp_path: Path) -> None:
    def scale(array: np.ndarray) -> None:
        array[:] = array * 1.5
    folder = damaged_copy(saved_bm25, tmp_path / "ix", "norms.npy", scale)
    with pytest.raises(IndexFileError, match="mean is .*, not k1") as caught:
        BM25Index.load(folder)
    assert_names(caught, folder / "norms.npy")


@pytest.mark.parametrize("name", ["idf.npy", "term_max.npy"])
@pytest.mark.parametrize("at", [0, 1000, 4096])
def test_a_zeroed_block_of_idf_or_term_bounds_is_found(saved_bm25: Path, tmp_path: Path, name: str, at: int) -> None:
    folder = damaged_copy(saved_bm25, tmp_path / "ix", name, zero_block(at))
    with pytest.raises(IndexFileError) as caught:
        BM25Index.load(folder)
    assert_names(caught, folder / name)


def test_term_bounds_zeroed_whole_are_found(saved_bm25: Path, tmp_path: Path) -> None:
    def zero(array: np.ndarray) -> None:
        array[:] = 0
    folder = damaged_copy(saved_bm25, tmp_path / "ix", "term_max.npy", zero)
    with pytest.raises(IndexFileError, match="term bounds out of range") as caught:
        BM25Index.load(folder)
    assert_names(caught, folder / "term_max.npy")


@pytest.mark.parametrize("at", [0, 8, 1000, 2048, 4096, 5000])
def test_a_block_of_term_bounds_overwritten_with_plausible_values_is_found(saved_bm25: Path, tmp_path: Path, at: int) -> None:
    """Values inside the cheap bounds (each bound a little smaller, as from another index): found by
    the recomputed sample, which has one term in every 4 KB block of the file."""
    def shrink(array: np.ndarray) -> None:
        first, last = at // 8 + 1, (at + BLOCK) // 8 - 1  # whole entries inside the block
        array[first:last] = array[first:last] * 0.999
    folder = damaged_copy(saved_bm25, tmp_path / "ix", "term_max.npy", shrink)
    with pytest.raises(IndexFileError, match="postings' largest weight") as caught:
        BM25Index.load(folder)
    assert_names(caught, folder / "term_max.npy")


# -- dense rows: VectorIndex's vectors.npy ---------------------------------------------------


@pytest.fixture(scope="module")
def saved_vectors(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from contextual_retrieval_core.dense.vectors import VectorIndex

    vectors = np.random.default_rng(1).standard_normal((200, 48))
    return VectorIndex([f"c{i}" for i in range(200)], vectors).save(tmp_path_factory.mktemp("vectors") / "v")


def set_rows(rows: slice, value: float | None = None, scale: float = 1.0) -> Callable[[np.ndarray], None]:
    def change(array: np.ndarray) -> None:
        array[rows] = array[rows] * scale if value is None else value
    return change


@pytest.mark.parametrize("damage, problem", [
    (set_rows(slice(7, 8), 0.0), "row 7 is all zeros"),
    (set_rows(slice(150, 200), 0.0), "row 150 is all zeros"),
    (set_rows(slice(3, 4), float("nan")), "row 3 holds NaN or infinity"),
    (set_rows(slice(9, 10), scale=0.5), "row 9 has length 0.5, not 1"),
    (zero_block(BLOCK + 100), "row 21 has length"),  # rows of 192 bytes: the block zeroes part of row 21, then rows 22..42
])
def test_damaged_rows_of_vectors_are_found(saved_vectors: Path, tmp_path: Path, damage: Callable[[np.ndarray], None],
                                           problem: str) -> None:
    from contextual_retrieval_core.dense.vectors import VectorIndex

    folder = damaged_copy(saved_vectors, tmp_path / "v", "vectors.npy", damage)
    with pytest.raises(IndexFileError, match=problem) as caught:
        VectorIndex.load(folder)
    assert_names(caught, folder / "vectors.npy")


def test_undamaged_vectors_load_and_answer_the_same(saved_vectors: Path) -> None:
    from contextual_retrieval_core.dense.vectors import VectorIndex

    loaded = VectorIndex.load(saved_vectors)
    query = np.random.default_rng(2).standard_normal(48)
    assert loaded.search(query, k=5) == VectorIndex(loaded.ids, np.asarray(loaded.vectors), normalize=False).search(query, k=5)


def test_a_zero_vector_is_refused_when_indexed_so_a_saved_index_never_holds_one() -> None:
    from contextual_retrieval_core.dense.vectors import VectorIndex

    vectors = np.eye(3)
    vectors[1] = 0.0
    with pytest.raises(ValueError, match="vectors row 1 has no direction"):
        VectorIndex(["a", "b", "c"], vectors)


def test_a_large_matrix_is_checked_a_block_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows are read in blocks (here 64 rows): a bad row in a later block is found, numbered
    from the start of the matrix."""
    from contextual_retrieval_core.dense import vectors as module

    monkeypatch.setattr(module, "_CHECK_BYTES", 64 * 8 * 4)
    rows = np.random.default_rng(3).standard_normal((300, 8))
    folder = module.VectorIndex([f"c{i}" for i in range(300)], rows).save(tmp_path / "v")
    assert len(module.VectorIndex.load(folder)) == 300
    damaged_copy(folder, tmp_path / "d", "vectors.npy", set_rows(slice(250, 251), 0.0))
    with pytest.raises(IndexFileError, match=r"row 250 is all zeros \(1 such rows in rows 192\.\.255"):
        module.VectorIndex.load(tmp_path / "d")


# -- the IVF index: ivf.json and the centroids in ivf.faiss ----------------------------------


@pytest.fixture(scope="module")
def saved_ivf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("faiss")
    from contextual_retrieval_core.dense.ivf import IVFIndex, IVFParams

    vectors = np.random.default_rng(4).standard_normal((3000, 64)).astype(np.float32)
    index = IVFIndex([f"c{i}" for i in range(3000)], vectors, params=IVFParams(depth=10, calibration_queries=50))
    return index.save(tmp_path_factory.mktemp("ivf") / "ivf")


def copy_folder(source: Path, target: Path) -> Path:
    target.mkdir()
    for file in source.iterdir():
        target.joinpath(file.name).write_bytes(file.read_bytes())
    return target


def test_a_zeroed_block_of_centroids_is_found(saved_ivf: Path, tmp_path: Path) -> None:
    import faiss

    from contextual_retrieval_core.dense.ivf import IVFIndex

    folder = copy_folder(saved_ivf, tmp_path / "ivf")
    graph = faiss.read_index(str(folder / "ivf.faiss"))
    first = faiss.downcast_index(graph.quantizer).reconstruct_n(0, 1).tobytes()
    raw = bytearray((folder / "ivf.faiss").read_bytes())
    at = raw.index(first)  # where the centroids start in FAISS's file
    raw[at + 1000 : at + 1000 + BLOCK] = bytes(BLOCK)  # 55 centroids of 256 bytes: 3 (in part) to 19
    (folder / "ivf.faiss").write_bytes(bytes(raw))
    with pytest.raises(IndexFileError, match=r"centroid 3 is not unit length \(17 of 55\)") as caught:
        IVFIndex.load(folder)
    assert Path(caught.value.path) == folder / "ivf.faiss" and "rebuild the index" in str(caught.value)


@pytest.mark.parametrize("nprobe", [0, -4, "x", 1.5, True, None, "missing"])
def test_a_bad_nprobe_in_ivf_json_names_the_file(saved_ivf: Path, tmp_path: Path, nprobe: object) -> None:
    from contextual_retrieval_core.dense.ivf import IVFIndex

    folder = copy_folder(saved_ivf, tmp_path / "ivf")
    meta = json.loads((folder / "ivf.json").read_text(encoding="utf-8"))
    if nprobe == "missing":
        del meta["nprobe"]
    else:
        meta["nprobe"] = nprobe
    (folder / "ivf.json").write_text(json.dumps(meta), encoding="utf-8")
    with pytest.raises(IndexFileError, match="'nprobe' must be how many clusters a query probes") as caught:
        IVFIndex.load(folder)
    assert Path(caught.value.path) == folder / "ivf.json" and "rebuild the index" in str(caught.value)


def test_a_deleted_ivf_json_is_named_not_vectors_json(saved_ivf: Path, tmp_path: Path) -> None:
    from contextual_retrieval_core.dense.hnsw import load_dense_index

    folder = copy_folder(saved_ivf, tmp_path / "ivf")
    (folder / "ivf.json").unlink()
    with pytest.raises(IndexFileError, match="ivf.json: missing") as caught:
        load_dense_index(folder)
    assert Path(caught.value.path) == folder / "ivf.json" and "vectors.json" not in str(caught.value)


def test_an_undamaged_ivf_index_loads_and_answers_the_same(saved_ivf: Path) -> None:
    from contextual_retrieval_core.dense.ivf import IVFIndex

    loaded, again = IVFIndex.load(saved_ivf), IVFIndex.load(saved_ivf)
    query = np.random.default_rng(5).standard_normal(64).astype(np.float32)
    assert loaded.search(query, k=10) == again.search(query, k=10) != []
    assert loaded.nprobe >= 1 and loaded.calibration["nprobe"] == loaded.nprobe


def test_a_zero_vector_is_refused_by_the_ivf_build() -> None:
    pytest.importorskip("faiss")
    from contextual_retrieval_core.dense.ivf import IVFIndex, IVFParams

    vectors = np.random.default_rng(6).standard_normal((100, 8)).astype(np.float32)
    vectors[42] = 0.0
    with pytest.raises(ValueError, match="vectors row 42 has no direction"):
        IVFIndex([f"c{i}" for i in range(100)], vectors, params=IVFParams(depth=5))
