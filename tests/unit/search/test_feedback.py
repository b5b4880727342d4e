"""Dense pseudo-relevance feedback: `HybridSearcher(dense_prf=beta)` against a hand computation, its
default and its switches."""

from __future__ import annotations

import numpy as np
import pytest

from contextual_retrieval_core import Chunk, ContextualChunk
from contextual_retrieval_core.dense.vectors import VectorIndex
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_core.search.hybrid import HybridSearcher

TEXTS = {
    "k1": "The signing key rotates every Tuesday at noon.",
    "k2": "Key rotation is scheduled by the ops calendar; rotations happen weekly.",
    "k3": "Rotating credentials: the vault issues a new key each week.",
    "s1": "Stir the soup slowly and add a pinch of salt.",
    "s2": "The soup needs more salt and pepper.",
    "n1": "Invoices are due at the end of the month.",
}


class Bag:
    """A tiny deterministic embedder: word counts over a fixed vocabulary, L2-normalised."""

    model_name, normalized = "bag", True
    vocab = sorted({w.strip(".;:,").lower() for t in TEXTS.values() for w in t.split()} | {"when", "does", "rotate"})

    def _vec(self, texts):
        out = np.zeros((len(texts), len(self.vocab)), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.split():
                w = w.strip(".;:,?").lower()
                if w in self.vocab:
                    out[i, self.vocab.index(w)] += 1
        return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-12, None)

    embed_documents = embed_queries = _vec


def chunks():
    return [ContextualChunk(Chunk(cid, "d", text), "") for cid, text in TEXTS.items()]


def test_prf_moves_the_query_toward_the_fused_top_chunks_and_searches_again():
    emb = Bag()
    plain = HybridSearcher(chunks(), emb)
    prf = HybridSearcher(chunks(), emb, config=FusionConfig(dense_prf=0.5, prf_top=2))
    assert prf._feedback_rows.vectors is prf.vectors.vectors  # the index's rows, not a second copy
    query = "when does the key rotate"
    first = plain.search(query, top_k=6)
    top2 = [h.id for h in first[:2]]
    # by hand: q' = unit(q + 0.5 * mean(v(top 1), v(top 2))) (q is unit); dense ranking by cosine with q'
    q = emb.embed_queries([query])[0]
    moved = q + 0.5 * np.mean(emb.embed_documents([TEXTS[c] for c in top2]), axis=0)
    moved /= np.linalg.norm(moved)
    expected_dense = [cid for cid, _ in VectorIndex(list(TEXTS), emb.embed_documents(list(TEXTS.values()))).search(moved, k=6)]
    hits = prf.search(query, top_k=6)
    dense_rank = {h.id: h.ranks["dense"] for h in hits}
    assert sorted(dense_rank, key=lambda c: dense_rank[c]) == expected_dense
    # the BM25 side is untouched by the feedback: each chunk keeps its BM25 rank
    assert {h.id: h.ranks["bm25"] for h in hits} == {h.id: h.ranks["bm25"] for h in first}
    # the feedback changed the dense side: k2, fed back from the fused top 2, moves up (3 -> 2)
    plain_dense = {h.id: h.ranks["dense"] for h in first}
    assert top2 == ["k1", "k2"] and dense_rank["k2"] < plain_dense["k2"]


def test_prf_is_on_by_default_for_hybrid_only_checked_and_leaves_blank_queries_empty():
    emb = Bag()
    default = HybridSearcher(chunks(), emb)
    assert default.dense_prf == 0.5 and default.prf_top == 3 and default._feedback_rows is not None
    query = "when does the key rotate"
    on = [(h.id, h.ranks) for h in HybridSearcher(chunks(), emb, config=FusionConfig(dense_prf=0.5)).search(query)]
    assert [(h.id, h.ranks) for h in default.search(query)] == on
    off = HybridSearcher(chunks(), emb, config=FusionConfig(dense_prf=0, prf_top=2))
    top2 = [(h.id, h.ranks) for h in HybridSearcher(chunks(), emb, config=FusionConfig(prf_top=2)).search(query)]
    assert off._feedback_rows is None and [(h.id, h.ranks) for h in off.search(query)] != top2
    # fed back from the dense ranking alone it lowered the no-context dense row: never run dense-only
    assert HybridSearcher(chunks(), emb, use_bm25=False)._feedback_rows is None
    assert default.search_many(["", "soup salt"])[0] == []
    for bad, error in ((-1, ValueError), (11, ValueError), (True, TypeError), ("0.5", TypeError)):
        with pytest.raises(error, match="dense_prf must be"):
            HybridSearcher(chunks(), emb, config=FusionConfig(dense_prf=bad))
    with pytest.raises(ValueError, match="prf_top"):
        HybridSearcher(chunks(), emb, config=FusionConfig(prf_top=0))


