"""The one place this package reads another package's private members, where no public API exists.

Each accessor names the versions it is tested with (tests/test_compat.py pins them); everything
else in this package uses public API only.

- llama-index-llms-anthropic (0.8 - 0.12): `Anthropic` keeps its SDK clients (Anthropic, Bedrock
  or Vertex, built from an api key it does not store) only as ``_client`` / ``_aclient``. Reusing
  them lets the core `AnthropicContextGenerator` call the API with the user's own credentials,
  base URL and retries.
- llama-index-core (0.12 - 0.14): `VectorStoreIndex` keeps the embedding model it embeds nodes and
  queries with only as ``_embed_model``; windowed embeddings (`windows.add_windows`) embed a
  node's windows with that same model.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["anthropic_llm_clients", "index_embed_model"]


def anthropic_llm_clients(llm: Any) -> tuple[Optional[Any], Optional[Any]]:
    """(sync, async) anthropic SDK clients of llama-index's `Anthropic` LLM; (None, None) when the
    installed version keeps them elsewhere."""
    return getattr(llm, "_client", None), getattr(llm, "_aclient", None)


def index_embed_model(index: Any) -> Optional[Any]:
    """The embedding model of a llama-index `VectorStoreIndex`; None when the installed version
    keeps it elsewhere."""
    return getattr(index, "_embed_model", None)
