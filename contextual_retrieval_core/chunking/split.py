"""`split_text`: the chunker `contextual-retrieval index` and the demo use.

Chunks are verbatim slices of the text, cut at line starts: a heading (prose) or a top-level
definition after a blank line (code) first, then a paragraph break, then any line; a single line
longer than the limit is cut at a space.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Collection, Mapping

from contextual_retrieval_core.chunking._languages import CODE_LANGUAGES, EXTENSIONS
from contextual_retrieval_core.errors import InputError

__all__ = ["split_text", "DEFAULT_CHUNK_CHARS", "CODE_EXTENSIONS"]

#: Characters per chunk: about 200 tokens of prose, so a chunk and its context fit the local
#: embedder's 256-token window.
DEFAULT_CHUNK_CHARS = 800

#: Extensions chunked as code (cuts prefer definitions over headings); from `_languages.EXTENSIONS`.
CODE_EXTENSIONS = frozenset(ext for ext, language in EXTENSIONS.items() if language in CODE_LANGUAGES)
_HEADING = re.compile(r"(#{1,6} |[=\-~^*+#]{3,}\s*$)")
_CODE_DEF = re.compile(
    r"(?:@|def |async def |class |fn |pub |impl |func |function |export |interface |struct |enum |type |"
    r"trait |mod |module |public |private |protected |static |const |let |var |package |namespace |#\[)"
)


def split_text(text: str, *, max_chars: int = DEFAULT_CHUNK_CHARS, code: bool = False,
               boundaries: Collection[int] | Mapping[int, int] | None = None, max_tokens: int | None = None,
               token_span: Callable[[int, int], int] | None = None,
               reserve: Callable[[int, str], int] | None = None,
               fitting_end: Callable[[int, int, int], int] | None = None) -> list[tuple[int, str]]:
    """Split `text` into chunks of at most `max_chars`, each occurring verbatim in `text`.

    Cuts go at line starts, preferring (best first) a heading or, for `code`, a top-level
    definition after a blank line; then any paragraph break; then any line; a single line longer
    than `max_chars` is cut at a space. Chunks are stripped of surrounding whitespace and empty
    ones are dropped. `boundaries` (line-start offsets, e.g. `code_outline.chunk_boundaries`: where
    tree-sitter found a definition) replace the `code` line rule for the preferred cuts; a mapping
    of offsets to ranks (`code_outline.cut_ranks`: definitions over statements) ranks them, a
    blank line before a cut adding one, and any other blank line ranking just above a plain line.
    `max_tokens` with `token_span(start, end)` (the tokens of ``text[start:end]``) bounds every
    chunk's tokens too (`budget.split_to_fit` derives both from the embedder's window);
    `reserve(offset, chunk)` takes what that chunk's context will cost off its own budget (the
    chunk is cut again, shorter, until it fits or is down to a quarter of `max_tokens`).
    `fitting_end(pos, limit, budget)` gives the furthest end in ``(pos, limit]`` within `budget`
    tokens where no line start is in reach (default: a binary search over characters with
    `token_span`; `budget.split_to_fit` gives one that cuts a long run between its parts). Every
    count is of a span of at most `max_chars` characters, so the work is linear in the text.

    Returns:
        (offset in `text` of the chunk's first character, chunk text) pairs, in order.

    Example:
        >>> text = "# A\\n\\n" + "first paragraph. " * 3 + "\\n\\n# B\\n\\n" + "second paragraph. " * 3
        >>> [chunk[:20] for _, chunk in split_text(text, max_chars=80)]
        ['# A\\n\\nfirst paragraph', '# B\\n\\nsecond paragrap']
    """
    if max_chars < 50:
        raise InputError(f"max_chars must be at least 50, got {max_chars}")
    n = len(text)
    starts = [0] + [m.end() for m in re.finditer("\n", text) if m.end() < n]
    quality = []
    cuts = frozenset(boundaries or ())
    ranks = boundaries if isinstance(boundaries, Mapping) else None
    for i, s in enumerate(starts):
        line = text[s : starts[i + 1] if i + 1 < len(starts) else n]
        prev_blank = i > 0 and not text[starts[i - 1] : s].strip()
        if ranks is not None:
            quality.append(ranks.get(s, 0) + (1 if prev_blank else 0))
            continue
        if boundaries is not None:
            quality.append(3 if s in cuts else 2 if prev_blank else 1)
            continue
        strong = _CODE_DEF.match(line.lstrip()) if code else _HEADING.match(line)
        quality.append(3 if strong and (prev_blank or not code) else 2 if prev_blank else 1)
    min_chars = max_chars // 3
    budget = max_tokens if token_span is not None else None

    def choose_end(pos: int, budget: int | None) -> int:
        if n - pos <= max_chars and (budget is None or token_span is None or token_span(pos, n) <= budget):
            return n  # the rest fits (its tokens are counted only when it is short: bounded work)
        lo = bisect.bisect_right(starts, pos + min_chars)
        hi = bisect.bisect_right(starts, pos + max_chars)
        if budget is not None and token_span is not None:
            first = bisect.bisect_right(starts, pos)
            hi = _past_last_fitting(starts, first, hi, pos, token_span, budget)
            lo = min(lo, _past_last_fitting(starts, first, hi, pos, token_span, budget // 3))
        if lo < hi:
            return starts[max(range(lo, hi), key=lambda j: (quality[j], starts[j]))]
        limit = pos + max_chars
        if budget is not None and token_span is not None:  # the furthest end the tokens allow
            furthest = fitting_end(pos, limit, budget) if fitting_end else furthest_fitting(pos, limit, token_span, budget)
            limit = min(limit, furthest)
        space = text.rfind(" ", pos + min(min_chars, (limit - pos) // 3), limit)
        return space + 1 if space > pos else max(limit, pos + 1)

    out: list[tuple[int, str]] = []
    pos = 0
    while pos < n:
        end = choose_end(pos, budget)
        if reserve is not None and budget is not None and token_span is not None:
            floor, own = max(1, budget // 4), budget
            while True:  # a shorter chunk can have another context: check again, budgets only shrink
                piece = text[pos:end]
                stripped = piece.strip()
                if not stripped:
                    break
                fits = max(floor, min(own, budget - reserve(pos + piece.index(stripped[0]), stripped)))
                if token_span(pos, end) <= fits or fits == own:
                    break
                own = fits
                end = choose_end(pos, own)
        piece = text[pos:end]
        stripped = piece.strip()
        if stripped:
            out.append((pos + piece.index(stripped[0]), stripped))
        pos = end
    return out


def _past_last_fitting(starts: list[int], first: int, stop: int, pos: int, span: Callable[[int, int], int], budget: int) -> int:
    """The index after the last line start in ``starts[first:stop]`` up to which ``text[pos:]``
    holds at most `budget` tokens (`first` when none does): the `hi` of the cut search."""
    lo, hi = first, stop
    while lo < hi:
        mid = (lo + hi) // 2
        if span(pos, starts[mid]) <= budget:
            lo = mid + 1
        else:
            hi = mid
    return lo


def furthest_fitting(pos: int, limit: int, span: Callable[[int, int], int], budget: int) -> int:
    """The largest end in ``(pos, limit]`` with ``text[pos:end]`` within `budget` tokens, at least
    ``pos + 1``."""
    lo, hi = pos + 1, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if span(pos, mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo
