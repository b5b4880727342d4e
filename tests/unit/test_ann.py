"""HNSWIndex: recall of the exact top-k on real MiniLM vectors, saving, loading, growing, choosing."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("faiss", reason="faiss-cpu is not installed: pip install 'contextual-retrieval-kit[ann]'")

from contextual_retrieval_core.dense.hnsw import ANN_THRESHOLD, HNSWIndex, HNSWParams, dense_index, load_dense_index  # noqa: E402
from contextual_retrieval_core.dense.vectors import VectorIndex  # noqa: E402


def recall(exact: list[list[tuple[str, float]]], approx: list[list[tuple[str, float]]]) -> float:
    hit = sum(len({i for i, _ in e} & {i for i, _ in a}) for e, a in zip(exact, approx))
    return hit / sum(len(e) for e in exact)


@pytest.fixture(scope="module")
def demo_vectors(offline_embedder) -> tuple[list[str], np.ndarray, np.ndarray]:
    from contextual_retrieval_core.app.demo import demo_chunks
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
    approx_index = dense_index(ids, docs, threshold=0)
    assert isinstance(approx_index, HNSWIndex)
    approx = approx_index.search_many(queries, k)
    assert recall(exact, approx) >= 0.99
    # the scores are the exact cosines, not the float16 graph's
    exact_scores = {i: s for i, s in exact[0]}
    for i, s in approx[0]:
        if i in exact_scores:
            assert s == pytest.approx(exact_scores[i], abs=1e-6)


def test_recall_on_clustered_vectors_past_the_threshold() -> None:
    """Thousands of rows, so the graph really prunes: 4000 points around 40 centres in 64-d."""
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((40, 64))
    docs = centres[rng.integers(0, 40, 4000)] + 0.35 * rng.standard_normal((4000, 64))
    queries = centres[rng.integers(0, 40, 50)] + 0.35 * rng.standard_normal((50, 64))
    ids = [f"c{i}" for i in range(len(docs))]
    exact = VectorIndex(ids, docs).search_many(queries, 150)
    approx = HNSWIndex(ids, docs, params=HNSWParams()).search_many(queries, 150)
    assert recall(exact, approx) >= 0.99
    assert [len(a) for a in approx] == [150] * 50


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


def test_dense_index_picks_by_size_and_checks_input() -> None:
    vecs = np.eye(3)
    assert type(dense_index(["a", "b", "c"], vecs)) is VectorIndex  # 3 < ANN_THRESHOLD
    assert type(dense_index(["a", "b", "c"], vecs, threshold=3)) is HNSWIndex
    assert ANN_THRESHOLD > 3
    with pytest.raises(ValueError, match="threshold"):
        dense_index(["a"], vecs[:1], threshold=-1)
    with pytest.raises(ValueError, match="connectivity"):
        HNSWParams(connectivity=1)
    with pytest.raises(ValueError, match="one id per vector"):
        HNSWIndex(["a"], vecs)
    with pytest.raises(ValueError, match="3-d vectors"):
        HNSWIndex(["a", "b", "c"], vecs).search(np.ones(4))
    with pytest.raises(FileNotFoundError, match="hnsw.json"):
        HNSWIndex.load("/nonexistent-dir")


class _Hashed:
    """A deterministic 32-d embedder: each text's vector is seeded by its words (no model needed)."""

    model_name, normalized = "hashed-32", False
    _words: dict[str, np.ndarray] = {}

    def _vec(self, text: str) -> np.ndarray:
        out = np.zeros(32, dtype=np.float32)
        for word in text.split():
            if word not in self._words:
                seed = int.from_bytes(word.encode(), "big") % 2**32
                self._words[word] = np.random.default_rng(seed).standard_normal(32).astype(np.float32)
            out += self._words[word]
        return out

    def embed_documents(self, texts):
        return np.stack([self._vec(t) for t in texts])

    embed_queries = embed_documents


def test_hybrid_searcher_switches_to_hnsw_at_the_threshold() -> None:
    from contextual_retrieval_core.search.hybrid import HybridSearcher
    from contextual_retrieval_core.types import Chunk, ContextualChunk

    rng = np.random.default_rng(3)
    words = [f"t{i}" for i in range(400)]
    chunks = [ContextualChunk(Chunk(f"c{i}", "d", " ".join(rng.choice(words, 6))), "") for i in range(ANN_THRESHOLD)]
    big = HybridSearcher(chunks, _Hashed(), use_bm25=False)
    small = HybridSearcher(chunks[:1000], _Hashed(), use_bm25=False)
    assert isinstance(big.vectors, HNSWIndex) and isinstance(small.vectors, VectorIndex)
    exact = VectorIndex([c.id for c in chunks], _Hashed().embed_documents([c.indexed_text for c in chunks]))
    queries = [chunks[i].indexed_text for i in range(0, ANN_THRESHOLD, 1000)]
    want = exact.search_many(_Hashed().embed_queries(queries), 10)
    got = [[(h.id, 0.0) for h in hits] for hits in big.search_many(queries, top_k=10)]
    assert recall(want, got) >= 0.95  # the fused top 10 of the dense side alone: the HNSW's top 10
