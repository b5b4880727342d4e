from __future__ import annotations

import json

import pytest

from contextual_retrieval_core.app.evaluation import (
    DATASET_ENV,
    evaluate,
    load_contexts_jsonl,
    load_cookbook,
    mrr,
    pass_at_k,
    recall_at_k,
)
from tests.notes_corpus import CountingEmbedder


def test_pass_at_k_is_the_cookbooks_mean_of_fractions():
    ranked = [["a", "x", "b"], ["y", "z", "c"]]
    golden = [["a", "b"], ["c"]]
    # query 1: top-2 has 1 of 2 golden; query 2: top-2 has 0 of 1
    assert pass_at_k(ranked, golden, 2) == pytest.approx((0.5 + 0.0) / 2)
    assert pass_at_k(ranked, golden, 3) == pytest.approx(1.0)
    # recall pools golden chunks across queries: 1 of 3 found in the top 2
    assert recall_at_k(ranked, golden, 2) == pytest.approx(1 / 3)
    assert mrr(ranked, golden) == pytest.approx((1 / 1 + 1 / 3) / 2)
    assert mrr([["q"]], [["a"]]) == 0.0


def test_metric_bad_input():
    with pytest.raises(ValueError, match="rankings for"):
        pass_at_k([["a"]], [["a"], ["b"]], 1)
    with pytest.raises(ValueError, match="no golden"):
        pass_at_k([["a"]], [[]], 1)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        pass_at_k([["a"]], [["a"]], 0)
    with pytest.raises(ValueError, match="no queries"):
        recall_at_k([], [], 5)


def test_dataset_from_environment_and_errors(tiny_dataset, monkeypatch, tmp_path):
    monkeypatch.setenv(DATASET_ENV, str(tiny_dataset))
    assert len(load_cookbook().queries) == 4
    monkeypatch.delenv(DATASET_ENV)
    with pytest.raises(ValueError, match=DATASET_ENV):
        load_cookbook()
    with pytest.raises(FileNotFoundError, match="codebase_chunks.json"):
        load_cookbook(tmp_path / "nowhere")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"doc_id": "doc_a", "context": "no index"}) + "\n")
    with pytest.raises(ValueError, match="original_index"):
        load_contexts_jsonl(bad, load_cookbook(tiny_dataset))


def test_evaluate_tiny_dataset_contexts_help(tiny_dataset, offline_embedder):
    ds = load_cookbook(tiny_dataset)
    contexts = load_contexts_jsonl(tiny_dataset / "contexts.jsonl", ds)
    results = {r.name: r for r in evaluate(ds, offline_embedder, contexts)}
    assert list(results) == ["dense", "bm25", "hybrid", "structural-dense", "structural-bm25", "structural-hybrid",
                             "contextual-dense", "contextual-bm25", "contextual-hybrid"]
    assert results["contextual-hybrid"].pass_at[5] == 100.0
    # the ACME question can only be answered through the context
    assert results["contextual-bm25"].mrr > results["bm25"].mrr
    with pytest.raises(ValueError, match="needs contexts"):
        evaluate(ds, offline_embedder, None, ["contextual-bm25"])
    with pytest.raises(ValueError, match="unknown configurations"):
        evaluate(ds, offline_embedder, None, ["magic"])
    with pytest.raises(ValueError, match="have no context"):
        evaluate(ds, offline_embedder, {"doc_a_chunk_0": "x"}, ["contextual-bm25"])


def test_evaluate_embeds_each_distinct_text_once_per_run(tiny_dataset):
    """Nine configurations, three text sets (plain, structural, Claude contexts) and one query set:
    the embedder sees each distinct text exactly once."""
    from contextual_retrieval_core.app.evaluation import headed_contexts, structural_contexts
    from contextual_retrieval_core.types import ContextualChunk

    ds = load_cookbook(tiny_dataset)
    contexts = load_contexts_jsonl(tiny_dataset / "contexts.jsonl", ds)
    embedder = CountingEmbedder()
    results = evaluate(ds, embedder, contexts)
    assert len(results) == 9
    structural = structural_contexts(ds)
    headed = headed_contexts(ds, contexts)  # the default: structural header, then the LLM context
    assert all(headed[c.id] == f"{structural[c.id]}\n{contexts[c.id]}" for c in ds.chunks)
    distinct = {c.text for c in ds.chunks}
    distinct |= {ContextualChunk(c, structural[c.id]).indexed_text for c in ds.chunks}
    distinct |= {ContextualChunk(c, headed[c.id]).indexed_text for c in ds.chunks}
    assert len(embedder.documents) == len(set(embedder.documents)) == len(distinct)
    assert set(embedder.documents) == distinct
    assert sorted(embedder.queries) == sorted({q.query for q in ds.queries})


def test_structural_configurations_use_the_offline_contexts(tiny_dataset):
    from contextual_retrieval_core.app.evaluation import structural_contexts

    ds = load_cookbook(tiny_dataset)
    structural = structural_contexts(ds)
    assert set(structural) == {c.id for c in ds.chunks} and all(structural.values())
    names = [r.name for r in evaluate(ds, CountingEmbedder(), None)]
    assert names == ["dense", "bm25", "hybrid", "structural-dense", "structural-bm25", "structural-hybrid"]
