"""The `Embedder` protocol every embedding backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from contextual_retrieval_core._sdk import in_thread
from contextual_retrieval_core.errors import InputError, InputTypeError

__all__ = ["Embedder", "aembed_documents", "aembed_queries", "as_texts", "chunk_lists", "consecutive_groups",
           "group_positions", "split_by_sizes"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors; documents and queries may be embedded differently.

    Implementations return float32 arrays of shape (len(texts), dimension). Vectors are L2
    normalised when `normalized` is True, so a dot product is the cosine similarity.
    """

    #: a stable name for the model, part of cache keys and reports
    model_name: str
    #: whether the vectors are L2-normalised
    normalized: bool

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for texts to be indexed (chunks)."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors for search queries."""
        ...

    async def aembed_documents(self, texts: Sequence[str]) -> np.ndarray:
        ...

    async def aembed_queries(self, texts: Sequence[str]) -> np.ndarray:
        ...


async def aembed_documents(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """`embedder.aembed_documents`, or its sync `embed_documents` in a worker thread when it has
    no async method (so a sync-only embedder never blocks the event loop)."""
    fn = getattr(embedder, "aembed_documents", None)
    if fn is not None:
        return await fn(texts)
    return await in_thread(embedder.embed_documents, texts)


async def aembed_queries(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """`embedder.aembed_queries`, or `embed_queries` in a worker thread."""
    fn = getattr(embedder, "aembed_queries", None)
    if fn is not None:
        return await fn(texts)
    return await in_thread(embedder.embed_queries, texts)


def as_texts(texts: Sequence[str]) -> list[str]:
    """`texts` as a list of str, checked before anything is embedded or paid for.

    A bare string would otherwise be embedded one character at a time, and bytes would reach the
    model undecoded; both are TypeErrors naming the fix.

    Example:
        >>> as_texts(("a", "b"))
        ['a', 'b']
        >>> as_texts("a")
        Traceback (most recent call last):
        ...
        contextual_retrieval_core.errors.InputTypeError: pass a list of texts, not a single string: embed_documents([text])
    """
    if isinstance(texts, str):
        raise InputTypeError("pass a list of texts, not a single string: embed_documents([text])")
    if isinstance(texts, (bytes, bytearray)):
        raise InputTypeError("pass a list of texts, not bytes: decode them first, e.g. [data.decode('utf-8')]")
    out = list(texts)
    for i, text in enumerate(out):
        if isinstance(text, (bytes, bytearray)):
            raise InputTypeError(f"texts[{i}] is bytes; decode it first, e.g. data.decode('utf-8', errors='replace')")
        if not isinstance(text, str):
            raise InputTypeError(f"texts[{i}] is {type(text).__name__}, expected str")
    return out


def chunk_lists(documents: Sequence[Sequence[str]], allow_empty: bool = False) -> list[list[str]]:
    """Each document's chunk texts, checked (the input of a document-aware embedder): a list of
    lists of strings; a document with no chunk is a ValueError unless `allow_empty`."""
    if isinstance(documents, str):
        raise InputTypeError("documents must be a list of lists of chunk texts, one list per document")
    docs = []
    for i, doc in enumerate(documents):
        if isinstance(doc, str):
            raise InputTypeError(f"documents[{i}] is a str; pass each document as a list of its chunk texts")
        docs.append(as_texts(doc))
        if not docs[-1] and not allow_empty:
            raise InputError(f"documents[{i}] has no chunks; drop it or give it at least one chunk text")
    return docs


def consecutive_groups(docs: list[list[str]]) -> list[list[int]]:
    """The flat positions of each document's chunks when the lists are laid end to end."""
    groups, start = [], 0
    for doc in docs:
        groups.append(list(range(start, start + len(doc))))
        start += len(doc)
    return groups


def group_positions(texts: Sequence[str], groups: Sequence[Any]) -> list[list[int]]:
    """The positions of `texts` grouped by their `groups` key (one key per text: a document's
    key), groups in first-seen order, positions in input order; errors name the fix."""
    if isinstance(groups, str) or len(groups) != len(texts):
        raise InputError(f"groups must hold one document key per text: got {len(groups)} keys for {len(texts)} texts")
    by_key: dict[Any, list[int]] = {}
    for i, key in enumerate(groups):
        by_key.setdefault(key, []).append(i)
    return list(by_key.values())


def split_by_sizes(flat: np.ndarray, sizes: Sequence[int]) -> list[np.ndarray]:
    """`flat`'s rows cut into consecutive arrays of `sizes` rows (one per document)."""
    return list(np.split(flat, np.cumsum(sizes)[:-1])) if len(sizes) else []
