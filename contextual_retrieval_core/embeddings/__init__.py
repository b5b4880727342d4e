"""Embedders: turn chunks and queries into vectors.

Backends are imported on first use, so `import contextual_retrieval_core.embeddings` needs neither
voyageai nor onnxruntime.

Example:
    >>> from contextual_retrieval_core.embeddings import Embedder
    >>> Embedder.__name__
    'Embedder'
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports
from contextual_retrieval_core.embeddings.base import Embedder

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.embeddings.cache import CachedEmbedder
    from contextual_retrieval_core.embeddings.late_chunking import LateChunkingEmbedder
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder, TruncationWarning
    from contextual_retrieval_core.embeddings.voyage import VoyageBatching, VoyageEmbedder
    from contextual_retrieval_core.embeddings.voyage_context import VoyageContextualizedEmbedder

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "LateChunkingEmbedder",
    "LocalMiniLMEmbedder",
    "TruncationWarning",
    "VoyageBatching",
    "VoyageContextualizedEmbedder",
    "VoyageEmbedder",
]

_LAZY = {
    "CachedEmbedder": "contextual_retrieval_core.embeddings.cache",
    "VoyageBatching": "contextual_retrieval_core.embeddings.voyage",
    "VoyageEmbedder": "contextual_retrieval_core.embeddings.voyage",
    "VoyageContextualizedEmbedder": "contextual_retrieval_core.embeddings.voyage_context",
    "LocalMiniLMEmbedder": "contextual_retrieval_core.embeddings.minilm",
    "TruncationWarning": "contextual_retrieval_core.embeddings.minilm",
    "LateChunkingEmbedder": "contextual_retrieval_core.embeddings.late_chunking",
}


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
