"""Opening the parts of an index folder, with `IndexDamagedError` (naming the file and the fix)
instead of a library's traceback when one is missing, truncated or foreign."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

from contextual_retrieval_core.dense.chroma import ChromaVectorIndex
from contextual_retrieval_core.embeddings.base import Embedder
from contextual_retrieval_core.index.chroma_server import drop_server_collection
from contextual_retrieval_core.index.manifest import MANIFEST_NAME, IndexDamagedError, IndexManifest
from contextual_retrieval_core.search.bm25 import BM25Index

__all__ = ["open_embedding_cache", "open_vectors", "load_bm25", "chunk_rows", "clear_index"]


def open_embedding_cache(file: Path, embedder: Embedder) -> Any:
    """A `CachedEmbedder` on `file` (created if missing)."""
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder

    try:
        return CachedEmbedder(embedder, file)
    except sqlite3.DatabaseError as exc:
        raise IndexDamagedError(
            f"{file} is not a readable embedding cache ({exc}); delete it (it is only a cache: nothing is lost) "
            "and re-run `contextual-retrieval index`"
        ) from exc


def open_vectors(folder: Path, collection: str, *, create: bool, fix: str) -> ChromaVectorIndex:
    """The Chroma collection in `folder`; created when `create`, else it must exist."""
    from contextual_retrieval_core.dense.chroma import chroma_client, chroma_collection

    if not (folder / "chroma.sqlite3").is_file():
        if not create:
            raise IndexDamagedError(f"{folder} is missing or holds no Chroma database; {fix}")
        _forget_deleted_database(folder)
    try:
        client = chroma_client(folder)
        # embeddings are always computed by the library and passed in: no Chroma embedding function
        found = (chroma_collection(client, collection) if create
                 else client.get_collection(collection, embedding_function=None))
    except ImportError:
        raise
    except Exception as exc:  # chromadb's errors share no base class beyond Exception
        raise IndexDamagedError(f"{folder} cannot be opened as this index's Chroma database "
                                f"({type(exc).__name__}: {exc}); {fix}") from exc
    return ChromaVectorIndex(collection=found)


def _forget_deleted_database(folder: Path) -> None:
    """Chroma keeps one system per database path for the whole process; when the folder was
    deleted under it (a damaged index being repaired), that system would go on writing to the
    deleted files. Drop it so the next client starts afresh. (Chroma's only hook for this,
    `clear_system_cache`, drops every database of the process.)"""
    try:
        from chromadb.api.shared_system_client import SharedSystemClient
    except ImportError:  # pragma: no cover - other chromadb layouts keep no such cache
        return
    systems = getattr(SharedSystemClient, "_identifier_to_system", {})
    for key in [k for k in systems if k and Path(k).resolve() == folder.resolve()]:
        systems.pop(key, None)


def load_bm25(folder: Path, manifest: IndexManifest, *, fix: str) -> BM25Index:
    """The BM25 index in `folder`, checked to index exactly the manifest's chunks."""
    for name in BM25Index.saved_files(folder):
        file = folder / name
        if not file.is_file():
            raise IndexDamagedError(f"{file} is missing; {fix}")
        if file.stat().st_size == 0:
            raise IndexDamagedError(f"{file} is empty; {fix}")
    try:
        bm25 = BM25Index.load(folder)
    except (OSError, ValueError, EOFError, KeyError, TypeError, IndexError) as exc:
        raise IndexDamagedError(f"{folder} is damaged ({type(exc).__name__}: {exc}); {fix}") from exc
    if len(bm25.ids) != manifest.chunk_count or set(bm25.ids) != set(manifest.chunk_ids()):
        raise IndexDamagedError(f"{folder} does not index this index's chunks ({len(bm25.ids)} ids, the manifest "
                                f"lists {manifest.chunk_count}; a BM25 index from another index?); {fix}")
    return bm25


def chunk_rows(collection: Any, ids: list[str], folder: Path, fix: str) -> dict[str, tuple[str, dict]]:
    """Chunk id -> (indexed text, metadata) from the Chroma `collection`; every id must be there
    (else `IndexDamagedError` naming `folder` and the `fix`)."""
    rows = collection.get(ids=ids, include=["documents", "metadatas"]) if ids else {"ids": []}
    info = {cid: (doc, meta) for cid, doc, meta in zip(rows["ids"], rows.get("documents") or [], rows.get("metadatas") or [])}
    absent = [cid for cid in ids if cid not in info]
    if absent:
        raise IndexDamagedError(f"{folder} lacks {len(absent)} chunks the manifest lists (first: {absent[0]}); {fix}")
    return info


def clear_index(path: Path, collection: str) -> None:
    """Empty the index at `path` (chunks, BM25, manifest), keeping its context store and
    embedding cache."""
    drop_server_collection(path)
    if (path / "chroma").is_dir():
        from contextual_retrieval_core.dense.chroma import chroma_client

        # through Chroma, not by deleting its folder: a client open on it in this process would
        # go on writing to the deleted files
        client = chroma_client(path / "chroma")
        if collection in [getattr(c, "name", c) for c in client.list_collections()]:
            client.delete_collection(collection)
    (path / MANIFEST_NAME).unlink(missing_ok=True)
    for part in path.glob("bm25*"):
        shutil.rmtree(part, ignore_errors=True)
