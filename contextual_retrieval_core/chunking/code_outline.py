"""Definitions in source code, from tree-sitter: what the structural contexts name (the enclosing
class / impl / function) and where the chunker prefers to cut.

The grammars come from the per-language wheels in `_languages.GRAMMARS` (compiled, nothing fetched
at run time). A language without a grammar, or whose grammar wheel is missing, raises
`GrammarUnavailable`; callers fall back to plain text and count it.

Example:
    >>> src = "class Service:\\n    def run(self):\\n        return 1\\n"
    >>> [(d.kind, d.name, d.parent.name if d.parent else None) for d in definitions(src, "python")]
    [('class', 'Service', None), ('def', 'run', 'Service')]
    >>> definition_boundaries("import os\\n\\n\\ndef a():\\n    pass\\n\\n# b does b\\ndef b():\\n    pass\\n", "python")
    [12, 31]
"""

from __future__ import annotations

import importlib
import logging
import re
import threading
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from contextual_retrieval_core.chunking._languages import CODE_LANGUAGES, GRAMMARS, language_for_path
from contextual_retrieval_core.errors import ContextualRetrievalError

__all__ = ["Definition", "definitions", "outline", "definition_boundaries", "chunk_boundaries", "statement_starts", "cut_ranks", "parser_fallback", "GrammarUnavailable", "TYPE_KINDS"]

_log = logging.getLogger(__name__)

#: kinds of definitions that own methods (a function inside one is a method)
TYPE_KINDS = frozenset({
    "class", "struct", "impl", "trait", "interface", "enum", "union", "object", "protocol",
    "extension", "record", "actor",
})


class GrammarUnavailable(ContextualRetrievalError, LookupError):
    """No tree-sitter grammar can be loaded for a language."""


@dataclass(eq=False)
class Definition:
    """One definition: `kind` as the language writes it ("def", "fn", "impl", "method", ...),
    `name`, character span [start, end), the enclosing definition, an explicit `owner` (a Go
    receiver, a Kotlin extension's receiver) and, for an impl block, the type it is for."""

    kind: str
    name: str
    start: int
    end: int
    parent: Definition | None = None
    owner: str | None = None
    type_name: str | None = None

    def display(self) -> str:
        name = f"{self.owner}.{self.name}" if self.owner else self.name
        return f"{self.kind} {name}"


# -- grammars -----------------------------------------------------------------------------------

_local = threading.local()


def _parser(language: str) -> Any:
    """A tree-sitter parser for `language` (one per thread: parsers are not thread-safe)."""
    cache = getattr(_local, "parsers", None)
    if cache is None:
        cache = _local.parsers = {}
    if language in cache:
        return cache[language]
    spec = GRAMMARS.get(language)
    if spec is None:
        raise GrammarUnavailable(f"no tree-sitter grammar for {language!r}")
    try:
        import tree_sitter

        module = importlib.import_module(spec[0])
        grammar = tree_sitter.Language(getattr(module, spec[1])())
    except (ImportError, AttributeError, ValueError, OSError) as exc:
        raise GrammarUnavailable(
            f"the tree-sitter grammar for {language} cannot be loaded ({exc}); install it with: "
            f"pip install {spec[0].replace('_', '-')}"
        ) from exc
    cache[language] = parser = tree_sitter.Parser(grammar)
    return parser


# -- per-language definition tables ---------------------------------------------------------------

_METHOD_OR_FUNCTION = "method|function"  # "method" inside a type, else "function"
_KEYWORD = "<keyword>"  # the declaration's own keyword (Swift: class / struct / extension / ...)

_JS = {
    "class_declaration": "class", "abstract_class_declaration": "class", "class": "class",
    "method_definition": "method", "function_declaration": "function",
    "generator_function_declaration": "function", "variable_declarator": "function",
    "interface_declaration": "interface", "enum_declaration": "enum", "internal_module": "namespace",
}
_C = {"function_definition": _METHOD_OR_FUNCTION, "struct_specifier": "struct", "union_specifier": "union",
      "enum_specifier": "enum"}
