"""The parts the CLI and the demo pick from the environment: embedder, context generator,
reranker and fusion weights ("auto": hosted services when their API key is set and their SDK
installed, else the offline defaults)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core.embeddings.base import Embedder
from contextual_retrieval_core.errors import InputError
from contextual_retrieval_core.generators.base import ContextGenerator
from contextual_retrieval_core.rerank.base import Reranker
from contextual_retrieval_core.search.ranked import DEFAULT_WEIGHTS

if TYPE_CHECKING:
    from contextual_retrieval_core.chunking.budget import TokenWindow

__all__ = ["choose_embedder", "choose_generator", "choose_reranker", "weights_for", "unused_keys", "installed",
           "embedder_kind", "default_window"]


def default_window(embedder: object = None) -> TokenWindow | None:
    """The window a splitter fits chunks to (`contextualize.fit.chunk_to_fit`): `embedder`'s
    where it exposes one (the library's embedders, through caches and framework adapters), else,
    with no embedder given, the library's default embedder's (the offline MiniLM, 256 tokens);
    None when neither can say (an embedder with no window, or the local extra not installed)."""
    from contextual_retrieval_core.chunking.budget import window_of

    if embedder is not None:
        return window_of(embedder)
    try:
        from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

        return window_of(LocalMiniLMEmbedder())
    except ImportError:
        return None


def choose_embedder(kind: str = "auto", model: str | None = None) -> Embedder:
    """The embedder for `kind`: "local" (offline MiniLM), "voyage" (VOYAGE_API_KEY), or "auto"
    (Voyage when VOYAGE_API_KEY is set and voyageai installed, else local)."""
    from contextual_retrieval_core._sdk import env_key

    if kind == "auto":
        kind = "voyage" if env_key("VOYAGE_API_KEY") and installed("voyageai") else "local"
    if kind == "local":
        from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

        return LocalMiniLMEmbedder()
    if kind == "voyage":
        from contextual_retrieval_core.embeddings.voyage import VoyageEmbedder

        return VoyageEmbedder(model or "voyage-3.5")
    if kind == "voyage-context":
        from contextual_retrieval_core.embeddings.voyage_context import VoyageContextualizedEmbedder

        return VoyageContextualizedEmbedder(model or "voyage-context-3")
    raise InputError(f"unknown embedder {kind!r}; choose auto, local, voyage or voyage-context")


def weights_for(embedder: Embedder) -> tuple[float, float]:
    """The (dense, BM25) fusion weights for `embedder`: the cookbook's 0.8 / 0.2 for Voyage (a
    strong hosted embedder, also behind a `CachedEmbedder`), else the defaults (0.5 / 0.5: the local
    embedder is no stronger than BM25)."""
    if embedder_kind(embedder) == "voyage":
        return (0.8, 0.2)
    return (float(DEFAULT_WEIGHTS[0]), float(DEFAULT_WEIGHTS[1]))


def choose_generator(kind: str = "auto", model: str | None = None) -> ContextGenerator:
    """The context generator for `kind`: "structural" (offline, no LLM), "anthropic" (Claude,
    ANTHROPIC_API_KEY), or "auto" (Claude when ANTHROPIC_API_KEY is set and anthropic installed,
    else structural)."""
    from contextual_retrieval_core._sdk import env_key

    if kind == "auto":
        kind = "anthropic" if env_key("ANTHROPIC_API_KEY") and installed("anthropic") else "structural"
    if kind == "structural":
        from contextual_retrieval_core.generators.structural import StructuralContextGenerator

        return StructuralContextGenerator()
    if kind == "anthropic":
        from contextual_retrieval_core.generators.anthropic import AnthropicContextGenerator

        return AnthropicContextGenerator(model or "claude-haiku-4-5")
    raise InputError(f"unknown context generator {kind!r}; choose auto, structural or anthropic")


def choose_reranker(kind: str = "auto") -> Reranker | None:
    """The reranker for `kind`: "none", "cohere" (COHERE_API_KEY), "voyage" (VOYAGE_API_KEY), or
    "auto" (Cohere when COHERE_API_KEY or CO_API_KEY is set and cohere installed, else none)."""
    from contextual_retrieval_core._sdk import env_key

    if kind == "auto":
        kind = "cohere" if env_key("COHERE_API_KEY", "CO_API_KEY") and installed("cohere") else "none"
    if kind == "none":
        return None
    if kind == "cohere":
        from contextual_retrieval_core.rerank.cohere import CohereReranker

        return CohereReranker()
    if kind == "voyage":
        from contextual_retrieval_core.rerank.voyage import VoyageReranker

        return VoyageReranker()
    raise InputError(f"unknown reranker {kind!r}; choose auto, none, cohere or voyage")


def installed(module: str) -> bool:
    """Whether `module` can be imported (without importing it)."""
    import importlib.util

    return importlib.util.find_spec(module) is not None


def unused_keys() -> list[str]:
    """Notes for API keys that "auto" choices ignore because their SDK is not installed."""
    from contextual_retrieval_core._sdk import env_key

    notes = []
    for keys, module, extra in ((("ANTHROPIC_API_KEY",), "anthropic", "anthropic"), (("VOYAGE_API_KEY",), "voyageai", "voyage"),
                                (("COHERE_API_KEY", "CO_API_KEY"), "cohere", "cohere")):
        if env_key(*keys) and not installed(module):
            notes.append(f"{keys[0]} is set but the {module} SDK is not installed, so it is not used: "
                         f"pip install 'contextual-retrieval-kit[{extra}]'")
    return notes


def embedder_kind(embedder: Embedder) -> str:
    inner = getattr(embedder, "embedder", embedder)
    name = type(inner).__name__
    return {"LocalMiniLMEmbedder": "local", "VoyageEmbedder": "voyage",
            "VoyageContextualizedEmbedder": "voyage-context"}.get(name, name)
