"""Bad input and damaged saved indexes get a clear error naming the parameter or the file (issue 12):
non-finite vectors, damaged BM25 / vector index files, a string where a list is expected, counts
that are not positive integers, blank queries."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from contextual_retrieval_core import BM25Index, Chunk, ContextualChunk, HybridSearcher, VectorIndex
from contextual_retrieval_core.checks import IndexFileError
from contextual_retrieval_core.dense.chroma import ChromaVectorIndex
from contextual_retrieval_core.rerank import PassThroughReranker
from contextual_retrieval_core.search.bm25 import load_with_records, save_with_records
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.rank_fusion import reciprocal_rank_fusion, relative_score_fusion
from contextual_retrieval_core.search.ranked import fuse_sources, rerank_hits

CHUNKS = [
    ContextualChunk(Chunk("acme-rev", "acme", "Revenue grew 3% over the previous quarter."), "ACME's Q2 2023 filing."),
    ContextualChunk(Chunk("globex-rev", "globex", "Revenue grew 3% over the previous quarter."), "Globex's 2021 report."),
    ContextualChunk(Chunk("acme-staff", "acme", "Headcount rose to 1,200."), "ACME's Q2 2023 staffing section."),
]


class WordEmbedder:
    """A small real Embedder: bag of hashed words; a text containing "broken" embeds as NaN, one
    containing "infinite" as infinity (what a failing model or a bad cache can hand back)."""

    model_name = "words"

    def _embed(self, texts):
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, sum(map(ord, word)) % 16] += 1.0
            if "broken" in text:
                out[row, 3] = np.nan
            if "infinite" in text:
                out[row, 5] = np.inf
        return out

    def embed_documents(self, texts):
        return self._embed(list(texts))

    def embed_queries(self, texts):
        return self._embed(list(texts))

    async def aembed_documents(self, texts):
        return self._embed(list(texts))

    async def aembed_queries(self, texts):
        return self._embed(list(texts))


# -- NaN and infinity ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("make", [VectorIndex, ChromaVectorIndex], ids=["memory", "chroma"])
def test_non_finite_vectors_are_rejected_in_the_index_and_the_query(make, bad) -> None:
    vectors = np.eye(3, dtype=np.float32)
    broken = vectors.copy()
    broken[1, 2] = bad
    with pytest.raises(ValueError, match=r"vectors holds NaN or infinity \(first in row 1\).*re-embed"):
        make(["a", "b", "c"], broken)
    index = make(["a", "b", "c"], vectors)
    assert [i for i, _ in index.search(np.array([1.0, 0.0, 0.0]), k=1)] == ["a"]
    with pytest.raises(ValueError, match="query vectors holds NaN or infinity"):
        index.search(np.array([bad, 0.0, 0.0]), k=1)


@pytest.mark.parametrize("word", ["broken", "infinite"])
def test_the_hybrid_searcher_rejects_an_embedder_returning_non_finite_vectors(word) -> None:
    chunks = [*CHUNKS, ContextualChunk(Chunk("bad", "d", f"a {word} chunk"), "")]
    with pytest.raises(ValueError, match=r"vectors holds NaN or infinity \(first in row 3\)"):
        HybridSearcher(chunks, WordEmbedder())
    searcher = HybridSearcher(CHUNKS, WordEmbedder())
    assert searcher.search("revenue grew", top_k=2)
    with pytest.raises(ValueError, match="query vectors holds NaN or infinity"):
        searcher.search(f"revenue {word}")


# -- damaged BM25 index files ----------------------------------------------------------------------


def _saved_bm25(tmp_path: Path) -> Path:
    index = BM25Index().index([c.id for c in CHUNKS], [c.indexed_text for c in CHUNKS])
    return index.save(tmp_path / "bm25")


def _rewrite_json(key: str, change: Callable) -> Callable[[Path], str]:
    def damage(path: Path) -> str:
        meta = json.loads((path / "bm25.json").read_text())
        meta[key] = change(meta[key])
        (path / "bm25.json").write_text(json.dumps(meta))
        return "bm25.json"

    return damage


def _rewrite_array(name: str, change: Callable[[np.ndarray], np.ndarray]) -> Callable[[Path], str]:
    def damage(path: Path) -> str:
        np.save(path / f"{name}.npy", change(np.load(path / f"{name}.npy")), allow_pickle=False)
        return f"{name}.npy"

    return damage


def _truncate(name: str, keep: float) -> Callable[[Path], str]:
    def damage(path: Path) -> str:
        raw = (path / name).read_bytes()
        (path / name).write_bytes(raw[: int(len(raw) * keep)])
        return name

    return damage


def _delete(name: str) -> Callable[[Path], str]:
    def damage(path: Path) -> str:
        (path / name).unlink()
        return name

    return damage


def _set_nan(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a[0] = np.nan
    return a


def _out_of_range(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a[-1] = 99
    return a


BM25_DAMAGE = {
    "json truncated": (_truncate("bm25.json", 0.5), "not readable JSON"),
    "json emptied": (_truncate("bm25.json", 0.0), "not readable JSON"),
    "ids missing": (_rewrite_json("ids", lambda ids: ids[:-1]), "document number outside 0..1"),
    "ids not strings": (_rewrite_json("ids", lambda ids: [1, 2, 3]), "'ids' must be a list of strings"),
    "vocab one short": (_rewrite_json("vocab", lambda v: v[:-1]), "entries for"),
    "settings bad": (_rewrite_json("k1", lambda k1: -1), "bad settings"),
    "counts truncated": (_truncate("tf.npy", 0.6), "truncated or corrupted"),
    "counts empty file": (_truncate("tf.npy", 0.0), "truncated or corrupted"),
    "counts deleted": (_delete("tf.npy"), "missing"),
    "a count of 0": (_rewrite_array("tf", lambda a: np.zeros_like(a)), "term count of 0"),
    "counts 2-D": (_rewrite_array("tf", lambda a: a.reshape(1, -1)), "expected a 1-D integer array"),
    "counts shorter than indices": (_rewrite_array("tf", lambda a: a[:-1]), "entries where"),
    "idf non-finite": (_rewrite_array("idf", _set_nan), "NaN or infinite"),
    "norms one short": (_rewrite_array("norms", lambda a: a[:-1]), "entries where"),
    "term bounds above the idf": (_rewrite_array("term_max", lambda a: a + 100.0), "term bounds out of range"),
    "indices out of order": (_rewrite_array("indices", lambda a: a[::-1].copy()), "not in ascending order"),
    "indices out of range": (_rewrite_array("indices", _out_of_range), "document number outside"),
    "indices float": (_rewrite_array("indices", lambda a: a.astype(np.float64)), "expected a 1-D integer array"),
    "indptr unordered": (_rewrite_array("indptr", lambda a: a[::-1].copy()), "offsets are not ordered"),
}


@pytest.mark.parametrize("case", list(BM25_DAMAGE))
def test_a_damaged_bm25_index_fails_at_load_naming_the_file(tmp_path, case) -> None:
    path = _saved_bm25(tmp_path)
    damage, problem = BM25_DAMAGE[case]
    name = damage(path)
    with pytest.raises(IndexFileError, match=problem) as err:
        BM25Index.load(path)
    # the file at fault heads the message; a file inconsistent with another names that one too
    assert Path(err.value.path).parent == path and str(err.value).startswith(str(err.value.path))
    assert name in str(err.value) and "save it again" in str(err.value)


def test_an_undamaged_bm25_index_loads_and_searches_the_same(tmp_path) -> None:
    index = BM25Index().index([c.id for c in CHUNKS], [c.indexed_text for c in CHUNKS])
    loaded = BM25Index.load(index.save(tmp_path / "ok"))
    assert loaded.search("ACME headcount", k=3) == index.search("ACME headcount", k=3) != []


@pytest.mark.parametrize(
    "name, content, problem",
    [
        ("records.jsonl", '{"id": "a"}\n{"id": \n', "not readable"),
        ("records.jsonl", '{"id": "a"}\n[1, 2]\n{"id": "c"}\n', "line 2 is a list"),
        ("records.jsonl", '{"id": "a"}\n', "1 records for 3 indexed texts"),
        ("settings.json", "{not json", "not readable JSON"),
        ("settings.json", "[1, 2]", "not a JSON object"),
    ],
)
def test_a_damaged_retriever_folder_fails_at_load_naming_the_file(tmp_path, name, content, problem) -> None:
    index = BM25Index().index([c.id for c in CHUNKS], [c.indexed_text for c in CHUNKS])
    path = save_with_records(tmp_path / "r", index, [{"id": c.id} for c in CHUNKS], {"k": 5})
    assert load_with_records(path)[2] == {"k": 5}
    (path / name).write_text(content)
    with pytest.raises(IndexFileError, match=problem) as err:
        load_with_records(path)
    assert Path(err.value.path) == path / name


# -- damaged vector index files --------------------------------------------------------------------


VECTOR_DAMAGE = {
    "json truncated": ("vectors.json", lambda p: _truncate("vectors.json", 0.5)(p), "not readable JSON"),
    "ids wrong type": ("vectors.json", lambda p: (p / "vectors.json").write_text('{"ids": "abc"}'), "list of distinct strings"),
    "ids one short": ("vectors.npy", lambda p: (p / "vectors.json").write_text('{"ids": ["a", "b"]}'), "3 rows for 2 ids"),
    "matrix truncated": ("vectors.npy", lambda p: _truncate("vectors.npy", 0.7)(p), "truncated or corrupted"),
    "matrix deleted": ("vectors.npy", lambda p: _delete("vectors.npy")(p), "missing"),
    "matrix 1-D": ("vectors.npy", lambda p: np.save(p / "vectors.npy", np.ones(3, dtype=np.float32)), "2-D float array"),
    "matrix non-finite": ("vectors.npy", lambda p: np.save(p / "vectors.npy", np.full((3, 2), np.nan, dtype=np.float32)), "NaN or infinity"),
}


@pytest.mark.parametrize("case", list(VECTOR_DAMAGE))
def test_a_damaged_vector_index_fails_at_load_naming_the_file(tmp_path, case) -> None:
    path = VectorIndex(["a", "b", "c"], np.eye(3)).save(tmp_path / "v")
    assert VectorIndex.load(path).search(np.array([0.0, 1.0, 0.0]), k=1)[0][0] == "b"
    name, damage, problem = VECTOR_DAMAGE[case]
    damage(path)
    with pytest.raises(IndexFileError, match=problem) as err:
        VectorIndex.load(path)
    assert Path(err.value.path) == path / name


# -- a string where a list is expected -------------------------------------------------------------


STRING_FOR_A_LIST = {
    "search_many": (lambda: HybridSearcher(CHUNKS, None).search_many("diff"), "queries"),
    "bm25 ids": (lambda: BM25Index().index("abc", ["x", "y", "z"]), "ids"),
    "bm25 texts": (lambda: BM25Index().index(["a", "b", "c"], "xyz"), "texts"),
    "bm25 search_many": (lambda: BM25Index().index(["a"], ["x"]).search_many("diff"), "queries"),
    "rrf lists": (lambda: reciprocal_rank_fusion(["ab", "cd"]), r"ranked_lists\[0\]"),
    "rrf top": (lambda: reciprocal_rank_fusion("abc"), "ranked_lists"),
    "relative score": (lambda: relative_score_fusion(["ab"]), r"scored_lists\[0\]"),
    "vector ids": (lambda: VectorIndex("abc", np.eye(3)), "ids"),
    "weights": (lambda: FusionConfig(weights="05"), "weights"),
}


@pytest.mark.parametrize("case", list(STRING_FOR_A_LIST))
def test_a_string_where_a_list_is_expected_is_a_type_error_naming_the_parameter(case) -> None:
    call, name = STRING_FOR_A_LIST[case]
    with pytest.raises(TypeError, match=rf"^{name} must be a list of .*not a single str"):
        call()


# -- counts that are not positive integers ---------------------------------------------------------


HITS = fuse_sources([("x", [("a", 1.0), ("b", 0.5)], 1.0)])
COUNTS = {
    "FusionConfig depth": (lambda v: FusionConfig(depth=v), "depth"),
    "FusionConfig top_k": (lambda v: FusionConfig(top_k=v), "top_k"),
    "FusionConfig rerank_depth": (lambda v: FusionConfig(rerank_depth=v), "rerank_depth"),
    "HybridSearcher depth": (lambda v: HybridSearcher(CHUNKS, None, config=FusionConfig(depth=v)), "depth"),
    "HybridSearcher top_k": (lambda v: HybridSearcher(CHUNKS, None, config=FusionConfig(top_k=v)), "top_k"),
    "search top_k": (lambda v: HybridSearcher(CHUNKS, None).search("revenue", top_k=v), "top_k"),
    "bm25 k": (lambda v: BM25Index().index(["a"], ["x"]).search("x", k=v), "k"),
    "vector k": (lambda v: VectorIndex(["a"], np.ones((1, 2))).search(np.ones(2), k=v), "k"),
    "rrf depth": (lambda v: reciprocal_rank_fusion([["a"]], depth=v), "depth"),
    "rrf top_k": (lambda v: reciprocal_rank_fusion([["a"]], top_k=v), "top_k"),
    "rerank top_k": (lambda v: rerank_hits("q", HITS, str, PassThroughReranker(), top_k=v), "top_k"),
    "rerank top_n": (lambda v: PassThroughReranker().rerank("q", ["a"], top_n=v), "top_n"),
}


@pytest.mark.parametrize("bad, error", [(0, ValueError), (-3, ValueError), (2.5, TypeError), (True, TypeError), ("5", TypeError)])
@pytest.mark.parametrize("case", list(COUNTS))
def test_a_count_that_is_not_a_positive_int_is_rejected_up_front(case, bad, error) -> None:
    call, name = COUNTS[case]
    with pytest.raises(error, match=rf"^{name} must be a positive integer"):
        call(bad)


def test_depth_zero_is_rejected_when_the_searcher_is_built_not_at_query_time() -> None:
    with pytest.raises(ValueError, match="^depth must be a positive integer, got 0"):
        HybridSearcher(CHUNKS, None, config=FusionConfig(depth=0))
    assert [h.id for h in HybridSearcher(CHUNKS, None, config=FusionConfig(depth=1)).search("ACME headcount")] == ["acme-staff"]


# -- blank queries ---------------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", " ", "\n\t"])
def test_a_blank_query_returns_no_results_in_the_core(query) -> None:
    searcher = HybridSearcher(CHUNKS, WordEmbedder())
    assert searcher.search("revenue grew") != []
    assert searcher.search(query) == []
    assert searcher.search_many([query, "revenue grew"])[0] == []
    assert BM25Index().index(["a"], ["x"]).search(query) == []
