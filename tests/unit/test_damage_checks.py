"""Damaged arrays are found at load, before they give different answers (issue 43): a zeroed or
overwritten block of a saved BM25 index's ``norms.npy``, ``idf.npy`` or ``term_max.npy``, rows
of a `VectorIndex`'s ``vectors.npy`` that are zero or not unit length, an `IVFIndex`'s damaged
centroids or ``ivf.json``. Each is an error naming the file and the fix."""

from __future__ import annotations

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
        raw = array.view(np.uint8)
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
