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
import re
import threading
from bisect import bisect_left, bisect_right
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Literal

from contextual_retrieval_core.chunking._languages import (
    CODE_LANGUAGES,
    GRAMMARS,
    PROSE_LANGUAGES,
    canonical_language,
    language_for_path,
)
from contextual_retrieval_core.chunking.code_outline import TYPE_KINDS, Definition, GrammarUnavailable
from contextual_retrieval_core.chunking.code_outline import outline as code_outline
from contextual_retrieval_core.generators._structure_detect import guess_language, looks_like_code
from contextual_retrieval_core.generators._structure_text import (
    Heading,
    code_title,
    headings,
    normalize,
    prose_title,
    short_path,
    short_title,
)
from contextual_retrieval_core.generators.base import Generation, TokenUsage
from contextual_retrieval_core.types import Chunk, Document

__all__ = ["StructuralContextGenerator", "StructuralInfo", "StructuralReport", "with_structural_header"]

_log = logging.getLogger(__name__)

#: metadata keys read for the document's title or path, in order
TITLE_KEYS = ("title", "file_path", "path", "source", "filename")
_PATH_KEYS = ("file_path", "path", "source", "filename")

_MAX_WORDS = 60
_MAX_DEFINES = 8
_MAX_DEPTH = 4
_CACHE_SIZE = 16


@dataclass(frozen=True)
class StructuralInfo:
    """What `StructuralContextGenerator.analyze` found for one chunk.

    Attributes:
        source: the document's path or quoted title, as it appears in the context.
        kind: "code" or "prose".
        language: the language of code (`_languages.EXTENSIONS` names: "python", "rust",
            "typescript", ...), else None.
        located: whether the chunk's position in the document was found. When it was not, the
            context falls back to the source (plus, for code, the definitions in the chunk text).
        position: the chunk's character offset in the document, or None.
        sections: the heading chain above the chunk (prose).
        scopes: the enclosing definitions at the chunk's start, outermost first (code).
        defines: names of the definitions that start inside the chunk (code).
    """

    source: str
    kind: Literal["code", "prose"]
    language: str | None
    located: bool
    position: int | None
    sections: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    defines: tuple[str, ...] = ()


@dataclass
class StructuralReport:
    """What the parsers did, counted over a generator's life (`StructuralContextGenerator.report`).

    Attributes:
        code_documents: documents parsed with a tree-sitter grammar.
        prose_documents: documents read for headings.
        syntax_errors: code documents whose parse met syntax errors (their definitions outside the
            broken part are still used).
        fallbacks: documents read as plain text (source only) although they are code, by reason,
            e.g. ``{"no grammar for lua": 3}``; each is logged.
    """

    code_documents: int = 0
    prose_documents: int = 0
    syntax_errors: int = 0
    fallbacks: Counter = field(default_factory=Counter)

    @property
    def fallback_documents(self) -> int:
        return sum(self.fallbacks.values())


