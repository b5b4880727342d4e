"""Embedders: turn chunks and queries into vectors.

Backends are imported on first use, so `import contextual_retrieval.embeddings` needs neither
voyageai nor onnxruntime.

Example:
    >>> from contextual_retrieval.embeddings import Embedder
    >>> Embedder.__name__
    'Embedder'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from contextual_retrieval.embeddings.base import Embedder

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval.embeddings.minilm import LocalMiniLMEmbedder
    from contextual_retrieval.embeddings.voyage import VoyageEmbedder

__all__ = ["Embedder", "VoyageEmbedder", "LocalMiniLMEmbedder"]

_LAZY = {
    "VoyageEmbedder": "contextual_retrieval.embeddings.voyage",
    "LocalMiniLMEmbedder": "contextual_retrieval.embeddings.minilm",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
