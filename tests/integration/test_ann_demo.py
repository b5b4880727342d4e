"""The HNSW and IVF indexes on the real offline model's vectors of the demo corpus (its chunks, its
questions and every chunk's first sentence as queries): recall of the exact top k, and the
same answers after save, load and add."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("faiss", reason="faiss-cpu is not installed: pip install 'contextual-retrieval-kit[ann]'")

from contextual_retrieval_core.dense.hnsw import HNSWIndex, HNSWParams, dense_index, load_dense_index  # noqa: E402
from contextual_retrieval_core.dense.ivf import IVFIndex  # noqa: E402
from contextual_retrieval_core.dense.vectors import VectorIndex  # noqa: E402
from tests.integration.test_ann import recall  # noqa: E402


@pytest.fixture(scope="module")
def demo_vectors(offline_embedder) -> tuple[list[str], np.ndarray, np.ndarray]:
    from contextual_retrieval_core.app._demo import demo_chunks
    from contextual_retrieval_core.app.demo_corpus import DEMO_QUERIES

    _, chunks = demo_chunks()
    embedder = offline_embedder
    docs = embedder.embed_documents([c.text for c in chunks])
    # the demo's queries, and every chunk's first sentence as a query of its own
    queries = [q.query for q in DEMO_QUERIES] + [c.text.split(".")[0] for c in chunks]
    return [c.id for c in chunks], docs, embedder.embed_queries(queries)


@pytest.mark.parametrize("k", [10, 150])
def test_recall_of_exact_top_k_on_demo_minilm_vectors(demo_vectors, k: int) -> None:
    ids, docs, queries = demo_vectors
    exact = VectorIndex(ids, docs).search_many(queries, k)
    approx_index = dense_index(ids, docs, threshold=0)  # what HybridSearcher builds past the threshold
    assert isinstance(approx_index, IVFIndex)
    approx = approx_index.search_many(queries, k)
    assert recall(exact, approx) >= 0.99
    # the scores are the cosines of the float16 rows: within float16 rounding of the exact ones
    exact_scores = {i: s for i, s in exact[0]}
    for i, s in approx[0]:
        if i in exact_scores:
            assert s == pytest.approx(exact_scores[i], abs=2e-3)
    forced = HNSWIndex(ids, docs).search_many(queries, k)  # the HNSW graph, built by hand, rescored exactly
    assert recall(exact, forced) >= 0.99
    assert all(s == pytest.approx(dict(exact[0])[i], abs=1e-6) for i, s in forced[0] if i in dict(exact[0]))


def test_save_load_keeps_params_and_memory_maps(demo_vectors, tmp_path) -> None:
    ids, docs, queries = demo_vectors
    params = HNSWParams(connectivity=8, expansion_add=64, expansion_search=100)
    index = HNSWIndex(ids, docs, params=params)
    index.save(tmp_path / "idx")
    meta = json.loads((tmp_path / "idx" / "hnsw.json").read_text())
    assert meta["params"] == {"connectivity": 8, "expansion_add": 64, "expansion_search": 100}
    assert meta["count"] == len(ids) and meta["dim"] == docs.shape[1]
    assert np.load(tmp_path / "idx" / "vectors.npy").dtype == np.float32
    loaded = load_dense_index(tmp_path / "idx")
    assert isinstance(loaded, HNSWIndex) and loaded.params == params
    assert isinstance(loaded.vectors, np.memmap) or isinstance(loaded.vectors.base, np.memmap)
    assert loaded.search_many(queries, 10) == index.search_many(queries, 10)
    # an exact index's directory opens as an exact index, memory-mapped too
    VectorIndex(ids, docs).save(tmp_path / "exact")
    exact = load_dense_index(tmp_path / "exact")
    assert type(exact) is VectorIndex
    assert isinstance(exact.vectors, np.memmap) or isinstance(exact.vectors.base, np.memmap)


def test_add_grows_a_loaded_index(demo_vectors, tmp_path) -> None:
    ids, docs, queries = demo_vectors
    HNSWIndex(ids[:30], docs[:30]).save(tmp_path / "idx")
    index = HNSWIndex.load(tmp_path / "idx")
    index.add(ids[30:], docs[30:])
    assert len(index) == len(ids)
    full = VectorIndex(ids, docs).search_many(queries, 10)
    assert recall(full, index.search_many(queries, 10)) >= 0.99
    with pytest.raises(ValueError, match="already indexed"):
        index.add(ids[:1], docs[:1])
