"""Conversions at the edge: LangChain `Document`s to and from the core's dataclasses.

The metadata keys every part of this package reads and writes are defined here once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document as LCDocument

from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.types import CHUNK_INDEX_KEY, CONTEXT_KEY, ContextualChunk, format_for_llm

__all__ = [
    "CONTEXT_KEY",
    "ORIGINAL_CONTENT_KEY",
    "PARENT_ID_KEY",
    "CHUNK_INDEX_KEY",
    "CHUNK_ID_KEY",
    "document_id_of",
    "chunk_id_of",
    "contextual_document",
    "format_docs_for_llm",
]

#: the generated context is metadata[CONTEXT_KEY]; the chunk's position is metadata[CHUNK_INDEX_KEY]
#: (both keys are the core's, in contextual_retrieval_core.types)
#: the chunk as the splitter produced it (page_content is context + "\n\n" + chunk)
ORIGINAL_CONTENT_KEY = "original_content"
#: the id of the whole document the chunk comes from
PARENT_ID_KEY = "parent_id"
#: the chunk's id (also `Document.id`): what vector stores, BM25 and fusion key on
CHUNK_ID_KEY = "chunk_id"


def document_id_of(doc: LCDocument, id_key: str | None = "source") -> str:
    """A whole document's id: `Document.id`, else ``metadata[id_key]``, else a hash of its text."""
    if doc.id:
        return str(doc.id)
    if id_key and doc.metadata.get(id_key) not in (None, ""):
        return str(doc.metadata[id_key])
    return "sha256:" + hashlib.sha256(doc.page_content.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def chunk_id_of(doc: LCDocument, id_key: str = CHUNK_ID_KEY) -> str:
    """A retrieved chunk's id: ``metadata[id_key]``, else `Document.id`; ValueError naming the fix.

    The metadata comes first because it travels with the chunk wherever it is stored, where a
    store's id may not be ours: LangChain's indexing API (``index(..., record_manager=...)``)
    stores every Document under a hash of its content and metadata, so the same chunk comes back
    from the vector store under that hash and from BM25 under its chunk id.

    Example:
        >>> chunk_id_of(LCDocument("x", id="3f2a-hash", metadata={"chunk_id": "c1"})), chunk_id_of(LCDocument("x", id="c2"))
        ('c1', 'c2')
    """
    value = doc.metadata.get(id_key)
    if value not in (None, ""):
        return str(value)
    if doc.id:
        return str(doc.id)
    raise InputError(
        f"a retrieved Document has neither an id nor metadata[{id_key!r}]: fusion dedupes by id, so "
        "index Documents with ids (ContextualDocumentTransformer sets them) or set id_key= to the "
        "metadata key that holds one"
    )


def contextual_document(chunk: ContextualChunk, metadata: dict[str, Any]) -> LCDocument:
    """The LangChain Document for a contextual chunk: page_content is exactly `indexed_text`."""
    meta = dict(metadata)
    meta.update(
        {
            CONTEXT_KEY: chunk.context,
            ORIGINAL_CONTENT_KEY: chunk.text,
            PARENT_ID_KEY: chunk.document_id,
            CHUNK_INDEX_KEY: chunk.chunk.index,
            CHUNK_ID_KEY: chunk.id,
        }
    )
    return LCDocument(page_content=chunk.indexed_text, metadata=meta, id=chunk.id)


def format_docs_for_llm(docs: Sequence[LCDocument], separator: str = "\n\n---\n\n") -> str:
    """Retrieved chunks for a prompt, each with its context and its source text marked apart.

    Documents without a ``context`` in their metadata are shown as they are.

    Example:
        >>> doc = LCDocument(page_content="ACME Q2 2023.\\n\\nRevenue grew 3%.",
        ...                  metadata={"context": "ACME Q2 2023.", "original_content": "Revenue grew 3%."})
        >>> print(format_docs_for_llm([doc, LCDocument(page_content="plain")]))
        [Context: generated to situate the source text below; not part of the source]
        <BLANKLINE>
        ACME Q2 2023.
        <BLANKLINE>
        [Source text]
        <BLANKLINE>
        Revenue grew 3%.
        <BLANKLINE>
        ---
        <BLANKLINE>
        plain
    """
    parts = []
    for doc in docs:
        context = doc.metadata.get(CONTEXT_KEY) or ""
        source = doc.metadata.get(ORIGINAL_CONTENT_KEY)
        parts.append(format_for_llm(context, source) if source is not None else doc.page_content)
    return separator.join(parts)
