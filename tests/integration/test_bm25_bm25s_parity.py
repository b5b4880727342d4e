"""`BM25Index` scores in numpy alone; before 0.2 it handed its weights to bm25s for scoring. The
scores are bit-identical to bm25s's on the same term-major weights, checked on the cookbook's 248
queries (bm25s comes with the `bench` extra, through llama-index-retrievers-bm25)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from contextual_retrieval_core.search.bm25 import BM25Index

bm25s = pytest.importorskip("bm25s")


def bm25s_scores(index: BM25Index, term_ids: list[int]) -> np.ndarray:
    """What 0.1 computed: a bm25s engine holding the index's own weights (as `_compat` set it)."""
    engine = bm25s.BM25(method="robertson", dtype="float64", int_dtype="int64", backend="numpy")
    postings = index._engine
    data = np.concatenate([postings.weights(t) for t in range(len(postings.indptr) - 1)])  # each posting's weight
    engine.scores = {"data": data, "indices": postings.indices.astype(np.int64), "indptr": postings.indptr,
                     "num_docs": postings.n_docs}
    engine.vocab_dict = index.vocab
    engine.nonoccurrence_array = None
    return engine.get_scores_from_ids(term_ids)


def test_summing_the_postings_in_numpy_equals_bm25s_summing_them_bit_for_bit(cookbook_dir):
    """The weights are the index's own (as in 0.1); what changed is who sums them per query."""
    documents = json.loads((cookbook_dir / "codebase_chunks.json").read_text(encoding="utf-8"))
    ids = [f"{d['doc_id']}_{c['original_index']}" for d in documents for c in d["chunks"]]
    texts = [c["content"] for d in documents for c in d["chunks"]]
    index = BM25Index().index(ids, texts)
    queries = [json.loads(line)["query"] for line in (cookbook_dir / "evaluation_set.jsonl").read_text().splitlines() if line]
    queries += ["cache cache cache", "the of and"]  # a repeated term, stop words only
    assert len(queries) == 250
    for query in queries:
        term_ids = [index.vocab[t] for t in index.tokenizer.tokenize(query) if t in index.vocab]
        assert np.array_equal(index.get_scores(query), bm25s_scores(index, term_ids)), query
