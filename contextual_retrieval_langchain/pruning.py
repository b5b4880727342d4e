"""`ContextPruningCompressor`: the core's `ContextPruner` as a LangChain `BaseDocumentCompressor`.

Use it in `ContextualCompressionRetriever`, or last in a `DocumentCompressorPipeline` after
`RerankCompressor`. It returns new Documents (copies) and never changes the caller's: for a
contextual Document (``metadata["original_content"]`` holds the chunk, page_content is context +
chunk) the copy's ``original_content`` is the kept source text and its page_content the context
plus that text, so `format_docs_for_llm` still shows context and source apart; any other
Document's page_content becomes the kept text. ``metadata["pruned_spans"]`` holds
[start, end, start_line, end_line] per kept piece of the original text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor
from langchain_core.documents import Document as LCDocument
from pydantic import ConfigDict, Field, PrivateAttr

from contextual_retrieval_core.errors import InputTypeError
from contextual_retrieval_core.pruning import PRUNED_SPANS_KEY, ContextPruner, PruningResult, kind_for_path
from contextual_retrieval_core.types import Chunk, ContextualChunk, compose_indexed_text
from contextual_retrieval_langchain._documents import CHUNK_ID_KEY, CONTEXT_KEY, ORIGINAL_CONTENT_KEY, PARENT_ID_KEY

__all__ = ["ContextPruningCompressor"]


def _chunks(docs: Sequence[LCDocument]) -> tuple[list[ContextualChunk], list]:
    chunks, kinds = [], []
    for i, doc in enumerate(docs):
        if not isinstance(doc, LCDocument):
            raise InputTypeError(f"documents[{i}] is a {type(doc).__name__}; pass LangChain Documents")
        meta = doc.metadata
        text = meta.get(ORIGINAL_CONTENT_KEY, doc.page_content)
        if not isinstance(text, str):
            raise InputTypeError(f"documents[{i}]: metadata[{ORIGINAL_CONTENT_KEY!r}] must be str, got {type(text).__name__}")
        chunk_id = str(doc.id or meta.get(CHUNK_ID_KEY) or f"#{i}")
        path = meta.get("source") or meta.get("file_path") or meta.get(PARENT_ID_KEY)
        document_id = str(meta.get(PARENT_ID_KEY) or path or chunk_id)
        chunks.append(ContextualChunk(Chunk(chunk_id, document_id, text), str(meta.get(CONTEXT_KEY) or "")))
        kinds.append(kind_for_path(str(path)) if path else None)
    return chunks, kinds


def _documents(docs: Sequence[LCDocument], result: PruningResult) -> list[LCDocument]:
    out = []
    for pruned in result.chunks:
        doc = docs[pruned.rank]
        meta = {**doc.metadata, PRUNED_SPANS_KEY: pruned.spans}
        if ORIGINAL_CONTENT_KEY in doc.metadata:
            meta[ORIGINAL_CONTENT_KEY] = pruned.text
            content = compose_indexed_text(pruned.context, pruned.text)
        else:
            content = pruned.text
        out.append(doc.model_copy(update={"page_content": content, "metadata": meta}))
    return out


class ContextPruningCompressor(BaseDocumentCompressor):
    """Keeps the sentences / statements of the retrieved Documents that answer the query.

    Args:
        embedder: a core `Embedder` (default: the offline `LocalMiniLMEmbedder`).
        budget: tokens of source text to keep; None for `budget_share` of the input (default 0.3).
        pruner: a ready core `ContextPruner` (then the settings here are ignored).
        settings: any other `ContextPruner` setting (lam, alpha, neighbours, min_tokens, ...).

    Example:
        >>> from langchain_core.documents import Document
        >>> docs = [Document("Revenue grew 3% to $412 million. The office moved. Lunch was at noon. Parking is free.")]
        >>> compressor = ContextPruningCompressor(budget=10, settings={"min_tokens": 1})
        >>> [d.page_content for d in compressor.compress_documents(docs, "How much did revenue grow?")]
        ['Revenue grew 3% to $412 million.']
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    embedder: Any | None = Field(default=None, exclude=True)
    budget: int | None = None
    budget_share: float = 0.3
    settings: dict[str, Any] = Field(default_factory=dict)
    pruner: Any | None = Field(default=None, exclude=True)
    _pruner: ContextPruner = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        if self.pruner is not None:
            if not isinstance(self.pruner, ContextPruner):
                raise InputTypeError(f"pruner must be a contextual_retrieval_core ContextPruner, got {type(self.pruner).__name__}")
            self._pruner = self.pruner
            return
        embedder = self.embedder
        if embedder is None:
            from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

            embedder = LocalMiniLMEmbedder()
        self._pruner = ContextPruner(embedder, budget=self.budget, budget_share=self.budget_share, **self.settings)

    def prepare(self, documents: Sequence[LCDocument]) -> int:
        """Compute ahead of any query what pruning `documents` needs (their units' vectors, terms
        and token counts; `ContextPruner.prepare`), at ingestion, say. Returns the texts embedded."""
        chunks, kinds = _chunks(list(documents))
        return self._pruner.prepare(chunks, kinds=kinds)

    def compress_documents(self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None) -> list[LCDocument]:
        docs = list(documents)
        chunks, kinds = _chunks(docs)
        return _documents(docs, self._pruner.prune(query, chunks, kinds=kinds))

    async def acompress_documents(self, documents: Sequence[LCDocument], query: str, callbacks: Callbacks | None = None) -> list[LCDocument]:
        docs = list(documents)
        chunks, kinds = _chunks(docs)
        return _documents(docs, await self._pruner.aprune(query, chunks, kinds=kinds))
