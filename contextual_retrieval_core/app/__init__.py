"""The command line (`contextual-retrieval`), its error messages, the demo and the evaluations.

What users import from this stage; each name is imported on first use (the modules behind them
stay importable by their own paths).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.app.cli import build_parser, main

__all__ = ["build_parser", "main"]

__getattr__, __dir__ = lazy_exports(globals(), {
    "build_parser": "contextual_retrieval_core.app.cli",
    "main": "contextual_retrieval_core.app.cli",
})
