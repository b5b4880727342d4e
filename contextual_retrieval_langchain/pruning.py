"""`ContextPruningCompressor`: the core's `ContextPruner` as a LangChain `BaseDocumentCompressor`.

Use it in `ContextualCompressionRetriever`, or last in a `DocumentCompressorPipeline` after
`RerankCompressor`. It returns new Documents (copies) and never changes the caller's: for a
contextual Document (``metadata["original_content"]`` holds the chunk, page_content is context +
chunk) the copy's ``original_content`` is the kept source text and its page_content the context
plus that text, so `format_docs_for_llm` still shows context and source apart; any other
Document's page_content becomes the kept text. ``metadata["pruned_spans"]`` holds
[start, end, start_line, end_line] per kept piece of the original text.

Every `PruningConfig` setting is a pydantic field of the compressor, with the config's name, type,
default and description; the values are validated by the core (the pruner is built from
`PruningConfig.of(compressor)`), so a setting means the same and fails the same way as in a core
`ContextPruner`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor
from langchain_core.documents import Document as LCDocument
from pydantic import ConfigDict, Field, PrivateAttr, model_validator

from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.pruning import PRUNED_SPANS_KEY, ContextPruner, PruningConfig, PruningResult, kind_for_path
from contextual_retrieval_core.types import Chunk, ContextualChunk, compose_indexed_text
from contextual_retrieval_langchain._documents import CHUNK_ID_KEY, CONTEXT_KEY, ORIGINAL_CONTENT_KEY, PARENT_ID_KEY
from contextual_retrieval_langchain._ingest_fields import with_config_fields

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


class _PruningChecked(BaseDocumentCompressor):
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")  # a misspelt setting is an error

    @model_validator(mode="before")
    @classmethod
    def _settings_of_the_pruner(cls, data: Any) -> Any:
        """With `pruner=`, the fields hold its settings; settings beside it are refused."""
        if not isinstance(data, dict) or data.get("pruner") is None:
            return data
        pruner = data["pruner"]
        if not isinstance(pruner, ContextPruner):
            raise InputTypeError(f"pruner must be a contextual_retrieval_core ContextPruner, got {type(pruner).__name__}")
        given = sorted(k for k in data if k in PruningConfig.field_names())
        if given:
            raise InputError(f"pass pruner= or the pruning settings {given}, not both: the pruner has its own (its config)")
        return {**data, **{name: getattr(pruner.config, name) for name in PruningConfig.field_names()}}

    @property
    def pruning_config(self) -> PruningConfig:
        """The `PruningConfig` the pruning fields hold."""
        return PruningConfig.of(self)


if TYPE_CHECKING:  # the generated fields are read by name; to a type checker this is the base
    _PruningFields = _PruningChecked
else:
    _PruningFields = with_config_fields(_PruningChecked, PruningConfig, "_WithPruningFields")


class ContextPruningCompressor(_PruningFields):
    """Keeps the sentences / statements of the retrieved Documents that answer the query.

    Args:
        embedder: a core `Embedder` (default: the offline `LocalMiniLMEmbedder`).
        pruner: a ready core `ContextPruner` (then the pruning fields hold its settings, and
            giving them as well is an error).
        budget, budget_share, alpha, ...: every `PruningConfig` setting, under its name (budget:
            tokens of source text to keep; None, the default, keeps `budget_share`, 0.3, of the input).

    Example:
        >>> from langchain_core.documents import Document
        >>> docs = [Document("Revenue grew 3% to $412 million. The office moved. Lunch was at noon. Parking is free.")]
        >>> compressor = ContextPruningCompressor(budget=10, min_tokens=1)
        >>> [d.page_content for d in compressor.compress_documents(docs, "How much did revenue grow?")]
        ['Revenue grew 3% to $412 million.']
    """

    embedder: Any | None = Field(default=None, exclude=True)
    pruner: Any | None = Field(default=None, exclude=True)
    _pruner: ContextPruner = PrivateAttr()

    def model_post_init(self, context: Any) -> None:
        if self.pruner is not None:
            self._pruner = self.pruner
            return
        embedder = self.embedder
        if embedder is None:
            from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

            embedder = LocalMiniLMEmbedder()
        self._pruner = ContextPruner(embedder, config=self.pruning_config)

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
