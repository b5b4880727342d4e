"""The flat module paths of releases before 0.2, kept importable.

Until 0.2 the core was one flat folder (``contextual_retrieval_core.hybrid``,
``contextual_retrieval_core.store``, ...). Each of those paths still imports, with a
`DeprecationWarning` naming its new home, as the very module object that lives there now (so
``isinstance`` checks and monkeypatching see one module, not a copy).

Example:
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", DeprecationWarning)
    ...     from contextual_retrieval_core.hybrid import HybridSearcher
    >>> HybridSearcher.__module__
    'contextual_retrieval_core.search.hybrid'
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # the protocols only: importing importlib.abc costs every start-up ~10 ms
    import importlib.abc

__all__ = ["MOVED", "install"]

_PACKAGE = "contextual_retrieval_core"

#: old module name (under the package) -> its module now
MOVED: dict[str, str] = {
    "chunking": "chunking.split",
    "code_outline": "chunking.code_outline",
    "languages": "chunking.languages",
    "tokenizer": "chunking.tokenizer",
    "prompts": "generators.prompts",
    "usage": "generators.usage",
    "store": "store.context_store",
    "store_batches": "store.batch_ledger",
    "store_claims": "store.claim_ledger",
    "store_errors": "store.errors",
    "store_jsonl": "store.jsonl",
    "store_postgres": "store.postgres",
    "contextualizer": "contextualize.contextualizer",
    "contextualize_run": "contextualize.run",
    "contextualize_batches": "contextualize.batches",
    "contextualize_claims": "contextualize.claims",
    "contextualize_inputs": "contextualize.inputs",
    "vectors": "dense.vectors",
    "ann": "dense.hnsw",
    "chroma": "dense.chroma",
    "chroma_server": "index.chroma_server",
    "windows": "dense.windows",
    "window_rows": "dense.window_rows",
    "bm25": "search.bm25",
    "where": "search.where",
    "fusion": "search.rank_fusion",
    "ensemble": "search.ranked",
    "fusion_config": "search.config",
    "feedback": "search.feedback",
    "hybrid": "search.hybrid",
    "contextual_index": "index.contextual_index",
    "index_changes": "index.changes",
    "index_manifest": "index.manifest",
    "index_report": "index.report",
    "index_storage": "index.storage",
    "files": "index.files",
    "folder_lock": "index.lock",
    "cli": "app.cli",
    "cli_errors": "app.errors",
    "demo": "app.demo",
    "demo_corpus": "app.demo_corpus",
    "evaluation": "app.evaluation",
}


class _Alias:
    """The loader of an old path: the module at its new path (a `importlib.abc.Loader`)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.target} in 0.2; import from there (or from the package)",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module is the one at its new path, already imported."""


class _Finder:
    """Finds the old flat paths (a `importlib.abc.MetaPathFinder`)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != _PACKAGE or name not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, cast("importlib.abc.Loader", _Alias(f"{_PACKAGE}.{MOVED[name]}")))


def install() -> None:
    """Put the finder of the old paths on `sys.meta_path` (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
