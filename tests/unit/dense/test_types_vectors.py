from __future__ import annotations

import numpy as np
import pytest

from contextual_retrieval_core import Chunk, ContextualChunk, Document, VectorIndex, compose_indexed_text


def test_indexed_text_positions():
    chunk = Chunk("c1", "d1", "Revenue grew 3%.", 0)
    assert ContextualChunk(chunk, "ACME Q2 2023.").indexed_text == "ACME Q2 2023.\n\nRevenue grew 3%."
    assert ContextualChunk(chunk, "ACME Q2 2023.", position="after").indexed_text == "Revenue grew 3%.\n\nACME Q2 2023."
    assert ContextualChunk(chunk, "ACME Q2 2023.", position="none").indexed_text == "Revenue grew 3%."
    assert ContextualChunk(chunk, "", position="before").indexed_text == "Revenue grew 3%."
    assert ContextualChunk(chunk, "ctx", separator=" | ").indexed_text == "ctx | Revenue grew 3%."
    cc = ContextualChunk(chunk, "ctx")
    assert (cc.id, cc.document_id, cc.text, cc.context) == ("c1", "d1", "Revenue grew 3%.", "ctx")
    with pytest.raises(ValueError, match="position"):
        compose_indexed_text("c", "t", "middle")  # type: ignore[arg-type]


def test_bad_document_and_chunk_input():
    with pytest.raises(TypeError, match="decode"):
        Document("d", b"\x89PNG")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        Chunk("", "d", "text")
    with pytest.raises(TypeError, match="must be str"):
        Chunk("c", "d", 42)  # type: ignore[arg-type]


def test_vector_index_exact_search_and_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(50, 8)).astype(np.float32)
    ids = [f"v{i}" for i in range(50)]
    index = VectorIndex(ids, vecs)
    q = vecs[7] + 0.01
    hits = index.search(q, k=5)
    assert hits[0][0] == "v7"
    sims = (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)) @ (q / np.linalg.norm(q))
    assert [h for h, _ in hits] == [ids[i] for i in np.argsort(-sims)[:5]]
    assert len(index.search(q, k=500)) == 50
    index.save(tmp_path)
    again = VectorIndex.load(tmp_path)
    assert again.search(q, k=5) == hits
    with pytest.raises(ValueError, match="embed queries with the embedder"):
        index.search(np.ones(3), k=1)
    with pytest.raises(ValueError, match="one id per vector"):
        VectorIndex(["a"], vecs[:2])
    with pytest.raises(ValueError, match="duplicate"):
        VectorIndex(["a", "a"], vecs[:2])
    with pytest.raises(ValueError, match="positive"):
        index.search(q, k=0)
