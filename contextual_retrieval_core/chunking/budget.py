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
piece is counted once and spans are summed. A run of more than `LONG_RUN_CHARS` characters
without whitespace (base64, a minified line) is the exception: the chunker counts it in parts of
`RUN_PART_CHARS` characters, a token more each for the cut (never fewer tokens than the run has),
and cuts it between them, so that chunking counts each character about once and takes time in
proportion to the text's size, whatever its spaces (`benchmarks/chunk_linear.py`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from contextual_retrieval_core.chunking.split import DEFAULT_CHUNK_CHARS, furthest_fitting, split_text

__all__ = ["TokenWindow", "window_of", "split_to_fit", "LLM_CONTEXT_RESERVE", "MIN_CHUNK_TOKENS"]

#: Embedder tokens kept for an LLM-written context: the prompt asks for 50-100 tokens (Anthropic's
#: figure), and the next power of two leaves room for a tokenizer that counts more finely than the
#: LLM's (Claude 3 Haiku's 737 cookbook contexts: at most 123 MiniLM tokens, 99th percentile 101).
LLM_CONTEXT_RESERVE = 128
#: No chunk gets a budget under this many tokens, however much room its context leaves.
MIN_CHUNK_TOKENS = 32
_PIECE = re.compile(r"\S+\s*|\s+")
#: Runs of more non-space characters than this (base64, a minified line) are counted only when a
#: span holds them whole (`_TextCosts`), so chunking a long run never counts the run whole.
LAZY_PIECE_CHARS = 256
#: A run of more non-space characters than this (more than WordPiece reads as one word) is counted
#: and cut by the chunker in parts of `RUN_PART_CHARS` characters (`_TextCosts.bound`).
LONG_RUN_CHARS = 100
RUN_PART_CHARS = 32


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

    def piece_costs(self, pieces: Sequence[str], *, remember: bool = True) -> list[int]:
        """Tokens of each whitespace-delimited piece, special tokens left out (counted once each);
        a piece that fills the window (a tokenizer that truncates reports no more) counts as the
        whole window, so it never fits whole and is cut inside. `remember=False` counts pieces
        unlikely to recur (a part of a long run) without keeping them."""
        new = sorted({p for p in pieces if p not in self._known})
        if not new:
            return [self._known[p] for p in pieces]
        counted = {p: max(0, int(n) - self.special) if int(n) < self.size else self.size
                   for p, n in zip(new, self.count(new))}
        if remember:
            self._known.update(counted)
        return [self._known[p] if p in self._known else counted[p] for p in pieces]

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
                      token_span=costs.bound, reserve=reserve, fitting_end=costs.fitting_end)


