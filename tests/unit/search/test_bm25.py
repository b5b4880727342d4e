from __future__ import annotations

import json
import random

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from contextual_retrieval_core.chunking.tokenizer import Tokenizer
from contextual_retrieval_core.search.bm25 import BM25Index


def _zipf_corpus(n_docs: int, seed: int = 0) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    vocab = np.array([f"t{i}" for i in range(400)])
    docs = []
    for _ in range(n_docs):
        length = int(rng.integers(1, 60))
        ranks = np.minimum(rng.zipf(1.3, size=length), len(vocab)) - 1
        docs.append(list(vocab[ranks]))
    return docs


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_robertson_equals_rank_bm25(seed):
    docs = _zipf_corpus(300, seed)
    ids = [f"d{i}" for i in range(len(docs))]
    ours = BM25Index(method="robertson", k1=1.5, b=0.75).index_tokens(ids, docs)
    oracle = BM25Okapi(docs, k1=1.5, b=0.75)
    # the corpus has terms in more than half the documents: rank_bm25's epsilon idf floor matters
    assert any(sum(t in set(d) for d in docs) > len(docs) / 2 for t in ("t0", "t1"))
    rng = random.Random(seed)
    for _ in range(20):
        query = [f"t{rng.randrange(60)}" for _ in range(rng.randint(1, 8))]
        expected = oracle.get_scores(query) / (1.5 + 1)
        got = ours.get_scores(query)
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
        hits = ours.search(query, k=50)
        # the oracle's ranking, with float noise at 1e-9 treated as a tie broken by position
        order = sorted((i for i in range(len(docs)) if expected[i] > 0), key=lambda i: (-round(expected[i], 9), i))
        top = order[:50]
        assert [s for _, s in hits] == pytest.approx([expected[i] for i in top], abs=1e-6)
        cut = round(expected[top[-1]], 9)  # a tie group may straddle the cut: compare above it
        above = [ids[i] for i in top if round(expected[i], 9) > cut]
        assert [h for h, _ in hits][: len(above)] == above


def test_lucene_idf_is_never_negative():
    docs = [["common", "x"], ["common"], ["common", "rare"]]
    index = BM25Index(tokenizer=Tokenizer(stemmer=None, stopwords=None)).index_tokens(["a", "b", "c"], docs)
    hits = dict(index.search(["common"], k=3))
    assert set(hits) == {"a", "b", "c"} and all(s > 0 for s in hits.values())


def test_top_k_never_pads_with_zero_scores_and_k_above_corpus():
    index = BM25Index().index(["a", "b", "c"], ["apple pie", "banana bread", "cherry tart"])
    assert index.search("apple", k=10) == [("a", pytest.approx(index.search("apple", 1)[0][1]))]
    everything = index.search("apple banana cherry", k=100)
    assert sorted(h for h, _ in everything) == ["a", "b", "c"]


def test_code_identifier_query_finds_its_chunk():
    index = BM25Index().index(
        ["exec", "other"],
        ["pub struct DiffExecutor<A, B> { primary: A, secondary: B }", "fn parse_config(path: &str)"],
    )
    assert index.search("What does the diff executor do?", k=1)[0][0] == "exec"
    assert index.search("DiffExecutor", k=1)[0][0] == "exec"
    assert index.search("parse config", k=1)[0][0] == "other"


def test_chinese_query_finds_chinese_chunk():
    index = BM25Index().index(
        ["zh1", "zh2", "en"],
        ["信息检索是从大量文档中找到相关信息的过程", "向量数据库存储嵌入向量", "Information retrieval in English"],
    )
    assert index.search("什么是信息检索", k=1)[0][0] == "zh1"
    assert index.search("向量数据库", k=1)[0][0] == "zh2"


def test_save_load_round_trip_keeps_tokenizer_settings(tmp_path):
    texts = ["DiffExecutor runs targets", "running the parser", "信息检索"]
    tok = Tokenizer(stemmer=None, split_identifiers=False)
    index = BM25Index(tok, k1=0.9, b=0.4).index(["a", "b", "c"], texts)
    index.save(tmp_path / "idx")
    loaded = BM25Index.load(tmp_path / "idx")
    assert loaded.tokenizer.config == tok.config
    assert (loaded.k1, loaded.b, loaded.method) == (0.9, 0.4, "lucene")
    for q in ["DiffExecutor", "diff executor", "running", "run", "检索"]:
        assert loaded.search(q, k=3) == index.search(q, k=3)
    # without identifier splitting "diff executor" must not match "DiffExecutor" after reload either
    assert loaded.search("diff executor", k=3) == []


