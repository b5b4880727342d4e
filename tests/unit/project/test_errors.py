"""`ContextualRetrievalError` is the base of every error class the library defines (issue 44), each
keeping the builtin base users already catch; the interruptions stay `KeyboardInterrupt`s and the
warnings `Warning`s. docs/errors.md lists every one of them."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import contextual_retrieval_core
from contextual_retrieval_core import ContextualRetrievalError

PACKAGES = ["contextual_retrieval_core", "contextual_retrieval_langchain", "contextual_retrieval_llamaindex"]
DOCS = (Path(__file__).resolve().parents[3] / "docs" / "errors.md").read_text(encoding="utf-8")


def defined_exceptions() -> list[type[BaseException]]:
    found = []
    for name in PACKAGES:
        try:
            package = importlib.import_module(name)
        except ImportError:  # a framework not installed: its classes cannot be raised
            continue
        for info in pkgutil.walk_packages(package.__path__, name + "."):
            try:
                module = importlib.import_module(info.name)
            except ImportError:  # an optional extra (milvus, pgvector, ...) not installed
                continue
            for _, cls in inspect.getmembers(module, inspect.isclass):
                if issubclass(cls, BaseException) and cls.__module__ == module.__name__:
                    found.append(cls)
    return sorted(set(found), key=lambda c: (c.__module__, c.__name__))


ERRORS = [c for c in defined_exceptions() if not issubclass(c, (KeyboardInterrupt, Warning))]


def test_every_library_error_derives_from_the_base_and_keeps_a_builtin_one() -> None:
    assert len(ERRORS) >= 20
    for cls in ERRORS:
        assert issubclass(cls, ContextualRetrievalError), f"{cls.__module__}.{cls.__name__}"
        if cls is not ContextualRetrievalError and cls.__name__ != "SpendLimitReached":
            builtin = [b for b in cls.__mro__ if b.__module__ == "builtins" and b not in (Exception, BaseException, object)]
            assert builtin, f"{cls.__name__} keeps no builtin base (ValueError, RuntimeError, ...)"


@pytest.mark.parametrize("cls", ERRORS, ids=lambda c: c.__name__)
def test_every_error_is_in_the_docs_page(cls: type[BaseException]) -> None:
    assert f"`{cls.__name__}`" in DOCS, f"docs/errors.md does not list {cls.__name__}"


def test_the_base_is_exported_and_one_except_catches_a_damaged_index(tmp_path) -> None:
    from contextual_retrieval_core.index.manifest import IndexManifest

    (tmp_path / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ContextualRetrievalError, match="manifest.json is not valid JSON"):
        IndexManifest.read(tmp_path)
    with pytest.raises(ValueError):  # the builtin base still catches it
        IndexManifest.read(tmp_path)
    assert "ContextualRetrievalError" in contextual_retrieval_core.__all__


def test_the_library_raises_no_bare_builtin_error() -> None:
    """Every `raise` of a builtin error class in the packages goes through one of ours (`InputError`
    for ValueError, ...), so `except ContextualRetrievalError` catches everything raised on purpose."""
    import ast

    root = Path(__file__).resolve().parents[3]
    bare = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name) \
                        and node.exc.func.id in ("ValueError", "TypeError", "RuntimeError", "FileNotFoundError", "ImportError", "OSError"):
                    bare.append(f"{path.relative_to(root)}:{node.lineno}: {node.exc.func.id}")
    assert bare == []
