"""The context store an index shares with `eval` and other runs.

An index keeps its LLM contexts in its own ``contexts.sqlite3`` (the folder is whole on its own:
copy it, deploy it, rebuild it without paying). `eval --generate-questions`, a `Contextualizer`
and the frameworks' parts keep theirs in the user's store (`default_store_path()`). An update
copies what the shared store holds for its chunks into its own store before asking for anything,
and copies its chunks' contexts back after, so whichever command runs first pays and the other
reads. The shared store is a convenience: when it cannot be opened or written, the update warns
and goes on with its own store alone.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from contextual_retrieval_core.contextualize.contextualizer import default_store_path
from contextual_retrieval_core.store.context_store import ContextStore
from contextual_retrieval_core.store.errors import ContextStoreError

__all__ = ["shared_store", "share"]


@contextmanager
def shared_store(where: str | os.PathLike[str] | bool) -> Iterator[ContextStore | None]:
    """The shared store `where` names (True: `default_store_path()`; False: none), open for the
    block; None when it cannot be opened (with a warning saying why)."""
    if where is False:
        yield None
        return
    path = default_store_path() if where is True else where
    try:
        store = ContextStore(path)
    except (ContextStoreError, ValueError, OSError) as exc:
        warnings.warn(f"the shared context store {path} cannot be opened ({exc}); contexts are read from and stored in "
                      "the index's own store only", UserWarning, stacklevel=3)
        yield None
        return
    with store:
        yield store


def share(source: ContextStore, target: ContextStore, keys: Iterable[str]) -> int:
    """Copy the contexts `source` holds under `keys` and `target` lacks; a store that cannot be
    read or written is warned about, not raised (the copy is a saving, never a loss)."""
    try:
        return target.copy_from(source, keys)
    except (ContextStoreError, ValueError, OSError) as exc:
        warnings.warn(f"contexts could not be copied from {source.path} to {target.path} ({exc}); nothing is lost, "
                      "a later run may pay for them once more", UserWarning, stacklevel=2)
        return 0
