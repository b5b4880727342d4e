"""`LateChunkingEmbeddings`: late-chunked vectors for LangChain Documents, offline.

LangChain's ``embed_documents(texts)`` gets a flat list with no document grouping, so there each
text is embedded as a document of its own. To late-chunk, pass the chunks grouped:
``embed_grouped_documents(docs)`` embeds the Documents of one parent together (grouped by
``metadata["parent_id"]``, which `ContextualDocumentTransformer` sets, or any key you name; each
group in the order given) through the core's `LateChunkingEmbedder`, so every chunk vector is
pooled from token embeddings that saw its neighbours; ``embed_document_chunks([[chunk, ...],
...])`` takes plain texts, one list per document. A Document's text is its ``page_content`` (for
the transformer's Documents: the context, then the chunk). Queries get ordinary MiniLM vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document

from contextual_retrieval_core.embeddings.late_chunking import MAX_POSITIONS, LateChunkingEmbedder
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_langchain._documents import PARENT_ID_KEY
from contextual_retrieval_langchain.embeddings import EmbedderEmbeddings

__all__ = ["LateChunkingEmbeddings"]


class LateChunkingEmbeddings(EmbedderEmbeddings):
    """`EmbedderEmbeddings` over the core `LateChunkingEmbedder` (offline MiniLM).

    Args:
        window: positions per macro-window (at most 512, the model's limit).
        overlap: tokens shared by consecutive macro-windows (default: a quarter of `window`).

    Example:
        >>> from langchain_core.documents import Document
        >>> emb = LateChunkingEmbeddings()
        >>> docs = [Document("ACME sells anvils.", metadata={"parent_id": "acme"}),
        ...         Document("Revenue grew 3% in Q2.", metadata={"parent_id": "acme"})]
        >>> vectors = emb.embed_grouped_documents(docs)
        >>> len(vectors), len(vectors[0])
        (2, 384)
    """

    def __init__(self, *, window: int = MAX_POSITIONS, overlap: int | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("embedder", LateChunkingEmbedder(window=window, overlap=overlap))
        super().__init__(**kwargs)

    def embed_document_chunks(self, documents: Sequence[Sequence[str]]) -> list[list[list[float]]]:
        """One list of chunk vectors per document; each document's chunks late-chunked together."""
        return [v.astype(float).tolist() for v in self.embedder.embed_document_chunks(documents)]

    def embed_grouped_documents(self, documents: Sequence[Document], key: str = PARENT_ID_KEY) -> list[list[float]]:
        """Vectors of `documents` in order; those with the same ``metadata[key]`` late-chunked together."""
        texts, groups = _texts_and_groups(documents, key)
        return np.asarray(self.embedder.embed_grouped(texts, groups), dtype=float).tolist()

    async def aembed_grouped_documents(self, documents: Sequence[Document], key: str = PARENT_ID_KEY) -> list[list[float]]:
        texts, groups = _texts_and_groups(documents, key)
        return np.asarray(await self.embedder.aembed_grouped(texts, groups), dtype=float).tolist()


def _texts_and_groups(documents: Sequence[Document], key: str) -> tuple[list[str], list[str]]:
    missing = [i for i, d in enumerate(documents) if key not in d.metadata]
    if missing:
        raise InputError(f"documents[{missing[0]}] has no metadata[{key!r}]; pass key= naming the parent document field")
    return [d.page_content for d in documents], [str(d.metadata[key]) for d in documents]
