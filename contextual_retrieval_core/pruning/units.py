"""Splitting a chunk into units the pruner can keep or drop, each a character span of the chunk.

A unit never cuts what a reader needs whole:

- prose: sentences (``.!?`` followed by space, and the CJK ``。！？`` with or without space),
  Markdown headings, list items and fenced code blocks (whose lines are split as code);
- Python: logical lines from `tokenize` (a statement with an open bracket or a multi-line string
  is one unit), consecutive comment lines grouped; a chunk `tokenize` cannot read to its end (a
  chunk cut mid-string) continues with the scanner below;
- other code: a scanner that knows strings, character literals, comments and brackets ends a unit
  at a line end only outside every string, comment and ``(``/``[``; braces delimit blocks, so
  the statements of a block are units of their own. A line longer than `max_line_chars`
  (minified code) is split further after ``;``, ``{`` and ``}`` at bracket depth 0.

Example:
    >>> [u.text for u in split_units("Revenue grew 3%. Costs fell.\\n\\n- item one\\n- item two")]
    ['Revenue grew 3%.', 'Costs fell.', '- item one', '- item two']
    >>> [u.text for u in split_units("x = f(1,\\n      2)\\ny = 3\\n", kind="python")]
    ['x = f(1,\\n      2)', 'y = 3']
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from contextual_retrieval_core.errors import InputError, InputTypeError

__all__ = ["Unit", "TextKind", "split_units", "guess_kind", "kind_for_path", "MAX_LINE_CHARS"]

TextKind = Literal["prose", "python", "code"]

#: a code line longer than this is minified code: it is split after ``;``, ``{`` and ``}``
MAX_LINE_CHARS = 400

_PY_EXT = {".py", ".pyi", ".pyw"}
_CODE_EXT = {
    ".rs", ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".java", ".kt", ".kts", ".scala", ".go",
    ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".cs", ".swift", ".m", ".mm", ".php", ".dart",
    ".sh", ".bash", ".rb", ".lua", ".sql", ".proto", ".zig", ".json", ".toml", ".yaml", ".yml",
}


@dataclass(frozen=True)
class Unit:
    """One unit of a chunk: ``text == chunk_text[start:end]``.

    Attributes:
        start, end: the character span in the chunk's text.
        text: the unit's text.
        kind: "sentence", "heading", "list_item" or "code".
    """

    start: int
    end: int
    text: str
    kind: str


def kind_for_path(path: str | None) -> TextKind | None:
    """"python" / "code" / "prose" from a file name's extension; None when it says nothing."""
    if not path or "." not in path.rsplit("/", 1)[-1]:
        return None
    ext = "." + path.rsplit(".", 1)[-1].lower()
    if ext in _PY_EXT:
        return "python"
    if ext in _CODE_EXT:
        return "code"
    if ext in {".md", ".markdown", ".rst", ".txt", ".html", ".htm"}:
        return "prose"
    return None


_CODE_LINE = re.compile(
    r"""^\s*(?:[{}()\[\]]|//|/\*|\*|\#(?:include|define|if|pragma|endif|\[)|@\w|
    (?:pub|fn|let|use|impl|mod|struct|enum|trait|match|const|static|return|if|else|for|while|
    def|class|import|from|async|await|try|except|elif|with|yield|raise|package|public|private|
    protected|void|int|bool|namespace|template|typedef|func|var|function|export|switch|case)\b)""",
    re.X,
)
_PY_LINE = re.compile(r"^\s*(?:def |class |elif |except\b|from \S+ import |import |@\w|.*:\s*(?:#.*)?$)")
_CURLY_END = re.compile(r"[;{}]\s*(?://.*)?$")


