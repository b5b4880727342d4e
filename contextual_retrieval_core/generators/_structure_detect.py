"""Whether a document without a known extension is code, and in which language: a guess from
line shapes, for documents that carry neither a file extension nor `metadata["language"]`.

No grammar identifies a language, so this stays a heuristic; the guess only picks the tree-sitter
grammar (`_languages.GRAMMARS`) that then parses the document.

Example:
    >>> looks_like_code("fn main() {\\n    let x = 1;\\n}\\n"), guess_language("fn main() {\\n    let x = 1;\\n}\\n")
    (True, 'rust')
    >>> looks_like_code("Quarterly memo\\n\\nRevenue grew by 3%.\\n")
    False
"""

from __future__ import annotations

import re

__all__ = ["looks_like_code", "guess_language"]

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


def looks_like_code(text: str) -> bool:
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


def guess_language(text: str) -> str:
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
        return "typescript"  # a superset of JavaScript: its grammar reads both
    return "c"
