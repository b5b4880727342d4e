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
- `AnthropicQuestionGenerator` (imported lazily): evaluation questions written by Claude from
  sampled chunks (what `contextual-retrieval eval --generate-questions` asks).
- `ContextPrompt` and `DEFAULT_PROMPT`: the situating prompt, the cookbook's by default;
  `UsageReport`: what a run's requests cost (tokens, cache reads and writes, dollars).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports
from contextual_retrieval_core.generators.base import (
    ContextGenerator,
    FatalGenerationError,
    Generation,
    GenerationError,
    RateLimitedTooLong,
    TokenUsage,
    TransientGenerationError,
)

if TYPE_CHECKING:  # pragma: no cover
    from contextual_retrieval_core.generators._anthropic_http import RunGaveUp, SpendLimitReached
    from contextual_retrieval_core.generators.anthropic import AnthropicContextGenerator
    from contextual_retrieval_core.generators.anthropic_crops import AnthropicCropContextGenerator
    from contextual_retrieval_core.generators.callable import CallableContextGenerator
    from contextual_retrieval_core.generators.chat import ChatContextGenerator
    from contextual_retrieval_core.generators.crop_structural import StructuralCropContextGenerator
    from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT, ContextPrompt
    from contextual_retrieval_core.generators.questions import AnthropicQuestionGenerator
    from contextual_retrieval_core.generators.structural import StructuralContextGenerator
    from contextual_retrieval_core.generators.usage import UsageReport

__all__ = [
    "DEFAULT_PROMPT",
    "AnthropicContextGenerator",
    "AnthropicCropContextGenerator",
    "AnthropicQuestionGenerator",
    "CallableContextGenerator",
    "ChatContextGenerator",
    "ContextGenerator",
    "ContextPrompt",
    "FatalGenerationError",
    "Generation",
    "GenerationError",
    "RateLimitedTooLong",
    "RunGaveUp",
    "SpendLimitReached",
    "StructuralContextGenerator",
    "StructuralCropContextGenerator",
    "TokenUsage",
    "TransientGenerationError",
    "UsageReport",
]

# every generator is imported on first use: importing the package (as any stage after it does)
# loads only the protocols, result types and errors of `base`
_LAZY = {
    "DEFAULT_PROMPT": ".prompts",
    "AnthropicContextGenerator": ".anthropic",
    "AnthropicCropContextGenerator": ".anthropic_crops",
    "AnthropicQuestionGenerator": ".questions",
    "CallableContextGenerator": ".callable",
    "ChatContextGenerator": ".chat",
    "ContextPrompt": ".prompts",
    "RunGaveUp": "._anthropic_http",
    "SpendLimitReached": "._anthropic_http",
    "StructuralContextGenerator": ".structural",
    "StructuralCropContextGenerator": ".crop_structural",
    "UsageReport": ".usage",
}


__getattr__, __dir__ = lazy_exports(globals(), _LAZY)
