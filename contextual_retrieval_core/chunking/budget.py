"""Chunk budgets from the embedder's own window: chunks that the embedder sees whole.

An embedder with a short window (the offline MiniLM reads 256 tokens) silently drops the tail of
a longer text. The indexed text is ``context + "\\n\\n" + chunk``, so a chunk fits when its tokens,
its context's and the embedder's special tokens add up to at most the window, all counted with the
embedder's own tokenizer. `split_to_fit` cuts a text so that every chunk does, given what each
chunk's context will take (`reserve`).

The rule (docs/defaults.md): an embedder that exposes its window (`max_tokens`) and a tokenizer
(`count_tokens`) gets chunks of at most ``max_tokens - special - reserve`` tokens, and
`DEFAULT_CHUNK_CHARS` characters; one that does not (hosted embedders read 32,000 tokens, far past
any chunk of `DEFAULT_CHUNK_CHARS`) gets the character limit alone.

Counting is exact for the tokenizers that split at whitespace first (WordPiece, as MiniLM's): the
tokens of a text are the sum of the tokens of its whitespace-separated pieces, so each distinct
piece is counted once and spans are summed.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS, split_text

__all__ = ["TokenWindow", "window_of", "split_to_fit", "LLM_CONTEXT_RESERVE", "MIN_CHUNK_TOKENS"]

#: Embedder tokens kept for an LLM-written context: the prompt asks for 50-100 tokens (Anthropic's
#: figure), and the next power of two leaves room for a tokenizer that counts more finely than the
#: LLM's (Claude 3 Haiku's 737 cookbook contexts: at most 123 MiniLM tokens, 99th percentile 101).
LLM_CONTEXT_RESERVE = 128
#: A chunk never gets a budget under this many tokens, however long its context: the chunk
#: still advances through the text (such a chunk's indexed text is then over the window).
MIN_CHUNK_TOKENS = 32
_PIECE = re.compile(r"\S+\s*|\s+")


def _through(embedder: Any, name: str) -> Any:
    """`embedder.<name>`, looking through wrappers that keep the real one as `.embedder`
    (`CachedEmbedder`, the frameworks' embedding adapters)."""
    for _ in range(8):
        if embedder is None:
            return None
        value = getattr(embedder, name, None)
        if value is not None:
            return value
        embedder = getattr(embedder, "embedder", None) or getattr(embedder, "_embedder", None)
    return None


@dataclass
class TokenWindow:
    """An embedder's window and its tokenizer.

    Args:
        size: tokens the embedder reads, special tokens included (MiniLM: 256).
        count: the embedder's `count_tokens` (tokens per text, special tokens included).
    """

    size: int
    count: Callable[[Sequence[str]], Sequence[int]]

    def __post_init__(self) -> None:
        self.special = int(self.count([""])[0])
        self._known: dict[str, int] = {}

    @property
    def room(self) -> int:
        """Tokens left for context and chunk once the special tokens are in."""
        return self.size - self.special

    def piece_costs(self, pieces: Sequence[str]) -> list[int]:
        """Tokens of each whitespace-delimited piece, special tokens left out (counted once each)."""
        new = sorted({p for p in pieces if p not in self._known})
        if new:
            for p, n in zip(new, self.count(new)):
                self._known[p] = max(0, int(n) - self.special)
        return [self._known[p] for p in pieces]

    def tokens(self, text: str) -> int:
        """Tokens of `text` without the special tokens, uncapped."""
        return sum(self.piece_costs(_PIECE.findall(text))) if text else 0


def window_of(embedder: Any) -> TokenWindow | None:
    """The `TokenWindow` of `embedder` (through cache and framework wrappers), or None when it
    exposes no window or no tokenizer."""
    size, count = _through(embedder, "max_tokens"), _through(embedder, "count_tokens")
    if not isinstance(size, int) or not callable(count):
        return None
    return TokenWindow(size, count)


def split_to_fit(
    text: str,
    window: TokenWindow | None,
    *,
    max_chars: int = DEFAULT_CHUNK_CHARS,
    code: bool = False,
    boundaries: Collection[int] | Mapping[int, int] | None = None,
    reserve: Callable[[int, str], int] | None = None,
    fixed_reserve: int = 0,
) -> list[tuple[int, str]]:
    """`split_text`, with every chunk's tokens plus its context's within `window`.

    `reserve(offset, chunk)` is the tokens the chunk's context will take where it can be
    computed before the context exists (the structural header: its file, section and
    definitions); `fixed_reserve` is room kept on top for a context that cannot (an LLM's). A
    chunk whose reserve leaves it too little room is split again with its own reserve, until
    every chunk fits or is down to `MIN_CHUNK_TOKENS`; cuts are `split_text`'s (definitions,
    headings, paragraphs, lines, spaces). Without a window this is `split_text`.

    Returns:
        (offset, chunk text) pairs, in order, as `split_text`.
    """
    if window is None:
        return split_text(text, max_chars=max_chars, code=code, boundaries=boundaries)
    costs = _TextCosts(text, window)
    cuts = sorted(boundaries) if boundaries is not None else None
    ranks = boundaries if isinstance(boundaries, Mapping) else None

    def split_span(start: int, end: int, budget: int) -> list[tuple[int, str]]:
        inner: list[int] | dict[int, int] | None = None
        if cuts is not None:
            inside = cuts[bisect.bisect_left(cuts, start):bisect.bisect_left(cuts, end)]
            inner = {b - start: ranks[b] for b in inside} if ranks is not None else [b - start for b in inside]
        return [(start + o, piece) for o, piece in split_text(text[start:end], max_chars=max_chars, code=code,
                                                                boundaries=inner, max_tokens=budget,
                                                                token_span=lambda a, b: costs.span(start + a, start + b))]

    base = max(MIN_CHUNK_TOKENS, window.room - fixed_reserve)
    out = split_span(0, len(text), base)
    if reserve is None:
        return out
    for _ in range(4):  # a re-split chunk's header can differ from its parent's: check again
        again: list[tuple[int, str]] = []
        changed = False
        for offset, piece in out:
            budget = max(MIN_CHUNK_TOKENS, window.room - fixed_reserve - reserve(offset, piece))
            if costs.span(offset, offset + len(piece)) <= budget or costs.span(offset, offset + len(piece)) <= MIN_CHUNK_TOKENS:
                again.append((offset, piece))
                continue
            parts = split_span(offset, offset + len(piece), budget)
            changed = changed or len(parts) > 1
            again.extend(parts)
        out = again
        if not changed:
            break
    return out


class _TextCosts:
    """Token counts of any span of one text, from its pieces' counts and a prefix sum."""

    def __init__(self, text: str, window: TokenWindow) -> None:
        self.starts: list[int] = []
        pieces: list[str] = []
        for m in _PIECE.finditer(text):
            self.starts.append(m.start())
            pieces.append(m.group())
        self.prefix = [0]
        for n in window.piece_costs(pieces):
            self.prefix.append(self.prefix[-1] + n)

    def span(self, start: int, end: int) -> int:
        """Tokens of ``text[start:end]`` (a piece cut inside counts whole at the span's end)."""
        first = bisect.bisect_right(self.starts, start) - 1
        last = bisect.bisect_left(self.starts, end)
        return self.prefix[last] - self.prefix[max(first, 0)]
