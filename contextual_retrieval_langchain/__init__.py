"""contextual-retrieval for LangChain: thin adapters over the framework-free core.

Ingestion: `ContextualDocumentTransformer` (splits, situates each chunk, returns
context + chunk Documents). Query: `ContextualBM25Retriever`, `ContextualEnsembleRetriever`
(weighted RRF over any retrievers, optional reranking) and `RerankCompressor` (Cohere, Voyage,
local). `LocalMiniLMEmbeddings` / `ContextualVoyageEmbeddings` / `EmbedderEmbeddings` wrap the core
embedders; `LateChunkingEmbeddings` late-chunks Documents grouped by parent (offline);
`chroma_from_documents` builds an embedded Chroma; `format_docs_for_llm` marks context
and source apart in prompts. `ContextualMilvus`, `MilvusLeg`, `milvus_retrievers` and
`milvus_ensemble` keep both sides of the hybrid in one Milvus collection (the ``milvus`` extra;
imported on first use). `VoyageContextualizedEmbeddings` (voyage-context-3, documents' chunks
embedded together) and `WindowedVectorStore` (a long text's windows as extra rows of any vector
store) are imported on first use too.

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_text_splitters import RecursiveCharacterTextSplitter
    >>> from contextual_retrieval_langchain import (ContextualDocumentTransformer,
    ...     ContextualEnsembleRetriever, LocalMiniLMEmbeddings, format_docs_for_llm)
    >>> transformer = ContextualDocumentTransformer(
    ...     text_splitter=RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0), show_progress=False)
    >>> chunks = transformer.transform_documents([
    ...     Document("# Billing\\nInvoices go out on the first of each month.", metadata={"source": "billing.md"}),
    ...     Document("# Deploy\\nRun make deploy from the release branch.", metadata={"source": "deploy.md"})])
    >>> retriever = ContextualEnsembleRetriever.from_documents(chunks, LocalMiniLMEmbeddings(), k=1)
    >>> print(format_docs_for_llm(retriever.invoke("when are invoices sent?")))
    [Context: generated to situate the source text below; not part of the source]
    <BLANKLINE>
    From billing.md, section: Billing.
    <BLANKLINE>
    [Source text]
    <BLANKLINE>
    # Billing
    Invoices go out on the first of each month.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports
from contextual_retrieval_core.errors import MissingDependencyError

try:
    import langchain_core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise MissingDependencyError(
        "contextual_retrieval_langchain needs LangChain: pip install 'contextual-retrieval-kit[langchain]'"
    ) from exc

from contextual_retrieval_langchain._documents import (
    CHUNK_ID_KEY,
    CHUNK_INDEX_KEY,
    CONTEXT_KEY,
    ORIGINAL_CONTENT_KEY,
    PARENT_ID_KEY,
    format_docs_for_llm,
)
from contextual_retrieval_langchain.bm25 import ContextualBM25Retriever
from contextual_retrieval_langchain.chat import chat_model_generator
from contextual_retrieval_langchain.embeddings import ContextualVoyageEmbeddings, EmbedderEmbeddings, LocalMiniLMEmbeddings
from contextual_retrieval_langchain.ensemble import ContextualEnsembleRetriever
from contextual_retrieval_langchain.late_chunking import LateChunkingEmbeddings
from contextual_retrieval_langchain.pruning import ContextPruningCompressor
from contextual_retrieval_langchain.rerank import RerankCompressor
from contextual_retrieval_langchain.transformer import ContextualDocumentTransformer
from contextual_retrieval_langchain.vectorstores import chroma_from_documents

if TYPE_CHECKING:  # pragma: no cover - typing only; imported on first use (the milvus extra, and two parts most never use)
    from contextual_retrieval_langchain.milvus import ContextualMilvus, MilvusLeg, milvus_ensemble, milvus_retrievers
    from contextual_retrieval_langchain.voyage_context import VoyageContextualizedEmbeddings
    from contextual_retrieval_langchain.windows import WindowedVectorStore

__all__ = [
    "ContextPruningCompressor",
    "CHUNK_ID_KEY",
    "CHUNK_INDEX_KEY",
    "CONTEXT_KEY",
    "ORIGINAL_CONTENT_KEY",
    "PARENT_ID_KEY",
    "ContextualBM25Retriever",
    "ContextualDocumentTransformer",
    "ContextualEnsembleRetriever",
    "ContextualMilvus",
    "ContextualVoyageEmbeddings",
    "EmbedderEmbeddings",
    "LateChunkingEmbeddings",
    "LocalMiniLMEmbeddings",
    "MilvusLeg",
    "RerankCompressor",
    "VoyageContextualizedEmbeddings",
    "WindowedVectorStore",
    "chat_model_generator",
    "chroma_from_documents",
    "format_docs_for_llm",
    "milvus_ensemble",
    "milvus_retrievers",
]

__getattr__, __dir__ = lazy_exports(globals(), {
    **{name: "contextual_retrieval_langchain.milvus" for name in ("ContextualMilvus", "MilvusLeg", "milvus_ensemble", "milvus_retrievers")},
    "VoyageContextualizedEmbeddings": "contextual_retrieval_langchain.voyage_context",
    "WindowedVectorStore": "contextual_retrieval_langchain.windows",
})
