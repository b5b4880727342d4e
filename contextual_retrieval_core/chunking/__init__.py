"""The split stage: documents into chunks, the token windows they fit, and the BM25 tokenizer.

What users import from this stage; each name is imported on first use (the modules behind them
stay importable by their own paths).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.chunking.budget import TokenWindow, split_to_fit, window_of
    from contextual_retrieval_core.chunking.payloads import omit_payloads
    from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS, split_text
    from contextual_retrieval_core.chunking.tokenizer import Tokenizer, TokenizerConfig

__all__ = ["DEFAULT_CHUNK_CHARS", "TokenWindow", "Tokenizer", "TokenizerConfig", "omit_payloads", "split_text", "split_to_fit", "window_of"]

__getattr__, __dir__ = lazy_exports(globals(), {
    "DEFAULT_CHUNK_CHARS": "contextual_retrieval_core.chunking.split",
    "TokenWindow": "contextual_retrieval_core.chunking.budget",
    "Tokenizer": "contextual_retrieval_core.chunking.tokenizer",
    "TokenizerConfig": "contextual_retrieval_core.chunking.tokenizer",
    "omit_payloads": "contextual_retrieval_core.chunking.payloads",
    "split_text": "contextual_retrieval_core.chunking.split",
    "split_to_fit": "contextual_retrieval_core.chunking.budget",
    "window_of": "contextual_retrieval_core.chunking.budget",
})
