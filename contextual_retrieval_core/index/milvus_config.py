"""`MilvusConfig`: where an index on Milvus keeps its collection and how it talks to the server.

A `MilvusContextualIndex` takes one (``milvus=``): the server, the collection, the credentials and
the collection's layout (`search.milvus.MilvusCollection`'s settings), validated once. The server
and the collection left None are the ones the index folder records.

Example:
    >>> config = MilvusConfig(uri="http://127.0.0.1:19530", token="user:secret")
    >>> config
    MilvusConfig(uri='http://127.0.0.1:19530', collection=None, analysis='ours', dense_index=None, batch_rows=256, timeout=10.0, client=None)
    >>> MilvusConfig(collection="2024-chunks")
    Traceback (most recent call last):
    ...
    contextual_retrieval_core.errors.InputError: a Milvus collection name is letters, digits and underscores, not starting with a digit (at most 255), got '2024-chunks'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from contextual_retrieval_core._settings import Settings, setting
from contextual_retrieval_core.checks import positive_int, positive_seconds
from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.search.milvus import ANALYSES, DEFAULT_BATCH_ROWS, DEFAULT_TIMEOUT_S, Analysis

__all__ = ["MilvusConfig"]

#: what Milvus takes as a collection name
_COLLECTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")


@dataclass(frozen=True)
class MilvusConfig(Settings):
    """The Milvus server and collection of a `MilvusContextualIndex` (frozen; validated when built).

    Args:
        uri: the Milvus server (``http://host:19530``; Milvus Lite's ``milvus-lite server --port``,
            standalone or a cluster's proxy); None: the one the folder records. Another URI for an
            existing index points it at another address of the same server data.
        collection: the collection (None: the recorded one, else a new unique name, so many
            folders can share one server).
        token: the server's credentials (``"user:password"`` or an API key), if it asks for any;
            never written to the folder, never in the repr.
        analysis: what Milvus's BM25 function reads (`search.milvus`: "ours", the default, or
            "milvus"); a new collection only, an existing one keeps its own.
        dense_index: the dense field's Milvus index (None: FLAT, exact; see `MilvusCollection`).
        batch_rows: rows per upsert request, and ids per read.
        timeout: seconds a Milvus request may take, retries included, before the server counts as
            not answering.
        client: a pymilvus `MilvusClient` to use (None: one made on first use).

    Errors name the setting and the fix: TypeError for a value of the wrong type, ValueError for
    one out of range.
    """

    uri: str | None = setting(None, "the Milvus server, http://host:19530 (None: the one the folder records)")
    collection: str | None = setting(None, "the collection (None: the recorded one, else a new unique name)")
    token: str | None = setting(None, "the server's credentials, if it asks for any (never written to the folder)", secret=True)
    analysis: Analysis = setting("ours", 'what the BM25 function reads: "ours" (the core tokenizer\'s terms) or "milvus"')
    dense_index: Mapping[str, Any] | None = setting(None, "the dense field's Milvus index (None: FLAT, exact)")
    batch_rows: int = setting(DEFAULT_BATCH_ROWS, "rows per upsert request, and ids per read")
    timeout: float = setting(DEFAULT_TIMEOUT_S, "seconds a Milvus request may take, retries included")
    client: Any = setting(None, "a pymilvus MilvusClient to use (None: one made on first use)")

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise once, here
        if self.uri is not None and (not isinstance(self.uri, str) or not self.uri):
            raise InputError(f"uri must be a Milvus server's address (http://host:19530) or None, got {self.uri!r}")
        if self.collection is not None and not (isinstance(self.collection, str) and _COLLECTION_NAME.fullmatch(self.collection)):
            raise InputError(f"a Milvus collection name is letters, digits and underscores, not starting with a digit "
                             f"(at most 255), got {self.collection!r}")
        if self.token is not None and not isinstance(self.token, str):
            raise InputTypeError(f"token must be a str (\"user:password\" or an API key) or None, got {type(self.token).__name__}")
        if self.analysis not in ANALYSES:
            raise InputError(f"analysis must be one of {ANALYSES}, got {self.analysis!r}")
        if self.dense_index is not None:
            if not isinstance(self.dense_index, Mapping):
                raise InputTypeError(f"dense_index must be a Milvus index's parameters (a dict such as "
                                     f"{{'index_type': 'HNSW', ...}}) or None, got {type(self.dense_index).__name__}")
            set_(self, "dense_index", dict(self.dense_index))
        set_(self, "batch_rows", positive_int("batch_rows", self.batch_rows))
        set_(self, "timeout", positive_seconds("timeout", self.timeout))
