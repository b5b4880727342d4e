"""Metadata filters across the hybrid, on real Chroma and real BM25, in both frameworks: the vector
store filters its own search, BM25 searches under the same predicate as a mask (never a top-k cut
filtered afterwards), so a filtered query returns only matching chunks, and `top_k` of them when
enough match."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from contextual_retrieval_langchain import ContextualBM25Retriever as LCBM25
from contextual_retrieval_langchain import ContextualEnsembleRetriever, chroma_from_documents
from contextual_retrieval_langchain.bm25 import metadata_predicate
from contextual_retrieval_llamaindex import ContextualBM25Retriever as LIBM25
from contextual_retrieval_llamaindex import HybridRetriever, LocalMiniLMEmbedding, chroma_vector_store

#: 10 "ops" chunks that match the query strongly, 4 "web" chunks that match it weakly
OPS = [f"Deploy pipeline rollback {i}: the deploy pipeline rolls back the rollback of deploy {i}." for i in range(10)]
WEB = [f"Web page {i} notes the deploy of the {topic} page." for i, topic in enumerate(["pricing", "careers", "blog", "docs"])]
TEXTS = [(f"ops-{i}", t, {"team": "ops", "year": 2020 + i % 5}) for i, t in enumerate(OPS)] + [
    (f"web-{i}", t, {"team": "web", "year": 2021 + i}) for i, t in enumerate(WEB)
]
WEB_IDS = {cid for cid, _, meta in TEXTS if meta["team"] == "web"}
#: every web chunk holds a term of each query but the last (which BM25 finds in no web chunk)
QUERIES = ["deploy pipeline rollback", "web page deploy", "careers page", "rollback 3"]


@pytest.fixture(scope="module")
def lc_docs() -> list[LCDocument]:
    return [LCDocument(text, id=cid, metadata={**meta, "chunk_id": cid}) for cid, text, meta in TEXTS]


@pytest.fixture(scope="module")
def chroma(lc_docs, lc_embeddings):
    return chroma_from_documents(lc_docs, lc_embeddings)


@pytest.fixture(scope="module")
def li_nodes() -> list[TextNode]:
    # the metadata kept out of the indexed text, so both frameworks embed and index the same text
    return [TextNode(text=text, id_=cid, metadata=meta, excluded_embed_metadata_keys=list(meta), excluded_llm_metadata_keys=list(meta))
            for cid, text, meta in TEXTS]


@pytest.fixture(scope="module")
def li_index(li_nodes) -> VectorStoreIndex:
    storage = StorageContext.from_defaults(vector_store=chroma_vector_store())
    return VectorStoreIndex(li_nodes, storage_context=storage, embed_model=LocalMiniLMEmbedding())


# -- LangChain ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    [
        {"team": "web"},
        {"team": {"$ne": "web"}},
        {"year": {"$gte": 2023}},
        {"$and": [{"team": "ops"}, {"year": {"$lt": 2022}}]},
        {"$or": [{"team": "web"}, {"year": {"$in": [2020, 2024]}}]},
        {"year": {"$nin": [2021, 2022]}},
    ],
)
def test_the_bm25_predicate_selects_what_chroma_selects(chroma, lc_docs, where) -> None:
    keep = metadata_predicate(where)
    assert {d.id for d in lc_docs if keep(d)} == set(chroma.get(where=where)["ids"])


def test_bad_filters_fail_naming_the_operator(lc_docs, chroma) -> None:
    with pytest.raises(ValueError, match=r"unknown operator '\$like'"):
        LCBM25.from_documents(lc_docs, filter={"team": {"$like": "w%"}})
    with pytest.raises(ValueError, match=r"\$gt on 'team' compares numbers"):
        ContextualEnsembleRetriever(retrievers=[chroma.as_retriever()], filter={"team": {"$gt": "a"}})
    with pytest.raises(TypeError, match="where dict"):
        metadata_predicate(["team", "web"])


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_langchain_filtered_query_stays_inside_the_filter_and_fills_top_k(chroma, lc_docs, run) -> None:
    bm25 = LCBM25.from_documents(lc_docs)
    ensemble = ContextualEnsembleRetriever(retrievers=[chroma.as_retriever(), bm25], depth=4, k=4, filter={"team": "web"})

    async def ask(query: str, **kw) -> list[LCDocument]:
        return ensemble.invoke(query, **kw) if run == "sync" else await ensemble.ainvoke(query, **kw)

    for query in QUERIES:
        got = await ask(query)
        assert {d.id for d in got} == WEB_IDS  # exactly the 4 matching chunks, nothing outside
        # each side searched under the filter: both found every matching chunk within depth 4
        if query != "rollback 3":
            assert all(d.metadata["ranks"]["dense"] is not None and d.metadata["ranks"]["bm25"] is not None for d in got)
    unfiltered = ContextualEnsembleRetriever(retrievers=[chroma.as_retriever(), bm25], depth=4, k=4).invoke("deploy pipeline rollback")
    assert {d.id for d in unfiltered} <= {f"ops-{i}" for i in range(10)}  # the filter is what kept ops out
    per_call = await ask("deploy pipeline rollback", filter={"$and": [{"team": "ops"}, {"year": 2020}]})
    assert {d.id for d in per_call} == {"ops-0", "ops-5"}


def test_langchain_bm25_searches_under_the_mask(lc_docs) -> None:
    bm25 = LCBM25.from_documents(lc_docs, k=3, filter={"team": "web"})
    got = bm25.invoke("deploy pipeline rollback")
    assert len(got) == 3 and {d.id for d in got} <= WEB_IDS  # the top 3 matching, not the top 3 cut then filtered
    assert {d.id for d in bm25.invoke("deploy pipeline rollback", filter={"team": "ops"})} <= {f"ops-{i}" for i in range(10)}
    assert LCBM25.from_documents(lc_docs, k=3).invoke("deploy pipeline rollback")[0].id.startswith("ops")


def test_langchain_filter_with_a_predicate_store_and_a_plain_source(lc_docs, lc_embeddings, tmp_path) -> None:
    """InMemoryVectorStore takes a predicate on the Document; BM25 takes the same predicate; a source
    that takes no filter has its Documents filtered by the ensemble."""
    from langchain_core.runnables import RunnableLambda

    store = InMemoryVectorStore(lc_embeddings)
    store.add_documents(lc_docs, ids=[d.id for d in lc_docs])
    plain = RunnableLambda(lambda q: lc_docs[:6] + lc_docs[-2:], name="plain")

    def web(doc: LCDocument) -> bool:
        return doc.metadata["team"] == "web"

    ensemble = ContextualEnsembleRetriever(retrievers=[store.as_retriever(), LCBM25.from_documents(lc_docs), plain], depth=4, k=10, filter=web)
    got = ensemble.invoke("deploy pipeline rollback")
    assert {d.id for d in got} == WEB_IDS
    assert {d.id for d in got if d.metadata["ranks"]["plain"] is not None} == {"web-2", "web-3"}
    with pytest.raises(ValueError, match="callable"):
        LCBM25.from_documents(lc_docs, filter=web).save(tmp_path / "bm25")
    LCBM25.from_documents(lc_docs, k=2, filter={"team": "web"}).save(tmp_path / "bm25")
    reopened = LCBM25.load(tmp_path / "bm25")
    assert reopened.filter == {"team": "web"} and {d.id for d in reopened.invoke("deploy")} <= WEB_IDS


# -- LlamaIndex -------------------------------------------------------------------------------------


WEB_FILTER = MetadataFilters(filters=[MetadataFilter(key="team", value="web")])


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_llamaindex_filtered_query_stays_inside_the_filter_and_fills_top_k(li_index, li_nodes, run) -> None:
    hybrid = HybridRetriever.from_defaults(li_index, nodes=li_nodes, filters=WEB_FILTER, depth=4, similarity_top_k=4)
    assert hybrid.retrievers["bm25"].filters == WEB_FILTER
    for query in QUERIES:
        got = hybrid.retrieve(query) if run == "sync" else await hybrid.aretrieve(query)
        assert {r.node.node_id for r in got} == WEB_IDS
        if query != "rollback 3":
            assert all(r.node.metadata["ranks"]["dense"] is not None and r.node.metadata["ranks"]["bm25"] is not None for r in got)
    newer = MetadataFilters(filters=[MetadataFilter(key="year", value=2023, operator=FilterOperator.GTE)])
    wide = HybridRetriever.from_defaults(li_index, nodes=li_nodes, filters=newer, depth=20, similarity_top_k=20)
    expected = {cid for cid, _, meta in TEXTS if meta["year"] >= 2023}
    assert {r.node.node_id for r in wide.retrieve("deploy pipeline rollback")} == expected


def test_llamaindex_filters_need_a_matching_bm25(li_index, li_nodes) -> None:
    with pytest.raises(ValueError, match="does not hold them"):
        HybridRetriever.from_defaults(li_index, bm25=LIBM25(li_nodes), filters=WEB_FILTER)
    with pytest.raises(TypeError, match="MetadataFilters"):
        HybridRetriever.from_defaults(li_index, nodes=li_nodes, filters={"team": "web"})
    given = HybridRetriever.from_defaults(li_index, bm25=LIBM25(li_nodes, filters=WEB_FILTER), filters=WEB_FILTER, depth=4, similarity_top_k=4)
    assert {r.node.node_id for r in given.retrieve("deploy pipeline rollback")} == WEB_IDS


def test_frameworks_agree_under_a_filter(chroma, lc_docs, li_index, li_nodes) -> None:
    lc = ContextualEnsembleRetriever(retrievers=[chroma.as_retriever(), LCBM25.from_documents(lc_docs)], depth=6, k=6,
                                     filter={"year": {"$gte": 2022}})
    newer = MetadataFilters(filters=[MetadataFilter(key="year", value=2022, operator=FilterOperator.GTE)])
    li = HybridRetriever.from_defaults(li_index, nodes=li_nodes, filters=newer, depth=6, similarity_top_k=6)
    for query in QUERIES:
        assert [d.id for d in lc.invoke(query)] == [r.node.node_id for r in li.retrieve(query)]
