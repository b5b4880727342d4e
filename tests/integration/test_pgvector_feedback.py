"""Dense feedback over PostgreSQL with pgvector reads the stored vectors back from the server and
never embeds a stored chunk again at query time (issue 42: a fresh process spent 930 ms / 733 ms a
query re-embedding the fused top chunks), through each framework's own store: LangChain's
`PGVector` (one SELECT by id; its search selects what the ensemble reads, ranking as the store's
own search does) and LlamaIndex's `PGVectorStore` (one SELECT on its table; window rows by the
node id their row id starts with). The top 10 is the core `HybridSearcher`'s with feedback, sync and
async. A real throwaway cluster on loopback (tests/servers.py), the demo corpus."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("langchain_postgres")
pytest.importorskip("llama_index.vector_stores.postgres")

from contextual_retrieval_core import ContextualChunk, HybridSearcher  # noqa: E402
from contextual_retrieval_core.app._demo import demo_chunks  # noqa: E402
from contextual_retrieval_core.app.demo_corpus import DEMO_QUERIES  # noqa: E402
from contextual_retrieval_core.search.config import FusionConfig  # noqa: E402
from tests.pgvector_stores import langchain_pgvector, llamaindex_pgvector  # noqa: E402

pytestmark = pytest.mark.timeout(300)
K = 10
QUERIES = [q.query for q in DEMO_QUERIES] + ["fork server child process", "battery life of the Widget Pro",
                                             "revenue grew by 3% over the previous quarter"]


class Counting:
    """A core embedder that counts the texts it embeds as documents (stored chunks)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.documents = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed_documents(self, texts: list[str]) -> Any:
        self.documents += len(texts)
        return self.inner.embed_documents(texts)


@pytest.fixture(scope="module")
def corpus(core_embedder):
    _, chunks = demo_chunks()
    contextual = [ContextualChunk(c, f"From {c.document_id}.") for c in chunks]
    core = {beta: HybridSearcher(contextual, core_embedder, config=FusionConfig(top_k=K, dense_prf=beta), windows=False)
            for beta in (0.5, 0)}
    expected = {q: [h.id for h in core[0.5].search(q)] for q in QUERIES}
    moved = sum(expected[q] != [h.id for h in core[0].search(q)] for q in QUERIES)
    assert moved >= 2, "feedback moves no ranking here: the test could not tell it ran"
    return contextual, expected


@pytest.fixture(scope="module")
def counting(core_embedder):
    return Counting(core_embedder)


@pytest.fixture(scope="module")
def langchain_retriever(pgvector_server, counting, corpus):
    """One collection for the module: `PGVector` keys rows by id across its collections."""
    return langchain_pgvector(pgvector_server, corpus[0], counting, collection="feedback", k=K)


@pytest.mark.parametrize("framework", ["langchain", "llamaindex"])
async def test_feedback_reads_the_vectors_from_pgvector_and_embeds_no_chunk_at_query_time(
    request, pgvector_server, counting, corpus, framework
) -> None:
    contextual, expected = corpus
    embedder = counting
    if framework == "langchain":
        before = embedder.documents
        retriever = request.getfixturevalue("langchain_retriever")
        assert embedder.documents - before in (0, len(contextual))  # built here, or by an earlier test

        def ids(found):
            return [d.metadata["chunk_id"] for d in found]

        ask, aask = retriever.invoke, retriever.ainvoke
    else:
        before = embedder.documents
        retriever = llamaindex_pgvector(pgvector_server, contextual, embedder, table="feedback", k=K)
        assert embedder.documents - before == len(contextual)

        def ids(found):
            return [r.node.node_id for r in found]

        ask, aask = retriever.retrieve, retriever.aretrieve
    assert retriever.dense_prf == 0.5
    built = embedder.documents
    for query in QUERIES:
        assert ids(ask(query)) == expected[query], query
        assert ids(await aask(query)) == expected[query], query
    assert embedder.documents == built  # every top chunk's vector came from the server


def test_langchain_search_by_vector_is_the_stores_own(langchain_retriever, core_embedder, corpus) -> None:
    """The lean search (id, text, metadata, distance) returns what `PGVector`'s own search returns."""
    from contextual_retrieval_langchain._pgvector import distances_by_vector, stored_vectors

    contextual, _ = corpus
    store = langchain_retriever.retrievers[0].vectorstore
    for query in QUERIES[:4]:
        vector = core_embedder.embed_queries([query])[0].tolist()
        own = store.similarity_search_with_score_by_vector(vector, k=150)
        lean = distances_by_vector(store, vector, k=150)
        assert len(own) == min(150, len(contextual))
        assert [(d.id, d.page_content, d.metadata) for d, _ in lean] == [(d.id, d.page_content, d.metadata) for d, _ in own]
        assert np.allclose([s for _, s in lean], [s for _, s in own])
    held = stored_vectors(store, [contextual[0].id, "not-stored"])
    assert list(held) == [contextual[0].id]
    assert np.allclose(held[contextual[0].id], core_embedder.embed_documents([contextual[0].indexed_text])[0], atol=1e-6)


