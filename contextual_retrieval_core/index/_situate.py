"""The contexts of an index update's chunks, through the index folder's own context store.

An LLM's context is read from the folder's ``contexts.sqlite3``, else from the shared store
(copied in first), else generated and stored the moment it arrives (then copied to the shared
store), so an update that stops part way pays for nothing twice; structural contexts are computed,
never stored. Any index that keeps its contexts in its folder runs it (`MilvusContextualIndex`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.generators.base import ContextGenerator

if TYPE_CHECKING:
    from contextual_retrieval_core.contextualize.contextualizer import ContextualizeResult
    from contextual_retrieval_core.types import Chunk, Document

__all__ = ["CONTEXTS_FILE", "situate"]

#: the index folder's own context store
CONTEXTS_FILE = "contexts.sqlite3"


def situate(
    folder: str | os.PathLike[str], generator: ContextGenerator, documents: Sequence[Document], chunks: Sequence[Chunk], *,
    shared: str | os.PathLike[str] | bool = True, concurrency: int | None = None, show_progress: bool = False,
) -> ContextualizeResult:
    """The `chunks`' contexts by `generator`, through the store in `folder` (and the `shared`
    store: True for the default one, a path, or False for none); `concurrency`: requests in flight
    (None: `ContextualizeConfig`'s default)."""
    from contextual_retrieval_core.contextualize.contextualizer import Contextualizer, store_keys
    from contextual_retrieval_core.index._shared_contexts import share, shared_store
    from contextual_retrieval_core.store.context_store import ContextStore

    config = ContextualizeConfig(show_progress=show_progress)
    if concurrency is not None:
        config = config.replace(concurrency=concurrency)
    if not generator.is_llm:
        return Contextualizer(generator, None, config=config).contextualize(documents, chunks)
    with ContextStore(Path(folder) / CONTEXTS_FILE) as own, shared_store(shared) as pool:
        keys = list(store_keys(generator, {d.id: d for d in documents}, chunks).values())
        if pool is not None:
            share(pool, own, keys)
        try:
            return Contextualizer(generator, own, config=config).contextualize(documents, chunks)
        finally:
            if pool is not None:
                share(own, pool, keys)