def test_saved_index_has_no_pickle(tmp_path):
    BM25Index().index(["a"], ["hello world"]).save(tmp_path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["bm25.json", "idf.npy", "indices.npy", "indptr.npy", "norms.npy", "term_max.npy", "tf.npy"]
    json.loads((tmp_path / "bm25.json").read_text())
    for name in names[1:]:
        np.load(tmp_path / name, allow_pickle=False)


def test_load_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a saved BM25Index"):
        BM25Index.load(tmp_path)
    (tmp_path / "bm25.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="not a BM25 index"):
        BM25Index.load(tmp_path)


def test_bad_input():
    with pytest.raises(ValueError, match="empty corpus"):
        BM25Index().index([], [])
    with pytest.raises(ValueError, match="duplicate id 'a'"):
        BM25Index().index(["a", "b", "a"], ["x", "y", "z"])
    with pytest.raises(ValueError, match="one id per text"):
        BM25Index().index(["a"], ["x", "y"])
    with pytest.raises(TypeError, match="decode"):
        BM25Index().index(["a"], [b"\xff\xfe"])
    index = BM25Index().index(["a"], ["hello world"])
    assert index.search("", k=5) == []
    assert index.search("   ", k=5) == []
    assert index.search("zzzunknownterm", k=5) == []
    assert index.search("the of and", k=5) == []  # only stop words
    for bad_k, error in ((0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError), ("3", TypeError)):
        with pytest.raises(error, match="k must be a positive integer"):
            index.search("hello", k=bad_k)
    with pytest.raises(RuntimeError, match="call index"):
        BM25Index().search("hello")


def test_ties_are_broken_by_index_order():
    index = BM25Index().index(["z", "y", "x"], ["identical text", "identical text", "identical text"])
    assert [h for h, _ in index.search("identical", k=3)] == ["z", "y", "x"]


def test_save_with_records_round_trip_and_mismatch(tmp_path):
    from contextual_retrieval_core.search.bm25 import load_with_records, save_with_records

    index = BM25Index().index(["a", "b"], ["revenue grew", "plants opened"])
    save_with_records(tmp_path / "r", index, [{"id": "a"}, {"id": "b"}], {"k": 7})
    loaded, records, settings = load_with_records(tmp_path / "r")
    assert loaded.search("revenue") == index.search("revenue") and records == [{"id": "a"}, {"id": "b"}]
    assert settings == {"k": 7} and not list((tmp_path / "r").glob("*.pkl"))
    save_with_records(tmp_path / "bad", index, [{"id": "a"}])
    with pytest.raises(ValueError, match="save the retriever again"):
        load_with_records(tmp_path / "bad")


def test_postings_sum_the_query_terms_rows_each_time_a_term_is_asked():
    from contextual_retrieval_core.search.bm25 import Postings

    rng = np.random.default_rng(3)
    weights = rng.random((6, 9)) * (rng.random((6, 9)) < 0.4)  # 6 terms x 9 documents, sparse
    rows = [np.flatnonzero(r) for r in weights]
    postings = Postings(np.concatenate([weights[t, cols] for t, cols in enumerate(rows)]),
                        np.concatenate(rows).astype(np.int64), np.cumsum([0] + [len(c) for c in rows]), 9)
    for terms in ([0], [1, 2], [5, 0, 3], [2, 2], []):
        assert np.allclose(postings.scores(terms), weights[terms].sum(axis=0) if terms else 0.0)
    assert postings.scores([]).shape == (9,)




def test_ties_at_the_cut_go_by_indexing_order() -> None:
    """Many texts share the k-th score: the ones indexed first are returned (argpartition alone
    picked any of them)."""
    rng = np.random.default_rng(4)
    docs = [["common", f"u{i}"] for i in range(300)] + [["common", "rare"]]
    index = BM25Index().index_tokens([f"d{i}" for i in range(len(docs))], docs)
    for k in (1, 10, 150):
        hits = index.search(["common", "rare"], k)
        assert [h for h, _ in hits] == ["d300"] + [f"d{i}" for i in range(k - 1)]
    shuffled = [docs[i] for i in rng.permutation(len(docs))]
    index = BM25Index().index_tokens([f"s{i}" for i in range(len(docs))], shuffled)
    scores = index.get_scores(["common"])
    assert [h for h, _ in index.search(["common"], 20)] == [f"s{i}" for i in np.lexsort((np.arange(len(docs)), -scores))[:20]]


def _heavy_tail_corpus(n_docs: int, seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    probs = 1.0 / np.arange(1, 401) ** 1.1
    probs /= probs.sum()
    return [[f"w{t}" for t in rng.choice(400, size=int(rng.integers(0, 40)), p=probs)] for _ in range(n_docs)]


def _sorted_top(index: BM25Index, terms: list[str], k: int, allowed=None) -> list[tuple[str, float]]:
    """The top k from every document's summed score: what search returned before pruning."""
    scores = index.get_scores(terms)
    if allowed is not None:
        scores = np.where(allowed, scores, 0.0)
    positive = np.flatnonzero(scores > 0)
    order = positive[np.lexsort((positive, -scores[positive]))][:k]
    return [(index.ids[i], float(scores[i])) for i in order]


@pytest.mark.parametrize("method", ["lucene", "robertson"])
def test_pruned_top_k_is_the_summed_top_k_bit_for_bit(tmp_path, method) -> None:
    """MaxScore skips the common terms' postings where it can prove the answer: ids, order and
    scores stay exactly those of summing every posting, for rare, common and repeated terms, every
    k, with and without a filter, built and loaded; and it does prune most of these queries."""
    docs = _heavy_tail_corpus(3000, 5)
    index = BM25Index(method=method).index_tokens([f"d{i}" for i in range(len(docs))], docs)
    loaded = BM25Index.load(index.save(tmp_path / "i"))
    rng = np.random.default_rng(6)
    probs = 1.0 / np.arange(1, 401) ** 1.1
    queries = [[f"w{t}" for t in rng.choice(400, size=int(rng.integers(1, 11)), p=probs / probs.sum())] for _ in range(120)]
    queries += [["w0", "w0", "w399"], ["w1", "w2"], ["w0"], ["w399", "w398", "w0", "w1", "w2", "w3"], ["nowhere"]]
    mask = rng.random(len(docs)) < 0.3
    pruned = 0
    engine = index._engine
    for terms in queries:
        term_ids = [index.vocab[t] for t in terms if t in index.vocab]
        for k in (1, 5, 20, 150, 5000):
            for allowed in (None, mask):
                want = _sorted_top(index, terms, k, allowed)
                assert index.search(terms, k, allowed=allowed) == want, (terms, k)
                assert loaded.search(terms, k, allowed=allowed) == want, (terms, k)
                pruned += engine.top(term_ids, k, allowed) is not None
    if method == "lucene":
        assert pruned > len(queries)  # the bound does hold for many of these queries
    assert np.array_equal(loaded._engine.term_max, engine.term_max)


_ARRAYS = ("indices", "indptr", "tf", "idf", "norms", "term_max")


def test_blocks_build_the_same_index_as_one_call() -> None:
    """A corpus streamed in blocks of texts (a generator) gives the same postings, weight for
    weight, as indexing it at once; ids repeated across blocks are refused."""
    docs = _heavy_tail_corpus(500, 7)
    texts = [" ".join(d) for d in docs]
    ids = [f"d{i}" for i in range(len(docs))]
    whole = BM25Index().index(ids, texts)
    streamed = BM25Index().index_blocks((ids[i : i + 37], texts[i : i + 37]) for i in range(0, len(ids), 37))
    for name in _ARRAYS:
        assert np.array_equal(getattr(whole._engine, name), getattr(streamed._engine, name))
    assert streamed.ids == ids and streamed.vocab == whole.vocab
    with pytest.raises(ValueError, match="duplicate id 'd3'"):
        BM25Index().index_blocks([(ids[:5], texts[:5]), (["d3"], ["again"])])


def test_postings_out_of_order_on_disk_are_refused(tmp_path) -> None:
    """Pruned search looks documents up by bisection, so a saved term whose document numbers are
    not ascending is a damaged file, named as such."""
    from contextual_retrieval_core.checks import IndexFileError

    index = BM25Index().index(["a", "b", "c"], ["apple pear", "apple", "apple plum"])
    path = index.save(tmp_path / "i")
    indices = np.load(path / "indices.npy")
    term = index.vocab[index.tokenizer.tokenize("apple")[0]]
    lo = int(index._engine.indptr[term])
    indices[lo], indices[lo + 1] = indices[lo + 1], indices[lo]
    np.save(path / "indices.npy", indices, allow_pickle=False)
    with pytest.raises(IndexFileError, match="not in ascending order"):
        BM25Index.load(path)


def test_a_build_past_the_heap_limit_spills_to_a_temporary_file_and_gives_the_same_index(monkeypatch, tmp_path) -> None:
    """Past `_SPILL_BYTES` the build's triples wait in an unnamed file in TMPDIR: the postings are
    the same, weight for weight, and no file is left behind; a TMPDIR that cannot be written is an
    error naming it and the fix."""
    import tempfile

    import contextual_retrieval_core.search.bm25 as bm25

    docs = _heavy_tail_corpus(900, 8)
    ids = [f"d{i}" for i in range(len(docs))]
    held = BM25Index().index_token_blocks((ids[i : i + 50], docs[i : i + 50]) for i in range(0, len(ids), 50))
    monkeypatch.setattr(bm25, "_SPILL_BYTES", 4096)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    spilled = BM25Index().index_token_blocks((ids[i : i + 50], docs[i : i + 50]) for i in range(0, len(ids), 50))
    for name in _ARRAYS:
        assert np.array_equal(getattr(held._engine, name), getattr(spilled._engine, name))
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "missing"))
    with pytest.raises(OSError, match="point TMPDIR at a disk with room"):
        BM25Index().index_token_blocks((ids[i : i + 50], docs[i : i + 50]) for i in range(0, len(ids), 50))


def test_a_version_1_folder_with_stored_weights_loads_and_answers_to_the_same_bits(tmp_path) -> None:
    """Folders written before the counts format (format_version 1: each posting's float64 weight
    in data.npy) load, search and save as they were; their weights are the ones version 2
    computes from the counts, bit for bit."""
    import json

    docs = _heavy_tail_corpus(800, 9)
    index = BM25Index().index_tokens([f"d{i}" for i in range(len(docs))], docs)
    engine = index._engine
    folder = index.save(tmp_path / "v2")
    assert {p.name for p in folder.glob("*.npy")} == {f"{n}.npy" for n in _ARRAYS}
    old = tmp_path / "v1"
    old.mkdir()
    meta = json.loads((folder / "bm25.json").read_text(encoding="utf-8"))
    meta["format_version"] = 1
    (old / "bm25.json").write_text(json.dumps(meta), encoding="utf-8")
    weights = np.concatenate([engine.weights(t) for t in range(len(engine.indptr) - 1)])
    for name, array in (("data", weights), ("indices", engine.indices), ("indptr", engine.indptr)):
        np.save(old / f"{name}.npy", array, allow_pickle=False)
    v1, v2 = BM25Index.load(old), BM25Index.load(folder)
    assert v1._engine.data is not None and v2._engine.data is None
    assert np.array_equal(v1._engine.term_max, engine.term_max)
    for terms in (["w0", "w5"], ["w1", "w300", "w2", "w2"], ["w399"]):
        assert v1.search(terms, 40) == v2.search(terms, 40) == index.search(terms, 40)
        assert np.array_equal(v1.get_scores(terms), v2.get_scores(terms))
    v1.save(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "bm25.json").read_text(encoding="utf-8"))["format_version"] == 1


