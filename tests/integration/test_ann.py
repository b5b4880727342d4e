"""HNSWIndex: recall of the exact top-k on real MiniLM vectors, saving, loading, growing, choosing."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("faiss", reason="faiss-cpu is not installed: pip install 'contextual-retrieval-kit[ann]'")

from contextual_retrieval_core.dense.hnsw import ANN_THRESHOLD, HNSWIndex, HNSWParams, dense_index  # noqa: E402
from contextual_retrieval_core.dense.vectors import VectorIndex  # noqa: E402


def recall(exact: list[list[tuple[str, float]]], approx: list[list[tuple[str, float]]]) -> float:
    hit = sum(len({i for i, _ in e} & {i for i, _ in a}) for e, a in zip(exact, approx))
    return hit / sum(len(e) for e in exact)


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
