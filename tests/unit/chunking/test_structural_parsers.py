"""Structural contexts and code chunking on real parsers: the language table, tree-sitter grammars,
markdown-it headings, counted fallbacks, loud failures and definition-boundary chunking."""

from __future__ import annotations

import logging
import sys

import pytest

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.chunking import code_outline
from contextual_retrieval_core.chunking._languages import CODE_LANGUAGES, EXTENSIONS, GRAMMARS, language_for_path
from contextual_retrieval_core.chunking.code_outline import (
    chunk_boundaries,
    definition_boundaries,
    definitions,
    parser_fallback,
)
from contextual_retrieval_core.chunking.split import CODE_EXTENSIONS, split_text
from contextual_retrieval_core.contextualize.config import ContextualizeConfig
from contextual_retrieval_core.contextualize.contextualizer import Contextualizer
from contextual_retrieval_core.generators import StructuralContextGenerator, structural
from contextual_retrieval_core.index.files import TEXT_EXTENSIONS


def ctx(gen: StructuralContextGenerator, path: str, text: str, piece: str) -> str:
    doc = Document(path, text)
    return gen.generate(doc, Chunk("c", doc.id, piece)).context


# -- one table ------------------------------------------------------------------------------------


def test_walker_and_chunker_use_the_language_table():
    assert frozenset(EXTENSIONS) == TEXT_EXTENSIONS
    assert {ext for ext, lang in EXTENSIONS.items() if lang in CODE_LANGUAGES} == CODE_EXTENSIONS
    assert ".md" in TEXT_EXTENSIONS and ".md" not in CODE_EXTENSIONS and ".rs" in CODE_EXTENSIONS
    assert language_for_path("https://x.org/a/b.tsx?raw=1") == "tsx"


@pytest.mark.parametrize("language", sorted(GRAMMARS))
def test_every_grammar_wheel_loads_offline_and_parses(language):
    # the grammar wheels ship compiled parsers: loading one fetches nothing
    assert parser_fallback(f"x{next(e for e, lang in EXTENSIONS.items() if lang == language)}") is None
    tree = code_outline._parser(language).parse(b"\n")
    assert tree.root_node is not None and not tree.root_node.has_error


# -- languages beyond the regex parsers' tests ----------------------------------------------------

KOTLIN = "class Foo {\n    fun run(y: Int): Int {\n        return y * 2\n    }\n}\nfun Foo.ext(): Int {\n    return 7\n}\n"
SWIFT = "extension Foo {\n  func more() {\n    print(1)\n  }\n}\nstruct P {\n  init(x: Int) {\n    self.x = x\n  }\n}\n"


@pytest.mark.parametrize("path,text,piece,expected", [
    ("a/Main.kt", KOTLIN, "return y * 2", "in class Foo > fun run"),
    ("a/Main.kt", KOTLIN, "return 7", "in fun Foo.ext"),
    ("a/M.scala", "object Main {\n  def run(x: Int): Int = {\n    x + 1\n  }\n}\n", "x + 1", "in object Main > def run"),
    ("a/M.swift", SWIFT, "print(1)", "in extension Foo > func more"),
    ("a/M.swift", SWIFT, "self.x = x", "in struct P > func init"),
    ("a/M.cs", "namespace App {\n  public class Svc {\n    public int Run(int x) {\n      return x;\n    }\n  }\n}\n",
     "return x;", "in namespace App > class Svc > method Run"),
    ("a/m.php", "<?php\nclass Svc {\n  public function run($x) {\n    return $x;\n  }\n}\n", "return $x;",
     "in class Svc > function run"),
    ("a/m.c", "struct s { int a; };\nstatic int add(int a, int b) {\n  return a + b;\n}\n", "return a + b;", "in function add"),
    ("a/m.tsx", "export function App() {\n  return <div>hi</div>;\n}\n", "return <div>hi</div>;", "in function App"),
    ("a/m.js", "const f = function() {\n  return 1;\n};\n", "return 1;", "in function f"),
])
def test_enclosing_definitions_in_more_languages(path, text, piece, expected):
    assert ctx(StructuralContextGenerator(), path, text, piece) == f"From {path}, {expected}."


