"""`contextual-retrieval eval --embedder late-chunking` on a tiny cookbook-format dataset: the CLI
drives the core's `evaluate` with `LateChunkingEmbedder`, each grouped embedding call made once."""

from __future__ import annotations

import json

import numpy as np

from contextual_retrieval_core.app.cli import main
from contextual_retrieval_core.app.evaluation import evaluate, load_contexts_jsonl, load_cookbook
from contextual_retrieval_core.embeddings.late_chunking import LateChunkingEmbedder

CONFIGS = ["dense", "hybrid", "contextual-dense", "contextual-hybrid"]


class CountingLate(LateChunkingEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.grouped_calls: list[int] = []

    def embed_grouped(self, texts, groups):
        self.grouped_calls.append(len(texts))
        return super().embed_grouped(texts, groups)


def test_eval_late_chunking_scores_what_the_core_scores(tiny_dataset, tmp_path, capsys):
    out = tmp_path / "late.json"
    code = main(["eval", "--dataset", str(tiny_dataset), "--contexts", str(tiny_dataset / "contexts.jsonl"),
                 "--embedder", "late-chunking", "--configs", ",".join(CONFIGS), "--embedding-cache", "none",
                 "--no-progress", "--json", str(out)])
    assert code == 0
    payload = json.loads(out.read_text())
    assert payload["embedder"] == "all-MiniLM-L6-v2-onnx-int8+late-chunking-w512-o128"
    dataset = load_cookbook(tiny_dataset)
    contexts = load_contexts_jsonl(tiny_dataset / "contexts.jsonl", dataset)
    late = CountingLate()
    core = evaluate(dataset, late, contexts, CONFIGS)
    assert [c["pass_at"] for c in payload["configs"]] == [r.to_json()["pass_at"] for r in core]
    # dense and hybrid index the same texts, as do the two contextual rows: two grouped calls
    assert late.grouped_calls == [len(dataset.chunks)] * 2


def test_eval_late_chunking_indexes_late_chunked_vectors(tiny_dataset):
    """The dense side holds the late-chunked vectors, not each chunk embedded alone."""
    from contextual_retrieval_core.search.hybrid import HybridSearcher
    from contextual_retrieval_core.types import ContextualChunk

    dataset = load_cookbook(tiny_dataset)
    late = LateChunkingEmbedder()
    chunks = [ContextualChunk(c, "") for c in dataset.chunks]
    searcher = HybridSearcher(chunks, late, use_bm25=False, show_progress=False)
    query = dataset.queries[0].query
    hits = searcher.search(query, top_k=len(chunks))
    expected = late.embed_grouped([c.text for c in dataset.chunks], [c.document_id for c in dataset.chunks])
    scores = expected @ late.embed_queries([query])[0]
    by_id = {c.id: s for c, s in zip(dataset.chunks, scores)}
    assert [h.id for h in hits] == sorted(by_id, key=lambda i: -by_id[i])
    alone = late.embed_documents([c.text for c in dataset.chunks])
    assert not np.allclose(alone, expected, atol=1e-3)
