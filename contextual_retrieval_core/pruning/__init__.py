"""Context pruning: send the answering LLM the evidence, not every retrieved chunk whole.

`ContextPruner` keeps the units (sentences, list items, headings, whole code statements) of the
retrieved chunks that answer the query, with provenance, under the settings of a `PruningConfig`;
`LLMContextCompressor` optionally lets an LLM extract passages, each verified against the
retrieved text. Each name is imported on first use (the modules behind them stay importable by
their own paths).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.pruning.config import PruningConfig
    from contextual_retrieval_core.pruning.llm import LLMContextCompressor
    from contextual_retrieval_core.pruning.pruner import ContextPruner
    from contextual_retrieval_core.pruning.result import (
        ELISION,
        PRUNED_SPANS_KEY,
        Piece,
        PrunedChunk,
        PruningReport,
        PruningResult,
        TokenCounter,
        regex_token_counter,
    )
    from contextual_retrieval_core.pruning.unit_cache import UnitCache
    from contextual_retrieval_core.pruning.units import Unit, guess_kind, kind_for_path, split_units

__all__ = [
    "ELISION",
    "PRUNED_SPANS_KEY",
    "ContextPruner",
    "LLMContextCompressor",
    "Piece",
    "PrunedChunk",
    "PruningConfig",
    "PruningReport",
    "PruningResult",
    "TokenCounter",
    "Unit",
    "UnitCache",
    "guess_kind",
    "kind_for_path",
    "regex_token_counter",
    "split_units",
]

_RESULT = "contextual_retrieval_core.pruning.result"
_UNITS = "contextual_retrieval_core.pruning.units"
__getattr__, __dir__ = lazy_exports(globals(), {
    "ELISION": _RESULT,
    "PRUNED_SPANS_KEY": _RESULT,
    "ContextPruner": "contextual_retrieval_core.pruning.pruner",
    "LLMContextCompressor": "contextual_retrieval_core.pruning.llm",
    "Piece": _RESULT,
    "PrunedChunk": _RESULT,
    "PruningConfig": "contextual_retrieval_core.pruning.config",
    "PruningReport": _RESULT,
    "PruningResult": _RESULT,
    "TokenCounter": _RESULT,
    "Unit": _UNITS,
    "UnitCache": "contextual_retrieval_core.pruning.unit_cache",
    "guess_kind": _UNITS,
    "kind_for_path": _UNITS,
    "regex_token_counter": _RESULT,
    "split_units": _UNITS,
})
