"""The import structure: no import circle in the three packages (imports inside functions and
under TYPE_CHECKING count), no core module importing from a later stage, few flat core modules."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from tests.source_tree import PACKAGES, ROOT, nodes

#: the core's stages in the order data flows; a module may import its own stage and earlier ones
STAGES = [
    ("types", "errors", "_settings", "checks", "_compat", "_sdk", "_version"),
    ("chunking",),
    ("generators",),
    ("store",),
    ("contextualize",),
    ("embeddings",),
    ("dense",),
    ("rerank",),
    ("search",),
    ("pruning",),
    ("_factories",),
    ("index",),
    ("app",),
    ("__init__",),
]
LEVEL = {name: i for i, names in enumerate(STAGES) for name in names}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Our modules `name` imports anywhere in its file (functions, TYPE_CHECKING included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in nodes(path):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        for target in targets:
            if target in known and target != name:
                found.add(target)
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def stage_of(module: str) -> int:
    parts = module.split(".")
    if parts[0] != "contextual_retrieval_core":
        raise ValueError(module)
    return LEVEL[parts[1] if len(parts) > 1 else "__init__"]


def test_no_import_circle_anywhere() -> None:
    """A package's __init__ re-exporting its modules is an edge too, so a module importing its
    own package's __init__ while the __init__ imports it is a circle."""
    assert circles(graph()) == []


def test_no_core_module_imports_a_later_stage() -> None:
    wrong = [
        f"{a} (stage {stage_of(a)}) imports {b} (stage {stage_of(b)})"
        for a, targets in graph().items() if a.startswith("contextual_retrieval_core")
        for b in targets if b.startswith("contextual_retrieval_core") and stage_of(b) > stage_of(a)
    ]
    assert wrong == []


def test_every_core_module_has_a_stage_and_few_are_flat() -> None:
    core = ROOT / "contextual_retrieval_core"
    flat = sorted(p.stem for p in core.glob("*.py"))
    assert len(flat) <= 12, flat
    for name in modules():
        if name.startswith("contextual_retrieval_core"):
            stage_of(name)  # KeyError: a folder or flat module with no stage above


def test_the_core_imports_no_framework() -> None:
    frameworks = ("llama_index", "langchain", "langchain_core", "contextual_retrieval_llamaindex", "contextual_retrieval_langchain")
    for name, path in modules().items():
        if not name.startswith("contextual_retrieval_core"):
            continue
        for node in nodes(path):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not [n for n in names if n.split(".")[0] in frameworks], (name, names)


def test_the_checker_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    with pytest.raises(ValueError):
        stage_of("contextual_retrieval_llamaindex.hybrid")
