"""ContextualEnsembleRetriever keeps LangChain's runnable contract, side by side with LangChain's own
`EnsembleRetriever`: the caller's tags, metadata and configurable values reach every source and the
callback handler, a source's configured result count is honoured, `config_specs` lists the
sources' fields; relevance scores come through the store's public path and never invert a store's
own order."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest
from langchain_classic.retrievers import EnsembleRetriever
from langchain_core.callbacks import BaseCallbackHandler, CallbackManagerForRetrieverRun
from langchain_core.documents import Document as LCDocument
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import ConfigurableField, RunnableConfig, RunnableLambda
from langchain_core.vectorstores import InMemoryVectorStore
from pydantic import ValidationError

from contextual_retrieval_langchain import ContextualBM25Retriever, ContextualEnsembleRetriever

DOCS = [
    LCDocument(f"Note {i}: the deploy pipeline {'rolls back' if i % 2 else 'retries'} step {i} of the release.", id=f"n{i}", metadata={"i": i})
    for i in range(14)
]
CONFIG: RunnableConfig = {"tags": ["T"], "metadata": {"m": 1}, "configurable": {"bm25_k": 2, "mood": "calm"}}


class Events(BaseCallbackHandler):
    """Every retriever and chain run the handler sees: (event, name, tags, metadata, parent?)."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str, list[str], dict[str, Any], bool]] = []

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID, parent_run_id: UUID | None = None,
                           tags: list[str] | None = None, metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.runs.append(("retriever", kwargs.get("name") or "", sorted(tags or []), dict(metadata or {}), parent_run_id is not None))

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                       tags: list[str] | None = None, metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.runs.append(("chain", kwargs.get("name") or "", sorted(tags or []), dict(metadata or {}), parent_run_id is not None))

    def children(self) -> list[tuple[str, str, list[str], dict[str, Any], bool]]:
        return sorted((r for r in self.runs if r[4]), key=repr)


#: what `Recording` saw, run by run
SEEN: list = []


