"""A Chroma server as the vector side of a `ContextualIndex` (`index --chroma-url http://host:port`).

The index folder keeps everything else (manifest, BM25, context store, embedding cache) and a
small ``chroma-server.json`` naming the server and the collection that holds this index's
chunks. The collection name is made unique when the index is first written, so many index
folders can share one server; later `index`, `query` and `remove` runs find the server in that
file (``--chroma-url`` again moves the index to another address of the same server data).

A server that does not answer (stopped, restarting, unreachable) is a `ChromaServerUnavailable`
naming its address, both when the index is opened and on any call after that; the client is kept,
so once the server is back the same `ContextualIndex` answers again, with no reopening.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from contextual_retrieval_core._sdk import error_chain
from contextual_retrieval_core.dense.chroma import ChromaVectorIndex, chroma_collection
from contextual_retrieval_core.dense.server_errors import VectorServerUnavailable
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.index.manifest import IndexDamagedError

__all__ = ["EMBEDDED_CHROMA", "SERVER_FILE", "chroma_http_client", "open_server_vectors", "uses_server", "drop_server_collection",
           "ChromaServerUnavailable", "ServerCollection"]

SERVER_FILE = "chroma-server.json"


class ChromaServerUnavailable(VectorServerUnavailable):
    """The Chroma server holding an index's vectors did not answer; the message names its address
    and the fix. Nothing in the index folder changed: the same call succeeds once it is back. A
    `VectorServerUnavailable`, as a PostgreSQL (pgvector) server that does not answer is, so one
    ``except`` catches either."""


def _unavailable(url: str, exc: BaseException) -> ChromaServerUnavailable:
    return ChromaServerUnavailable(
        f"the Chroma server at {url} does not answer ({type(exc).__name__}: {exc}); start it again "
        "(`chroma run --path DB --port PORT`) or pass --chroma-url with its address, then retry: "
        "the index folder is unchanged"
    )


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP client's errors for a server that is down or went away mid-request."""
    import httpx

    return (httpx.TransportError,)


def _down(exc: BaseException | None) -> bool:
    """Whether `exc`, or an error it was raised from, is the HTTP client's for a server that is down."""
    return any(isinstance(error, _transport_errors()) for error in error_chain(exc))


class ServerCollection:
    """A Chroma collection on a server whose calls raise `ChromaServerUnavailable` (naming `url`)
    when the server does not answer; everything else is the collection's own.

    Thread-safe as the wrapped collection is: it holds no state of its own.

    Example:
        >>> class Collection:  # any chromadb collection; a stand-in here
        ...     def count(self) -> int:
        ...         return 0
        >>> ServerCollection(Collection(), "http://127.0.0.1:8000").count()
        0
    """

    def __init__(self, collection: Any, url: str) -> None:
        self._collection, self.url = collection, url

    def __getattr__(self, name: str) -> Any:  # name, metadata, _client, ...: the collection's own
        return getattr(self._collection, name)

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(self._collection, method)(*args, **kwargs)
        except Exception as exc:
            if _down(exc):
                raise _unavailable(self.url, exc) from exc
            raise

    def count(self) -> int:
        return self._call("count")

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("get", *args, **kwargs)

    def query(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("query", *args, **kwargs)

    def upsert(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("upsert", *args, **kwargs)

    def add(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("add", *args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("delete", *args, **kwargs)


def chroma_http_client(url: str) -> Any:
    """A `chromadb.HttpClient` for ``http(s)://host:port``; a malformed URL is a ValueError naming it."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"--chroma-url must look like http://host:port (a `chroma run` server), got {url!r}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 8000)
    except ValueError:
        raise InputError(f"--chroma-url has a bad port: {url!r}") from None
    import chromadb
    from chromadb.config import Settings

    return chromadb.HttpClient(host=parts.hostname, port=port, ssl=parts.scheme == "https",
                               settings=Settings(anonymized_telemetry=False))


#: `ContextualIndex(chroma_url=EMBEDDED_CHROMA)`: the vectors in the folder's own embedded Chroma
#: (``chroma/``), as indexes written before version folders held every row kept them
EMBEDDED_CHROMA = "embedded"


def uses_server(folder: Path, url: str | None) -> bool:
    """Whether the index in `folder` keeps its vectors on a Chroma server."""
    return (bool(url) and url != EMBEDDED_CHROMA) or (Path(folder) / SERVER_FILE).is_file()


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
    try:
        client = chroma_http_client(url)  # asks the server for its tenant: fails when it is down
    except Exception as exc:  # chromadb turns the refused connection into a ValueError of its own
        if _down(exc):
            raise _unavailable(url, exc) from exc
        raise
    try:
        found = chroma_collection(client, collection) if create else client.get_collection(collection, embedding_function=None)
    except Exception as exc:  # a missing or foreign collection: chromadb raises several types
        if _down(exc):
            raise _unavailable(url, exc) from exc
        raise IndexDamagedError(f"the Chroma server at {url} has no usable collection {collection!r} "
                                f"({type(exc).__name__}: {exc}); is `chroma run` up there? {fix}") from exc
    return ChromaVectorIndex(collection=ServerCollection(found, url))


def drop_server_collection(folder: Path) -> None:
    """Delete the index's collection on its server (for a rebuild); nothing when it has none."""
    file = Path(folder) / SERVER_FILE
    if not file.is_file():
        return
    saved = json.loads(file.read_text(encoding="utf-8"))
    client = chroma_http_client(saved["url"])
    if saved["collection"] in [getattr(c, "name", c) for c in client.list_collections()]:
        client.delete_collection(saved["collection"])
