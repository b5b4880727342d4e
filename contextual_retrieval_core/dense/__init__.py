"""The dense stage: exact, IVF and HNSW vector indexes, Chroma, and windows for long texts.

What users import from this stage; each name is imported on first use (the modules behind them
stay importable by their own paths).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.dense.chroma import ChromaVectorIndex
    from contextual_retrieval_core.dense.event_loops import OtherEventLoopError
    from contextual_retrieval_core.dense.hnsw import ANN_THRESHOLD, HNSWIndex, HNSWParams, dense_index, load_dense_index
    from contextual_retrieval_core.dense.ivf import IVFIndex, IVFParams
    from contextual_retrieval_core.dense.server_errors import VectorServerUnavailable
    from contextual_retrieval_core.dense.vectors import VectorIndex
    from contextual_retrieval_core.dense.windows import WindowConfig

__all__ = ["ANN_THRESHOLD", "ChromaVectorIndex", "HNSWIndex", "HNSWParams", "IVFIndex", "IVFParams", "OtherEventLoopError", "VectorIndex", "VectorServerUnavailable", "WindowConfig", "dense_index", "load_dense_index"]

__getattr__, __dir__ = lazy_exports(globals(), {
    "ANN_THRESHOLD": "contextual_retrieval_core.dense.hnsw",
    "ChromaVectorIndex": "contextual_retrieval_core.dense.chroma",
    "HNSWIndex": "contextual_retrieval_core.dense.hnsw",
    "HNSWParams": "contextual_retrieval_core.dense.hnsw",
    "IVFIndex": "contextual_retrieval_core.dense.ivf",
    "IVFParams": "contextual_retrieval_core.dense.ivf",
    "OtherEventLoopError": "contextual_retrieval_core.dense.event_loops",
    "VectorIndex": "contextual_retrieval_core.dense.vectors",
    "VectorServerUnavailable": "contextual_retrieval_core.dense.server_errors",
    "WindowConfig": "contextual_retrieval_core.dense.windows",
    "dense_index": "contextual_retrieval_core.dense.hnsw",
    "load_dense_index": "contextual_retrieval_core.dense.hnsw",
})
