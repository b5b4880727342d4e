"""Context generators: (document, chunk) -> a short context that situates the chunk.

- `StructuralContextGenerator`: the offline default. It calls no LLM and builds the context from
  the title or path, the headings and the enclosing code definitions.
- `AnthropicContextGenerator`: Claude with prompt caching. It is imported lazily, so importing
  this package does not import the ``anthropic`` SDK.
- `CallableContextGenerator`: wraps your own function, sync or async (any LLM, any framework).
- `ChatContextGenerator`: the prompt as two text blocks through a framework chat model (what the
  LlamaIndex and LangChain adapters use for models other than Claude, which get
  `AnthropicContextGenerator` on the model's own clients).
- `StructuralCropContextGenerator` and `AnthropicCropContextGenerator` (imported lazily): image
  crops situated within their frames, offline from the detection metadata or by Claude with the
  frame prompt-cached (documents and chunks from `chunking.frames.crop_chunks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports
from contextual_retrieval_core.generators.base import (
    ContextGenerator,
    FatalGenerationError,
    Generation,
    GenerationError,
    TokenUsage,
    TransientGenerationError,
)

if TYPE_CHECKING:  # pragma: no cover
    from contextual_retrieval_core.generators.anthropic import AnthropicContextGenerator
    from contextual_retrieval_core.generators.anthropic_crops import AnthropicCropContextGenerator
    from contextual_retrieval_core.generators.callable import CallableContextGenerator
    from contextual_retrieval_core.generators.chat import ChatContextGenerator
    from contextual_retrieval_core.generators.crop_structural import StructuralCropContextGenerator
    from contextual_retrieval_core.generators.structural import StructuralContextGenerator

__all__ = [
    "AnthropicContextGenerator",
    "AnthropicCropContextGenerator",
    "CallableContextGenerator",
    "ChatContextGenerator",
    "ContextGenerator",
    "FatalGenerationError",
    "Generation",
    "GenerationError",
    "StructuralContextGenerator",
    "StructuralCropContextGenerator",
    "TokenUsage",
    "TransientGenerationError",
]

# every generator is imported on first use: importing the package (as any stage after it does)
# loads only the protocols and result types
_LAZY = {
    "AnthropicContextGenerator": ".anthropic",
    "AnthropicCropContextGenerator": ".anthropic_crops",
    "CallableContextGenerator": ".callable",
    "ChatContextGenerator": ".chat",
    "StructuralContextGenerator": ".structural",
    "StructuralCropContextGenerator": ".crop_structural",
}


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
