"""Rerankers: rescore retrieved candidates against the query.

Backends are imported on first use, so `import contextual_retrieval_core.rerank` needs neither cohere,
voyageai nor sentence-transformers.

Example:
    >>> from contextual_retrieval_core.rerank import PassThroughReranker
    >>> [r.index for r in PassThroughReranker().rerank("q", ["a", "b"])]
    [0, 1]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports
from contextual_retrieval_core.rerank.base import PassThroughReranker, Reranker, RerankResult

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.rerank.cohere import CohereReranker
    from contextual_retrieval_core.rerank.crossencoder import CrossEncoderReranker
    from contextual_retrieval_core.rerank.voyage import VoyageReranker

__all__ = [
    "Reranker",
    "RerankResult",
    "PassThroughReranker",
    "CohereReranker",
    "VoyageReranker",
    "CrossEncoderReranker",
]

_LAZY = {
    "CohereReranker": "contextual_retrieval_core.rerank.cohere",
    "VoyageReranker": "contextual_retrieval_core.rerank.voyage",
    "CrossEncoderReranker": "contextual_retrieval_core.rerank.crossencoder",
}


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
