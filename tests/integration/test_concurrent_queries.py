"""Eight threads sharing one retriever of each query path (`HybridSearcher`, LlamaIndex's
`HybridRetriever`, LangChain's `ContextualEnsembleRetriever` through ``batch`` and ``abatch`` with
``max_concurrency=8``, `ContextualIndex`) answer exactly as one thread does: the same ids and
scores, no exception. The cases are benchmarks/soak.py's, on the demo corpus (soak.py runs them on
the cookbook corpus and reports the throughput ratio)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.scripts import load_script

soak = load_script("benchmarks/soak.py")


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    corpus = soak.demo_corpus()
    return corpus, {p.name: p for p in soak.build_paths(corpus, tmp_path_factory.mktemp("soak"))}


@pytest.mark.parametrize("name", soak.PATH_NAMES)
def test_eight_threads_answer_as_one_does(paths, name: str) -> None:
    corpus, built = paths
    case = soak.concurrent_case(built[name], corpus.queries * 3, threads=8)
    assert case["queries"] == 3 * len(corpus.queries)
    assert case["first_errors"] == [] and case["errors"] == 0
    assert case["mismatches"] == 0


def test_a_contextual_index_opened_by_eight_threads_at_once(paths, tmp_path: Path) -> None:
    """No warm-up: the threads race to load the BM25 index and open Chroma on a fresh object."""
    from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder

    corpus, built = paths
    index_dir = tmp_path / "index"
    soak.write_files(corpus, tmp_path / "src")
    soak.build_index(tmp_path / "src", index_dir)
    serial = [soak.contextual_index(index_dir, LocalMiniLMEmbedder()).search(q) for q in corpus.queries]
    cold = soak.contextual_index(index_dir, LocalMiniLMEmbedder())
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(cold.search, corpus.queries)) == serial
