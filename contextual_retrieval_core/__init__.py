"""contextual-retrieval: Anthropic's Contextual Retrieval, framework-free core.

The core imports no framework (LlamaIndex, LangChain) and no hosted SDK at import time; those
live in `contextual_retrieval_llamaindex`, `contextual_retrieval_langchain` and lazily-imported
backends. Its subpackages follow the data, one stage each:

- `chunking`: splitting, code outlines, the language table, the BM25 tokenizer;
- `generators`: context generators (Anthropic, framework LLMs, structural), prompts, prices;
- `store`: the persistent context store (SQLite, PostgreSQL) and its JSONL export;
- `contextualize`: the `Contextualizer`, which turns chunks into contextual chunks;
- `embeddings`: the offline model, Voyage, the embedding cache;
- `dense`: exact and HNSW vector indexes, Chroma, windows;
- `rerank`: rerankers;
- `search`: BM25, filters, fusion and its settings, dense feedback, the one query flow;
- `pruning`: query-time context pruning;
- `index`: `ContextualIndex`, the persistent folder index;
- `app`: the command line, the demo, evaluation.

Each stage package exports what users import from it. A module whose name starts with an
underscore (`index/_storage.py`, `_sdk.py`) is internal: its names may change in any release.
"""

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports
from contextual_retrieval_core._version import __version__

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.checks import IndexFileError
    from contextual_retrieval_core.chunking.tokenizer import Tokenizer, TokenizerConfig
    from contextual_retrieval_core.contextualize.config import ContextualizeConfig
    from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
    from contextual_retrieval_core.contextualize.fit import chunk_documents
    from contextual_retrieval_core.dense.vectors import VectorIndex
    from contextual_retrieval_core.dense.windows import WindowConfig
    from contextual_retrieval_core.errors import (
        ContextualRetrievalError,
        DiskError,
        InputError,
        InputTypeError,
        MissingDependencyError,
        NotFoundError,
        RunError,
    )
    from contextual_retrieval_core.index.contextual_index import ContextualIndex
    from contextual_retrieval_core.search.bm25 import BM25Index
    from contextual_retrieval_core.search.config import FusionConfig
    from contextual_retrieval_core.search.hybrid import HybridSearcher, SearchHit
    from contextual_retrieval_core.search.rank_fusion import (
        DEFAULT_RRF_K,
        FusedHit,
        fuse,
        reciprocal_rank_fusion,
        relative_score_fusion,
    )
    from contextual_retrieval_core.search.ranked import DEFAULT_TOP_K, DEFAULT_WEIGHTS
    from contextual_retrieval_core.store import ContextStore, open_store
    from contextual_retrieval_core.types import Chunk, ContextualChunk, Document, compose_indexed_text



__all__ = [
    "__version__",
    "BM25Index",
    "Chunk",
    "ContextStore",
    "ContextualChunk",
    "ContextualIndex",
    "ContextualRetrievalError",
    "ContextualizeConfig",
    "Contextualizer",
    "DEFAULT_RRF_K",
    "DEFAULT_TOP_K",
    "DEFAULT_WEIGHTS",
    "DiskError",
    "Document",
    "FusedHit",
    "FusionConfig",
    "HybridSearcher",
    "IndexFileError",
    "InputError",
    "InputTypeError",
    "MissingDependencyError",
    "NotFoundError",
    "RunError",
    "SearchHit",
    "Tokenizer",
    "TokenizerConfig",
    "VectorIndex",
    "WindowConfig",
    "chunk_documents",
    "compose_indexed_text",
    "fuse",
    "open_store",
    "reciprocal_rank_fusion",
    "relative_score_fusion",
]

# every export is imported on first use, so a command that needs a few stages loads only those
__getattr__, __dir__ = lazy_exports(globals(), {
    "BM25Index": "contextual_retrieval_core.search.bm25",
    "Chunk": "contextual_retrieval_core.types",
    "ContextStore": "contextual_retrieval_core.store",
    "ContextualChunk": "contextual_retrieval_core.types",
    "ContextualIndex": "contextual_retrieval_core.index.contextual_index",
    "ContextualRetrievalError": "contextual_retrieval_core.errors",
    "ContextualizeConfig": "contextual_retrieval_core.contextualize.config",
    "Contextualizer": "contextual_retrieval_core.contextualize.contextualizer",
    "DEFAULT_RRF_K": "contextual_retrieval_core.search.rank_fusion",
    "DEFAULT_TOP_K": "contextual_retrieval_core.search.ranked",
    "DEFAULT_WEIGHTS": "contextual_retrieval_core.search.ranked",
    "DiskError": "contextual_retrieval_core.errors",
    "Document": "contextual_retrieval_core.types",
    "FusedHit": "contextual_retrieval_core.search.rank_fusion",
    "FusionConfig": "contextual_retrieval_core.search.config",
    "HybridSearcher": "contextual_retrieval_core.search.hybrid",
    "IndexFileError": "contextual_retrieval_core.checks",
    "InputError": "contextual_retrieval_core.errors",
    "InputTypeError": "contextual_retrieval_core.errors",
    "MissingDependencyError": "contextual_retrieval_core.errors",
    "NotFoundError": "contextual_retrieval_core.errors",
    "RunError": "contextual_retrieval_core.errors",
    "SearchHit": "contextual_retrieval_core.search.hybrid",
    "Tokenizer": "contextual_retrieval_core.chunking.tokenizer",
    "TokenizerConfig": "contextual_retrieval_core.chunking.tokenizer",
    "VectorIndex": "contextual_retrieval_core.dense.vectors",
    "WindowConfig": "contextual_retrieval_core.dense.windows",
    "chunk_documents": "contextual_retrieval_core.contextualize.fit",
    "compose_indexed_text": "contextual_retrieval_core.types",
    "fuse": "contextual_retrieval_core.search.rank_fusion",
    "open_store": "contextual_retrieval_core.store",
    "reciprocal_rank_fusion": "contextual_retrieval_core.search.rank_fusion",
    "relative_score_fusion": "contextual_retrieval_core.search.rank_fusion",
})
