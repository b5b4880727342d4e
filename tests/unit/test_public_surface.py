"""The public surface, stated (issue 44): the package and each stage package export what users
import from them, each name the very object its module defines, imported on first use only."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

STAGES = ["contextual_retrieval_core", "contextual_retrieval_core.search", "contextual_retrieval_core.index",
          "contextual_retrieval_core.contextualize", "contextual_retrieval_core.dense", "contextual_retrieval_core.chunking",
          "contextual_retrieval_core.app", "contextual_retrieval_core.embeddings", "contextual_retrieval_core.pruning"]


@pytest.mark.parametrize("name", STAGES)
def test_every_exported_name_resolves_to_its_modules_object(name: str) -> None:
    package = importlib.import_module(name)
    assert package.__all__, f"{name} exports nothing"
    for export in package.__all__:
        if export == "__version__":
            continue
        value = getattr(package, export)
        home = getattr(value, "__module__", None)
        if home is not None and home.startswith("contextual_retrieval_core"):
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
