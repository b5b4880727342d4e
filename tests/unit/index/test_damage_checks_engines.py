"""Errors from a local engine (embedded Chroma, faiss, SQLite) reading a damaged index file are
described as that engine's, with the files it reads and the fix, never as a hosted service's
refusal with API-key advice (issue 43). Real errors: a Chroma folder with a damaged HNSW segment,
faiss reading a damaged file, SQLite opening a file that is not a database."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from contextual_retrieval_core.app._errors import describe, error_classes, local_engine

HOSTED = ("hosted service refused", "API key", "ANTHROPIC_API_KEY")


def raised(call) -> BaseException:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the error under test, whatever its class
        return exc
    raise AssertionError("no error")


def assert_local(text: str, engine: str, files: str) -> None:
    assert text.startswith(f"{engine} (a local engine reading the index's files, not a hosted service) failed: ")
    fix = "--rebuild` (nothing is paid for" if engine == "Chroma" else "re-run `contextual-retrieval index"  # Chroma: moved out of
    assert files in text and fix in text and "--rebuild" in text
    assert not any(word in text for word in HOSTED)


@pytest.fixture(scope="module")
def chroma_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An embedded Chroma folder whose collection has its HNSW segment on disk (1,200 rows)."""
    pytest.importorskip("chromadb")
    from contextual_retrieval_core.dense.chroma import chroma_client, chroma_collection

    folder = tmp_path_factory.mktemp("chroma") / "chroma"
    collection = chroma_collection(chroma_client(folder), "chunks")
    vectors = np.random.default_rng(0).standard_normal((1200, 8)).astype(np.float32)
    for start in range(0, 1200, 400):
        collection.add(ids=[f"c{i}" for i in range(start, start + 400)], embeddings=vectors[start : start + 400])
    assert list(folder.glob("*/header.bin")), "no HNSW segment written"
    return folder


def query_copy(source: Path, target: Path) -> None:
    """Query a copy of `source` (a fresh path: Chroma keeps one system per path per process)."""
    from contextual_retrieval_core.dense.chroma import chroma_client

    shutil.copytree(source, target)
    collection = chroma_client(target).get_collection("chunks", embedding_function=None)
    collection.query(query_embeddings=np.ones((1, 8), dtype=np.float32), n_results=5)


@pytest.mark.parametrize("damage", ["zero header.bin", "delete link_lists.bin", "zero chroma.sqlite3"])
def test_a_damaged_embedded_chroma_folder_is_described_as_chroma_with_the_fix(chroma_folder: Path, tmp_path: Path,
                                                                              damage: str) -> None:
    how, name = damage.split()
    copy = tmp_path / "copy"
    shutil.copytree(chroma_folder, copy)
    file = copy / name if name == "chroma.sqlite3" else next(copy.glob(f"*/{name}"))
    if how == "zero":
        with open(file, "r+b") as fh:
            fh.write(bytes(4096))
    else:
        file.unlink()
    exc = raised(lambda: query_copy(copy, tmp_path / "query"))
    assert isinstance(exc, error_classes()) and type(exc).__module__.startswith("chromadb")
    assert local_engine(exc) == "Chroma"
    assert_local(describe(exc), "Chroma", "the index's chroma/ folder (chroma.sqlite3 and its HNSW segment files)")
    named = describe(exc, index_dir="/data/ix")
    assert "/data/ix/chroma/ folder" in named and "`contextual-retrieval index PATH... --index-dir /data/ix --rebuild`" in named


def test_a_faiss_error_on_a_damaged_file_is_described_as_faiss(tmp_path: Path) -> None:
    faiss = pytest.importorskip("faiss")
    file = tmp_path / "ivf.faiss"
    file.write_bytes(b"IwFl" + bytes(100))
    exc = raised(lambda: faiss.read_index(str(file)))
    assert type(exc) is RuntimeError and local_engine(exc) == "faiss"  # a builtin class, raised in faiss's code
    assert_local(describe(exc), "faiss", "the index's dense index files (ivf.faiss, hnsw.faiss)")


def test_a_sqlite_error_is_described_as_sqlite(tmp_path: Path) -> None:
    file = tmp_path / "contexts.sqlite3"
    file.write_bytes(b"not a database" * 100)
    exc = raised(lambda: sqlite3.connect(file).execute("SELECT * FROM sqlite_master").fetchall())
    assert local_engine(exc) == "SQLite"
    assert_local(describe(exc), "SQLite", "contexts.sqlite3")


def test_a_hosted_service_error_keeps_its_api_key_advice() -> None:
    httpx = pytest.importorskip("httpx")
    exc = httpx.ConnectError("connection refused")
    assert local_engine(exc) is None and "hosted service refused" in describe(exc)


def test_other_errors_are_their_message() -> None:
    assert describe(ValueError("depth must be a positive integer, got 0")) == "depth must be a positive integer, got 0"
    full = OSError(28, "No space left on device", "/x/y")
    assert describe(full) == "[Errno 28] No space left on device: '/x/y'"