_KINDS: dict[str, dict[str, str]] = {
    "python": {"function_definition": "def", "class_definition": "class"},
    "ruby": {"method": "def", "singleton_method": "def", "class": "class", "module": "module"},
    "rust": {"function_item": "fn", "function_signature_item": "fn", "impl_item": "impl", "struct_item": "struct",
             "enum_item": "enum", "trait_item": "trait", "mod_item": "mod", "union_item": "union"},
    "go": {"function_declaration": "func", "method_declaration": "func", "type_spec": "type"},
    "javascript": _JS, "typescript": _JS, "tsx": _JS,
    "java": {"class_declaration": "class", "interface_declaration": "interface", "enum_declaration": "enum",
             "record_declaration": "record", "annotation_type_declaration": "interface",
             "method_declaration": "method", "constructor_declaration": "method"},
    "c": _C,
    "cpp": {**_C, "class_specifier": "class", "namespace_definition": "namespace"},
    "csharp": {"class_declaration": "class", "struct_declaration": "struct", "interface_declaration": "interface",
               "enum_declaration": "enum", "record_declaration": "record", "namespace_declaration": "namespace",
               "file_scoped_namespace_declaration": "namespace", "method_declaration": "method",
               "constructor_declaration": "method"},
    "php": {"class_declaration": "class", "interface_declaration": "interface", "trait_declaration": "trait",
            "enum_declaration": "enum", "function_definition": "function", "method_declaration": "function",
            "namespace_definition": "namespace"},
    "kotlin": {"class_declaration": _KEYWORD, "object_declaration": "object", "function_declaration": "fun"},
    "scala": {"class_definition": "class", "object_definition": "object", "trait_definition": "trait",
              "enum_definition": "enum", "function_definition": "def", "function_declaration": "def"},
    "swift": {"class_declaration": _KEYWORD, "protocol_declaration": "protocol", "function_declaration": "func",
              "protocol_function_declaration": "func", "init_declaration": "func"},
}
#: nodes whose start is the definition's start when they wrap it (`export`, decorators, `type`)
_WRAPPERS = frozenset({
    "export_statement", "decorated_definition", "lexical_declaration", "variable_declaration",
    "type_declaration", "template_declaration",
})
_NAME_TYPES = ("identifier", "type_identifier", "simple_identifier", "constant", "name", "property_identifier",
               "field_identifier", "scope_resolution", "qualified_identifier", "namespace_identifier")


def _text(node: Any) -> str:
    return node.text.decode("utf-8", "replace")


def _base_type(node: Any) -> str | None:
    """`Foo` of `Foo`, `Foo<A, B>`, `a::b::Foo`, `*Foo`, `&'a Foo`."""
    while node is not None:
        if node.type in ("type_identifier", "identifier", "simple_identifier"):
            return _text(node)
        if node.type in ("scoped_type_identifier", "scoped_identifier", "qualified_identifier"):
            node = node.child_by_field_name("name") or node.named_children[-1]
            continue
        inner = node.child_by_field_name("type")
        if inner is None:
            inner = next((c for c in node.named_children if c.type not in ("lifetime", "type_arguments")), None)
        node = inner
    return None


def _plain_name(node: Any) -> str | None:
    name = node.child_by_field_name("name")
    if name is None:
        name = next((c for c in node.named_children if c.type in _NAME_TYPES), None)
    if name is None:
        return None
    if name.type not in _NAME_TYPES[:7]:
        found = _base_type(name)
        if found:
            return found
    return " ".join(_text(name).split())


def _c_function_name(node: Any) -> str | None:
    """The declared name of a C/C++ function definition, through pointer / reference declarators."""
    todo = [node.child_by_field_name("declarator")]
    while todo:
        decl = todo.pop(0)
        if decl is None or decl.type in ("parameter_list", "compound_statement"):
            continue
        if decl.type == "function_declarator":
            inner = decl.child_by_field_name("declarator")
            return " ".join(_text(inner).split()) if inner is not None else None
        todo.extend(decl.named_children)
    return None


