"""`CachedEmbedder`: a persistent embedding cache in front of any `Embedder`.

Vectors are stored in SQLite as raw float32 bytes, keyed by (model, input kind, sha256 of the
text as the embedder reads it: an embedder with `window_prefixes` reads a long text only up to its
window's end): an unchanged chunk is never embedded, or paid for, twice, nor is a long text and
the part of it the embedder reads. The model part names the output
dimension too when the embedder was asked for a non-default one (``voyage-3.5@256``), so vectors of
two sizes never share a key. No pickle anywhere.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from contextual_retrieval_core._sdk import in_thread
from contextual_retrieval_core.embeddings.base import Embedder, as_texts

__all__ = ["CachedEmbedder"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model TEXT NOT NULL,
    kind TEXT NOT NULL,
    text_sha256 TEXT NOT NULL,
    dim INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model, kind, text_sha256)
)
"""


class CachedEmbedder:
    """Wraps an `Embedder`; serves known texts from an SQLite file, embeds only the rest.

    Args:
        embedder: the embedder to wrap.
        path: the SQLite file (created if missing); ":memory:" for a per-process cache.

    Threads may share one `CachedEmbedder`: reads, writes and the counts are guarded by a lock;
    two threads missing the same text at once both embed it (the second write replaces the first
    with the same vector).

    Attributes:
        hits, misses: texts served from the cache / sent to the embedder since creation.
        cache_model: the model part of the cache keys: `model_name`, plus ``@<dimension>`` when
            the embedder has an `output_dimension` set.

    Example:
        >>> from contextual_retrieval_core.embeddings import LocalMiniLMEmbedder
        >>> cached = CachedEmbedder(LocalMiniLMEmbedder(), ":memory:")
        >>> _ = cached.embed_documents(["hello"]); _ = cached.embed_documents(["hello"])
        >>> (cached.hits, cached.misses)
        (1, 1)
    """

    def __init__(self, embedder: Embedder, path: str | os.PathLike[str]) -> None:
        self.embedder = embedder
        self.model_name = embedder.model_name
        self.normalized = embedder.normalized
        dimension = getattr(embedder, "output_dimension", None)
        self.cache_model = f"{self.model_name}@{dimension}" if dimension else self.model_name
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._conn.execute("PRAGMA journal_mode=WAL") if self.path != ":memory:" else None
        self._conn.execute(_SCHEMA)
        self._conn.commit()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _lookup(self, kind: str, keys: list[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique), 500):
                part = unique[start : start + 500]
                marks = ",".join("?" * len(part))
                rows = self._conn.execute(
                    f"SELECT text_sha256, dim, vector FROM embeddings WHERE model=? AND kind=? "
                    f"AND text_sha256 IN ({marks})",
                    [self.cache_model, kind, *part],
                ).fetchall()
                for key, dim, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32, count=dim)
        return found

    def _embed(self, kind: str, texts: Sequence[str], compute: Callable[[list[str]], Any]) -> np.ndarray:
        texts = as_texts(texts)
        if not texts:  # the wrapped embedder's own empty result: shape (0, its dimension)
            return np.asarray(compute([]), dtype=np.float32)
        keys = [hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in self._as_read(texts)]
        found = self._lookup(kind, keys)
        todo = [i for i, key in enumerate(keys) if key not in found]
        first: dict[str, int] = {}
        for i in todo:
            first.setdefault(keys[i], i)
        new_idx = list(first.values())
        if new_idx:
            vectors = np.asarray(compute([texts[i] for i in new_idx]), dtype=np.float32)
            with self._lock:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?, ?)",
                    [
                        (self.cache_model, kind, keys[i], int(v.shape[0]), v.tobytes())
                        for i, v in zip(new_idx, vectors)
                    ],
                )
                self._conn.commit()
            for i, v in zip(new_idx, vectors):
                found[keys[i]] = v
        with self._lock:  # counted exactly when threads share the cache
            self.hits += len(texts) - len(new_idx)
            self.misses += len(new_idx)
        return np.stack([found[key] for key in keys])

    def _as_read(self, texts: list[str]) -> list[str]:
        """The texts as the embedder reads them (`window_prefixes`, where it has one: a text longer
        than its window cut where the window ends), so that a long text and its own window share
        one cache entry; the texts themselves otherwise."""
        prefixes = getattr(self.embedder, "window_prefixes", None)
        return list(prefixes(texts)) if callable(prefixes) else texts

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("document", texts, self.embedder.embed_documents)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed("query", texts, self.embedder.embed_queries)

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return await in_thread(self.embed_documents, texts)

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return await in_thread(self.embed_queries, texts)

    def close(self) -> None:
        self._conn.close()
