"""The core imports with no framework or hosted SDK installed, and imports none of them; the
generators, rerank and embeddings packages, the index and the CLI import no SDK they do not
need; an adapter without its framework names the extra. Each check runs a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from contextual_retrieval_core.rerank import PassThroughReranker
from tests.unit.rerank.test_rerankers import QUERY, TEXTS

REPO = Path(__file__).resolve().parents[2]

FRAMEWORKS = ["llama_index", "langchain", "langchain_core", "langchain_community", "langchain_classic",
              "anthropic", "voyageai", "cohere", "chromadb", "torch", "sentence_transformers", "matplotlib"]

CORE_MODULES = [
    "contextual_retrieval_core",
    "contextual_retrieval_core.types",
    "contextual_retrieval_core.chunking.tokenizer",
    "contextual_retrieval_core.search.bm25",
    "contextual_retrieval_core.search.rank_fusion",
    "contextual_retrieval_core.dense.vectors",
    "contextual_retrieval_core.search.hybrid",
    "contextual_retrieval_core.app.evaluation",
    "contextual_retrieval_core.app.cli",
    "contextual_retrieval_core.embeddings",
    "contextual_retrieval_core.embeddings.base",
    "contextual_retrieval_core.embeddings.cache",
    "contextual_retrieval_core.embeddings.minilm",
    "contextual_retrieval_core.rerank",
    "contextual_retrieval_core.rerank.base",
]

# A meta-path finder that makes the frameworks look uninstalled: any import of them fails.
BLOCKER = f"""
import sys, importlib.abc
BLOCKED = {FRAMEWORKS!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in BLOCKED:
            raise ImportError('blocked for the test: ' + name)
        return None
sys.meta_path.insert(0, Block())
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_core_imports_without_frameworks_installed():
    code = BLOCKER + "\nimport importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in CORE_MODULES)
    code += "print('ok')\n"
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@pytest.mark.parametrize("package, extra", [("contextual_retrieval_llamaindex", "llamaindex"), ("contextual_retrieval_langchain", "langchain")])
def test_adapters_without_their_framework_name_the_extra(package, extra):
    result = _run(BLOCKER + f"\nimport {package}\n")
    assert result.returncode != 0
    assert f"pip install 'contextual-retrieval-kit[{extra}]'" in result.stderr


def test_core_imports_no_framework_module():
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in CORE_MODULES)
    code += f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FRAMEWORKS!r}))\n"
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_blocker_really_blocks():
    # the finder above must make a framework unimportable, or the first test proves nothing
    result = _run(BLOCKER + "\nimport llama_index.core\n")
    assert result.returncode != 0 and "blocked for the test" in result.stderr


def test_generators_package_does_not_import_anthropic_sdk():
    import subprocess
    import sys

    code = (
        "import sys, contextual_retrieval_core.generators as g\n"
        "assert 'anthropic' not in sys.modules, 'SDK imported'\n"
        "assert 'contextual_retrieval_core.generators.anthropic' not in sys.modules\n"
        "print(g.StructuralContextGenerator.label)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "structural (no LLM)"


def test_indexing_module_imports_no_framework_or_chroma():
    code = ("import sys, contextual_retrieval_core.index.contextual_index, contextual_retrieval_core.app._demo, contextual_retrieval_core.app.cli\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'chromadb', 'llama_index', 'langchain', 'langchain_core', 'anthropic', 'voyageai', 'cohere'}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_pass_through_is_exported_and_the_package_imports_no_sdk() -> None:
    assert [r.index for r in PassThroughReranker().rerank(QUERY, TEXTS, top_n=2)] == [0, 1]
    code = (
        "import sys, contextual_retrieval_core.rerank, contextual_retrieval_core.embeddings\n"
        "print(sorted(m for m in ('cohere', 'voyageai', 'sentence_transformers', 'onnxruntime') if m in sys.modules))"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_without_langchain_the_error_names_the_extra() -> None:
    import subprocess
    import sys

    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0].startswith('langchain'):\n"
        "            raise ImportError('blocked for the test: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import contextual_retrieval_langchain\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode != 0
    assert "pip install 'contextual-retrieval-kit[langchain]'" in result.stderr
