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
#: No chunk gets a budget under this many tokens, however much room its context leaves.
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
        """Tokens of each whitespace-delimited piece, special tokens left out (counted once each);
        a piece that fills the window (a tokenizer that truncates reports no more) counts as the
        whole window, so it never fits whole and is cut inside."""
        new = sorted({p for p in pieces if p not in self._known})
        if new:
            for p, n in zip(new, self.count(new)):
                self._known[p] = max(0, int(n) - self.special) if int(n) < self.size else self.size
        return [self._known[p] for p in pieces]

    def tokens(self, text: str) -> int:
        """Tokens of `text` without the special tokens (summed over its pieces, so a text longer
        than the window counts past it)."""
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
    definitions); `fixed_reserve` is room kept on top for a context that cannot (an LLM's). Each
    chunk is cut where `split_text` would cut it (definitions, headings, paragraphs, lines,
    spaces) within the window less its own reserve, so a chunk with a long header is shorter
    than its neighbours, not split into a chunk and a sliver. Without a window this is
    `split_text`.

    Returns:
        (offset, chunk text) pairs, in order, as `split_text`.
    """
    if window is None:
        return split_text(text, max_chars=max_chars, code=code, boundaries=boundaries)
    costs = _TextCosts(text, window)
    budget = max(MIN_CHUNK_TOKENS, window.room - fixed_reserve)
    return split_text(text, max_chars=max_chars, code=code, boundaries=boundaries, max_tokens=budget,
                      token_span=costs.span, reserve=reserve)


class _TextCosts:
    """Token counts of any span of one text, from its pieces' counts and a prefix sum; a piece
    that a span cuts inside its non-space characters (a long run without spaces) has its part
    counted on its own."""

    def __init__(self, text: str, window: TokenWindow) -> None:
        self.text, self.window = text, window
        self.starts: list[int] = []
        self.words: list[int] = []  # where each piece's non-space characters end
        pieces: list[str] = []
        for m in _PIECE.finditer(text):
            self.starts.append(m.start())
            self.words.append(m.start() + len(m.group().rstrip()))
            pieces.append(m.group())
        self.prefix = [0]
        for n in window.piece_costs(pieces):
            self.prefix.append(self.prefix[-1] + n)

    def _cost(self, start: int, end: int) -> int:
        return self.window.piece_costs([self.text[start:end]])[0] if end > start else 0

    def span(self, start: int, end: int) -> int:
        """Tokens of ``text[start:end]``."""
        if end <= start:
            return 0
        first = bisect.bisect_right(self.starts, start) - 1
        last = bisect.bisect_right(self.starts, end - 1) - 1  # the piece holding the span's last character
        head_cut = first >= 0 and self.starts[first] < start < self.words[first]
        tail_cut = self.starts[last] < end < self.words[last]
        if first == last and (head_cut or tail_cut):
            return self._cost(start, min(end, self.words[last]))
        lo = first + 1 if head_cut or first < 0 or start >= self.words[first] else first
        hi = last if tail_cut else last + 1
        total = self.prefix[hi] - self.prefix[lo]
        if head_cut:
            total += self._cost(start, self.words[first])
        if tail_cut:
            total += self._cost(self.starts[last], end)
        return total