def test_offsets_are_characters_not_utf8_bytes():
    text = "# ünïcödé 🚀 ✓\nclass Ü:\n    def ñ(self):\n        return '🚀'\n\ndef après():\n    return 2\n"
    defs = definitions(text, "python")
    assert [(d.name, text[d.start:d.start + 3]) for d in defs] == [("Ü", "cla"), ("ñ", "def"), ("après", "def")]
    assert ctx(StructuralContextGenerator(), "ü.py", text, "return '🚀'") == "From ü.py, in class Ü > def ñ."
    assert ctx(StructuralContextGenerator(), "ü.py", text, "return 2") == "From ü.py, in def après."


# -- Markdown through markdown-it -----------------------------------------------------------------


def test_markdown_html_blocks_and_long_fences_are_not_headings():
    text = (
        "# Guide\n\n<!--\n# Not a heading: inside an HTML comment\n-->\n\n## Real\n\n"
        "````md\n```\n# still code\n```\n````\n\nafter the fence\n"
    )
    gen = StructuralContextGenerator()
    assert ctx(gen, "g.md", text, "after the fence") == "From g.md, section: Guide > Real."
    assert ctx(gen, "g.md", text, "# still code") == "From g.md, section: Guide > Real."


def test_heading_inline_markup_is_plain_text():
    text = "# The `split_text` [chunker](https://x.org) *rules*\n\nbody\n"
    assert ctx(StructuralContextGenerator(), "c.md", text, "body") == "From c.md, section: The split_text chunker rules."


# -- failures: counted, logged, loud --------------------------------------------------------------


def test_code_without_a_grammar_is_plain_text_and_counted():
    gen = StructuralContextGenerator()
    assert ctx(gen, "scripts/x.lua", "function f()\n  return 1\nend\n", "return 1") == "From scripts/x.lua."
    assert gen.report.fallbacks == {"no grammar for lua": 1} and gen.report.fallback_documents == 1
    assert parser_fallback("scripts/x.lua") == "no grammar for lua" and chunk_boundaries("x", "x.lua") is None


def test_missing_grammar_wheel_falls_back_logged_and_counted(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "tree_sitter_kotlin", None)  # as if the wheel were not installed
    monkeypatch.setattr(code_outline._local, "parsers", {}, raising=False)
    gen = StructuralContextGenerator()
    with caplog.at_level(logging.WARNING):
        out = ctx(gen, "a/Main.kt", KOTLIN, "return y * 2")
    assert out == "From a/Main.kt."
    assert gen.report.fallbacks == {"grammar unavailable for kotlin": 1}
    assert any("pip install tree-sitter-kotlin" in r.getMessage() for r in caplog.records)
    assert parser_fallback("a/Main.kt") == "grammar unavailable for kotlin"
    assert chunk_boundaries(KOTLIN, "a/Main.kt") is None


def test_syntax_errors_are_counted_and_the_rest_still_parsed():
    gen = StructuralContextGenerator()
    text = "def ok():\n    return 1\n\ndef broken(:\n    pass\n\nclass Later:\n    def m(self):\n        return 3\n"
    assert ctx(gen, "b.py", text, "return 3") == "From b.py, in class Later > def m."
    assert gen.report.syntax_errors == 1 and gen.report.code_documents == 1


def test_a_composer_bug_fails_loudly(monkeypatch):
    def broken(info):
        raise RuntimeError("composer bug")

    monkeypatch.setattr(structural, "_compose", broken)
    gen = StructuralContextGenerator()
    doc = Document("a.md", "# A\ntext")
    with pytest.raises(RuntimeError, match="composer bug"):
        gen.generate(doc, Chunk("c", doc.id, "text"))
    with pytest.raises(RuntimeError, match="composer bug"):
        Contextualizer(gen, None, config=ContextualizeConfig(show_progress=False)).contextualize([doc], [Chunk("c", doc.id, "text")])


