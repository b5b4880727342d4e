"""A Chroma server as the vector side of a `ContextualIndex` (`index --chroma-url http://host:port`).

The index folder keeps everything else (manifest, BM25, context store, embedding cache) and a
small ``chroma-server.json`` naming the server and the collection that holds this index's
chunks. The collection name is made unique when the index is first written, so many index
folders can share one server; later `index`, `query` and `remove` runs find the server in that
file (``--chroma-url`` again moves the index to another address of the same server data).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from contextual_retrieval_core.dense.chroma import ChromaVectorIndex, chroma_collection
from contextual_retrieval_core.index.manifest import IndexDamagedError

__all__ = ["SERVER_FILE", "chroma_http_client", "open_server_vectors", "uses_server", "drop_server_collection"]

SERVER_FILE = "chroma-server.json"


def chroma_http_client(url: str) -> Any:
    """A `chromadb.HttpClient` for ``http(s)://host:port``; a malformed URL is a ValueError naming it."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"--chroma-url must look like http://host:port (a `chroma run` server), got {url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 8000)
    except ValueError:
        raise ValueError(f"--chroma-url has a bad port: {url!r}") from None
    import chromadb
    from chromadb.config import Settings

    return chromadb.HttpClient(host=parts.hostname, port=port, ssl=parts.scheme == "https",
                               settings=Settings(anonymized_telemetry=False))


def uses_server(folder: Path, url: str | None) -> bool:
    """Whether the index in `folder` keeps its vectors on a Chroma server."""
    return bool(url) or (Path(folder) / SERVER_FILE).is_file()


def _target(folder: Path, url: str | None, *, create: bool, fix: str) -> tuple[str, str]:
    file = Path(folder) / SERVER_FILE
    saved: dict = {}
    if file.is_file():
        try:
            saved = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise IndexDamagedError(f"{file} is not readable JSON ({exc}); {fix}") from None
    url = url or saved.get("url")
    collection = saved.get("collection") or f"contextual-index-{uuid.uuid4().hex[:16]}"
    if not url:
        raise IndexDamagedError(f"{file} names no server; pass --chroma-url http://host:port")
    if create and saved != {"url": url, "collection": collection}:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(json.dumps({"url": url, "collection": collection}, indent=2) + "\n", encoding="utf-8")
    return url, collection


def open_server_vectors(folder: Path, url: str | None, *, create: bool, fix: str) -> ChromaVectorIndex:
    """This index's collection on the Chroma server; created when `create`, else it must exist."""
    url, collection = _target(folder, url, create=create, fix=fix)
    client = chroma_http_client(url)
    try:
        found = chroma_collection(client, collection) if create else client.get_collection(collection, embedding_function=None)
    except Exception as exc:  # connection refused, missing collection: chromadb raises several types
        raise IndexDamagedError(f"the Chroma server at {url} has no usable collection {collection!r} "
                                f"({type(exc).__name__}: {exc}); is `chroma run` up there? {fix}") from exc
    return ChromaVectorIndex(collection=found)


def drop_server_collection(folder: Path) -> None:
    """Delete the index's collection on its server (for a rebuild); nothing when it has none."""
    file = Path(folder) / SERVER_FILE
    if not file.is_file():
        return
    saved = json.loads(file.read_text(encoding="utf-8"))
    client = chroma_http_client(saved["url"])
    if saved["collection"] in [getattr(c, "name", c) for c in client.list_collections()]:
        client.delete_collection(saved["collection"])