def guess_kind(text: str) -> TextKind:
    """"python", "code" or "prose", from how the lines look (used when no file name says)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return "prose"
    code = sum(1 for ln in lines if _CODE_LINE.match(ln) or _CURLY_END.search(ln) or ln.startswith(("    ", "\t")))
    if code < 0.5 * len(lines):
        return "prose"
    curly = sum(1 for ln in lines if _CURLY_END.search(ln))
    python = sum(1 for ln in lines if _PY_LINE.match(ln) or "self." in ln)
    return "python" if python > curly else "code"


def split_units(text: str, kind: TextKind | None = None, *, max_line_chars: int = MAX_LINE_CHARS) -> list[Unit]:
    """The units of `text`, in order, whitespace between them left out.

    Args:
        text: the chunk's text.
        kind: "prose", "python" or "code"; None to guess from the text (`guess_kind`).
        max_line_chars: code lines longer than this are split after ``;``, ``{``, ``}``.
    """
    if not isinstance(text, str):
        raise InputTypeError(f"text must be str, got {type(text).__name__}")
    kind = kind or guess_kind(text)
    if kind not in ("prose", "python", "code"):
        raise InputError(f"kind must be 'prose', 'python' or 'code', not {kind!r}")
    if kind == "python":
        spans = _python_spans(text, max_line_chars)
    elif kind == "code":
        spans = _code_spans(text, 0, len(text), max_line_chars, python=False)
    else:
        return _prose_units(text, max_line_chars)
    return [Unit(a, b, text[a:b], "code") for a, b in _group(text, _merge_trivial(text, spans))]


# -- code -----------------------------------------------------------------------------------------

_TRIVIAL = re.compile(r"^[\s)}\];,]*$")


def _merge_trivial(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Spans with a unit of only closing brackets (``}``, ``});``) joined to the unit before it."""
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if b <= a or not text[a:b].strip():
            continue
        if out and _TRIVIAL.match(text[a:b]):
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


_COMMENT = re.compile(r"^\s*(?://|#(?![\[!]?\[)|/\*|\*|--)")
_ATTRIBUTE = re.compile(r"^\s*(?:#!?\[|@\w)")