def test_pruning_over_postings_with_an_empty_term_row() -> None:
    """Postings built by hand (or read from a version 1 folder) may hold a term without postings:
    the pruned top k still equals sorting the summed scores."""
    from contextual_retrieval_core.search.bm25 import Postings

    rng = np.random.default_rng(12)
    n_docs = 400
    rows = [np.sort(rng.choice(n_docs, size=s, replace=False)) for s in (3, 0, 40, 300, 390)]  # term 1 is empty
    weights = [rng.random(len(r)) * w for r, w in zip(rows, (5.0, 1.0, 3.0, 0.2, 0.05))]
    postings = Postings(np.concatenate(weights), np.concatenate(rows).astype(np.int32), np.cumsum([0] + [len(r) for r in rows]), n_docs)
    proved = 0
    for terms in ([0, 1, 2, 3, 4], [1, 3, 4], [2, 1, 4, 4]):
        scores = postings.scores(terms)
        positive = np.flatnonzero(scores > 0)
        for k in (1, 10, 50):
            want = positive[np.lexsort((positive, -scores[positive]))][:k]
            got = postings.top(terms, k)
            if got is not None:
                proved += 1
                assert got[0].tolist() == want.tolist() and got[1].tolist() == scores[want].tolist()
    assert proved >= 3
