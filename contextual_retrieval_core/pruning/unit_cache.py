"""`UnitCache`: what pruning computes per text, computed once and kept for the next query.

A chunk's units (sentences, list items, code statements), their vectors, their BM25 terms and
their token counts never change, so `ContextPruner` looks each up here by the text itself before
computing it. Vectors are keyed by the embedder's model name and the text, so chunks that arrive
from anywhere (another retriever, another process) are recognised by content; behind an
embedder wrapped in `CachedEmbedder` they also persist across processes. Fill it ahead of the
first query with `ContextPruner.prepare` (at ingestion) or let queries fill it as they go.

Vectors are held as float32 by default, exactly as the embedder returned them, so a cached vector
and a freshly computed one give the same selection; ``dtype=numpy.float16`` halves the memory at
the price of rounding them.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any

import numpy as np

from contextual_retrieval_core.checks import positive_int
from contextual_retrieval_core.chunking.tokenizer import Tokenizer
from contextual_retrieval_core.embeddings.base import Embedder, aembed_documents
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.pruning.result import TokenCounter
from contextual_retrieval_core.pruning.units import TextKind, Unit, split_units

__all__ = ["UnitCache", "Terms"]


class Terms:
    """A text's BM25 terms: how many (`length`) and how often each occurs (`counts`)."""

    __slots__ = ("length", "counts")

    def __init__(self, terms: Sequence[str]) -> None:
        self.length = len(terms)
        self.counts = Counter(terms)


class UnitCache:
    """Units, vectors, BM25 terms and token counts by text, bounded, shared safely between threads.

    Args:
        max_texts: entries kept per kind of value; the oldest are dropped beyond it (default
            200,000; the vectors then take at most `max_texts` x dimension x 4 bytes as float32).
        dtype: how vectors are held: numpy.float32 (default: as embedded) or numpy.float16 (half
            the memory, rounded); they are handed out as float32 either way.

    Attributes:
        embedded: texts this cache sent to an embedder since creation.

    Example:
        >>> from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
        >>> cache, embedder = UnitCache(), LocalMiniLMEmbedder()
        >>> _ = cache.vectors(["Revenue grew 3%.", "Staff enjoyed the party."], embedder)
        >>> _ = cache.vectors(["Revenue grew 3%."], embedder)
        >>> cache.embedded
        2
    """

    def __init__(self, max_texts: int = 200_000, *, dtype: Any = np.float32) -> None:
        self.max_texts = positive_int("max_texts", max_texts)
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
            raise InputError(f"dtype must be numpy.float32 or numpy.float16, got {self.dtype}")
        self._units: dict[tuple[str | None, str], list[Unit]] = {}
        self._vectors: dict[tuple[str, str], np.ndarray] = {}
        self._terms: dict[tuple[str, str], Terms] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.embedded = 0

    def __len__(self) -> int:
        return len(self._vectors)

    @property
    def vector_bytes(self) -> int:
        """Bytes held by cached vectors."""
        with self._lock:
            return sum(v.nbytes for v in self._vectors.values())

    # -- lookups ---------------------------------------------------------------------------------

    def units(self, text: str, kind: TextKind | None) -> list[Unit]:
        """`split_units(text, kind)`, split once per (text, kind)."""
        return self._one(self._units, (kind, text), lambda: split_units(text, kind))

    def terms(self, texts: Sequence[str], tokenizer: Tokenizer) -> list[Terms]:
        """The BM25 terms of each text under `tokenizer`'s settings."""
        setting = json.dumps(tokenizer.config.to_dict(), sort_keys=True, default=str)
        return [self._one(self._terms, (setting, t), partial(_terms, tokenizer, t)) for t in texts]

    def token_counts(self, texts: Sequence[str], counter: TokenCounter) -> list[int]:
        """`counter.count(text)` for each text."""
        return [self._one(self._counts, (counter.name, t), partial(counter.count, t)) for t in texts]

    def vectors(self, texts: Sequence[str], embedder: Embedder) -> np.ndarray:
        """float32 document vectors of `texts` (one row each); only texts not seen before are
        embedded, each distinct one once, in one call."""
        model, todo = self._missing(texts, embedder)
        if todo:
            self._store(model, todo, embedder.embed_documents(todo))
        return self._stack(model, texts, embedder)

    async def avectors(self, texts: Sequence[str], embedder: Embedder) -> np.ndarray:
        """`vectors` with the embedder's async method (or its sync one in a worker thread)."""
        model, todo = self._missing(texts, embedder)
        if todo:
            self._store(model, todo, await aembed_documents(embedder, todo))
        return self._stack(model, texts, embedder)

    # -- internals -------------------------------------------------------------------------------

    def _one(self, table: dict, key: Hashable, compute: Callable[[], Any]) -> Any:
        with self._lock:
            value = table.get(key)
        if value is None:
            value = compute()
            with self._lock:
                self._put(table, key, value)
        return value

    def _put(self, table: dict, key: Hashable, value: Any) -> None:
        table[key] = value
        while len(table) > self.max_texts:
            del table[next(iter(table))]

    def _missing(self, texts: Sequence[str], embedder: Embedder) -> tuple[str, list[str]]:
        model = _model_key(embedder)
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if (model, t) not in self._vectors))
        return model, todo

    def _store(self, model: str, todo: list[str], vectors: Any) -> None:
        array = np.asarray(vectors, dtype=np.float32)
        if array.shape[0] != len(todo):
            raise InputError(f"the embedder returned {array.shape[0]} vectors for {len(todo)} texts")
        with self._lock:
            self.embedded += len(todo)
            for text, row in zip(todo, array.astype(self.dtype, copy=False)):
                self._put(self._vectors, (model, text), row)

    def _stack(self, model: str, texts: Sequence[str], embedder: Embedder) -> np.ndarray:
        with self._lock:
            rows = [self._vectors.get((model, t)) for t in texts]
        missing = [t for t, r in zip(texts, rows) if r is None]
        if missing:  # dropped by the bound between the embedding and now: embed those again
            again = dict(zip(missing, np.asarray(embedder.embed_documents(missing), dtype=np.float32)))
            rows = [again[t] if r is None else r for t, r in zip(texts, rows)]
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([r for r in rows if r is not None]).astype(np.float32, copy=False)


def _model_key(embedder: Embedder) -> str:
    dimension = getattr(embedder, "output_dimension", None)
    name = str(getattr(embedder, "model_name", type(embedder).__name__))
    return f"{name}@{dimension}" if dimension else name


def _terms(tokenizer: Tokenizer, text: str) -> Terms:
    return Terms(tokenizer.tokenize(text))