def _describe(node: Any, kind: str, language: str) -> tuple[str, str, dict[str, str]] | None:
    """(kind, name, extra fields) of a definition node, or None when it is not one after all."""
    t = node.type
    if language == "rust" and t == "impl_item":
        ty = _base_type(node.child_by_field_name("type"))
        if not ty:
            return None
        trait = node.child_by_field_name("trait")
        trait_name = _base_type(trait) if trait is not None else None
        return "impl", f"{trait_name} for {ty}" if trait_name else ty, {"type_name": ty}
    if language == "rust" and t == "mod_item" and node.child_by_field_name("body") is None:
        return None
    if language == "go":
        if t == "type_spec":
            body = node.child_by_field_name("type")
            if body is None or body.type not in ("struct_type", "interface_type"):
                return None
            return body.type.split("_")[0], _plain_name(node) or "", {}
        if t == "method_declaration":
            receiver = node.child_by_field_name("receiver")
            owner = _base_type(receiver.named_children[0]) if receiver is not None and receiver.named_children else None
            return "func", _plain_name(node) or "", {"owner": owner} if owner else {}
    if language in ("javascript", "typescript", "tsx") and t == "variable_declarator":
        value = node.child_by_field_name("value")
        if value is None or value.type not in ("arrow_function", "function_expression", "function",
                                               "generator_function"):
            return None
    if language in ("c", "cpp"):
        if t == "function_definition":
            return kind, _c_function_name(node) or "", {}
        if node.child_by_field_name("body") is None:
            return None  # `struct x y;`: a use, not a definition
    if kind == _KEYWORD:
        word = node.child_by_field_name("declaration_kind")
        if word is not None:
            kind = _text(word)
        else:
            words = [_text(c) for c in node.children if not c.is_named]
            kind = "interface" if "interface" in words else "enum" if "enum" in words else "class"
    if language == "swift" and t == "init_declaration":
        return "func", "init", {}
    if language == "kotlin" and t == "function_declaration":
        name_node = node.child_by_field_name("name")
        before = [c for c in node.named_children if name_node is not None and c.end_byte <= name_node.start_byte]
        receiver = next((c for c in reversed(before) if c.type in ("user_type", "receiver_type")), None)
        extra = {"owner": _base_type(receiver) or _text(receiver)} if receiver is not None else {}
        return kind, _plain_name(node) or "", extra
    name = _plain_name(node)
    if name is None:
        return None
    return kind, name, {}


# -- the walk -----------------------------------------------------------------------------------


class _Offsets:
    """Byte offsets of the UTF-8 text -> character offsets of the str."""

    def __init__(self, text: str, data: bytes) -> None:
        self.identity = len(data) == len(text)
        self.total = len(data)
        self.starts: list[int] = []
        if not self.identity:
            pos = 0
            for ch in text:
                self.starts.append(pos)
                pos += len(ch.encode("utf-8", "surrogatepass"))

    def __call__(self, byte: int) -> int:
        if self.identity:
            return byte
        return bisect_right(self.starts, byte) - 1 if byte < self.total else len(self.starts)


class _Lines:
    """Line starts and indentation of a text by line number (tree-sitter's rows), found once: a
    node's line costs no search back through its line (a minified file is one long line)."""

    _INDENT = re.compile(r"[^\S\n]*")

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self._indents: dict[int, int] = {}

    def start(self, row: int) -> int:
        """Offset of line `row`'s first character."""
        return self.starts[row]

    def indent_end(self, row: int) -> int:
        """Offset of the first non-space character of line `row` (or of its end)."""
        if row not in self._indents:
            m = self._INDENT.match(self.text, self.starts[row])
            self._indents[row] = m.end() if m else self.starts[row]
        return self._indents[row]


def _parse(text: str, language: str) -> tuple[Any, Callable[[int], int]]:
    data = text.encode("utf-8", "surrogatepass")
    tree = _parser(language).parse(data)
    return tree, _Offsets(text, data)


def definitions(text: str, language: str) -> list[Definition]:
    """Every definition in `text`, in source order, with spans and parents (outermost first)."""
    return outline(text, language)[0]


def outline(text: str, language: str) -> tuple[list[Definition], bool]:
    """`definitions(text, language)`, and whether the parse met syntax errors (the definitions
    outside the broken part are still found)."""
    tree, char = _parse(text, language)
    kinds = _KINDS[language]
    out: list[Definition] = []
    broken: list[Definition] = []  # definitions whose own parse met an error

    def visit(node: Any, parent: Definition | None) -> None:
        for child in node.named_children:
            here = parent
            kind = kinds.get(child.type)
            found = _describe(child, kind, language) if kind else None
            if found is not None and found[1]:
                kind_word, name, extra = found
                if kind_word == _METHOD_OR_FUNCTION:
                    if parent is not None and parent.kind in ("function", "method"):
                        # C/C++ functions do not nest: the outer one's braces were lost to a parse
                        # error (often a macro); it ends here and this one is its sibling
                        parent.end = min(parent.end, char(child.start_byte))
                        parent = parent.parent
                    kind_word = "method" if parent is not None and parent.kind in TYPE_KINDS else "function"
                start_node = child
                while start_node.parent is not None and start_node.parent.type in _WRAPPERS:
                    start_node = start_node.parent
                here = Definition(kind_word, name, char(start_node.start_byte), char(child.end_byte), parent, **extra)
                out.append(here)
                if child.has_error:
                    broken.append(here)
            visit(child, here)

    visit(tree.root_node, None)
    if language in ("c", "cpp"):
        _reattach_closed_early(tree.root_node, out, broken, char)
    out.sort(key=lambda d: d.start)
    return out, tree.root_node.has_error


