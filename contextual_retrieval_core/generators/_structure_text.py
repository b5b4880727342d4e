"""Headings and titles for the structural contexts.

Markdown headings (ATX and setext, fenced code skipped) come from markdown-it-py's CommonMark
parser. reStructuredText has no parser among the dependencies: its section titles are read by
their adornment lines (the rule docutils applies: a new adornment style opens the next level).
YAML front matter is cut before parsing (its `title:` is a title).

Example:
    >>> [(h.level, h.text) for h in headings("# Setup\\n\\n## Install\\n\\n```\\n# not one\\n```\\n")]
    [(1, 'Setup'), (2, 'Install')]
    >>> heading_chain(headings("# A\\n## B\\ntext\\n# C\\n"), 12)
    ['A', 'B']
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["Heading", "headings", "heading_chain", "prose_title", "code_title", "short_title", "short_path",
           "normalize"]


@dataclass(frozen=True)
class Heading:
    start: int  # character offset of the heading's first line
    level: int
    text: str


_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_ADORN = re.compile(r"^([=\-~^\"'`*+#:._<>!$%&,/;?@\\|])\1+[ \t]*$")


@lru_cache(maxsize=1)
def _md() -> Any:
    """The CommonMark parser, built on first use (a query that writes no context never loads it)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")


def _line_offsets(text: str) -> list[int]:
    offsets, off = [], 0
    for line in text.split("\n"):
        offsets.append(off)
        off += len(line) + 1
    return offsets


def _front_matter_lines(text: str) -> int:
    fm = _FRONT_MATTER.match(text)
    if not fm:
        return 0
    return fm.group(0).count("\n") + (0 if fm.group(0).endswith("\n") else 1)


