"""The three packages' source files and their syntax trees, parsed once per test process (the
house-rule and import-graph tests each walk every module)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("contextual_retrieval_core", "contextual_retrieval_llamaindex", "contextual_retrieval_langchain")


def sources() -> list[Path]:
    """Every .py file of the three packages, sorted."""
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


@functools.cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of `path` (shared: do not change it)."""
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every node of `path`'s syntax tree in `ast.walk` order (shared: do not change them)."""
    return tuple(ast.walk(parsed(path)))