@dataclass
class _Outline:
    kind: Literal["code", "prose"]
    language: str | None
    title: str | None  # from the content: first heading / line / leading comment
    headings: list[Heading] = field(default_factory=list)
    defs: list[Definition] = field(default_factory=list)  # sorted by start

    def __post_init__(self) -> None:
        # found once a document, so that each chunk's context costs a search, not a scan
        self._heading_starts = [h.start for h in self.headings]
        self._chains: list[tuple[str, ...]] = []
        stack: dict[int, str] = {}
        for h in self.headings:
            stack = {lvl: t for lvl, t in stack.items() if lvl < h.level}
            stack[h.level] = h.text
            self._chains.append(tuple(stack[lvl] for lvl in sorted(stack)))
        self._def_starts = [d.start for d in self.defs]
        self._points: list[int] = []
        self._around: list[tuple[tuple[Definition, ...], tuple[Definition, ...]]] = []
        if self.defs:
            self._sweep()

    def _sweep(self) -> None:
        """For each start or end of a definition p: the definitions around p (start < p < end),
        and around any point just after it (start <= p < end), outermost first."""
        events: dict[int, tuple[list[Definition], list[Definition]]] = {}
        for d in self.defs:
            events.setdefault(d.start, ([], []))[0].append(d)
            events.setdefault(d.end, ([], []))[1].append(d)
        active: dict[int, Definition] = {}
        for p in sorted(events):
            opening, closing = events[p]
            for d in closing:
                active.pop(id(d), None)
            at = tuple(sorted(active.values(), key=lambda d: d.start))
            for d in opening:
                if d.end > p:
                    active[id(d)] = d
            self._points.append(p)
            self._around.append((at, tuple(sorted(active.values(), key=lambda d: d.start))))

    def chain(self, pos: int) -> tuple[str, ...]:
        """`_structure_text.heading_chain(self.headings, pos)`."""
        i = bisect_right(self._heading_starts, pos)
        return self._chains[i - 1] if i else ()

    def enclosing(self, pos: int) -> list[Definition]:
        """The definitions with ``start < pos < end``, by start."""
        i = bisect_right(self._points, pos) - 1
        if i < 0:
            return []
        at, after = self._around[i]
        return list(at if self._points[i] == pos else after)

    def starting_in(self, start: int, end: int) -> list[Definition]:
        """The definitions with ``start <= d.start < end``, in order."""
        return self.defs[bisect_left(self._def_starts, start):bisect_left(self._def_starts, end)]


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
      Markdown is parsed by markdown-it-py (ATX and setext headings; code blocks skipped);
      reStructuredText titles are read by their adornments;
    - code: the enclosing class / impl / trait / module and function at the chunk's start, e.g.
      ``in impl DiffExecutor > fn run_target``, and the definitions that start inside the chunk,
      e.g. ``defines: new, run_target``. The language comes from the file extension in the path
      metadata or the id (`_languages.EXTENSIONS`), from ``metadata["language"]``, or else from
      the content. The definitions come from tree-sitter (Python, Ruby, Rust, Go, JavaScript,
      TypeScript, Java, Kotlin, Scala, Swift, C, C++, C#, PHP); code in another language, or
      whose grammar is missing, is read as plain text (the context names the file) and counted
      in `report`.

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
    prompt_identity: str = "structural-v2"
    is_llm: bool = False
    #: how usage reports name this generator
    label: str = "structural (no LLM)"

    def __init__(self) -> None:
        self._cache: OrderedDict[tuple, _Outline] = OrderedDict()
        self._lock = threading.Lock()
        #: parser counts and plain-text fallbacks, over this generator's life
        self.report = StructuralReport()

    def __repr__(self) -> str:
        return f"StructuralContextGenerator(prompt_identity={self.prompt_identity!r})"

    # -- ContextGenerator ---------------------------------------------------------------------------

    def generate(self, document: Document, chunk: Chunk) -> Generation:
        """The structural context of `chunk` within `document` (zero usage)."""
        return Generation(_compose(self.analyze(document, chunk)), TokenUsage())

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
            _log.debug("chunk %r not found in document %r; context is the source only", chunk.id, document.id)
        if outline.kind == "prose":
            sections: tuple[str, ...] = ()
            if pos is not None:
                sections = outline.chain(_first_nonspace(text, pos))
                if quoted_title is not None and sections and normalize(sections[0]) == normalize(quoted_title):
                    sections = sections[1:]
            return StructuralInfo(source, "prose", None, pos is not None, pos, sections=sections)
        if pos is not None:
            first = _first_nonspace(text, pos)
            end = pos + len(chunk.text)
            enclosing = outline.enclosing(first)
            inside = outline.starting_in(pos, end)
        else:
            enclosing = []
            inside = _chunk_definitions(chunk.text, outline.language)
        scopes = tuple(d.display() for d in enclosing if d.name)
        defines = _define_names(inside, enclosing, outline.language)
        return StructuralInfo(source, "code", outline.language, pos is not None, pos, scopes=scopes, defines=defines)

    def _outline(self, document: Document) -> _Outline:
        meta = document.metadata or {}
        key = (document.id, len(document.text), hash(document.text),
               tuple(str(meta.get(k, "")) for k in (*TITLE_KEYS, "language")))
        with self._lock:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        outline = self._build_outline(document)
        with self._lock:
            self._cache[key] = outline
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return outline

    def _build_outline(self, document: Document) -> _Outline:
        text = document.text
        kind, language = _classify(document)
        if kind == "prose":
            rst = language == "rst"
            found = headings(text, rst=rst)
            with self._lock:
                self.report.prose_documents += 1
            return _Outline("prose", None, prose_title(text, found), headings=found)
        defs, errors = self._parse_code(text, language, document.id)
        with self._lock:
            self.report.code_documents += 1
            self.report.syntax_errors += errors
        return _Outline("code", language, code_title(text), defs=defs)

    def _parse_code(self, text: str, language: str | None, where: str) -> tuple[list[Definition], bool]:
        """Definitions of `text`; for a language without a loadable grammar, none (plain text),
        logged and counted in `report.fallbacks`."""
        if language not in GRAMMARS:
            reason = f"no grammar for {language or 'unknown code'}"
        else:
            try:
                return code_outline(text, language)
            except GrammarUnavailable as exc:
                reason = f"grammar unavailable for {language}"
                _log.warning("structural contexts: %s; %r is read as plain text", exc, where)
        with self._lock:
            self.report.fallbacks[reason] += 1
        _log.debug("structural contexts: %s: %r read as plain text", reason, where)
        return [], False


# ----------------------------------------------------------------------------------------------
# language, source, position
# ----------------------------------------------------------------------------------------------


def _chunk_definitions(text: str, language: str | None) -> list[Definition]:
    """Definitions in a chunk's own text (the chunk was not found in its document)."""
    if language not in GRAMMARS:
        return []
    try:
        return code_outline(text, language)[0]
    except GrammarUnavailable:  # already logged and counted for the document
        return []


def _classify(document: Document) -> tuple[Literal["code", "prose"], str | None]:
    meta = document.metadata or {}
    language = canonical_language(meta.get("language"))
    if language is None:
        for value in [*(meta.get(k) for k in _PATH_KEYS), document.id, meta.get("title")]:
            language = language_for_path(value)
            if language is not None:
                break
    if language in CODE_LANGUAGES:
        return "code", language
    if language in PROSE_LANGUAGES:
        return "prose", language
    if looks_like_code(document.text):
        return "code", guess_language(document.text)
    return "prose", None


_PATH_LIKE = re.compile(r"[/\\]|\.[A-Za-z][A-Za-z0-9]{0,7}$")


def _source(document: Document, outline: _Outline) -> tuple[str, str | None]:
    """The source phrase, and the title when the phrase is a quoted title (for de-duplication)."""
    meta = document.metadata or {}
    for key in TITLE_KEYS:
        value = meta.get(key)
        if value is None or not str(value).strip():
            continue
        value = " ".join(str(value).split())
        if key == "title":
            title = short_title(value)
            return f'"{title}"', title
        return short_path(value), None
    if _PATH_LIKE.search(document.id) and not re.search(r"\s", document.id):
        return short_path(document.id), None
    if outline.title:
        title = short_title(outline.title)
        return f'"{title}"', title
    return short_path(document.id), None


_OFFSET_KEYS = ("start_index", "start_char_idx", "start_char", "char_start")


def _locate(text: str, chunk: Chunk) -> int | None:
    body = chunk.text
    if not body.strip() or not text:
        return None
    meta = chunk.metadata or {}
    probe = body.strip()[:50]
    for key in _OFFSET_KEYS:
        off = meta.get(key)
        if (isinstance(off, int) and not isinstance(off, bool) and 0 <= off < len(text)
                and (text.startswith(probe, _first_nonspace(text, off)) or text.startswith(body[:50], off))):
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
# the sentence
# ----------------------------------------------------------------------------------------------


def _define_names(inside: list[Definition], enclosing: list[Definition], language: str | None) -> tuple[str, ...]:
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
            if p is not None and p.kind in TYPE_KINDS and id(p) not in enclosing_ids:
                owner = p.type_name or p.name
                if owner and not name.startswith(owner + sep):
                    name = f"{owner}{sep}{name}"
        if name not in names:
            names.append(name)
    return tuple(names)


def _compose(info: StructuralInfo) -> str:
    chain = info.sections if info.kind == "prose" else info.scopes
    label = "section" if info.kind == "prose" else "in"
    best = ""
    for max_defs, max_depth in ((_MAX_DEFINES, _MAX_DEPTH), (4, _MAX_DEPTH), (4, 2), (2, 2), (0, 1)):
        best = _sentence(info.source, chain, label, info.defines, max_defs, max_depth)
        if len(best.split()) <= _MAX_WORDS:
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


def with_structural_header(header: str, context: str) -> str:
    """`context` with the chunk's structural context on a line before it (``Contextualizer(structural_header=True)``,
    ``evaluate(structural_header=True)``): the file, section or enclosing definitions first, then what
    the LLM wrote.

    Example:
        >>> with_structural_header("From app/service.py, in class Service.", "Starts the worker pool.")
        'From app/service.py, in class Service.\\nStarts the worker pool.'
    """
    header, context = header.strip(), context.strip()
    return f"{header}\n{context}" if header and context else header or context
