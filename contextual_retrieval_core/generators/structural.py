r"""`StructuralContextGenerator`: the offline default. It builds each context from the document's
structure and calls no LLM.

The context names where the chunk comes from: the document's path or title, then either the chain
of headings above the chunk (Markdown, reStructuredText) or, for source code, the enclosing
class / impl / function at the chunk's start and the definitions that begin inside the chunk.
It is free, instant and deterministic. It is weaker than an LLM-written context, but it still
puts a file name, a section or a function name into every chunk's indexed text. Usage reports
label it ``"structural (no LLM)"``.

Example:
    >>> from contextual_retrieval_core import Chunk, Document
    >>> gen = StructuralContextGenerator()
    >>> doc = Document("docs/setup.md", "# Setup\n## Installation\n### Linux\nRun make install.\n")
    >>> gen.generate(doc, Chunk("c0", doc.id, "Run make install.")).context
    'From docs/setup.md, section: Setup > Installation > Linux.'
    >>> src = Document("src/executors/differential.rs",
    ...     "impl DiffExecutor {\n    fn run_target(&mut self) {\n        self.primary.run();\n    }\n}\n")
    >>> gen.generate(src, Chunk("c1", src.id, "self.primary.run();")).context
    'From src/executors/differential.rs, in impl DiffExecutor > fn run_target.'
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from ..types import Chunk, Document
from .base import Generation, TokenUsage

__all__ = ["StructuralContextGenerator", "StructuralInfo"]

_log = logging.getLogger(__name__)

#: metadata keys read for the document's title or path, in order
TITLE_KEYS = ("title", "file_path", "path", "source", "filename")
_PATH_KEYS = ("file_path", "path", "source", "filename")

_MAX_WORDS = 60
_MAX_DEFINES = 8
_MAX_DEPTH = 4
_CACHE_SIZE = 16

_EXT_LANG = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".rb": "ruby",
    ".rs": "rust",
    ".go": "go",
    ".js": "js", ".jsx": "js", ".mjs": "js", ".cjs": "js", ".ts": "js", ".tsx": "js", ".mts": "js",
    ".cts": "js",
    ".java": "java",
    ".kt": "kotlin", ".kts": "kotlin",
    ".scala": "scala",
    ".swift": "swift",
    ".c": "c", ".h": "cpp", ".cpp": "cpp", ".hpp": "cpp", ".cc": "cpp", ".cxx": "cpp", ".hh": "cpp",
    ".hxx": "cpp",
    ".cs": "csharp",
    ".php": "php",
}
_PROSE_EXTS = {".md", ".markdown", ".mdx", ".rst", ".rest", ".txt", ".text", ".adoc", ".org"}
_LANG_NAMES = {
    "python": "python", "py": "python", "ruby": "ruby", "rb": "ruby", "rust": "rust", "rs": "rust",
    "go": "go", "golang": "go", "javascript": "js", "typescript": "js", "js": "js", "ts": "js",
    "jsx": "js", "tsx": "js", "java": "java", "kotlin": "kotlin", "scala": "scala", "swift": "swift",
    "c": "c", "cpp": "cpp", "c++": "cpp", "csharp": "csharp", "c#": "csharp", "php": "php",
}
_PROSE_LANG_NAMES = {"markdown", "md", "rst", "restructuredtext", "text", "plaintext", "prose"}

_TYPE_KINDS = {
    "class", "struct", "impl", "trait", "interface", "enum", "union", "object", "protocol",
    "extension", "record",
}


@dataclass(frozen=True)
class StructuralInfo:
    """What `StructuralContextGenerator.analyze` found for one chunk.

    Attributes:
        source: the document's path or quoted title, as it appears in the context.
        kind: "code" or "prose".
        language: the detected language family of code ("python", "rust", "js", ...), else None.
        located: whether the chunk's position in the document was found. When it was not, the
            context falls back to the source (plus, for code, the definitions in the chunk text).
        position: the chunk's character offset in the document, or None.
        sections: the heading chain above the chunk (prose).
        scopes: the enclosing definitions at the chunk's start, outermost first (code).
        defines: names of the definitions that start inside the chunk (code).
    """

    source: str
    kind: Literal["code", "prose"]
    language: Optional[str]
    located: bool
    position: Optional[int]
    sections: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()


class StructuralContextGenerator:
    r"""The offline default `ContextGenerator`. It situates chunks by document structure and
    calls no LLM.

    Each context is one short sentence of at most about 60 words, and the same input always gives
    the same context:

    - the source: the first of the metadata keys ``title``, ``file_path``, ``path``, ``source``
      and ``filename``. Next comes the document id when it looks like a path (``docs/setup.md``).
      Otherwise, for prose, the first ``# `` heading, or the first non-empty line when it is
      under 100 characters. For code it is the first line of a leading comment or docstring,
      with license notices skipped. The document id is the last resort. A title is quoted, a
      path is not;
    - prose: the chain of headings above the chunk, e.g. ``section: Setup > Installation > Linux``.
      It reads ATX ``#`` headings, setext ``===`` / ``---`` underlines and reStructuredText
      adornments, and skips fenced code blocks;
    - code: the enclosing class / impl / trait / module and function at the chunk's start, e.g.
      ``in impl DiffExecutor > fn run_target``, and the definitions that start inside the chunk,
      e.g. ``defines: new, run_target``. The language comes from the file extension in the path
      metadata or the id, from ``metadata["language"]``, or else from the content. Python and
      Ruby are read by indentation. Brace languages (Rust, Go, C/C++, Java, C#, JS/TS, Kotlin,
      Scala, Swift, PHP) are read by brace depth, with comments and strings blanked first. This
      is best effort and never raises.

    The chunk's position is read from a ``start_index`` / ``start_char_idx`` metadata offset
    (LangChain / LlamaIndex) when that offset matches. Otherwise it is the first occurrence of
    the chunk text, then of its first 200 characters, then of its first words with any
    whitespace between them. When the chunk cannot be found, `analyze` reports
    ``located=False`` and the context falls back to the source alone.

    Usage reports label this generator ``"structural (no LLM)"`` (`label`). Its usage is always
    zero, and `prompt_identity` changes whenever the output format changes, so a stored context
    is never reused across formats.

    Example:
        >>> from contextual_retrieval_core import Chunk, Document
        >>> gen = StructuralContextGenerator()
        >>> py = Document("app/service.py",
        ...     "class Service:\n    def run(self):\n        x = 1\n        return x\n")
        >>> gen.generate(py, Chunk("c0", py.id, "return x")).context
        'From app/service.py, in class Service > def run.'
        >>> gen.analyze(py, Chunk("c1", py.id, "not in the document")).located
        False
    """

    name: str = "structural"
    model: str = ""
    prompt_identity: str = "structural-v1"
    is_llm: bool = False
    #: how usage reports name this generator
    label: str = "structural (no LLM)"

    def __init__(self) -> None:
        self._cache: OrderedDict[tuple, _Outline] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StructuralContextGenerator(prompt_identity={self.prompt_identity!r})"

    # -- ContextGenerator ---------------------------------------------------------------------------

    def generate(self, document: Document, chunk: Chunk) -> Generation:
        """The structural context of `chunk` within `document` (zero usage)."""
        try:
            context = _compose(self.analyze(document, chunk))
        except Exception:  # best effort: a parser bug must never stop an ingestion run
            _log.debug("structural analysis failed for chunk %r", chunk.id, exc_info=True)
            context = f"From {_short_path(document.id)}."
        return Generation(context, TokenUsage())

    async def agenerate(self, document: Document, chunk: Chunk) -> Generation:
        """Same as `generate`; it is cheap enough to run on the event loop."""
        return self.generate(document, chunk)

    # -- analysis -----------------------------------------------------------------------------------

    def analyze(self, document: Document, chunk: Chunk) -> StructuralInfo:
        """The parts of the context: source, kind, position, sections or scopes and definitions."""
        outline = self._outline(document)
        source, quoted_title = _source(document, outline)
        text = document.text
        pos = _locate(text, chunk)
        if pos is None and chunk.text.strip():
            _log.debug("chunk %r not found in document %r; context is the source only",
                       chunk.id, document.id)
        if outline.kind == "prose":
            sections: tuple[str, ...] = ()
            if pos is not None:
                first = _first_nonspace(text, pos)
                sections = tuple(_heading_chain(outline.headings, first))
                if quoted_title is not None and sections and _norm(sections[0]) == _norm(quoted_title):
                    sections = sections[1:]
            return StructuralInfo(source, "prose", None, pos is not None, pos, sections=sections)
        scopes: tuple[str, ...] = ()
        if pos is not None:
            first = _first_nonspace(text, pos)
            end = pos + len(chunk.text)
            enclosing = [d for d in outline.defs if d.start < first < d.end]
            enclosing.sort(key=lambda d: d.start)
            inside = [d for d in outline.defs if pos <= d.start < end]
        else:
            enclosing = []
            try:
                inside = _code_defs(chunk.text, outline.language or "c")
            except Exception:  # best effort: never raise
                inside = []
        scopes = tuple(d.display() for d in enclosing if d.name)
        defines = _define_names(inside, enclosing, outline.language or "c")
        return StructuralInfo(
            source, "code", outline.language, pos is not None, pos, scopes=scopes, defines=defines
        )

    def _outline(self, document: Document) -> "_Outline":
        meta = document.metadata or {}
        key = (
            document.id,
            len(document.text),
            hash(document.text),
            tuple(str(meta.get(k, "")) for k in (*TITLE_KEYS, "language")),
        )
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        outline = _build_outline(document)
        with self._lock:
            self._cache[key] = outline
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return outline


# ----------------------------------------------------------------------------------------------
# outline of a document
# ----------------------------------------------------------------------------------------------


@dataclass
class _Heading:
    start: int
    level: int
    text: str


@dataclass(eq=False)
class _Def:
    kind: str
    name: str
    start: int
    end: int
    parent: Optional["_Def"] = None
    owner: Optional[str] = None  # an explicit owner type (a Go receiver)
    type_name: Optional[str] = None  # the type an impl block is for

    def display(self) -> str:
        name = f"{self.owner}.{self.name}" if self.owner else self.name
        return f"{self.kind} {name}"


@dataclass
class _Outline:
    kind: Literal["code", "prose"]
    language: Optional[str]
    title: Optional[str]  # from the content: first heading / line / leading comment
    headings: list[_Heading] = field(default_factory=list)
    defs: list[_Def] = field(default_factory=list)


def _build_outline(document: Document) -> _Outline:
    text = document.text
    kind, language = _classify(document)
    try:
        if kind == "code":
            defs = _code_defs(text, language or "c")
            return _Outline("code", language, _code_title(text), defs=defs)
        rst = _extension(document) in (".rst", ".rest")
        headings = _headings(text, rst=rst)
        return _Outline("prose", None, _prose_title(text, headings), headings=headings)
    except Exception:  # best effort: a parser bug must never stop an ingestion run
        _log.debug("structural outline failed for %r", document.id, exc_info=True)
        return _Outline(kind, language, None)


def _extension(document: Document) -> str:
    meta = document.metadata or {}
    for value in [*(meta.get(k) for k in _PATH_KEYS), document.id, meta.get("title")]:
        if not value:
            continue
        value = re.split(r"[?#]", str(value))[0]
        ext = os.path.splitext(value)[1].lower()
        if ext in _EXT_LANG or ext in _PROSE_EXTS:
            return ext
    return ""


def _classify(document: Document) -> tuple[Literal["code", "prose"], Optional[str]]:
    lang = str((document.metadata or {}).get("language") or "").strip().lower()
    if lang in _LANG_NAMES:
        return "code", _LANG_NAMES[lang]
    if lang in _PROSE_LANG_NAMES:
        return "prose", None
    ext = _extension(document)
    if ext in _EXT_LANG:
        return "code", _EXT_LANG[ext]
    if ext in _PROSE_EXTS:
        return "prose", None
    if _looks_like_code(document.text):
        return "code", _guess_language(document.text)
    return "prose", None


_CODE_LINE = re.compile(
    r"""
    [;{}]\s*$
    | ^\s*[})\]]
    | ^\s*(?://|/\*|\*/|\*\s|\#!|\#include\b|\#define\b|\#\[|@\w)
    | ^\s*(?:pub(?:\([\w:]+\))?\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+\w+
    | ^\s*(?:impl|mod|struct|enum|trait)\b[^.]*$
    | ^\s*use\s+[\w:]+(?:::|;)
    | ^\s*(?:let|const|var)\s+(?:mut\s+)?[\w$]+\s*[:=]
    | ^\s*(?:async\s+)?def\s+\w+\s*\(
    | ^\s*class\s+\w+[^.]*[:{(]\s*$
    | ^\s*(?:import\s+[\w.{*]+|from\s+[\w.]+\s+import\b)
    | ^\s*(?:package|func|function)\s+\w+
    | ^\s*(?:if|elif|else|for|while|with|try|except|finally)\b.*:\s*$
    | ^\s*[\w.\[\]]+\s*(?:[-+*/%|&]?=)\s*\S
    | ^\s*[\w.]+\(.*\)\s*$
    """,
    re.X,
)


def _looks_like_code(text: str) -> bool:
    lines = [ln for ln in text.splitlines()[:600] if ln.strip()]
    fences = sum(1 for ln in lines if ln.lstrip().startswith(("```", "~~~")))
    atx = sum(1 for ln in lines if re.match(r" {0,3}#{1,6} +\S", ln))
    if fences >= 2 and atx >= 1:
        return False
    lines = [ln for ln in lines if not ln.lstrip().startswith("#")]  # comments or headings: neutral
    if not lines:
        return False
    score = sum(1 for ln in lines if _CODE_LINE.search(ln)) / len(lines)
    return score >= 0.4


def _guess_language(text: str) -> str:
    M = re.M
    if "<?php" in text:
        return "php"
    braceish = len(re.findall(r"[{;][ \t]*$", text, M))
    ruby_ends = len(re.findall(r"^[ \t]*end[ \t]*$", text, M))
    defs = len(re.findall(r"^[ \t]*def[ \t]+[\w.?!]+", text, M))
    if defs and ruby_ends >= defs // 2 + 1 and braceish <= defs:
        return "ruby"
    py = (
        len(re.findall(r"^[ \t]*(?:async[ \t]+)?def[ \t]+\w+[ \t]*\(", text, M))
        + len(re.findall(r"^[ \t]*class[ \t]+\w+[^{;\n]*:[ \t]*$", text, M))
        + len(re.findall(
            r"^(?:from[ \t]+[\w.]+[ \t]+import\b|import[ \t]+[\w.]+(?:[ \t]+as[ \t]+\w+)?[ \t]*$)", text, M
        ))
    )
    if py and braceish <= 2 * py:
        return "python"
    if re.search(r"\bfn\s+\w+", text) and (
        re.search(r"\blet\s+(?:mut\s+)?\w+", text) or re.search(r"^\s*(?:pub\s+)?(?:impl|use)\b", text, M)
        or "->" in text
    ):
        return "rust"
    if re.search(r"^package\s+\w+[ \t]*$", text, M) or re.search(r"^func\s", text, M):
        return "go"
    if re.search(r"^\s*#\s*include\b", text, M):
        return "cpp"
    if re.search(r"^package\s+[\w.]+;", text, M) or re.search(
        r"\b(?:public|private|protected)\s+(?:static\s+)?(?:final\s+)?(?:class|interface|void)\b", text
    ):
        return "java"
    if re.search(r"\w::\w", text):
        return "cpp"
    if re.search(r"^\s*(?:(?:private|public|internal|override|suspend)\s+)*fun\s+\w+", text, M):
        return "kotlin"
    if re.search(r"^\s*func\s+\w+", text, M):
        return "swift"
    if re.search(r"\bfunction\b|=>|\bconst\s+\w+\s*=|\brequire\(|^\s*export\s", text, M):
        return "js"
    return "c"


# -- titles -----------------------------------------------------------------------------------------


def _source(document: Document, outline: _Outline) -> tuple[str, Optional[str]]:
    """The source phrase, and the title when the phrase is a quoted title (for de-duplication)."""
    meta = document.metadata or {}
    for key in TITLE_KEYS:
        value = meta.get(key)
        if value is None or not str(value).strip():
            continue
        value = " ".join(str(value).split())
        if key == "title":
            title = _short_title(value)
            return f'"{title}"', title
        return _short_path(value), None
    if _PATH_LIKE.search(document.id) and not re.search(r"\s", document.id):
        return _short_path(document.id), None
    if outline.title:
        title = _short_title(outline.title)
        return f'"{title}"', title
    return _short_path(document.id), None


_PATH_LIKE = re.compile(r"[/\\]|\.[A-Za-z][A-Za-z0-9]{0,7}$")


def _short_title(title: str) -> str:
    title = title.strip().rstrip(".:;,。：；，")
    words = title.split()
    if len(words) > 12:
        title = " ".join(words[:12]) + "…"
    if len(title) > 80:
        title = title[:79].rstrip() + "…"
    return title


def _short_path(path: str) -> str:
    path = " ".join(path.split())
    return path if len(path) <= 100 else "…" + path[-99:]


def _prose_title(text: str, headings: list[_Heading]) -> Optional[str]:
    body = text
    fm = _FRONT_MATTER.match(text)
    if fm:
        m = re.search(r"^title:\s*(.+?)\s*$", fm.group(1), re.M)
        if m and m.group(1).strip("'\" "):
            return m.group(1).strip("'\" ")
        body = text[fm.end():]
    for h in headings:
        if h.level == 1:
            return h.text
    for line in body.splitlines():
        line = line.strip()
        if line:
            if len(line) < 100 and not re.fullmatch(r"[-=~^*#_`+.:\"']+", line):
                return _clean_inline(line.lstrip("#> ").strip()) or None
            return None
    return None


_DECORATION = re.compile(r"^[\s\-=*/#_~+!<>]*$")
_COMMENT_PREFIX = re.compile(r'^\s*(?://[/!]?|/\*+!?|\*+|#+(?=\s|$)|--|;+|"""|\'\'\'|<!--)\s*')
_EDGE_DECORATION = re.compile(r"^[\s\-=*/#~_+]+|[\s\-=*/#~_+]+$")
_LICENSE = re.compile(
    r"licen[cs]e|copyright|\(c\)|all rights reserved|SPDX|permission is hereby granted|warrant",
    re.I,
)


def _code_title(text: str) -> Optional[str]:
    """The first line of the first leading comment or docstring that is not a license notice."""
    blocks: list[list[str]] = []
    current: list[str] = []
    closer: Optional[str] = None  # inside a /* */ comment or a docstring: its closing delimiter
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
            for opener, close in (("/*", "*/"), ('"""', '"""'), ("\'\'\'", "\'\'\'"), ("<!--", "-->")):
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
        first = _clean_inline(block[0])
        return first if 0 < len(first) < 100 else None
    return None


# -- chunk position ---------------------------------------------------------------------------------

_OFFSET_KEYS = ("start_index", "start_char_idx", "start_char", "char_start")


def _locate(text: str, chunk: Chunk) -> Optional[int]:
    body = chunk.text
    if not body.strip() or not text:
        return None
    meta = chunk.metadata or {}
    probe = body.strip()[:50]
    for key in _OFFSET_KEYS:
        off = meta.get(key)
        if isinstance(off, int) and not isinstance(off, bool) and 0 <= off < len(text):
            if text.startswith(probe, _first_nonspace(text, off)) or text.startswith(body[:50], off):
                return off
    pos = text.find(body)
    if pos >= 0:
        return pos
    stripped = body.strip()
    pos = text.find(stripped[:200])
    if pos >= 0:
        return pos
    words = stripped.split()[:12]
    if len(words) >= 2:
        m = re.search(r"\s+".join(re.escape(w) for w in words), text)
        if m:
            return m.start()
    return None


def _first_nonspace(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos].isspace():
        pos += 1
    return pos


# ----------------------------------------------------------------------------------------------
# prose: headings
# ----------------------------------------------------------------------------------------------

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ADORN = re.compile(r"^([=\-~^\"'`*+#:._<>!$%&,/;?@\\|])\1+[ \t]*$")


def _clean_inline(s: str) -> str:
    s = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", s)  # links and images -> their text
    s = re.sub(r"(\*\*|__|`)", "", s)
    s = re.sub(r"(?<!\w)[*_](\S(?:.*?\S)?)[*_](?!\w)", r"\1", s)
    return " ".join(s.split())


def _heading_text(s: str) -> str:
    s = _clean_inline(s)
    words = s.split()
    if len(words) > 8:
        s = " ".join(words[:8]) + "…"
    if len(s) > 60:
        s = s[:59].rstrip() + "…"
    return s


def _headings(text: str, *, rst: bool = False) -> list[_Heading]:
    """Headings with their offsets and levels; fenced code blocks and front matter are skipped."""
    lines = text.split("\n")
    offsets = []
    off = 0
    for line in lines:
        offsets.append(off)
        off += len(line) + 1
    start_line = 0
    fm = _FRONT_MATTER.match(text)
    if fm:
        start_line = fm.group(0).count("\n") + (0 if fm.group(0).endswith("\n") else 1)
    has_atx = False
    fence: Optional[str] = None
    for line in lines[start_line:]:
        fm_ = _FENCE.match(line)
        if fence is None and fm_:
            fence = fm_.group(1)[0]
        elif fence is not None and fm_ and fm_.group(1)[0] == fence:
            fence = None
        elif fence is None and _ATX.match(line):
            has_atx = True
            break
    rst_chars_seen = not has_atx and any(
        _ADORN.match(ln) and ln.strip()[0] not in "=-" and len(ln.strip()) >= 3 for ln in lines
    )
    rst_mode = rst or rst_chars_seen

    found: list[tuple[int, Any, str]] = []  # (offset, style, text)
    fence = None
    prev_text: Optional[int] = None  # index of the previous line when it is a paragraph line
    i = start_line
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not rst_mode:
            fm_ = _FENCE.match(line)
            if fence is None and fm_:
                fence = fm_.group(1)[0]
                prev_text = None
                i += 1
                continue
            if fence is not None:
                if fm_ and fm_.group(1)[0] == fence:
                    fence = None
                i += 1
                continue
            m = _ATX.match(line)
            if m:
                txt = m.group(2).strip()
                if txt:
                    found.append((offsets[i], len(m.group(1)), txt))
                prev_text = None
                i += 1
                continue
        adorn: Any = None
        if stripped and not line[:1].isspace():
            adorn = _ADORN.match(line)
        elif stripped and not rst_mode:
            adorn = re.match(r"^ {1,3}(=+|-+)[ \t]*$", line)
        if adorn and prev_text is not None:
            ch = stripped[0]
            title = lines[prev_text].strip()
            if rst_mode:
                ok = len(stripped) >= min(len(title), 3)
                over = prev_text - 1 >= start_line and lines[prev_text - 1].strip() == stripped
                style: Any = (ch, over)
            else:
                ok = ch in "=-" and len(stripped) >= 2
                style = 1 if ch == "=" else 2
            if ok:
                found.append((offsets[prev_text], style, title))
                prev_text = None
                i += 1
                continue
        if stripped and not adorn and not (rst_mode and line[:1].isspace()):
            is_list = bool(re.match(r"^\s*(?:[-*+]|\d+[.)])\s", line)) and not rst_mode
            is_table = stripped.startswith("|")
            prev_text = None if (is_list or is_table) else i
        else:
            prev_text = None
        i += 1

    if not rst_mode:
        return [_Heading(o, lvl, _heading_text(t)) for o, lvl, t in found]
    levels: dict[Any, int] = {}
    out = []
    for o, style, t in found:
        if isinstance(style, int):
            lvl = style
        else:
            lvl = levels.setdefault(style, len(levels) + 1)
        out.append(_Heading(o, lvl, _heading_text(t)))
    return out


def _heading_chain(headings: list[_Heading], pos: int) -> list[str]:
    stack: dict[int, str] = {}
    for h in headings:
        if h.start > pos:
            break
        stack[h.level] = h.text
        for deeper in [lvl for lvl in stack if lvl > h.level]:
            del stack[deeper]
    chain = [stack[lvl] for lvl in sorted(stack)]
    return chain


def _norm(s: str) -> str:
    return " ".join(s.lower().split()).rstrip(".:;,…")


# ----------------------------------------------------------------------------------------------
# code: definitions and their spans
# ----------------------------------------------------------------------------------------------

_C_COMMENTS = r"(?P<c>//[^\n]*|/\*.*?\*/)"
_TOKENS = {
    "python": re.compile(
        r"(?P<c>\#[^\n]*)"
        r"|(?P<s>\"\"\"(?:\\.|[^\\])*?\"\"\"|'''(?:\\.|[^\\])*?'''"
        r"|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*')",
        re.S,
    ),
    "ruby": re.compile(
        r"(?P<c>\#[^\n]*)|(?P<s>\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*')", re.S
    ),
    "rust": re.compile(
        _C_COMMENTS + r"|(?P<s>r(?P<h>\#*)\".*?\"(?P=h)|b?\"(?:\\.|[^\"\\])*\""
        r"|b?'(?:\\.[^'\n]{0,8}|[^\\'\n])')",
        re.S,
    ),
    "go": re.compile(
        _C_COMMENTS + r"|(?P<s>\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|`[^`]*`)", re.S
    ),
    "js": re.compile(
        _C_COMMENTS + r"|(?P<s>\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)", re.S
    ),
    "php": re.compile(
        r"(?P<c>//[^\n]*|/\*.*?\*/|\#(?!\[)[^\n]*)"
        r"|(?P<s>\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*')",
        re.S,
    ),
    "c": re.compile(
        _C_COMMENTS + r"|(?P<s>\"\"\"(?:\\.|[^\\])*?\"\"\"|\"(?:\\.|[^\"\\\n])*\""
        r"|'(?:\\.|[^'\\\n]){1,8}')",
        re.S,
    ),
}
_NON_NEWLINE = re.compile(r"[^\n]")


def _sanitize(text: str, language: str) -> str:
    """`text` with comments blanked to spaces and string interiors to \\x01; same length."""
    regex = _TOKENS.get(language, _TOKENS["c"])
    out = []
    last = 0
    for m in regex.finditer(text):
        s, e = m.span()
        out.append(text[last:s])
        seg = m.group()
        if m.group("c") is not None:
            out.append(_NON_NEWLINE.sub(" ", seg))
        else:
            out.append(seg[0] + _NON_NEWLINE.sub("\x01", seg[1:-1]) + seg[-1])
        last = e
    out.append(text[last:])
    return "".join(out)


def _code_defs(text: str, language: str) -> list[_Def]:
    san = _sanitize(text, language)
    if language in ("python", "ruby"):
        defs = _indent_defs(san, language)
    else:
        defs = _brace_defs(san, language)
    defs.sort(key=lambda d: d.start)
    return defs


_PY_DEF = re.compile(r"[ \t]*(?:async[ \t]+)?(def|class)[ \t]+([^\W\d]\w*)")
_RB_DEF = re.compile(r"[ \t]*(def|class|module)[ \t]+(?:self\.)?([^\W\d][\w:]*[?!=]?)")


def _indent_defs(san: str, language: str) -> list[_Def]:
    regex = _PY_DEF if language == "python" else _RB_DEF
    defs: list[_Def] = []
    stack: list[tuple[int, _Def]] = []
    depth = 0
    cont = False
    last_content_end = 0
    off = 0
    for line in san.split("\n"):
        start, end = off, off + len(line)
        off = end + 1
        stripped = line.strip()
        if not stripped:
            cont = False
            continue
        if depth == 0 and not cont and not stripped.startswith("\x01"):
            lead = len(line) - len(line.lstrip(" \t"))
            indent = len(line[:lead].expandtabs(8))
            while stack and stack[-1][0] >= indent:
                stack.pop()[1].end = last_content_end
            m = regex.match(line)
            if m:
                d = _Def(m.group(1), m.group(2), start + lead, len(san),
                         parent=stack[-1][1] if stack else None)
                defs.append(d)
                stack.append((indent, d))
        depth += sum(line.count(ch) for ch in "([{") - sum(line.count(ch) for ch in ")]}")
        depth = max(depth, 0)
        cont = stripped.endswith("\\")
        last_content_end = end
    while stack:
        stack.pop()[1].end = last_content_end
    return defs


_ANNOTATIONS = re.compile(
    r"\#!?\[[^\]]*\]"  # Rust attributes
    r"|@[\w.]+(?:\([^()]*\))?"  # Java / Kotlin / TS annotations and decorators
    r"|(?m:^[ \t]*\#[ \t]*(?:include|define|if|ifdef|ifndef|else|elif|endif|pragma|undef|import|error)\b.*$)"
    r"|(?m:^[ \t]*\[[^\]\n]*\][ \t]*$)"  # C# attributes on their own line
)
_KEYWORD = re.compile(
    r"(?<![\w.$:])(fn|func|function\*?|def|fun|class|struct|impl|trait|interface|enum|union|mod|"
    r"module|namespace|object|protocol|extension|record)(?![\w$])"
)
_IDENT = r"[A-Za-z_$][\w$]*"
_CONTROL = {
    "if", "else", "for", "while", "do", "switch", "case", "try", "catch", "finally", "match",
    "loop", "return", "with", "synchronized", "lock", "using", "foreach", "fixed", "checked",
    "unchecked", "select", "go", "defer", "throw", "yield", "await", "when", "guard", "repeat",
    "elif", "until", "unless", "new", "sizeof", "typeof", "delete", "assert", "super", "this",
    "static_assert", "decltype", "alignof", "not", "and", "or",
}
_METHOD_TAIL = re.compile(
    r"(?::|->|where\b|throws\b|const\b|noexcept\b|override\b|final\b|&|volatile\b|rethrows\b|"
    r"async\b|mutating\b|=\s*default\b)"
)


def _brace_defs(san: str, language: str) -> list[_Def]:
    defs: list[_Def] = []
    stack: list[Optional[_Def]] = []
    last = 0
    for m in re.finditer(r"[{};]", san):
        ch = m.group()
        p = m.start()
        if ch == "{":
            parent = next((d for d in reversed(stack) if d is not None), None)
            hs = max(last, p - 1000)
            try:
                d = _parse_header(san, hs, p, parent)
            except Exception:  # pragma: no cover - best effort
                d = None
            if d is not None:
                defs.append(d)
            stack.append(d)
        elif ch == "}":
            if stack:
                d = stack.pop()
                if d is not None:
                    d.end = p + 1
        last = p + 1
    for d in stack:
        if d is not None:
            d.end = len(san)
    return defs


def _strip_generics(h: str) -> str:
    h = h.replace("->", "\x02").replace("=>", "\x03")
    for _ in range(10):
        new = re.sub(r"<[^<>]*>", "", h)
        if new == h:
            break
        h = new
    return h.replace("\x02", "->").replace("\x03", "=>")


def _def_start(san: str, hs: int, he: int, token: str) -> int:
    raw = san[hs:he]
    m = re.search(r"(?<![\w$])" + re.escape(token) + r"(?![\w$])", raw)
    at = hs + (m.start() if m else len(raw) - len(raw.lstrip()))
    line_start = san.rfind("\n", 0, at) + 1
    first = _first_nonspace(san, max(line_start, hs))
    return min(first, at)


def _parse_header(san: str, hs: int, he: int, parent: Optional[_Def]) -> Optional[_Def]:
    h = _ANNOTATIONS.sub(" ", san[hs:he])
    h = " ".join(h.split())
    if not h:
        return None
    h = re.sub(r"\btemplate\s*<", "<", h)
    h = _strip_generics(h).strip()
    if not h:
        return None

    def make(kind: str, name: str, token: str, **kw: Any) -> _Def:
        return _Def(kind, name, _def_start(san, hs, he, token), len(san), parent=parent, **kw)

    m = re.search(r"(?<![\w.$])type\s+(" + _IDENT + r")\s+(struct|interface)\b", h)
    if m:
        return make(m.group(2), m.group(1), m.group(1))

    m = _KEYWORD.search(h)
    if m:
        kw = m.group(1).rstrip("*")
        rest = h[m.end():]
        if kw == "impl":
            im = re.match(r"\s*!?\s*(?:(?P<trait>[\w:]+)\s+for\s+)?(?:dyn\s+)?(?P<ty>[\w:]+)", rest)
            if not im:
                return None
            ty = im.group("ty").split("::")[-1]
            trait = im.group("trait")
            name = f"{trait.split('::')[-1]} for {ty}" if trait else ty
            return make("impl", name, "impl", type_name=ty)
        if kw in ("fn", "func", "function", "def", "fun"):
            if kw == "func":
                gm = re.match(
                    r"\s*\(\s*(?:\w+\s+)?\*?\s*(" + _IDENT + r")[^)]*\)\s*(" + _IDENT + r")(?=\s*\()", rest
                )
                if gm:
                    return make("func", gm.group(2), gm.group(2), owner=gm.group(1))
            fm = re.match(r"\s*(?:(" + _IDENT + r")\.)?(" + _IDENT + r")", rest)
            if fm:
                owner = fm.group(1) if kw == "fun" else None
                return make(kw, fm.group(2), fm.group(2), owner=owner)
            am = re.search(r"(" + _IDENT + r")\s*[:=]\s*(?:async\s+)?$", h[: m.start()])
            if am and kw == "function":
                return make("function", am.group(1), am.group(1))
            return None
        em = re.match(r"\s*(?:(?:class|struct)\s+)?(" + _IDENT + r"(?:(?:::|\.)" + _IDENT + r")*)", rest)
        if not em:
            return None
        after = rest[em.end():]
        if re.match(r"\s*=(?!>)", after):
            return None
        if kw not in ("impl",) and re.match(r"\s*[*&\s]*" + _IDENT + r"\s*\(", after):
            pass  # a function returning this type: fall through to the function pattern
        else:
            name = em.group(1)
            if kw in ("object", "record", "module") and not re.match(
                r"\s*(?:[:({,<]|extends\b|with\b|implements\b|$)", after
            ):
                return None  # `object foo bar`: not a declaration
            return make(kw, name, name)

    am = re.search(
        r"(?:^|[\s,;(])(" + _IDENT + r")\s*(?::[^=]*)?=\s*(?:async\s*)?(?:\([^()]*\)|" + _IDENT
        + r")\s*(?::[^=]*)?=>\s*$",
        h,
    )
    if am:
        return make("function", am.group(1), am.group(1))

    first = re.match(r"[A-Za-z_]+", h)
    if first and first.group() in _CONTROL:
        return None
    i = h.find("(")
    if i <= 0:
        return None
    before = h[:i].rstrip()
    nm = re.search(r"(~?" + _IDENT + r"(?:::~?" + _IDENT + r")*|operator\s*\S+)$", before)
    if not nm:
        return None
    name = nm.group(1)
    pre = before[: nm.start()].rstrip()
    if name in _CONTROL or name.split("::")[-1] in _CONTROL:
        return None
    if re.search(r"(?<![=!<>])=(?![=>])", pre) or pre.endswith((".", "->", "!", "?", ",", "(", "+", "-")):
        return None
    if re.search(r"\b(?:return|new|throw|await|yield|else|case)\b", pre):
        return None
    depth = 0
    j = -1
    for k in range(i, len(h)):
        if h[k] == "(":
            depth += 1
        elif h[k] == ")":
            depth -= 1
            if depth == 0:
                j = k
                break
    if j < 0:
        return None  # a call with a closure argument: `foo(x => {`
    tail = h[j + 1:].strip()
    if tail and not _METHOD_TAIL.match(tail):
        return None
    in_type = parent is not None and parent.kind in _TYPE_KINDS
    return make("method" if in_type else "function", name, name.split("::")[0])


def _define_names(inside: list[_Def], enclosing: list[_Def], language: str) -> tuple[str, ...]:
    sep = "::" if language in ("rust", "cpp", "php") else "."
    enclosing_ids = {id(d) for d in enclosing}
    names: list[str] = []
    for d in inside:
        if not d.name or d.kind in ("impl", "namespace"):
            continue
        name = d.name
        if d.owner:
            name = f"{d.owner}.{name}"
        else:
            p = d.parent
            if p is not None and p.kind in _TYPE_KINDS and id(p) not in enclosing_ids:
                owner = p.type_name or p.name
                if owner and not name.startswith(owner + sep):
                    name = f"{owner}{sep}{name}"
        if name not in names:
            names.append(name)
    return tuple(names)


# ----------------------------------------------------------------------------------------------
# the sentence
# ----------------------------------------------------------------------------------------------


def _compose(info: StructuralInfo) -> str:
    chain = info.sections if info.kind == "prose" else info.scopes
    label = "section" if info.kind == "prose" else "in"
    defines = info.defines
    best = ""
    for max_defs, max_depth in ((_MAX_DEFINES, _MAX_DEPTH), (4, _MAX_DEPTH), (4, 2), (2, 2), (0, 1)):
        text = _sentence(info.source, chain, label, defines, max_defs, max_depth)
        best = text
        if len(text.split()) <= _MAX_WORDS:
            break
    return best


def _sentence(source: str, chain: tuple[str, ...], label: str, defines: tuple[str, ...],
              max_defs: int, max_depth: int) -> str:
    out = f"From {source}"
    if chain:
        shown = list(chain[-max_depth:])
        if len(chain) > max_depth:
            shown.insert(0, "…")
        sep = ": " if label == "section" else " "
        out += f", {label}{sep}" + " > ".join(shown)
    if defines and max_defs > 0:
        shown_defs = list(defines[:max_defs])
        more = len(defines) - len(shown_defs)
        out += "; defines: " + ", ".join(shown_defs)
        if more:
            out += f" and {more} more"
    return out.rstrip(".") + "."