def _group(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Consecutive comment lines (no blank line between) joined into one unit; an attribute or
    decorator line joined to the statement it decorates."""
    out: list[tuple[int, int]] = []
    comments: list[bool] = []
    attach = False
    for a, b in spans:
        piece = text[a:b]
        is_comment = all(_COMMENT.match(ln) for ln in piece.splitlines() if ln.strip())
        if out and (attach or (is_comment and comments[-1] and text[out[-1][1] : a].count("\n") <= 1)):
            out[-1] = (out[-1][0], b)
            comments[-1] = comments[-1] and is_comment and not attach
        else:
            out.append((a, b))
            comments.append(is_comment)
        attach = bool(_ATTRIBUTE.match(piece)) and "\n" not in piece
    return out


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _python_spans(text: str, max_line_chars: int) -> list[tuple[int, int]]:
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))

    def at(row: int, col: int) -> int:
        return offsets[row - 1] + col if row - 1 < len(offsets) else len(text)

    spans: list[tuple[int, int]] = []
    start: int | None = None  # first token of the logical line being read
    comment_run: tuple[int, int] | None = None
    done = 0  # text before this is covered
    depth = 0  # open brackets, counted here (tokenize's own count goes negative on a stray closer)
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER):
                continue
            a, b = at(*tok.start), at(*tok.end)
            if tok.type == tokenize.COMMENT and start is None:
                comment_run = (comment_run[0], b) if comment_run else (_line_start(text, a), b)
                continue
            if tok.type == tokenize.NL:
                if start is None and comment_run and _blank_line_follows(text, b):
                    spans.append(comment_run)
                    comment_run, done = None, b
                continue
            if tok.type == tokenize.OP and tok.string in "([{":
                depth += 1
            elif tok.type == tokenize.OP and tok.string in ")]}":
                depth = max(0, depth - 1)  # a chunk may start inside a bracket it never opened
            if tok.type == tokenize.NEWLINE or tok.type == tokenize.NL and depth == 0 and start is not None:
                if depth > 0:
                    continue  # tokenize saw a closer without its opener: the statement goes on
                if start is not None:
                    spans.append((start, a))
                    start, done = None, b
                continue
            if start is None:
                if comment_run:
                    spans.append(comment_run)
                    comment_run = None
                start = _line_start(text, a)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    if comment_run:
        spans.append(comment_run)
        done = max(done, comment_run[1])
    if start is not None:  # an unfinished statement (or a chunk tokenize stopped in): scan the rest
        done = start
    if done < len(text) and text[done:].strip():
        spans.extend(_code_spans(text, done, len(text), max_line_chars, python=True))
    return _split_long(text, spans, max_line_chars, python=True)


def _blank_line_follows(text: str, pos: int) -> bool:
    nxt = text.find("\n", pos)
    line = text[pos:nxt if nxt >= 0 else len(text)]
    return not line.strip()


_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")", "]", "}"}
_PY_STRING = re.compile(r"""(?i)(?:[rbuf]{0,2})('''|\"\"\"|'|")""")
_RUST_RAW = re.compile(r'r(#*)"')
_CHAR_LIT = re.compile(r"'(?:\\.[^']{0,8}|[^'\\\n])'")


def _scan(text: str, lo: int, hi: int, *, python: bool) -> Iterator[tuple[int, int, bool]]:
    """Yield (position, depth, in_code) at each newline and at each ``;{}`` between lo and hi.

    depth counts open ``(``, ``[`` and expression braces (every ``{`` in Python; in other code
    one after ``::``, ``=``, ``(``, ``[``, ``,`` or ``!``, see `_expression_brace`);
    in_code is False inside a string or block comment that is still open at that point.
    """
    i, depth, stack = lo, 0, []
    while i < hi:
        c = text[i]
        if c == "\n":
            yield i, depth, True
            i += 1
            continue
        if python and c == "#" or not python and text.startswith("//", i):
            nl = text.find("\n", i, hi)
            i = hi if nl < 0 else nl
            continue
        if not python and text.startswith("/*", i):
            end = text.find("*/", i + 2, hi)
            i = hi if end < 0 else end + 2
            continue
        if not python:
            m = _RUST_RAW.match(text, i)
            if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                close = '"' + m.group(1)
                end = text.find(close, m.end(), hi)
                i = hi if end < 0 else end + len(close)
                continue
        if c == "'" and not python:
            m = _CHAR_LIT.match(text, i)
            i = m.end() if m else i + 1  # otherwise a lifetime ('a) or an apostrophe
            continue
        if c in "'\"`" or python and c in "rbuRBUfF" and _PY_STRING.match(text, i):
            m = _PY_STRING.match(text, i) if python else None
            if m and (m.start() == i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                quote, body = m.group(1), m.end()
            elif c in "'\"`":
                quote, body = c, i + 1
            else:
                i += 1
                continue
            j = body
            while j < hi:
                if text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(quote, j):
                    break
                if len(quote) == 1 and quote != "`" and text[j] == "\n":
                    break  # an unterminated one-line string ends at the line end
                j += 1
            i = min(hi, j + len(quote))
            continue
        if c in _OPEN:
            block = c == "{" and not python and not _expression_brace(text, lo, i)
            stack.append(block)
            if block:
                yield i + 1, depth, True
            else:
                depth += 1
        elif c in _CLOSE:
            block = stack.pop() if stack else False
            if not block:
                depth = max(0, depth - 1)
            elif c == "}":
                yield i + 1, depth, True
        elif c == ";" and not python:
            yield i + 1, depth, True
        i += 1


_EXPRESSION_BEFORE_BRACE = re.compile(r"(?:::|[(\[,!]|[^=]=|^=)\s*$")


def _expression_brace(text: str, lo: int, i: int) -> bool:
    """Whether the ``{`` at i opens an expression (``use a::{b, c}``, ``= {1, 2}``, ``f({..})``)
    rather than a block (``fn f() {``, ``else {``, ``x => {``)."""
    return bool(_EXPRESSION_BEFORE_BRACE.search(text[max(lo, i - 8) : i]))


def _code_spans(text: str, lo: int, hi: int, max_line_chars: int, *, python: bool) -> list[tuple[int, int]]:
    """Units of text[lo:hi]: line ends at bracket depth 0, outside strings and comments."""
    spans, start = [], lo
    for pos, depth, _ in _scan(text, lo, hi, python=python):
        # ; { } inside a line are boundaries only in long lines (_split_long)
        if depth == 0 and pos < hi and text[pos] == "\n":
            spans.append(_trim(text, start, pos))
            start = pos + 1
    if start < hi:
        spans.append(_trim(text, start, hi))
    return _split_long(text, [s for s in spans if s[1] > s[0]], max_line_chars, python=python)


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    """The span without blank lines around it; leading indentation of its first line kept."""
    while a < b and text[a] in "\r\n":
        a += 1
    while a < b and text[a:b].startswith((" ", "\t")) and "\n" in text[a:b] and not text[a:text.find("\n", a, b)].strip():
        a = text.find("\n", a, b) + 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _split_long(text: str, spans: list[tuple[int, int]], max_line_chars: int, *, python: bool) -> list[tuple[int, int]]:
    if python:
        return spans  # Python cannot be cut inside a logical line without breaking it
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if b - a <= max_line_chars:
            out.append((a, b))
            continue
        start = a
        for pos, depth, _ in _scan(text, a, b, python=False):
            if depth == 0 and pos - start >= 1 and text[pos - 1] in ";{}\n":
                if text[start:pos].strip():
                    out.append(_trim(text, start, pos))
                start = pos
        if text[start:b].strip():
            out.append(_trim(text, start, b))
    return [s for s in out if s[1] > s[0]]


# -- prose ----------------------------------------------------------------------------------------

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_ABBREV = {"e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "st", "fig", "no", "cf", "approx", "inc", "ltd", "co"}
# a sentence ends at . ! ? (closing quotes/brackets allowed) before space, or at CJK 。！？ anywhere
_SENTENCE_END = re.compile(r"(?:[.!?]+[\"')\]’”]*(?=\s+\S)|[。！？]+[」』”’）]*)")


def _prose_units(text: str, max_line_chars: int) -> list[Unit]:
    units: list[Unit] = []
    pos, paragraph_start, in_fence, fence_start = 0, None, False, 0
    lines = text.splitlines(keepends=True)

    def flush(end: int) -> None:
        nonlocal paragraph_start
        if paragraph_start is not None:
            units.extend(_sentences(text, paragraph_start, end))
            paragraph_start = None

    for line in lines:
        a, b = pos, pos + len(line.rstrip("\r\n"))
        pos += len(line)
        if _FENCE.match(line):
            if in_fence:
                units.extend(_fenced(text, fence_start, a, b, max_line_chars))
                in_fence = False
            else:
                flush(a)
                in_fence, fence_start = True, a
            continue
        if in_fence:
            continue
        if not line.strip():
            flush(a)
        elif _HEADING.match(line):
            flush(a)
            s, e = _strip(text, a, b)
            units.append(Unit(s, e, text[s:e], "heading"))
        elif _LIST_ITEM.match(line):
            flush(a)
            paragraph_start = a  # a list item runs until the next item, heading or blank line
            units.extend(_sentences(text, a, b, kind="list_item", whole=True))
            paragraph_start = None
        elif paragraph_start is None:
            paragraph_start = a
    if in_fence:
        units.extend(_fenced(text, fence_start, len(text), len(text), max_line_chars))
    else:
        flush(len(text))
    return units


def _fenced(text: str, fence: int, close: int, end: int, max_line_chars: int) -> list[Unit]:
    """A fenced code block's lines split as code; the fence lines join the first and last unit."""
    body = text.find("\n", fence, end) + 1 or end
    spans = _merge_trivial(text, _code_spans(text, body, close, max_line_chars, python=False)) if body < close else []
    if not spans:
        s, e = _strip(text, fence, end)
        return [Unit(s, e, text[s:e], "code")] if e > s else []
    spans[0] = (fence, spans[0][1])
    spans[-1] = (spans[-1][0], max(spans[-1][1], _strip(text, fence, end)[1]))
    return [Unit(s, e, text[s:e], "code") for s, e in spans]


def _strip(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _sentences(text: str, a: int, b: int, kind: str = "sentence", whole: bool = False) -> list[Unit]:
    if whole:
        s, e = _strip(text, a, b)
        return [Unit(s, e, text[s:e], kind)] if e > s else []
    out, start = [], a
    for m in _SENTENCE_END.finditer(text, a, b):
        end = m.end()
        if text[m.start()] == "." and m.group() == ".":
            word = re.search(r"([\w.]+)$", text[start : m.start()])
            if word and (word.group(1).lower() in _ABBREV or len(word.group(1)) == 1):
                continue  # e.g. / i.e. / an initial: not the end of a sentence
        s, e = _strip(text, start, end)
        if e > s:
            out.append(Unit(s, e, text[s:e], kind))
        start = end
    s, e = _strip(text, start, b)
    if e > s:
        out.append(Unit(s, e, text[s:e], kind))
    return out
