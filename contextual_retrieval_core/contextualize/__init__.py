"""The contextualize stage: `Contextualizer`, its `ContextualizeConfig`, and chunking documents for it.

What users import from this stage; each name is imported on first use (the modules behind them
stay importable by their own paths).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.contextualize.config import ContextualizeConfig
    from contextual_retrieval_core.contextualize.contextualizer import (
        ContextualizationError,
        Contextualizer,
        ContextualizeResult,
        default_store_path,
        store_keys,
    )
    from contextual_retrieval_core.contextualize.fit import chunk_documents
    from contextual_retrieval_core.contextualize.interrupts import Interrupted, StopAsked, Terminated

__all__ = ["ContextualizationError", "ContextualizeConfig", "ContextualizeResult", "Contextualizer", "Interrupted", "StopAsked", "Terminated", "chunk_documents", "default_store_path", "store_keys"]

__getattr__, __dir__ = lazy_exports(globals(), {
    "ContextualizationError": "contextual_retrieval_core.contextualize.contextualizer",
    "ContextualizeConfig": "contextual_retrieval_core.contextualize.config",
    "ContextualizeResult": "contextual_retrieval_core.contextualize.contextualizer",
    "Contextualizer": "contextual_retrieval_core.contextualize.contextualizer",
    "Interrupted": "contextual_retrieval_core.contextualize.interrupts",
    "StopAsked": "contextual_retrieval_core.contextualize.interrupts",
    "Terminated": "contextual_retrieval_core.contextualize.interrupts",
    "chunk_documents": "contextual_retrieval_core.contextualize.fit",
    "default_store_path": "contextual_retrieval_core.contextualize.contextualizer",
    "store_keys": "contextual_retrieval_core.contextualize.contextualizer",
})
