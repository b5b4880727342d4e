"""The query stage: BM25, fusion, dense feedback, the query flow and `HybridSearcher`.

What users import from this stage; each name is imported on first use (the modules behind them
stay importable by their own paths).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.search.bm25 import BM25Index
    from contextual_retrieval_core.search.config import FusionConfig
    from contextual_retrieval_core.search.feedback import FeedbackRows
    from contextual_retrieval_core.search.flow import DenseSide, FlowResult, QueryFlow, Source, SyncDenseSide, SyncSource
    from contextual_retrieval_core.search.hybrid import HybridSearcher, SearchHit
    from contextual_retrieval_core.search.milvus import MilvusCollection, MilvusServerUnavailable
    from contextual_retrieval_core.search.rank_fusion import FusedHit, fuse, reciprocal_rank_fusion, relative_score_fusion
    from contextual_retrieval_core.search.ranked import RankedHit, arerank_hits, rerank_hits

__all__ = [
    "BM25Index",
    "DenseSide",
    "FeedbackRows",
    "FlowResult",
    "FusedHit",
    "FusionConfig",
    "HybridSearcher",
    "MilvusCollection",
    "MilvusServerUnavailable",
    "QueryFlow",
    "RankedHit",
    "SearchHit",
    "Source",
    "SyncDenseSide",
    "SyncSource",
    "arerank_hits",
    "fuse",
    "reciprocal_rank_fusion",
    "relative_score_fusion",
    "rerank_hits",
]

_FLOW = "contextual_retrieval_core.search.flow"
_RANKED = "contextual_retrieval_core.search.ranked"

__getattr__, __dir__ = lazy_exports(globals(), {
    "BM25Index": "contextual_retrieval_core.search.bm25",
    "DenseSide": _FLOW,
    "FeedbackRows": "contextual_retrieval_core.search.feedback",
    "FlowResult": _FLOW,
    "FusedHit": "contextual_retrieval_core.search.rank_fusion",
    "FusionConfig": "contextual_retrieval_core.search.config",
    "HybridSearcher": "contextual_retrieval_core.search.hybrid",
    "MilvusCollection": "contextual_retrieval_core.search.milvus",
    "MilvusServerUnavailable": "contextual_retrieval_core.search.milvus",
    "QueryFlow": _FLOW,
    "RankedHit": _RANKED,
    "SearchHit": "contextual_retrieval_core.search.hybrid",
    "Source": _FLOW,
    "SyncDenseSide": _FLOW,
    "SyncSource": _FLOW,
    "arerank_hits": _RANKED,
    "fuse": "contextual_retrieval_core.search.rank_fusion",
    "reciprocal_rank_fusion": "contextual_retrieval_core.search.rank_fusion",
    "relative_score_fusion": "contextual_retrieval_core.search.rank_fusion",
    "rerank_hits": _RANKED,
})