def dense_after_feedback(retriever: Any, query: str, run_async: bool = False) -> Any:
    """{node id: similarity} of a `HybridRetriever`'s dense list after feedback (the flow's own)."""
    from llama_index.core.schema import QueryBundle

    from contextual_retrieval_core.search.flow import QueryFlow
    from contextual_retrieval_llamaindex._sources import bound_sources

    flow = QueryFlow(retriever.config, bound_sources(retriever.retrievers, retriever._feedback, QueryBundle(query)))

    def dense(results: Any) -> dict[str, float]:
        return {node_id: round(score, 5) for node_id, score in results[0].lists[0]}

    if run_async:
        async def run() -> dict[str, float]:
            return dense(await flow.arun([query], rerank=False))
        return run()
    return dense(flow.run([query], rerank=False))


async def test_llamaindex_windowed_feedback_on_pgvector_is_the_in_memory_stores(pgvector_server, core_embedder) -> None:
    """Windowed nodes: the rows read back from PGVectorStore (own row and window rows, in window
    order) are SimpleVectorStore's, vector for vector, and the retriever's answers (its second
    search selecting row ids and distances, `pgvector.search_again`) are the same, sync and async."""
    from urllib.parse import urlsplit

    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores.simple import SimpleVectorStore
    from llama_index.vector_stores.postgres import PGVectorStore

    from contextual_retrieval_core.dense.windows import WindowConfig
    from contextual_retrieval_llamaindex import CoreEmbedding, HybridRetriever
    from contextual_retrieval_llamaindex._pgvector import lean_search
    from tests.pgvector_stores import sqlalchemy_url

    _, chunks = demo_chunks()
    nodes = [TextNode(id_=c.id, text=c.text) for c in chunks]
    sides, retrievers = [], []
    for store in (SimpleVectorStore(), PGVectorStore.from_params(
            connection_string=sqlalchemy_url(pgvector_server, "psycopg"), async_connection_string=sqlalchemy_url(pgvector_server, "asyncpg"),
            database=urlsplit(pgvector_server).path.lstrip("/"), table_name="windows", embed_dim=384)):
        index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store),
                                 embed_model=CoreEmbedding(core_embedder))
        retriever = HybridRetriever.from_defaults(index, nodes=nodes, similarity_top_k=K, windows=WindowConfig(size=32))
        sides.append(retriever._feedback["dense"])
        retrievers.append(retriever)
    assert sides[0].retriever.extra > 0  # some nodes have windows
    assert lean_search(sides[0].retriever) is None and lean_search(sides[1].retriever) is not None
    for query in QUERIES:  # the dense list after feedback: the same nodes at the same scores (ties in any order)
        expected = dense_after_feedback(retrievers[0], query)
        assert dense_after_feedback(retrievers[1], query) == expected, query
        assert await dense_after_feedback(retrievers[1], query, run_async=True) == expected, query
    top = [n.node_id for n in nodes]
    memory, server = sides[0].rows(top), sides[1].rows(top)
    assert server.rows_of_chunk == memory.rows_of_chunk and max(map(len, server.rows_of_chunk.values())) > 1
    assert np.allclose(server.vectors, memory.vectors, atol=1e-6)


def test_llamaindex_second_search_makes_the_nodes_it_has_not_seen_as_the_store_does(pgvector_server, core_embedder, corpus) -> None:
    """`search_again` selects ids and distances, then reads the rows of the nodes not at hand:
    with none at hand, every node is made from its row, and the answer is the store's own search
    by that vector, node for node (id, text, metadata) and score for score; with every node at
    hand, the same ids and scores, the nodes the ones given."""
    from llama_index.core.schema import QueryBundle

    from contextual_retrieval_llamaindex._pgvector import lean_search

    retriever = llamaindex_pgvector(pgvector_server, corpus[0], core_embedder, table="lean_unseen", k=K)
    dense = retriever.retrievers["dense"]
    lean = lean_search(dense)
    assert lean is not None and not lean.windowed
    for query in QUERIES[:4]:
        vector = core_embedder.embed_queries([query])[0].tolist()
        own = dense.retrieve(QueryBundle(query, embedding=vector))
        made = lean.search_again(vector, {})
        assert [(r.node.node_id, r.node.get_content(), r.node.metadata) for r in made] == [
            (r.node.node_id, r.node.get_content(), r.node.metadata) for r in own]
        assert np.allclose([r.score for r in made], [r.score for r in own], atol=1e-6)
        at_hand = {r.node.node_id: r.node for r in own}
        again = lean.search_again(vector, at_hand)
        assert [r.node.node_id for r in again] == [r.node.node_id for r in own]
        assert all(r.node is at_hand[r.node.node_id] for r in again)