def _reattach_closed_early(root: Any, out: list[Definition], broken: list[Definition], char: Callable[[int], int]) -> None:
    """A stray top-level `}` closes a block that an error ended early (a macro-made class such as
    `TEST_CLASS(Name) { public: ... }`): the broken definition before it spans to that brace and
    the top-level definitions in between are inside it again."""
    for node in root.children:
        if node.type != "ERROR" or node.text.strip() != b"}":
            continue
        close = char(node.end_byte)
        tops = [d for d in out if d.parent is None and d.end <= close]
        owner = next((d for d in reversed(tops) if d in broken), None)
        if owner is None:
            continue
        for d in tops:
            if d.start > owner.start:
                d.parent = owner
        owner.end = close
        broken.remove(owner)


def definition_boundaries(text: str, language: str) -> list[int]:
    """Character offsets of the line starts where a definition begins, counting the comments,
    attributes and decorators right above it as part of it: the chunker's preferred cuts."""
    tree, _ = _parse(text, language)
    kinds = _KINDS[language]
    cuts: set[int] = set()
    lines = _Lines(text)

    def visit(node: Any) -> None:
        for child in node.named_children:
            if child.type in kinds:
                first = child
                while first.parent is not None and first.parent.type in _WRAPPERS:
                    first = first.parent
                prev = first.prev_named_sibling
                while (prev is not None and ("comment" in prev.type or "attribute" in prev.type
                                             or prev.type == "decorator")
                       and first.start_point[0] - prev.end_point[0] <= 1):
                    first = prev
                    prev = first.prev_named_sibling
                cuts.add(lines.start(first.start_point[0]))
            visit(child)

    visit(tree.root_node)
    return sorted(cuts)


def chunk_boundaries(text: str, path: object) -> list[int] | None:
    """`definition_boundaries` for a file by its extension, or None where no grammar reads it
    (the chunker then uses its line rules). A grammar that cannot be loaded is logged."""
    language = language_for_path(path)
    if language not in GRAMMARS:
        return None
    try:
        return definition_boundaries(text, language)
    except GrammarUnavailable as exc:
        _log.warning("code-aware chunking is off for %s: %s", path, exc)
        return None


#: node types whose named children are statements or members, across the grammars (a function's
#: or class's body, a block, a module)
_BODIES = frozenset({"module", "program", "source_file", "translation_unit", "compilation_unit", "block",
                     "statement_block", "compound_statement", "declaration_list", "field_declaration_list",
                     "class_body", "interface_body", "enum_body", "body_statement", "suite", "impl_item"})
#: ranks of cuts for `split_text` (a blank line before a cut adds one)
DEFINITION_RANK, STATEMENT_RANK = 4, 2


def statement_starts(text: str, language: str) -> list[int]:
    """Line starts where a statement or member of a body begins (first on its line): the cuts
    inside a definition too long for one chunk, so it is split between its statements rather
    than inside one."""
    tree, char = _parse(text, language)
    cuts: set[int] = set()
    lines = _Lines(text)

    def visit(node: Any) -> None:
        for child in node.named_children:
            if node.type in _BODIES or node.type.endswith("_body"):
                row = child.start_point[0]
                if lines.indent_end(row) >= char(child.start_byte):  # first on its line
                    cuts.add(lines.start(row))
            if child.named_child_count:
                visit(child)

    visit(tree.root_node)
    return sorted(cuts)


def cut_ranks(text: str, path: object) -> dict[int, int] | None:
    """The chunker's ranked cuts for a file (`split_text(boundaries=...)`): definitions
    (`DEFINITION_RANK`, with their comments and decorators) over statements and members inside
    bodies (`STATEMENT_RANK`); None where no grammar reads it."""
    language = language_for_path(path)
    if language not in GRAMMARS:
        return None
    try:
        ranks = dict.fromkeys(statement_starts(text, language), STATEMENT_RANK)
        ranks.update(dict.fromkeys(definition_boundaries(text, language), DEFINITION_RANK))
    except GrammarUnavailable as exc:
        _log.warning("code-aware chunking is off for %s: %s", path, exc)
        return None
    return ranks


def parser_fallback(path: object) -> str | None:
    """Why a code file is read as plain text (no definitions, line-rule chunks), e.g.
    "no grammar for lua"; None when a grammar parses it or it is not code."""
    language = language_for_path(path)
    if language not in CODE_LANGUAGES:
        return None
    if language not in GRAMMARS:
        return f"no grammar for {language}"
    try:
        _parser(language)
    except GrammarUnavailable:
        return f"grammar unavailable for {language}"
    return None
