"""The persistent index folder behind `contextual-retrieval index` and `query`.

What users import from this stage; each name is imported on first use (the modules behind them
stay importable by their own paths).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.index.chroma_server import ChromaServerUnavailable
    from contextual_retrieval_core.index.contextual_index import ContextualIndex
    from contextual_retrieval_core.index.files import UndecodableFileError
    from contextual_retrieval_core.index.lock import IndexLockedError
    from contextual_retrieval_core.index.manifest import IndexDamagedError, IndexManifest, IndexMismatchError
    from contextual_retrieval_core.index.milvus_config import MilvusConfig
    from contextual_retrieval_core.index.milvus_index import MilvusContextualIndex
    from contextual_retrieval_core.index.report import IndexHit, IndexReport
    from contextual_retrieval_core.index.space import IndexFullError

__all__ = [
    "ChromaServerUnavailable",
    "ContextualIndex",
    "IndexDamagedError",
    "IndexFullError",
    "IndexHit",
    "IndexLockedError",
    "IndexManifest",
    "IndexMismatchError",
    "IndexReport",
    "MilvusConfig",
    "MilvusContextualIndex",
    "UndecodableFileError",
]

__getattr__, __dir__ = lazy_exports(globals(), {
    "ChromaServerUnavailable": "contextual_retrieval_core.index.chroma_server",
    "ContextualIndex": "contextual_retrieval_core.index.contextual_index",
    "IndexDamagedError": "contextual_retrieval_core.index.manifest",
    "IndexFullError": "contextual_retrieval_core.index.space",
    "IndexHit": "contextual_retrieval_core.index.report",
    "IndexLockedError": "contextual_retrieval_core.index.lock",
    "IndexManifest": "contextual_retrieval_core.index.manifest",
    "IndexMismatchError": "contextual_retrieval_core.index.manifest",
    "IndexReport": "contextual_retrieval_core.index.report",
    "MilvusConfig": "contextual_retrieval_core.index.milvus_config",
    "MilvusContextualIndex": "contextual_retrieval_core.index.milvus_index",
    "UndecodableFileError": "contextual_retrieval_core.index.files",
})