# -- code-aware chunking --------------------------------------------------------------------------

CODE = '''"""Module."""

import os


class Store:
    """Keeps things."""

    def __init__(self, root):
        self.root = root
        self.items = {}
        self.count = 0

    # Adds one item; the comment belongs to the method.
    @staticmethod
    def add(item):
        value = str(item)
        value = value.strip()
        return value


def helper(x):
    total = 0
    for i in range(x):
        total += i
    return total
'''


def test_definition_boundaries_include_comments_and_decorators():
    cuts = definition_boundaries(CODE, "python")
    lines = [CODE[c:CODE.index("\n", c)] for c in cuts]
    assert lines == ["class Store:", "    def __init__(self, root):", "    # Adds one item; the comment belongs to the method.",
                     "def helper(x):"]


JS_CODE = "".join(
    f"function step{i}(a) {{\n  const x = a + {i};\n  const z = x - 1;\n\n  const y = x * z;\n  return y;\n}}\n"
    for i in range(6)
)


def test_chunker_cuts_at_definitions_not_at_statements():
    with_tree = [c for _, c in split_text(JS_CODE, max_chars=200, code=True, boundaries=chunk_boundaries(JS_CODE, "m.js"))]
    assert len(with_tree) > 1 and all(c.startswith("function step") and c.endswith("}") for c in with_tree)
    # the line rules cut where a blank line precedes a `const`, inside a function
    plain = [c for _, c in split_text(JS_CODE, max_chars=200, code=True)]
    assert any(c.startswith("const y") for c in plain)


def test_every_grammar_and_markdown_it_is_a_core_dependency():
    from pathlib import Path

    import tomllib
    from packaging.requirements import Requirement

    project = tomllib.loads((Path(__file__).resolve().parents[3] / "pyproject.toml").read_text("utf-8"))["project"]
    core = {Requirement(r).name for r in project["dependencies"]}
    wanted = {module.replace("_", "-") for module, _ in GRAMMARS.values()} | {"tree-sitter", "markdown-it-py"}
    assert wanted <= core, wanted - core


def test_index_report_counts_code_read_as_plain_text(tmp_path):
    from contextual_retrieval_core.index._changes import read_changes
    from contextual_retrieval_core.index.files import collect_files
    from contextual_retrieval_core.index.report import IndexReport

    (tmp_path / "a.lua").write_text("function f()\n  return 1\nend\n")
    (tmp_path / "b.lua").write_text("function g()\n  return 2\nend\n")
    (tmp_path / "c.py").write_text("def h():\n    return 3\n")
    (tmp_path / "d.md").write_text("# D\n\ntext\n")
    report = IndexReport()
    read_changes(collect_files([tmp_path]).files, {}, False, 800, report, False)
    assert report.plain_text_code == {"no grammar for lua": 2}
    assert "code read as plain text: 2 (no grammar for lua)" in report.format()


def test_cpp_methods_returning_references_and_pointers_are_named():
    src = "class A {\n  const std::vector<int> &get() const noexcept { return v; }\n  int *ptr() { return p; }\n};\n"
    assert [(d.kind, d.name) for d in definitions(src, "cpp")] == [("class", "A"), ("method", "get"), ("method", "ptr")]


def test_cpp_functions_do_not_nest_after_a_macro_breaks_the_parse():
    src = "void f() {\n  CHECK(x, int32_t, \"\");\n  g();\n}\n"
    assert all(d.parent is None for d in definitions(src, "cpp"))


def test_cpp_macro_made_class_closed_early_is_reattached():
    src = ("TEST_CLASS(FmtTest)\n{\n\tTEST_SUITE(FmtTest);\npublic:\n\tvoid setUp()\n\t{\n\t\tinit();\n\t}\n\n"
           "\tvoid common()\n\t{\n\t\tint i = -1;\n\t\tlog(i);\n\t}\n\nprivate:\n\tstatic const int X;\n};\n")
    out = ctx(StructuralContextGenerator(), "t.cpp", src, "log(i);")
    assert out == "From t.cpp, in function TEST_CLASS > function common."
