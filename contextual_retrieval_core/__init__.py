"""contextual-retrieval: Anthropic's Contextual Retrieval, framework-free core.

The core imports no framework (LlamaIndex, LangChain) and no hosted SDK at import time; those
live in `contextual_retrieval_llamaindex`, `contextual_retrieval_langchain` and lazily-imported
backends.
"""

from .bm25 import BM25Index
from .fusion import FusedHit, fuse, reciprocal_rank_fusion, relative_score_fusion
from .fusion_config import FusionConfig
from .hybrid import DEFAULT_RRF_K, DEFAULT_TOP_K, DEFAULT_WEIGHTS, HybridSearcher, SearchHit
from .tokenizer import Tokenizer, TokenizerConfig
from .types import Chunk, ContextualChunk, Document, compose_indexed_text
from .vectors import VectorIndex

__version__ = "0.1.0"

__all__ = [
    "BM25Index",
    "Chunk",
    "ContextualChunk",
    "DEFAULT_RRF_K",
    "DEFAULT_TOP_K",
    "DEFAULT_WEIGHTS",
    "Document",
    "FusedHit",
    "FusionConfig",
    "HybridSearcher",
    "SearchHit",
    "Tokenizer",
    "TokenizerConfig",
    "VectorIndex",
    "compose_indexed_text",
    "fuse",
    "reciprocal_rank_fusion",
    "relative_score_fusion",
]
