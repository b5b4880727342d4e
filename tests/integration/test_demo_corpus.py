"""The real offline model over the demo corpus: a `ContextualIndex` with and without windows ranks
as the core `HybridSearcher` does on the same chunks (feedback on and off), and pruning with its
defaults keeps the sentence that answers each demo question."""

from __future__ import annotations

import json

import pytest

from contextual_retrieval_core import Chunk, ContextualChunk
from contextual_retrieval_core.app._demo import demo_chunks
from contextual_retrieval_core.app.demo_corpus import DEMO_QUERIES
from contextual_retrieval_core.dense.windows import WindowConfig
from contextual_retrieval_core.index.contextual_index import ContextualIndex
from contextual_retrieval_core.pruning import ContextPruner
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.hybrid import HybridSearcher
from tests.integration.test_index_windows import rows


@pytest.fixture(scope="module")
def embedder(offline_embedder):
    return offline_embedder


def demo_index(tmp_path, windows, embedder):
    """The demo corpus in a `ContextualIndex` (MiniLM, 400-character chunks), and its chunks as the
    index stored them (for a `HybridSearcher` over the same chunks)."""
    from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS

    folder = tmp_path / "corpus"
    for path, text in DEMO_DOCUMENTS:
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text, encoding="utf-8")
    index = ContextualIndex(tmp_path / "ix", embedder=embedder, chunk_chars=400, windows=windows)
    index.update([folder], show_progress=False)
    return index, stored_chunks(index), embedder


def stored_chunks(index: ContextualIndex) -> list[ContextualChunk]:
    """The index's chunks in manifest order, as its version's chunk table holds them."""
    import sqlite3
    from contextlib import closing

    from contextual_retrieval_core.index._snapshot import CHUNKS_FILE

    with closing(sqlite3.connect(index.path / index.manifest.bm25 / CHUNKS_FILE)) as db:
        metas = {cid: json.loads(meta) for cid, meta in db.execute("SELECT id, metadata FROM chunks")}
    return [ContextualChunk(Chunk(cid, metas[cid]["path"], metas[cid]["text"], metas[cid]["chunk_index"]), metas[cid]["context"])
            for cid in index.manifest.chunk_ids()]


def test_same_top_20_as_the_core_searcher_on_the_same_chunks(tmp_path, offline_embedder):
    """Parity: the index's Chroma window rows and `HybridSearcher(windows=...)` rank alike."""
    from contextual_retrieval_core.app.demo_corpus import DEMO_QUERIES

    windows = WindowConfig(size=48, overlap=8)
    index, chunks, embedder = demo_index(tmp_path, windows, offline_embedder)
    searcher = HybridSearcher(chunks, embedder, windows=windows, config=FusionConfig(weights=index.weights))
    assert searcher._extra_rows > 0 and len(rows(index)) == len(chunks) + searcher._extra_rows
    for query in [q.query for q in DEMO_QUERIES]:
        assert [h.id for h in index.search(query, top_k=20)] == [h.id for h in searcher.search(query, top_k=20)]


@pytest.mark.parametrize("windows", [None, WindowConfig(size=48, overlap=8)])
def test_dense_prf_ranks_as_the_core_searcher_does(tmp_path, windows, capsys, offline_embedder):
    """Parity with feedback (the default): the index reads the fused top 3 chunks' rows (windows
    included) from Chroma and searches again, as `HybridSearcher` does in memory; off, both agree
    again."""
    from contextual_retrieval_core.app.cli import main
    from contextual_retrieval_core.app.demo_corpus import DEMO_QUERIES

    index, chunks, embedder = demo_index(tmp_path, windows, offline_embedder)
    searcher = HybridSearcher(chunks, embedder, windows=windows, config=FusionConfig(weights=index.weights))
    plain = HybridSearcher(chunks, embedder, windows=windows, config=FusionConfig(weights=index.weights, dense_prf=0))
    assert searcher.dense_prf == 0.5
    changed = 0
    for query in [q.query for q in DEMO_QUERIES]:
        ours = [h.id for h in index.search(query, top_k=20)]
        assert ours == [h.id for h in searcher.search(query, top_k=20)], query
        off = [h.id for h in index.search(query, top_k=20, config=FusionConfig(dense_prf=0))]
        assert off == [h.id for h in plain.search(query, top_k=20)], query
        changed += ours != off
    assert changed  # the feedback moved some ranking: the parity is not the plain search's
    query = DEMO_QUERIES[0].query
    capsys.readouterr()
    assert main(["query", str(tmp_path / "ix"), query, "--json", "-k", "20"]) == 0
    assert [h["id"] for h in json.loads(capsys.readouterr().out)] == [h.id for h in searcher.search(query, top_k=20)]
    assert main(["query", str(tmp_path / "ix"), query, "--no-dense-prf", "--json", "-k", "20"]) == 0
    assert [h["id"] for h in json.loads(capsys.readouterr().out)] == [h.id for h in plain.search(query, top_k=20)]


def test_defaults_keep_the_demo_answers(embedder):
    """The defaults on the demo corpus: each query's answering text survives pruning of the
    default contextual-hybrid top 10 (offline structural contexts, MiniLM + BM25)."""
    from contextual_retrieval_core.generators.structural import StructuralContextGenerator

    documents, chunks = demo_chunks()
    docs = {d.id: d for d in documents}
    generator = StructuralContextGenerator()
    contextual = [ContextualChunk(c, generator.generate(docs[c.document_id], c).context) for c in chunks]
    searcher = HybridSearcher(contextual, embedder)
    pruner = ContextPruner(embedder)
    reductions, checked = [], 0
    for q in DEMO_QUERIES:
        hits = searcher.search(q.query, top_k=10)
        result = pruner.prune(q.query, [h.chunk for h in hits])
        if any(q.path == h.chunk.document_id and q.marker in h.chunk.text for h in hits):
            assert q.marker in result.text, q.query
            checked += 1
        reductions.append(result.report.reduction)
    assert checked >= 4
    assert min(reductions) > 0.4