class _TextCosts:
    """Token counts of spans of one text, from its pieces' counts and prefix sums.

    `span` is exact: a piece that a span cuts inside its non-space characters has its part counted
    on its own (kept for this text only), and a piece longer than `LAZY_PIECE_CHARS` is counted
    only when a span holds it whole. `bound` is what the chunker counts: `span`, except that a
    run of more than `LONG_RUN_CHARS` non-space characters (base64, a minified line) is counted in
    parts of `RUN_PART_CHARS` characters, each with one token more for its cut (a cut changes the
    tokens around it: with that token, never fewer than the run's own on MiniLM's tokenizer, for
    base64, hex, letters, CJK, minified code; test_chunking_linear.py checks it); every
    part is counted once, and `fitting_end` cuts such a run between its parts, so that chunking a
    text counts each character about once (linear in the text's size, whatever its spaces).
    """

    def __init__(self, text: str, window: TokenWindow) -> None:
        self.text, self.window = text, window
        self.starts: list[int] = []
        self.words: list[int] = []  # where each piece's non-space characters end
        pieces: list[str] = []
        for m in _PIECE.finditer(text):
            self.starts.append(m.start())
            self.words.append(m.start() + len(m.group().rstrip()))
            pieces.append(m.group())
        # runs of more than LAZY_PIECE_CHARS non-space characters: counted whole only when needed
        self.lazy = [i for i, (a, b) in enumerate(zip(self.starts, self.words)) if b - a > LAZY_PIECE_CHARS]
        self._lazy_costs: dict[int, int] = {}
        self._parts: dict[tuple[int, int], int] = {}
        short = [p for i, p in enumerate(pieces) if self.words[i] - self.starts[i] <= LAZY_PIECE_CHARS]
        costs = dict(zip(short, window.piece_costs(short)))
        self.prefix = [0]
        for p in pieces:
            self.prefix.append(self.prefix[-1] + costs.get(p, 0))
        # the chunker's units: pieces as they are, runs over LONG_RUN_CHARS in parts (seam 1)
        self.unit_starts: list[int] = []
        self.unit_words: list[int] = []
        self.seam: list[int] = []
        unit_costs: list[int | None] = []  # None: a part, counted below with the others
        run_parts: list[str] = []
        for start, word, p in zip(self.starts, self.words, pieces):
            if word - start <= LONG_RUN_CHARS:
                self.unit_starts.append(start)
                self.unit_words.append(word)
                self.seam.append(0)
                unit_costs.append(costs[p])
                continue
            for at in range(start, word, RUN_PART_CHARS):
                self.unit_starts.append(at)
                self.unit_words.append(min(word, at + RUN_PART_CHARS))
                self.seam.append(1)
                unit_costs.append(None)
                run_parts.append(text[at:at + RUN_PART_CHARS] if at + RUN_PART_CHARS < word else p[at - start:])
        part_costs = iter(window.piece_costs(run_parts, remember=False))
        self.unit_prefix = [0]
        for n in unit_costs:
            self.unit_prefix.append(self.unit_prefix[-1] + (n if n is not None else next(part_costs) + 1))

    def _unit_end(self, i: int) -> int:
        return self.unit_starts[i + 1] if i + 1 < len(self.unit_starts) else len(self.text)

    def _cost(self, start: int, end: int) -> int:
        if end <= start:
            return 0
        key = (start, end)
        if key not in self._parts:
            self._parts[key] = self.window.piece_costs([self.text[start:end]], remember=False)[0]
        return self._parts[key]

    def _whole(self, lo: int, hi: int) -> int:
        """Tokens of pieces ``lo..hi-1`` counted whole."""
        total = self.prefix[hi] - self.prefix[lo]
        for i in self.lazy[bisect.bisect_left(self.lazy, lo):bisect.bisect_left(self.lazy, hi)]:
            if i not in self._lazy_costs:
                end = self.starts[i + 1] if i + 1 < len(self.starts) else len(self.text)
                self._lazy_costs[i] = self.window.piece_costs([self.text[self.starts[i]:end]], remember=False)[0]
            total += self._lazy_costs[i]
        return total

    def span(self, start: int, end: int) -> int:
        """Tokens of ``text[start:end]``."""
        return self._count(start, end, self.starts, self.words, None)

    def bound(self, start: int, end: int) -> int:
        """Tokens of ``text[start:end]`` as the chunker counts them: `span`, or more inside a long
        run (see the class)."""
        return self._count(start, end, self.unit_starts, self.unit_words, self.seam)

    def _count(self, start: int, end: int, starts: list[int], words: list[int], seam: list[int] | None) -> int:
        if end <= start:
            return 0
        first = bisect.bisect_right(starts, start) - 1
        last = bisect.bisect_right(starts, end - 1) - 1  # the unit holding the span's last character
        head_cut = first >= 0 and starts[first] < start < words[first]
        tail_cut = starts[last] < end < words[last]
        if first == last and (head_cut or tail_cut):
            return self._cost(start, min(end, words[last])) + (seam[last] if seam else 0)
        lo = first + 1 if head_cut or first < 0 or start >= words[first] else first
        hi = last if tail_cut else last + 1
        total = self._whole(lo, hi) if seam is None else self.unit_prefix[hi] - self.unit_prefix[lo]
        if head_cut:
            total += self._cost(start, words[first]) + (seam[first] if seam else 0)
        if tail_cut:
            total += self._cost(starts[last], end) + (seam[last] if seam else 0)
        return total

    def fitting_end(self, pos: int, limit: int, budget: int) -> int:
        """The furthest end in ``(pos, limit]`` with ``bound(pos, end) <= budget`` (at least
        ``pos + 1``): inside one long run, the last end of a part that fits (no count past the
        parts'), else `furthest_fitting`'s binary search."""
        piece = bisect.bisect_right(self.starts, pos) - 1
        if piece < 0 or self.words[piece] - self.starts[piece] <= LONG_RUN_CHARS or limit >= self.words[piece]:
            return furthest_fitting(pos, limit, self.bound, budget)
        i = bisect.bisect_right(self.unit_starts, pos) - 1  # the part holding pos
        j = bisect.bisect_right(self.unit_starts, limit) - 1  # part ends (next starts) in (pos, limit]
        lo, hi = i + 1, j + 1  # candidates: unit_starts[lo:hi], bisected with `bound`
        while lo < hi:
            mid = (lo + hi) // 2
            if self.bound(pos, self.unit_starts[mid]) <= budget:
                lo = mid + 1
            else:
                hi = mid
        if lo > i + 1:
            return self.unit_starts[lo - 1]
        return furthest_fitting(pos, min(limit, self._unit_end(i)), self.bound, budget)
