"""The public surface, stated (issue 44): the package and each stage package export what users
import from them, each name the very object its module defines, imported on first use only; a
module whose name has no leading underscore is the home of a name its package exports (or one
users run with ``python -m``), every other module is named as internal (``_name.py``)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from tests.source_tree import PACKAGES, ROOT, parsed, sources

STAGES = ["contextual_retrieval_core", "contextual_retrieval_core.search", "contextual_retrieval_core.index",
          "contextual_retrieval_core.contextualize", "contextual_retrieval_core.dense", "contextual_retrieval_core.chunking",
          "contextual_retrieval_core.app", "contextual_retrieval_core.embeddings", "contextual_retrieval_core.pruning",
          "contextual_retrieval_core.generators", "contextual_retrieval_core.rerank", "contextual_retrieval_core.store",
          "contextual_retrieval_langchain", "contextual_retrieval_llamaindex"]

#: public modules that export nothing: users run them with ``python -m`` (docs/scaling-out.md)
RUN_WITH_M = {"contextual_retrieval_core.app.pgvector_server"}


@pytest.mark.parametrize("name", STAGES)
def test_every_exported_name_resolves_to_its_modules_object(name: str) -> None:
    package = importlib.import_module(name)
    assert package.__all__, f"{name} exports nothing"
    for export in package.__all__:
        if export == "__version__":
            continue
        value = getattr(package, export)
        home = getattr(value, "__module__", None)
        if home is not None and home.startswith(PACKAGES):
            assert getattr(importlib.import_module(home), export) is value, (name, export)


def test_the_main_classes_and_their_arguments_are_exported_where_users_look() -> None:
    import contextual_retrieval_core as core

    for export in ("ContextualizeConfig", "FusionConfig", "WindowConfig", "ContextualRetrievalError", "ContextualIndex"):
        assert export in core.__all__


@pytest.mark.parametrize("stage, name", [
    ("contextual_retrieval_core.search", "FusionConfig"),
    ("contextual_retrieval_core.contextualize", "ContextualizeConfig"),
    ("contextual_retrieval_core.pruning", "PruningConfig"),
    ("contextual_retrieval_core.embeddings", "VoyageBatching"),
    ("contextual_retrieval_core.index", "MilvusConfig"),
])
def test_every_settings_home_is_exported_by_its_stage(stage: str, name: str) -> None:
    assert name in importlib.import_module(stage).__all__


def test_a_stage_package_imports_nothing_until_a_name_is_used() -> None:
    code = ("import sys, contextual_retrieval_core.index, contextual_retrieval_core.search, contextual_retrieval_core.pruning; "
            "print(any(m in sys.modules for m in ('contextual_retrieval_core.index.contextual_index', "
            "'contextual_retrieval_core.search.hybrid', 'contextual_retrieval_core.pruning.pruner', 'numpy')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def defined_names(path: Path) -> set[str]:
    """The names `path` defines at its top level (classes, functions, assignments)."""
    names: set[str] = set()
    for node in parsed(path).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def module_file(name: str) -> Path | None:
    path = ROOT / Path(*name.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.exists():
            return candidate
    return None


def imported_from(path: Path) -> dict[str, str]:
    """Each name `path` imports from a module (``from X import name``, anywhere in the file, so
    TYPE_CHECKING imports too) and the absolute name of X."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, str] = {}
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.ImportFrom) and node.module:
            up = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            found.update({a.asname or a.name: ".".join([*up, node.module]) for a in node.names})
    return found


def home_of(name: str, module: str) -> str:
    """The module that defines `name`, following re-exports from `module` on; "" if none does."""
    for _ in range(5):
        path = module_file(module)
        if path is None:
            return ""
        if name in defined_names(path):
            return module
        module = imported_from(path).get(name, "")
    return ""


def export_homes(init: Path) -> dict[str, str]:
    """Each name in the package's ``__all__`` and the module that defines it, read from the
    ``__init__``'s imports (at its top or under TYPE_CHECKING, where every lazily exported name is
    imported for the type checker); "" for a name with no such import."""
    package = module_name(init)
    exported = next((ast.literal_eval(node.value) for node in parsed(init).body if isinstance(node, ast.Assign)
                     and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)), [])
    sources_of = imported_from(init)
    return {name: home_of(name, package if name in defined_names(init) else sources_of.get(name, "")) for name in exported}


def public_modules() -> list[Path]:
    return [p for p in sources() if p.name != "__init__.py" and not any(part.startswith("_") for part in module_name(p).split("."))]


def test_every_export_names_its_home_for_the_type_checker() -> None:
    """A lazily exported name is imported under TYPE_CHECKING too (what mypy and the checks below
    read), from the module that defines it or one that imports it from there."""
    unknown = [f"{module_name(init)}.{name}" for init in sources() if init.name == "__init__.py"
               for name, home in export_homes(init).items() if not home and name != "__version__"]
    assert unknown == []


@pytest.mark.parametrize("path", public_modules(), ids=module_name)
def test_every_public_module_is_the_home_of_an_exported_name(path: Path) -> None:
    """A module without a leading underscore holds something users import from its package (its
    stage package, or the top package for a flat module); one that holds nothing for users is
    ``_name.py``. The modules users run with ``python -m`` are the stated exception."""
    name = module_name(path)
    if name in RUN_WITH_M:
        return
    package = name.rpartition(".")[0]
    homes = export_homes(ROOT / Path(*package.split(".")) / "__init__.py")
    assert [n for n, home in homes.items() if home == name], (
        f"{name} is the home of nothing {package} exports: export what users import from it, or rename it "
        f"_{name.rpartition('.')[2]}.py")


def test_the_run_with_m_modules_are_documented_and_runnable() -> None:
    docs = "\n".join(p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    for name in RUN_WITH_M:
        path = ROOT / Path(*name.split(".")).with_suffix(".py")
        assert 'if __name__ == "__main__":' in path.read_text(encoding="utf-8"), name
        assert f"python -m {name}" in docs, name


def test_the_api_pages_render_public_modules_only() -> None:
    """docs/api renders what users import: no ``::: path`` into an internal module."""
    targets = [line.split()[1] for page in sorted((ROOT / "docs" / "api").glob("*.md"))
               for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("::: ")]
    assert targets and [t for t in targets if any(part.startswith("_") for part in t.split("."))] == []


def test_the_checker_reads_homes_and_finds_a_module_that_exports_nothing() -> None:
    homes = export_homes(ROOT / "contextual_retrieval_core" / "generators" / "__init__.py")
    assert homes["AnthropicContextGenerator"] == "contextual_retrieval_core.generators.anthropic"
    assert homes["ContextGenerator"] == "contextual_retrieval_core.generators.base"
    assert export_homes(ROOT / "contextual_retrieval_core" / "store" / "__init__.py")["open_store"] == "contextual_retrieval_core.store"
    assert "contextual_retrieval_core.generators.base" in {module_name(p) for p in public_modules()}
    assert "contextual_retrieval_core.index._storage" not in {module_name(p) for p in public_modules()}
