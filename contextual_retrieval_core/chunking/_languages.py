"""The one extension-to-language table: what `contextual-retrieval index` walks, what it chunks as
code, and which parser the structural contexts use for a file.

- `EXTENSIONS`: file extension -> language name. A folder walk indexes exactly these extensions.
- `GRAMMARS`: language -> the tree-sitter grammar wheel that parses it (module, function); the
  wheels ship compiled grammars, so nothing is downloaded at run time.
- `PROSE_LANGUAGES`: read as documents with headings (Markdown through markdown-it-py,
  reStructuredText by its section adornments); `CODE_LANGUAGES`: chunked as code (with a grammar:
  at definition boundaries); anything else (data, markup) is plain text.

Example:
    >>> language_for_path("src/app/cart.tsx"), language_for_path("README.md"), language_for_path("x.lock")
    ('tsx', 'markdown', None)
    >>> is_code("lib/billing.rb"), is_code("notes.txt")
    (True, False)
"""

from __future__ import annotations

import os

__all__ = [
    "EXTENSIONS", "GRAMMARS", "PROSE_LANGUAGES", "CODE_LANGUAGES", "ALIASES",
    "language_for_path", "canonical_language", "is_code",
]

_TABLE = {
    # code with a tree-sitter grammar
    "python": ".py .pyi .pyw",
    "ruby": ".rb",
    "rust": ".rs",
    "go": ".go",
    "javascript": ".js .jsx .mjs .cjs",
    "typescript": ".ts .mts .cts",
    "tsx": ".tsx",
    "java": ".java",
    "kotlin": ".kt .kts",
    "scala": ".scala",
    "swift": ".swift",
    "c": ".c",
    "cpp": ".h .cc .cpp .cxx .hh .hpp .hxx",
    "csharp": ".cs",
    "php": ".php",
    # code without a grammar here: chunked as code, contexts name the file only
    "lua": ".lua", "perl": ".pl", "r": ".r", "julia": ".jl", "shell": ".sh .bash .zsh", "sql": ".sql",
    "dart": ".dart", "elixir": ".ex .exs", "erlang": ".erl", "haskell": ".hs", "ocaml": ".ml",
    "clojure": ".clj", "zig": ".zig", "nim": ".nim",
    # prose
    "markdown": ".md .markdown .mdx",
    "rst": ".rst .rest",
    "text": ".txt .text",
    "asciidoc": ".adoc",
    "org": ".org",
    "latex": ".tex",
    # data and markup: plain text
    "csv": ".csv .tsv", "notebook": ".ipynb", "html": ".html", "css": ".css .scss", "vue": ".vue",
    "svelte": ".svelte", "toml": ".toml", "yaml": ".yaml .yml", "json": ".json", "ini": ".ini .cfg",
    "protobuf": ".proto", "graphql": ".graphql", "elisp": ".el", "vim": ".vim",
}

#: file extension (lower case, with the dot) -> language name
EXTENSIONS: dict[str, str] = {ext: lang for lang, exts in _TABLE.items() for ext in exts.split()}

#: language -> (module of its tree-sitter grammar wheel, function returning the language pointer)
GRAMMARS: dict[str, tuple[str, str]] = {
    "python": ("tree_sitter_python", "language"),
    "ruby": ("tree_sitter_ruby", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "go": ("tree_sitter_go", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "java": ("tree_sitter_java", "language"),
    "kotlin": ("tree_sitter_kotlin", "language"),
    "scala": ("tree_sitter_scala", "language"),
    "swift": ("tree_sitter_swift", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "csharp": ("tree_sitter_c_sharp", "language"),
    "php": ("tree_sitter_php", "language_php"),
}

PROSE_LANGUAGES = frozenset({"markdown", "rst", "text", "asciidoc", "org", "latex"})
CODE_LANGUAGES = frozenset(GRAMMARS) | frozenset(
    {"lua", "perl", "r", "julia", "shell", "sql", "dart", "elixir", "erlang", "haskell", "ocaml", "clojure", "zig", "nim"}
)

#: other names a `metadata["language"]` may use
ALIASES: dict[str, str] = {
    "py": "python", "rb": "ruby", "rs": "rust", "golang": "go", "js": "javascript", "jsx": "javascript",
    "ts": "typescript", "c++": "cpp", "cxx": "cpp", "c#": "csharp", "cs": "csharp", "kt": "kotlin",
    "md": "markdown", "restructuredtext": "rst", "plaintext": "text", "prose": "text", "bash": "shell",
    "sh": "shell",
}


def canonical_language(name: object) -> str | None:
    """The table's name for a language name or alias ("TypeScript", "c++", "md"), else None."""
    key = str(name or "").strip().lower()
    key = ALIASES.get(key, key)
    return key if key in _TABLE else None


def language_for_path(path: object) -> str | None:
    """The language of a file path or URL by its extension, else None."""
    value = str(path or "").split("?")[0].split("#")[0]
    return EXTENSIONS.get(os.path.splitext(value)[1].lower())


def is_code(path: object) -> bool:
    """Whether a file is chunked as code."""
    return language_for_path(path) in CODE_LANGUAGES
