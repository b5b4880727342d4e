"""Context pruning: send the answering LLM the evidence, not every retrieved chunk whole.

`ContextPruner` keeps the units (sentences, list items, headings, whole code statements) of the
retrieved chunks that answer the query, with provenance; `LLMContextCompressor` optionally lets
an LLM extract passages, each verified against the retrieved text.
"""


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
