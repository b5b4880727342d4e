"""HNSWIndex and IVFIndex: recall of the exact top-k on real MiniLM vectors, saving, loading, growing, choosing."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("faiss", reason="faiss-cpu is not installed: pip install 'contextual-retrieval-kit[ann]'")

from contextual_retrieval_core.checks import IndexFileError, mapped_file  # noqa: E402
from contextual_retrieval_core.dense.hnsw import ANN_THRESHOLD, HNSWIndex, HNSWParams, dense_index, load_dense_index  # noqa: E402
from contextual_retrieval_core.dense.ivf import IVFIndex, IVFParams  # noqa: E402
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
    assert type(dense_index(["a", "b", "c"], vecs, threshold=3)) is IVFIndex
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


def test_hybrid_searcher_switches_to_ivf_at_the_threshold() -> None:
    from contextual_retrieval_core.search.hybrid import HybridSearcher
    from contextual_retrieval_core.types import Chunk, ContextualChunk

    rng = np.random.default_rng(3)
    words = [f"t{i}" for i in range(400)]
    chunks = [ContextualChunk(Chunk(f"c{i}", "d", " ".join(rng.choice(words, 6))), "") for i in range(ANN_THRESHOLD)]
    big = HybridSearcher(chunks, _Hashed(), use_bm25=False)
    small = HybridSearcher(chunks[:1000], _Hashed(), use_bm25=False)
    assert isinstance(big.vectors, IVFIndex) and isinstance(small.vectors, VectorIndex)
    exact = VectorIndex([c.id for c in chunks], _Hashed().embed_documents([c.indexed_text for c in chunks]))
    queries = [chunks[i].indexed_text for i in range(0, ANN_THRESHOLD, 1000)]
    want = exact.search_many(_Hashed().embed_queries(queries), 10)
    got = [[(h.id, 0.0) for h in hits] for hits in big.search_many(queries, top_k=10)]
    assert recall(want, got) >= 0.95  # the fused top 10 of the dense side alone: the IVF index's top 10


def _clustered(seed: int, n: int, queries: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((60, 64))
    docs = centres[rng.integers(0, 60, n)] + 0.5 * rng.standard_normal((n, 64))
    # queries off the data: a centre's direction plus as much noise again, as real queries sit
    # farther from every chunk than chunks sit from each other
    qs = centres[rng.integers(0, 60, queries)] + 0.8 * rng.standard_normal((queries, 64))
    return [f"c{i}" for i in range(n)], docs, qs


def test_ivf_calibrates_its_probe_count_and_reaches_the_exact_top_150() -> None:
    ids, docs, queries = _clustered(11, 20_000, 60)
    index = IVFIndex(ids, docs)
    cal = index.calibration
    assert cal["recall"] >= 0.99 and cal["nlist"] == 142 and 1 <= cal["nprobe"] < cal["nlist"]  # it prunes
    exact = VectorIndex(ids, docs).search_many(queries, 150)
    approx = index.search_many(queries, 150)
    assert recall(exact, approx) >= 0.97
    # the scores are the cosines of the float16 rows: within float16 rounding of the exact ones
    e = dict(exact[0])
    assert all(abs(s - e[i]) < 2e-3 for i, s in approx[0] if i in e)
    # a deeper request probes more clusters, so it is no less complete
    assert recall(VectorIndex(ids, docs).search_many(queries[:10], 300), index.search_many(queries[:10], 300)) >= 0.97


def test_ivf_saves_loads_mapped_grows_and_names_a_damaged_file(tmp_path) -> None:
    ids, docs, queries = _clustered(5, 3000, 20)
    index = IVFIndex(ids, docs, params=IVFParams(depth=50))
    before = index.search_many(queries, 50)
    index.save(tmp_path / "ivf")
    loaded = IVFIndex.load(tmp_path / "ivf")
    assert loaded.nprobe == index.nprobe and loaded.calibration == index.calibration
    assert loaded.search_many(queries, 50) == before
    assert type(load_dense_index(tmp_path / "ivf")) is IVFIndex
    loaded.add(["new"], docs[:1] * -1.0)  # a mapped, read-only index is copied into memory to grow
    assert loaded.search(-docs[0], k=1)[0][0] == "new"
    with pytest.raises(ValueError, match="already indexed"):
        loaded.add(["new"], docs[:1])
    reached = loaded.calibrate(queries)
    assert reached >= 0.99 and loaded.calibration["source"] == "caller's queries"
    (tmp_path / "ivf" / "ivf.faiss").write_bytes(b"not a faiss file")
    with pytest.raises(IndexFileError, match="ivf.faiss"):
        IVFIndex.load(tmp_path / "ivf")
    with pytest.raises(ValueError, match="target_recall"):
        IVFParams(target_recall=1.5)
    with pytest.raises(ValueError, match="one id per vector"):
        IVFIndex(["a"], docs[:2])


def test_ivf_builds_from_a_memory_mapped_file_a_block_at_a_time(tmp_path, monkeypatch) -> None:
    """Vectors on disk (`np.load(..., mmap_mode="r")`) are read through the file in blocks: the
    index, its probe count and its answers are those of the same vectors in memory, and a slice of
    the map (whose offset numpy does not move) is read as the slice it is."""
    import contextual_retrieval_core.dense.ivf as ivf

    ids, vectors, queries = _clustered(11, 3000, 20)
    np.save(tmp_path / "v.npy", vectors.astype(np.float32), allow_pickle=False)
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r")
    assert mapped_file(mapped) is not None and mapped_file(mapped[1000:]) is None
    monkeypatch.setattr(ivf, "_BLOCK_BYTES", 64 * 4 * 700)  # several blocks of each, the last one short
    params = IVFParams(depth=50)
    in_memory, on_disk = IVFIndex(ids, vectors, params=params), IVFIndex(ids, mapped, params=params)
    assert on_disk.nprobe == in_memory.nprobe and on_disk.calibration == in_memory.calibration
    assert on_disk.search_many(queries, 50) == in_memory.search_many(queries, 50)
    tail = IVFIndex(ids[1000:], mapped[1000:], params=params)
    assert tail.search_many(queries, 10) == IVFIndex(ids[1000:], vectors[1000:], params=params).search_many(queries, 10)
