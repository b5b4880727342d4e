"""What pruning returns: `PruningResult` (the kept `PrunedChunk`s, each with its `Piece`s and their
character and line spans) and `PruningReport`; the `TokenCounter` it counts with.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contextual_retrieval_core.types import ContextualChunk, format_for_llm

__all__ = ["ELISION", "PRUNED_SPANS_KEY", "Piece", "PrunedChunk", "PruningReport", "PruningResult", "TokenCounter",
           "regex_token_counter"]

#: what stands between two kept units that were not adjacent in the chunk
ELISION = "\n[…]\n"
#: metadata key both framework parts put on a pruned node / Document: its `PrunedChunk.spans`
PRUNED_SPANS_KEY = "pruned_spans"


@dataclass(frozen=True)
class TokenCounter:
    """A named token counter: ``count(text) -> int``."""

    name: str
    count: Callable[[str], int]


# scripts written without spaces count a token per character, as subword tokenizers roughly do
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]")
regex_token_counter = TokenCounter("regex words+punctuation", lambda text: len(_TOKEN.findall(text)))


@dataclass(frozen=True)
class Piece:
    """A run of kept units: ``text == chunk.text[start:end]``; lines are 1-based, inclusive."""

    start: int
    end: int
    text: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class PrunedChunk:
    """A chunk after pruning, with provenance.

    Attributes:
        chunk: the input ContextualChunk (unchanged).
        rank: its 0-based position in the input.
        pieces: the kept runs of units, in order, with character and line spans.
        units_kept, units_total: how many units it kept of how many.
        score: the coarse-filter score in [0, 1].
    """

    chunk: ContextualChunk
    rank: int
    pieces: tuple[Piece, ...]
    units_kept: int
    units_total: int
    score: float = 1.0

    @property
    def id(self) -> str:
        return self.chunk.id

    @property
    def document_id(self) -> str:
        return self.chunk.document_id

    @property
    def context(self) -> str:
        return self.chunk.context

    @property
    def text(self) -> str:
        """The kept source text: pieces joined by `ELISION`."""
        return ELISION.join(p.text for p in self.pieces)

    @property
    def spans(self) -> list[list[int]]:
        """[start, end, start_line, end_line] of every piece: where the kept text is in the chunk."""
        return [[p.start, p.end, p.start_line, p.end_line] for p in self.pieces]

    @property
    def whole(self) -> bool:
        return len(self.pieces) == 1 and self.pieces[0].text == self.chunk.text


@dataclass
class PruningReport:
    """What pruning did.

    Attributes:
        tokenizer: the name of the token counter.
        tokens_before, tokens_after: source-text tokens in and out (contexts not counted).
        units_kept: chunk id -> (units kept, units in the chunk).
        chunks_dropped: ids of chunks the coarse filter (or the budget) left empty.
        fallbacks: safety valves taken ("standout:<chunk id>", "min_tokens").
        unchanged_reason: why the input came back unchanged (None when it was pruned).
        unverified: passages an LLM returned that were not found in the retrieved text, dropped
            (`LLMContextCompressor` only).
        usage: the LLM's token usage (`LLMContextCompressor` only).
        elapsed_s: seconds spent.
    """

    tokenizer: str
    tokens_before: int = 0
    tokens_after: int = 0
    units_kept: dict[str, tuple[int, int]] = field(default_factory=dict)
    chunks_dropped: list[str] = field(default_factory=list)
    fallbacks: list[str] = field(default_factory=list)
    unchanged_reason: str | None = None
    unverified: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def reduction(self) -> float:
        """1 - tokens_after / tokens_before (0 for an empty input)."""
        return 1.0 - self.tokens_after / self.tokens_before if self.tokens_before else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokenizer": self.tokenizer, "tokens_before": self.tokens_before, "tokens_after": self.tokens_after,
            "reduction": round(self.reduction, 4), "units_kept": {k: list(v) for k, v in self.units_kept.items()},
            "chunks_dropped": list(self.chunks_dropped), "fallbacks": list(self.fallbacks),
            "unchanged_reason": self.unchanged_reason, "unverified": self.unverified, "usage": dict(self.usage),
        }


@dataclass
class PruningResult:
    """The pruned chunks (rank order, empty ones left out) and the report."""

    chunks: list[PrunedChunk]
    report: PruningReport

    @property
    def text(self) -> str:
        """The kept source text of every chunk, separated by blank lines (no contexts)."""
        return "\n\n".join(c.text for c in self.chunks)

    def format_for_llm(self, separator: str = "\n\n---\n\n") -> str:
        """Every kept chunk as an LLM sees it: context and pruned source marked apart."""
        return separator.join(format_for_llm(c.context, c.text) for c in self.chunks)
