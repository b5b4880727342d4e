"""The split stage: documents into chunks, the token windows they fit, and the BM25 tokenizer;
image frames and their crops as documents and chunks.

What users import from this stage; each name is imported on first use (the modules behind them
stay importable by their own paths).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from contextual_retrieval_core._sdk import lazy_exports

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.chunking.budget import TokenWindow, split_to_fit, window_of
    from contextual_retrieval_core.chunking.code_outline import GrammarUnavailable
    from contextual_retrieval_core.chunking.detections import Detection, DetectionError, parse_detections
    from contextual_retrieval_core.chunking.frames import (
        Crop,
        CropBatch,
        CropInput,
        Frame,
        FrameInput,
        FrameInputError,
        crop_chunks,
    )
    from contextual_retrieval_core.chunking.images import UnreadableImageError
    from contextual_retrieval_core.chunking.payloads import omit_payloads
    from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS, split_text
    from contextual_retrieval_core.chunking.tokenizer import Tokenizer, TokenizerConfig

__all__ = [
    "DEFAULT_CHUNK_CHARS",
    "Crop",
    "CropBatch",
    "CropInput",
    "Detection",
    "DetectionError",
    "Frame",
    "FrameInput",
    "FrameInputError",
    "GrammarUnavailable",
    "TokenWindow",
    "Tokenizer",
    "TokenizerConfig",
    "UnreadableImageError",
    "crop_chunks",
    "omit_payloads",
    "parse_detections",
    "split_text",
    "split_to_fit",
    "window_of",
]

_FRAMES = "contextual_retrieval_core.chunking.frames"
_DETECTIONS = "contextual_retrieval_core.chunking.detections"
__getattr__, __dir__ = lazy_exports(globals(), {
    "DEFAULT_CHUNK_CHARS": "contextual_retrieval_core.chunking.split",
    "Crop": _FRAMES,
    "CropBatch": _FRAMES,
    "CropInput": _FRAMES,
    "Detection": _DETECTIONS,
    "DetectionError": _DETECTIONS,
    "Frame": _FRAMES,
    "FrameInput": _FRAMES,
    "FrameInputError": _FRAMES,
    "GrammarUnavailable": "contextual_retrieval_core.chunking.code_outline",
    "TokenWindow": "contextual_retrieval_core.chunking.budget",
    "Tokenizer": "contextual_retrieval_core.chunking.tokenizer",
    "TokenizerConfig": "contextual_retrieval_core.chunking.tokenizer",
    "UnreadableImageError": "contextual_retrieval_core.chunking.images",
    "crop_chunks": _FRAMES,
    "omit_payloads": "contextual_retrieval_core.chunking.payloads",
    "parse_detections": _DETECTIONS,
    "split_text": "contextual_retrieval_core.chunking.split",
    "split_to_fit": "contextual_retrieval_core.chunking.budget",
    "window_of": "contextual_retrieval_core.chunking.budget",
})