def test_the_moved_query_is_unit_length_whatever_the_querys_length():
    from contextual_retrieval_core.search.feedback import feedback_rows

    rows = feedback_rows(["a", "b"], np.array([[2.0, 0.0], [0.0, 3.0]]), {})
    q = np.array([[3.0, 4.0]])  # length 5: normalised before it is moved, so beta weighs the same
    expected = np.array([0.6, 0.8]) + 0.5 * np.array([0.0, 1.0])
    out = rows.moved(q, [["b"]], 0.5)[0]
    assert np.allclose(out, expected / np.linalg.norm(expected)) and np.isclose(np.linalg.norm(out), 1.0)
    assert rows.moved(q, [["not-held"]], 0.5).tolist() == q.tolist()  # nothing to feed back: unchanged


def test_stored_rows_of_chunks_a_collection_lacks_feed_nothing_back():
    import uuid

    from contextual_retrieval_core.dense._window_rows import WINDOW_OF_KEY
    from contextual_retrieval_core.dense.chroma import chroma_client
    from contextual_retrieval_core.dense.windows import WINDOW_MARK
    from contextual_retrieval_core.search.feedback import stored_feedback_rows

    collection = chroma_client(None).create_collection(f"prf-{uuid.uuid4().hex}")
    collection.add(ids=["a", "b", f"b{WINDOW_MARK}1"], embeddings=[[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]],
                   metadatas=[{"x": 1}, {"x": 1}, {WINDOW_OF_KEY: "b"}])
    none = stored_feedback_rows(collection, ["x", "y"])  # another store's ids: no rows, no error
    assert none.rows_of_chunk == {} and none.moved_query([1.0, 0.0], ["x"], 0.5).tolist() == [1.0, 0.0]
    some = stored_feedback_rows(collection, ["x", "b"])
    assert {c: len(r) for c, r in some.rows_of_chunk.items()} == {"b": 2}  # its own row and its window


def test_a_store_read_feeds_back_the_held_rows_only():
    """A chunk the store gives no vector back for feeds nothing back: nothing is embedded again."""
    from contextual_retrieval_core.search.feedback import StoreRead

    read = StoreRead(["a", "b", "c"], {"a": ["a", "a~1"], "b": ["b"], "c": ["c"]}, {"a": [1.0, 0.0], "a~1": [0.0, 2.0]})
    rows = read.rows()
    assert {c: len(r) for c, r in rows.rows_of_chunk.items()} == {"a": 2}  # b and c: nothing held
    assert np.allclose(rows.vectors, [[1.0, 0.0], [0.0, 1.0]])  # normalised, in read order
    assert rows.feeds(["c", "a"]) and not rows.feeds(["b", "c"])
    assert StoreRead(["b"], {"b": ["b"]}, {}).rows().feeds(["b"]) is False


def test_a_read_of_rows_keyed_by_row_id_groups_windows_under_their_chunk_in_window_order():
    from contextual_retrieval_core.dense._window_rows import row_id
    from contextual_retrieval_core.search.feedback import StoreRead

    held = {row_id("a", 2): [0.0, 1.0], "b": [1.0, 1.0], row_id("a", 1): [1.0, 0.0], "a": [1.0, 1.0], "z": [5.0, 5.0]}
    read = StoreRead.of_rows(["a", "b", "c"], held)
    assert read.rows_of == {"a": ["a", row_id("a", 1), row_id("a", 2)], "b": ["b"], "c": []}  # "z": not asked for
    assert {c: len(r) for c, r in read.rows().rows_of_chunk.items()} == {"a": 3, "b": 1}