"""LlamaIndex parts for contextual retrieval: thin adapters over the `contextual_retrieval_core` core.

- `ContextualNodeParser`: split whole Documents with any node parser and situate every chunk.
- `StructureSplitter`: its default node parser, the library's chunker (definitions and headings first);
  `FittedSplitter`: the same fitted to the embedding's window (more chunks, more LLM requests).
- `ContextualBM25Retriever`: contextual BM25 (the core index) as a retriever.
- `HybridRetriever`: any retrievers fused with weighted RRF, optionally reranked.
- `ContextualRerank`: Cohere (default), Voyage or any core reranker as a node postprocessor.
- `ContextPruningPostprocessor`, `LLMCompressorPostprocessor`: context pruning after retrieval.
- `LocalMiniLMEmbedding`, `ContextualVoyageEmbedding`, `CoreEmbedding`: embeddings;
  `VoyageContextualizedEmbedding` (imported on first use): voyage-context-3, a document's nodes
  embedded together.
- `LateChunkingEmbedding`: late-chunked node vectors (nodes of one document embedded together) in
  an `IngestionPipeline`, offline.
- `chroma_vector_store`: embedded Chroma holding our embeddings; `WindowedVectorRetriever`
  (imported on first use): a vector index's search with long nodes' windows as extra entries.
- `ContextualMilvusVectorStore`, `milvus_hybrid_retriever`: both sides of the hybrid in one Milvus
  collection (the ``milvus`` extra; imported on first use).
"""

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports
from contextual_retrieval_core.errors import MissingDependencyError

try:
    import llama_index.core  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise MissingDependencyError(
        "contextual_retrieval_llamaindex needs LlamaIndex: pip install 'contextual-retrieval-kit[llamaindex]'"
    ) from exc

from contextual_retrieval_llamaindex.bm25 import ContextualBM25Retriever
from contextual_retrieval_llamaindex.chroma import chroma_vector_store
from contextual_retrieval_llamaindex.embeddings import ContextualVoyageEmbedding, CoreEmbedding, LocalMiniLMEmbedding
from contextual_retrieval_llamaindex.hybrid import HybridRetriever
from contextual_retrieval_llamaindex.late_chunking import LateChunkingEmbedding
from contextual_retrieval_llamaindex.llm import llm_context_generator
from contextual_retrieval_llamaindex.node_parser import ContextualNodeParser
from contextual_retrieval_llamaindex.pruning import ContextPruningPostprocessor, LLMCompressorPostprocessor
from contextual_retrieval_llamaindex.rerank import ContextualRerank
from contextual_retrieval_llamaindex.splitter import FittedSplitter, StructureSplitter

if TYPE_CHECKING:  # pragma: no cover - typing only; imported on first use (the milvus extra, and two parts most never use)
    from contextual_retrieval_llamaindex.milvus import ContextualMilvusVectorStore, milvus_hybrid_retriever
    from contextual_retrieval_llamaindex.voyage_context import VoyageContextualizedEmbedding
    from contextual_retrieval_llamaindex.windows import WindowedVectorRetriever

__all__ = [
    "ContextPruningPostprocessor",
    "ContextualBM25Retriever",
    "ContextualMilvusVectorStore",
    "ContextualNodeParser",
    "ContextualRerank",
    "ContextualVoyageEmbedding",
    "CoreEmbedding",
    "FittedSplitter",
    "StructureSplitter",
    "HybridRetriever",
    "LateChunkingEmbedding",
    "LLMCompressorPostprocessor",
    "LocalMiniLMEmbedding",
    "VoyageContextualizedEmbedding",
    "WindowedVectorRetriever",
    "chroma_vector_store",
    "llm_context_generator",
    "milvus_hybrid_retriever",
]

__getattr__, __dir__ = lazy_exports(globals(), {
    "ContextualMilvusVectorStore": "contextual_retrieval_llamaindex.milvus",
    "milvus_hybrid_retriever": "contextual_retrieval_llamaindex.milvus",
    "VoyageContextualizedEmbedding": "contextual_retrieval_llamaindex.voyage_context",
    "WindowedVectorRetriever": "contextual_retrieval_llamaindex.windows",
})
