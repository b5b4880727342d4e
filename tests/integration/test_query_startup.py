"""What `contextual-retrieval query` loads before it needs it (a fresh interpreter per check)."""

from __future__ import annotations

import json
import subprocess
import sys


def _loaded_after(code: str) -> set[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_importing_the_core_loads_no_stage():
    loaded = _loaded_after("import contextual_retrieval_core")
    assert not {"numpy", "bm25s", "chromadb", "onnxruntime"} & loaded
    loaded = _loaded_after("from contextual_retrieval_core import HybridSearcher")
    assert "contextual_retrieval_core.search.hybrid" in loaded


def test_the_command_line_parser_loads_no_search_generator_or_model():
    loaded = _loaded_after("from contextual_retrieval_core.app.cli import build_parser\nbuild_parser()")
    heavy = {"bm25s", "scipy", "chromadb", "onnxruntime", "markdown_it", "contextual_retrieval_core.search.hybrid",
             "contextual_retrieval_core.generators.structural"}
    assert not heavy & loaded


def test_bm25_scores_without_bm25s_or_scipy():
    loaded = _loaded_after("from contextual_retrieval_core.search.bm25 import BM25Index\n"
                           "BM25Index().index(['a'], ['diff executor']).search('executor')")
    assert not {"bm25s", "scipy"} & loaded
