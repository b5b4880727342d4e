"""LangChain's indexing API (`index(..., record_manager, cleanup="incremental")`) stores every
Document under its own hash id; the chunks still keep their identity (metadata["chunk_id"]), so an
ensemble over such a store and BM25 returns each chunk once: InMemoryVectorStore and Chroma."""

from __future__ import annotations

import warnings

import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.indexing import InMemoryRecordManager, index
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter

from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS, DEMO_QUERIES
from contextual_retrieval_langchain import ContextualBM25Retriever, ContextualDocumentTransformer, ContextualEnsembleRetriever

QUERIES = [q.query for q in DEMO_QUERIES] + ["revenue grew", "fork server"]


def transform(documents: list[LCDocument]) -> list[LCDocument]:
    splitter = RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0)
    return ContextualDocumentTransformer(text_splitter=splitter, show_progress=False).transform_documents(documents)


def make_store(kind: str, embeddings):
    if kind == "memory":
        return InMemoryVectorStore(embeddings)
    import uuid

    from langchain_chroma import Chroma

    from contextual_retrieval_core.dense.chroma import chroma_client

    return Chroma(collection_name=f"indexing-api-{uuid.uuid4().hex}", embedding_function=embeddings, client=chroma_client())


def run_index(chunks, manager, store):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the default sha1 key encoder's advice
        return index(chunks, manager, store, cleanup="incremental", source_id_key="source")


@pytest.mark.parametrize("kind", ["memory", "chroma"])
def test_ensemble_over_an_indexed_store_returns_each_chunk_once(kind, lc_embeddings):
    docs = [LCDocument(text, metadata={"source": path}) for path, text in DEMO_DOCUMENTS]
    chunks = transform(docs)
    store = make_store(kind, lc_embeddings)
    manager = InMemoryRecordManager(namespace=f"test/{kind}")
    manager.create_schema()
    assert run_index(chunks, manager, store)["num_added"] == len(chunks)
    stored = store.similarity_search("revenue", k=3)
    assert stored and all(d.id not in {c.id for c in chunks} for d in stored)  # the indexing API's own ids

    def ensemble(chunks):
        dense = store.as_retriever(search_kwargs={"k": 40})
        return ContextualEnsembleRetriever(retrievers=[dense, ContextualBM25Retriever.from_documents(chunks, k=40)], k=20)

    by_id = {c.id: c for c in chunks}
    for query in QUERIES:
        got = ensemble(chunks).invoke(query)
        ids = [d.id for d in got]
        assert len(ids) == len(set(ids)) == 20, query  # each chunk once
        assert all(d.metadata["chunk_id"] == d.id and d.page_content == by_id[d.id].page_content for d in got)
        assert any(len(d.metadata["ranks"]) == 2 and None not in d.metadata["ranks"].values() for d in got)  # both sides agree on ids

    # an incremental re-index after one document changed: the old chunks of that document go
    changed = [LCDocument(text + "\n\nAppendix: nothing else changed.", metadata={"source": path}) if path == DEMO_DOCUMENTS[0][0]
               else LCDocument(text, metadata={"source": path}) for path, text in DEMO_DOCUMENTS]
    new_chunks = transform(changed)
    result = run_index(new_chunks, manager, store)
    assert result["num_skipped"] > 0 and result["num_added"] >= 1
    current = {c.id for c in new_chunks}
    for query in QUERIES[:3]:
        got = ensemble(new_chunks).invoke(query)
        ids = [d.id for d in got]
        assert len(ids) == len(set(ids)) and set(ids) <= current
