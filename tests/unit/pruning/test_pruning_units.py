"""Unit splitting for pruning: code stays whole (checked against tokenize), prose splits right."""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize

import pytest

from contextual_retrieval_core.app._demo import demo_chunks
from contextual_retrieval_core.pruning.units import guess_kind, split_units


def _cookbook_docs(cookbook_dir):
    return json.loads((cookbook_dir / "codebase_chunks.json").read_text(encoding="utf-8"))


def _is_python(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def _python_forbidden(text: str) -> list[tuple[int, int]]:
    """(start, end) spans a unit boundary may not fall strictly inside: string tokens and the
    inside of open brackets, from the tokens `tokenize` gives for the whole chunk (up to where it
    stops, for a chunk cut mid-statement)."""
    offsets = [0]
    for line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    at = lambda rc: offsets[rc[0] - 1] + rc[1] if rc[0] - 1 < len(offsets) else len(text)  # noqa: E731
    spans, stack = [], []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING:
                spans.append((at(tok.start), at(tok.end)))
            elif tok.type == tokenize.OP and tok.string in "([{":
                stack.append(at(tok.start))
            elif tok.type == tokenize.OP and tok.string in ")]}" and stack:
                spans.append((stack.pop(), at(tok.end)))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    spans.extend((a, len(text) + 1) for a in stack)  # still open at the end of the chunk
    return spans


def _boundaries(units, text: str) -> set[int]:
    """Unit edges, except the chunk's own edges (only whitespace before or after)."""
    return {p for u in units for p in (u.start, u.end) if text[:p].strip() and text[p:].strip()}


def _check_python(text: str) -> list[str]:
    units = split_units(text, "python")
    assert all(text[u.start : u.end] == u.text for u in units)
    bad = []
    for a, b in _python_forbidden(text):
        for p in _boundaries(units, text):
            if a < p < b:
                bad.append(f"boundary {p} inside {text[a:b][:60]!r}")
    return bad


def test_python_units_never_cut_strings_or_brackets_demo_and_cookbook(cookbook_dir):
    texts = [c.text for c in demo_chunks()[1] if c.document_id.endswith(".py")]
    assert len(texts) >= 3
    docs = [d for d in _cookbook_docs(cookbook_dir) if _is_python(d["content"])]
    assert len(docs) >= 10  # the Ciphey and Thrift Python files
    texts += [c["content"] for d in docs for c in d["chunks"]]
    problems = {i: p for i, t in enumerate(texts) if (p := _check_python(t))}
    assert not problems, list(problems.items())[:3]
    # and the units are real statements: a multi-line bracketed call is one unit
    text = "x = call(1,\n         'a)b',\n         2)\ny = 3\n"
    assert [u.text for u in split_units(text, "python")] == ["x = call(1,\n         'a)b',\n         2)", "y = 3"]


_RUST_STRIP = re.compile(r'r#*"(?:.|\n)*?"#*|"(?:\\.|[^"\\])*"|//[^\n]*|/\*(?:.|\n)*?\*/|\'(?:\\.[^\']{0,8}|[^\'\\\n])\'')


def _rust_open_at(text: str) -> list[int]:
    """Bracket depth of ( and [ and whether inside a string/comment, per position (a separate
    regex-based reading of the text, not the splitter's scanner)."""
    state = [0] * (len(text) + 1)
    masked = list(text)
    for m in _RUST_STRIP.finditer(text):
        for i in range(m.start() + 1, m.end()):
            state[i] = 10**6  # inside a literal or comment
            masked[i] = " "
    depth = 0
    for i, ch in enumerate(masked):
        if state[i] < 10**6:
            state[i] = depth
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
    state[len(text)] = depth
    return state


def test_rust_units_never_cut_strings_comments_or_brackets(cookbook_dir):
    rust = [d for d in _cookbook_docs(cookbook_dir) if re.search(r"^\s*(pub )?fn \w+", d["content"], re.M) and "::" in d["content"]]
    assert len(rust) >= 10
    checked = 0
    for d in rust:
        for c in d["chunks"]:
            text = c["content"]
            state = _rust_open_at(text)
            units = split_units(text, "code")
            assert all(text[u.start : u.end] == u.text for u in units)
            for p in _boundaries(units, text):
                assert state[p] == 0, (d["doc_id"], p, text[max(0, p - 40) : p + 40])
            checked += 1
    assert checked >= 100


def test_code_kinds_are_guessed():
    assert guess_kind("def f(x):\n    return x\n\nclass A:\n    pass\n") == "python"
    assert guess_kind("fn main() {\n    let x = 1;\n}\n") == "code"
    assert guess_kind("Revenue grew by 3%. Costs fell.\n\nThe outlook is good.") == "prose"


def test_prose_sentences_lists_headings_and_cjk():
    text = "# Title\n\nRevenue grew 3.5% (e.g. from renewals). Costs fell! Why?\n\n- first item\n- second item\n1. numbered"
    units = split_units(text, "prose")
    assert [(u.kind, u.text) for u in units] == [
        ("heading", "# Title"),
        ("sentence", "Revenue grew 3.5% (e.g. from renewals)."),
        ("sentence", "Costs fell!"),
        ("sentence", "Why?"),
        ("list_item", "- first item"),
        ("list_item", "- second item"),
        ("list_item", "1. numbered"),
    ]
    cjk = "信息检索是从大量文档中找到相关信息的过程。向量数据库存储嵌入向量！为什么？"
    assert [u.text for u in split_units(cjk)] == ["信息检索是从大量文档中找到相关信息的过程。", "向量数据库存储嵌入向量！", "为什么？"]


def test_fenced_code_in_markdown_is_split_as_code():
    text = "Run this:\n\n```python\nx = f(1,\n      2)\nprint(x)\n```\nDone."
    units = split_units(text, "prose")
    assert [u.text for u in units] == ["Run this:", "```python\nx = f(1,\n      2)", "print(x)\n```", "Done."]


def test_minified_line_is_split_after_statements_not_inside_strings():
    line = 'var a=1;function f(){return "x;y{"}' + ";b=f();" * 300
    units = split_units(line, "code")
    assert len(units) > 100
    assert "".join(u.text for u in units) == line  # nothing lost: one line, cut only between units
    assert all('"x;y{"' in u.text for u in units if '"x' in u.text)


def test_units_reject_bad_input():
    with pytest.raises(TypeError, match="text must be str"):
        split_units(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind must be"):
        split_units("x", "java")  # type: ignore[arg-type]
    assert split_units("   \n\n ") == []