class Recording(BaseRetriever):
    """A plain BaseRetriever that records the tags and metadata of the run it was invoked in."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[LCDocument]:
        SEEN.append((sorted(run_manager.tags), dict(run_manager.metadata)))
        return DOCS[:3]


@pytest.fixture(scope="module")
def store(lc_embeddings) -> InMemoryVectorStore:
    store = InMemoryVectorStore(lc_embeddings)
    store.add_documents(DOCS, ids=[d.id for d in DOCS])
    return store


def sources(store: InMemoryVectorStore, configs: list) -> list:
    """A vector-store retriever, a plain BaseRetriever, a runnable that records its config, and a BM25
    retriever whose k is a configurable field."""
    bm25 = ContextualBM25Retriever.from_documents(DOCS, k=10).configurable_fields(k=ConfigurableField(id="bm25_k"))

    def lambda_source(query: str, config: RunnableConfig) -> list[LCDocument]:
        configs.append((sorted(config.get("tags", [])), dict(config.get("metadata", {})), dict(config.get("configurable", {}))))
        return DOCS[5:7]

    return [store.as_retriever(search_kwargs={"k": 4}), Recording(), RunnableLambda(lambda_source, name="lambda_source"), bm25]


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_config_reaches_every_source_and_the_handler_as_ensemble_retriever_passes_it(store, run) -> None:
    observed = {}
    for kind in ("stock", "ours"):
        configs: list = []
        SEEN.clear()
        events = Events()
        retrievers = sources(store, configs)
        ensemble = (EnsembleRetriever(retrievers=retrievers) if kind == "stock"
                    else ContextualEnsembleRetriever(retrievers=retrievers, depth=4))
        config = {**CONFIG, "callbacks": [events]}
        docs = ensemble.invoke("deploy pipeline", config) if run == "sync" else await ensemble.ainvoke("deploy pipeline", config)
        children = events.children()
        if kind == "ours":  # dense PRF (the default) searches the vector store twice, in two like runs
            dense = [r for r in children if r[1] == "VectorStoreRetriever"]
            assert len(dense) == 2 and dense[0] == dense[1]
            children.remove(dense[0])
        observed[kind] = (children, configs, list(SEEN))
        assert docs
        if kind == "ours":  # the BM25 source returned its configured 2, not the ensemble's depth
            assert sum(d.metadata["ranks"][ensemble.names[3]] is not None for d in docs) == 2
        top = [r for r in events.runs if not r[4]]
        assert len(top) == 1 and "T" in top[0][2] and top[0][3]["m"] == 1  # the ensemble's own run
    stock, ours = observed["stock"], observed["ours"]
    assert ours == stock  # every child run, every config and every run manager the same
    children, configs, seen = ours
    assert configs == [(["T"], {"m": 1}, {"bm25_k": 2, "mood": "calm"})]  # configurable reaches a runnable source
    assert seen == [(["T", "retriever_2"], {"m": 1, "ls_retriever_name": "recording"})]
    names = {name for _, name, _, _, _ in children}
    assert {"VectorStoreRetriever", "Recording", "lambda_source", "ContextualBM25Retriever"} <= names
    for _, name, tags, metadata, _ in children:
        assert "T" in tags and metadata["m"] == 1, name
    tags = {name: t for _, name, t, _, _ in children}
    assert "retriever_1" in tags["VectorStoreRetriever"] and "retriever_3" in tags["lambda_source"]
    vector_meta = next(m for _, name, _, m, _ in children if name == "VectorStoreRetriever")
    assert vector_meta["ls_vector_store_provider"] == "InMemoryVectorStore"  # the run invoke would start


def test_a_configured_k_is_honoured_as_ensemble_retriever_honours_it() -> None:
    bm25 = ContextualBM25Retriever.from_documents(DOCS, k=10).configurable_fields(k=ConfigurableField(id="bm25_k"))
    ours = ContextualEnsembleRetriever(retrievers=[bm25], depth=6)
    stock = EnsembleRetriever(retrievers=[bm25])
    query = "deploy pipeline rolls back"
    configured = {"configurable": {"bm25_k": 2}}
    assert len(stock.invoke(query, configured)) == 2
    assert [d.id for d in ours.invoke(query, configured)] == [d.id for d in stock.invoke(query, configured)]
    assert len(ours.invoke(query)) == 6  # not configured: the ensemble's depth
    assert len(ours.invoke(query, {"configurable": {"other": 1}})) == 6


def test_config_specs_are_the_sources(store) -> None:
    bm25 = ContextualBM25Retriever.from_documents(DOCS).configurable_fields(k=ConfigurableField(id="bm25_k", name="BM25 k"))
    retrievers = [store.as_retriever(), bm25]
    ours = ContextualEnsembleRetriever(retrievers=retrievers).config_specs
    assert [s.id for s in ours] == ["bm25_k"] and ours == EnsembleRetriever(retrievers=retrievers).config_specs
    assert ContextualEnsembleRetriever(retrievers=retrievers).config_schema().model_json_schema()["properties"]["configurable"]


def test_fields_are_typed_documented_and_resolved_when_built(store) -> None:
    fields = ContextualEnsembleRetriever.model_fields
    assert all(f.description for name, f in fields.items() if name not in BaseRetriever.model_fields), "every field documented"
    with pytest.raises(ValidationError, match="retrievers"):
        ContextualEnsembleRetriever(retrievers=["not a retriever"])
    built = ContextualEnsembleRetriever(retrievers=[store.as_retriever(), RunnableLambda(lambda q: [])], weights=[3, 1], k=4)
    assert (built.names, built.weights, built.k, built.config.top_k) == (["dense", "RunnableLambda"], [3.0, 1.0], 4, 4)


# -- relevance scores ------------------------------------------------------------------------------


class DistanceStore(InMemoryVectorStore):
    """A store that reports distances (1 - cosine, smaller is better) and defines no relevance function."""

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[LCDocument, float]]:
        return [(d, 1.0 - s) for d, s in super().similarity_search_with_score(query, k, **kwargs)]

    async def asimilarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[LCDocument, float]]:
        return self.similarity_search_with_score(query, k, **kwargs)


@pytest.mark.parametrize("store_class", [InMemoryVectorStore, DistanceStore])
async def test_relative_score_keeps_the_dense_order_of_a_store_without_a_relevance_function(lc_embeddings, store_class) -> None:
    store = store_class(lc_embeddings)
    store.add_documents(DOCS, ids=[d.id for d in DOCS])
    query = "step 3 rolls back"
    own = [d.id for d, _ in InMemoryVectorStore.similarity_search_with_score(store, query, k=14)]
    dense = store.as_retriever()
    alone = ContextualEnsembleRetriever(retrievers=[dense], mode="relative_score", k=14)
    got = alone.invoke(query)
    assert [d.id for d in got] == own  # the store's order, not inverted
    assert [d.id for d in await alone.ainvoke(query)] == own
    scores = [d.metadata["source_scores"]["dense"] for d in got]
    assert scores == sorted(scores, reverse=True)
    bm25 = ContextualBM25Retriever.from_documents(DOCS)
    both = ContextualEnsembleRetriever(retrievers=[dense, bm25], mode="relative_score", weights=[0.9, 0.1], k=14)
    assert [d.id for d in both.invoke(query)][:3] == own[:3]  # the dense top 3 stay on top


def test_a_store_with_a_relevance_function_reports_it(contextual_docs, lc_embeddings, core_embedder) -> None:
    from contextual_retrieval_langchain import chroma_from_documents

    chroma = chroma_from_documents(contextual_docs, lc_embeddings)
    got = ContextualEnsembleRetriever(retrievers=[chroma.as_retriever()], mode="relative_score", k=3).invoke("quarterly revenue")
    q = core_embedder.embed_queries(["quarterly revenue"])[0]
    for doc in got:  # Chroma's cosine relevance, through similarity_search_with_relevance_scores
        v = core_embedder.embed_documents([doc.page_content])[0]
        assert doc.metadata["source_scores"]["dense"] == pytest.approx(float(q @ v), abs=1e-4)