def _inline_text(token: Any) -> str:
    parts = []
    for child in token.children or ():
        if child.type in ("text", "code_inline", "image"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return " ".join("".join(parts).split())


def heading_text(s: str) -> str:
    words = s.split()
    if len(words) > 8:
        s = " ".join(words[:8]) + "…"
    if len(s) > 60:
        s = s[:59].rstrip() + "…"
    return s


def headings(text: str, *, rst: bool = False) -> list[Heading]:
    """The document's headings with offsets and levels: Markdown through markdown-it, or
    reStructuredText (`rst=True`, or a document with no Markdown heading whose adornment lines
    use rST-only characters)."""
    lines = text.split("\n")
    offsets = _line_offsets(text)
    skip = _front_matter_lines(text)
    body = "\n" * skip + "\n".join(lines[skip:])  # same line numbers, front matter blanked
    found: list[Heading] = []
    if not rst:
        tokens = _md().parse(body)
        for i, tok in enumerate(tokens):
            if tok.type == "heading_open" and tok.map and i + 1 < len(tokens):
                title = _inline_text(tokens[i + 1])
                if title:
                    found.append(Heading(offsets[tok.map[0]], int(tok.tag[1]), heading_text(title)))
        has_atx = any(t.type == "heading_open" and t.markup.startswith("#") for t in tokens)
        rst_like = not has_atx and any(
            _ADORN.match(ln) and ln.strip()[0] not in "=-" and len(ln.strip()) >= 3 for ln in lines
        )
        if not rst_like:
            return found
    return _rst_headings(lines, offsets, skip)


def _rst_headings(lines: list[str], offsets: list[int], start_line: int) -> list[Heading]:
    found: list[tuple[int, tuple[str, bool], str]] = []
    prev_text: int | None = None  # the previous line, when it is a paragraph line
    for i in range(start_line, len(lines)):
        line = lines[i]
        stripped = line.strip()
        adorn = _ADORN.match(line) if stripped and not line[:1].isspace() else None
        if adorn and prev_text is not None:
            title = lines[prev_text].strip()
            if len(stripped) >= min(len(title), 3):
                over = prev_text - 1 >= start_line and lines[prev_text - 1].strip() == stripped
                found.append((offsets[prev_text], (stripped[0], over), title))
                prev_text = None
                continue
        prev_text = i if stripped and not adorn and not line[:1].isspace() else None
    levels: dict[tuple[str, bool], int] = {}
    return [Heading(o, levels.setdefault(style, len(levels) + 1), heading_text(clean_inline(t)))
            for o, style, t in found]


def heading_chain(found: list[Heading], pos: int) -> list[str]:
    """The heading texts above character offset `pos`, outermost first."""
    stack: dict[int, str] = {}
    for h in found:
        if h.start > pos:
            break
        stack[h.level] = h.text
        for deeper in [lvl for lvl in stack if lvl > h.level]:
            del stack[deeper]
    return [stack[lvl] for lvl in sorted(stack)]


def normalize(s: str) -> str:
    return " ".join(s.lower().split()).rstrip(".:;,…")


def clean_inline(s: str) -> str:
    """One line of Markdown as plain text (markdown-it's inline parse: links, emphasis, code)."""
    tokens = _md().parseInline(s)
    return _inline_text(tokens[0]) if tokens else " ".join(s.split())


# -- titles -------------------------------------------------------------------------------------


def short_title(title: str) -> str:
    title = title.strip().rstrip(".:;,。：；，")
    words = title.split()
    if len(words) > 12:
        title = " ".join(words[:12]) + "…"
    if len(title) > 80:
        title = title[:79].rstrip() + "…"
    return title


def short_path(path: str) -> str:
    path = " ".join(path.split())
    return path if len(path) <= 100 else "…" + path[-99:]


def prose_title(text: str, found: list[Heading]) -> str | None:
    """The front matter's `title:`, else the first level-1 heading, else a short first line."""
    body = text
    fm = _FRONT_MATTER.match(text)
    if fm:
        m = re.search(r"^title:\s*(.+?)\s*$", fm.group(1), re.M)
        if m and m.group(1).strip("'\" "):
            return m.group(1).strip("'\" ")
        body = text[fm.end():]
    for h in found:
        if h.level == 1:
            return h.text
    for line in body.splitlines():
        line = line.strip()
        if line:
            if len(line) < 100 and not re.fullmatch(r"[-=~^*#_`+.:\"']+", line):
                return clean_inline(line.lstrip("#> ").strip()) or None
            return None
    return None


_DECORATION = re.compile(r"^[\s\-=*/#_~+!<>]*$")
_COMMENT_PREFIX = re.compile(r'^\s*(?://[/!]?|/\*+!?|\*+|#+(?=\s|$)|--|;+|"""|\'\'\'|<!--)\s*')
_EDGE_DECORATION = re.compile(r"^[\s\-=*/#~_+]+|[\s\-=*/#~_+]+$")
_LICENSE = re.compile(
    r"licen[cs]e|copyright|\(c\)|all rights reserved|SPDX|permission is hereby granted|warrant", re.I)


def code_title(text: str) -> str | None:
    """The first line of the first leading comment or docstring that is not a license notice."""
    blocks: list[list[str]] = []
    current: list[str] = []
    closer: str | None = None  # inside a /* */ comment or a docstring: its closing delimiter
    for raw in text.splitlines()[:150]:
        line = raw.strip()
        if closer is None:
            if not line or line.startswith(("#!", "<?php")) or re.search(r"coding[:=]", line):
                if current:
                    blocks.append(current)
                    current = []
                continue
            if _DECORATION.match(line):
                continue
            stripped = _COMMENT_PREFIX.sub("", line, count=1)
            if stripped == line:
                break  # code: the leading comments are over
            for opener, close in (("/*", "*/"), ('"""', '"""'), ("'''", "'''"), ("<!--", "-->")):
                if line.startswith(opener) and close not in line[len(opener):]:
                    closer = close
                    break
        else:
            if closer in line:
                line = line[: line.index(closer)]
                closer = None
            stripped = re.sub(r"^\*+\s?", "", line.strip())
        stripped = re.sub(r"(\*/|\"\"\"|'''|-->)\s*$", "", stripped)
        stripped = _EDGE_DECORATION.sub("", stripped).strip()
        if stripped:
            current.append(stripped)
    if current:
        blocks.append(current)
    for block in blocks:
        if any(_LICENSE.search(line) for line in block):
            continue
        first = clean_inline(block[0])
        return first if 0 < len(first) < 100 else None
    return None
