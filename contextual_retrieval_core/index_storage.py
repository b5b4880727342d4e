"""Opening the parts of an index folder, with `IndexDamagedError` (naming the file and the fix)
instead of a library's traceback when one is missing, truncated or foreign."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .bm25 import BM25Index
from .chroma import ChromaVectorIndex
from .embeddings.base import Embedder
from .index_manifest import IndexDamagedError, IndexManifest

__all__ = ["open_embedding_cache", "open_vectors", "load_bm25"]


def open_embedding_cache(file: Path, embedder: Embedder) -> Any:
    """A `CachedEmbedder` on `file` (created if missing)."""
    from .embeddings.cache import CachedEmbedder

    try:
        return CachedEmbedder(embedder, file)
    except sqlite3.DatabaseError as exc:
        raise IndexDamagedError(
            f"{file} is not a readable embedding cache ({exc}); delete it (it is only a cache: nothing is lost) "
            "and re-run `contextual-retrieval index`"
        ) from exc


def open_vectors(folder: Path, collection: str, *, create: bool, fix: str) -> ChromaVectorIndex:
    """The Chroma collection in `folder`; created when `create`, else it must exist."""
    from .chroma import chroma_client, chroma_collection

    if not create and not (folder / "chroma.sqlite3").is_file():
        raise IndexDamagedError(f"{folder} is missing or holds no Chroma database; {fix}")
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


def load_bm25(folder: Path, manifest: IndexManifest, *, fix: str) -> BM25Index:
    """The BM25 index in `folder`, checked to index exactly the manifest's chunks."""
    try:
        bm25 = BM25Index.load(folder)
    except (OSError, ValueError, EOFError, KeyError, TypeError, IndexError) as exc:
        raise IndexDamagedError(f"{folder} is damaged ({type(exc).__name__}: {exc}); {fix}") from exc
    if len(bm25.ids) != manifest.chunk_count or set(bm25.ids) != set(manifest.chunk_ids()):
        raise IndexDamagedError(f"{folder} does not index this index's chunks ({len(bm25.ids)} ids, the manifest "
                                f"lists {manifest.chunk_count}; a BM25 index from another index?); {fix}")
    return bm25
