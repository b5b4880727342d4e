"""PostgreSQL with pgvector as the dense side, through each framework's own store (LangChain's
`PGVector`, LlamaIndex's `PGVectorStore`), composed with our BM25 by the hybrid retrievers: on the
cookbook set (737 chunks with Claude's contexts, 248 queries), exact search on the server, the
same top-20 ids as the core's embedded `HybridSearcher` (in-memory exact vectors) for every query
whose exact dense top 150 has no two chunks within `TIE` (1e-6) of each other. Where it has
(chunks whose texts embed to the same vector, or scores that differ in the 7th digit: 102 of the
248 queries, 70 of them with exactly equal scores; 5 reach a different fused top 20 on LangChain,
1 on LlamaIndex, all among these), PostgreSQL's float
arithmetic and its order among equal distances differ from numpy's and the embedded index's
chunk order, so there the test checks that the server's dense list is the exact one up to the
order among scores within `TIE`. A real throwaway cluster on
loopback (tests/servers.py), the offline model's vectors cached for the session."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("langchain_postgres")
pytest.importorskip("llama_index.vector_stores.postgres")

from contextual_retrieval_core import ContextualChunk, HybridSearcher  # noqa: E402
from contextual_retrieval_core.app.evaluation import load_contexts_jsonl, load_cookbook  # noqa: E402
from contextual_retrieval_core.search.config import FusionConfig  # noqa: E402
from tests.pgvector_stores import langchain_pgvector, llamaindex_pgvector  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
K = 20
#: scores closer than this are a tie: the server's float arithmetic orders them its own way
TIE = 1e-6


@pytest.fixture(scope="module")
def cookbook(cookbook_dir, cookbook_embedder):
    dataset = load_cookbook(cookbook_dir)
    contexts = load_contexts_jsonl(cookbook_dir / "contexts_claude-3-haiku.jsonl", dataset)
    chunks = [ContextualChunk(c, contexts.get(c.id, "")) for c in dataset.chunks]
    assert sum(bool(c.context) for c in chunks) == len(chunks) == 737
    queries = [q.query for q in dataset.queries]
    # the frameworks' own stores hold one row per chunk (windows are asked for with windows=True):
    # the core with one vector per chunk is their reference
    core = HybridSearcher(chunks, cookbook_embedder, config=FusionConfig(top_k=K), windows=False)
    expected = [[h.id for h in core.search(q)] for q in queries]
    assert all(len(ids) == K for ids in expected)
    vectors = cookbook_embedder.embed_documents([c.indexed_text for c in chunks])
    scores = vectors @ cookbook_embedder.embed_queries(queries).T  # (chunks, queries), exact cosine
    depth = core.config.depth
    tied = {}
    for q, query in enumerate(queries):
        top = np.argsort(-scores[:, q], kind="stable")[:depth]
        if np.min(-np.diff(scores[top, q])) < TIE:
            tied[query] = [chunks[i].id for i in top]
    assert tied, "no query with tied dense scores: the tie check below checks nothing"
    score_of = {(c.id, query): float(scores[i, q]) for q, query in enumerate(queries) if query in tied
                for i, c in enumerate(chunks)}
    return chunks, queries, expected, tied, score_of


def check(got: list[list[str]], expected: list[list[str]], queries: list[str], tied: dict, score_of: dict, dense) -> None:
    """Identical top 20 for every query without tied dense scores; for the others, the server's
    dense list is the exact one once equal scores are put in chunk order."""
    differ = [q for q, g, e in zip(queries, got, expected) if g != e]
    assert not [q for q in differ if q not in tied], "top-20 ids differ from the embedded path"
    for query, exact in tied.items():
        server = dense(query)
        # at every rank the server's chunk has the exact score of that rank: the same list, ties in any order
        got_scores = [score_of[cid, query] for cid in server]
        assert np.allclose(got_scores, [score_of[cid, query] for cid in exact], rtol=0, atol=TIE), query


def test_langchain_pgvector_gives_the_embedded_top_20_on_the_cookbook(pgvector_server, cookbook, cookbook_embedder):
    chunks, queries, expected, tied, score_of = cookbook
    retriever = langchain_pgvector(pgvector_server, chunks, cookbook_embedder, collection="cookbook-parity")
    store = retriever.retrievers[0].vectorstore
    assert type(store).__name__ == "PGVector"
    got = [[d.metadata["chunk_id"] for d in retriever.invoke(q)] for q in queries]
    check(got, expected, queries, tied, score_of,
          lambda q: [d.metadata["chunk_id"] for d in store.similarity_search(q, k=len(tied[q]))])
    # the vectors are on the server: a plain SQL count sees every chunk in the collection's rows
    import psycopg

    with psycopg.connect(pgvector_server) as conn:
        (rows,) = conn.execute("SELECT count(*) FROM langchain_pg_embedding e JOIN langchain_pg_collection c "
                               "ON e.collection_id = c.uuid WHERE c.name = 'cookbook-parity'").fetchone()
    assert rows == len(chunks)


def test_llamaindex_pgvector_gives_the_embedded_top_20_on_the_cookbook(pgvector_server, cookbook, cookbook_embedder):
    chunks, queries, expected, tied, score_of = cookbook
    retriever = llamaindex_pgvector(pgvector_server, chunks, cookbook_embedder, table="cookbook_parity")
    got = [[r.node.node_id for r in retriever.retrieve(q)] for q in queries]
    dense = retriever.retrievers["dense"]  # the PGVectorStore's retriever, at the fusion depth (150)
    check(got, expected, queries, tied, score_of, lambda q: [r.node.node_id for r in dense.retrieve(q)])
    import psycopg

    with psycopg.connect(pgvector_server) as conn:
        (rows,) = conn.execute("SELECT count(*) FROM data_cookbook_parity").fetchone()
        # no ANN index on the table: every search is the exact scan
        indexes = [r[0] for r in conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'data_cookbook_parity'")]
    assert rows == len(chunks)
    assert not any("hnsw" in i or "ivfflat" in i for i in indexes), indexes
