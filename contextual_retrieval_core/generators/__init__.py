"""Context generators: (document, chunk) -> a short context that situates the chunk.

- `StructuralContextGenerator`: the offline default. It calls no LLM and builds the context from
  the title or path, the headings and the enclosing code definitions.
- `AnthropicContextGenerator`: Claude with prompt caching. It is imported lazily, so importing
  this package does not import the ``anthropic`` SDK.
- `CallableContextGenerator`: wraps your own function, sync or async (any LLM, any framework).
- `ChatContextGenerator`: the prompt as two text blocks through a framework chat model (what the
  LlamaIndex and LangChain adapters use for models other than Claude, which get
  `AnthropicContextGenerator` on the model's own clients).
"""

from __future__ import annotations

from contextual_retrieval_core._sdk import lazy_exports

from typing import TYPE_CHECKING

from contextual_retrieval_core.generators.base import (
    ContextGenerator,
    FatalGenerationError,
    Generation,
    GenerationError,
    TokenUsage,
    TransientGenerationError,
)
from contextual_retrieval_core.generators.callable import CallableContextGenerator
from contextual_retrieval_core.generators.chat import ChatContextGenerator
from contextual_retrieval_core.generators.structural import StructuralContextGenerator

if TYPE_CHECKING:  # pragma: no cover
    from contextual_retrieval_core.generators.anthropic import AnthropicContextGenerator

__all__ = [
    "AnthropicContextGenerator",
    "CallableContextGenerator",
    "ChatContextGenerator",
    "ContextGenerator",
    "FatalGenerationError",
    "Generation",
    "GenerationError",
    "StructuralContextGenerator",
    "TokenUsage",
    "TransientGenerationError",
]

_LAZY = {"AnthropicContextGenerator": ".anthropic"}


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
