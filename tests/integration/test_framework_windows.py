"""Windowed contextual embeddings on the framework paths with the in-memory stores (LlamaIndex's
default `VectorStoreIndex`, LangChain's `InMemoryVectorStore`), against the core: window entries
point at their chunk, each node / Document comes back once, the core's order; filters, async,
a store given by the caller, and the errors."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import Document as LIDocument
from llama_index.core import VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters

from contextual_retrieval_core import Chunk, ContextualChunk, HybridSearcher
from contextual_retrieval_core.app.demo_corpus import DEMO_DOCUMENTS, DEMO_QUERIES
from contextual_retrieval_core.dense._window_rows import WINDOW_OF_KEY
from contextual_retrieval_core.dense.windows import WINDOW_MARK, WindowConfig
from contextual_retrieval_core.embeddings.cache import CachedEmbedder
from contextual_retrieval_core.search.config import FusionConfig
from contextual_retrieval_langchain import ContextualDocumentTransformer, ContextualEnsembleRetriever
from contextual_retrieval_langchain.embeddings import EmbedderEmbeddings
from contextual_retrieval_langchain.windows import WindowedVectorStore
from contextual_retrieval_llamaindex import ContextualNodeParser, HybridRetriever
from contextual_retrieval_llamaindex.embeddings import CoreEmbedding

WINDOWS = WindowConfig(size=40, overlap=8)
QUERIES = [q.query for q in DEMO_QUERIES] + ["fork server child process", "battery life of the Widget Pro"]


@pytest.fixture(scope="module")
def shared(offline_embedder):
    """One MiniLM behind an in-memory embedding cache for the core and both frameworks here (each
    text embedded once; test_framework_parity.py runs them on separate embedders)."""
    return CachedEmbedder(offline_embedder, ":memory:")


@pytest.fixture(scope="module")
def corpus(shared):
    nodes = ContextualNodeParser(node_parser=SentenceSplitter(chunk_size=64, chunk_overlap=0), show_progress=False)(
        [LIDocument(text=text, id_=path, metadata={"team": path.split("/")[0]}, excluded_embed_metadata_keys=["team"],
                    excluded_llm_metadata_keys=["team"]) for path, text in DEMO_DOCUMENTS]
    )
    embed = CoreEmbedding(shared)
    chunks = [ContextualChunk(Chunk(n.node_id, n.ref_doc_id, n.text), n.metadata["context"]) for n in nodes]
    core = HybridSearcher(chunks, shared, windows=WINDOWS, config=FusionConfig(top_k=20))
    assert core._extra_rows > 0
    return nodes, embed, chunks, core


@pytest.fixture(scope="module")
def li_index(corpus):
    return VectorStoreIndex(corpus[0], embed_model=corpus[1])


def test_llamaindex_in_memory_index_matches_the_core_and_returns_each_node_once(corpus, li_index):
    nodes, embed, _, core = corpus
    index = li_index
    hybrid = HybridRetriever.from_defaults(index, similarity_top_k=20, windows=WINDOWS)  # nodes from the docstore
    windows = [n for n in index.docstore.docs.values() if WINDOW_OF_KEY in n.metadata]
    assert len(windows) == core._extra_rows
    assert all(w.node_id.startswith(w.metadata[WINDOW_OF_KEY] + WINDOW_MARK) for w in windows)
    assert len(hybrid.retrievers["bm25"].retrieve("revenue")) > 0
    for query in QUERIES:
        got = hybrid.retrieve(query)
        assert [r.node.node_id for r in got] == [h.id for h in core.search(query)]
        assert all(WINDOW_OF_KEY not in r.node.metadata for r in got)
    dense = hybrid.retrievers["dense"].retrieve("fork server child process")
    assert len(dense) == len({r.node.node_id for r in dense}) == len(nodes)  # depth 150 > nodes: every node once
    # again on the same index: the entries are replaced, not doubled; the BM25 side never sees windows
    again = HybridRetriever.from_defaults(index, similarity_top_k=20, windows=WINDOWS)
    assert len([n for n in index.docstore.docs.values() if WINDOW_OF_KEY in n.metadata]) == len(windows)
    assert set(again.retrievers["bm25"].nodes) == {n.node_id for n in nodes}
    assert [r.node.node_id for r in again.retrieve(QUERIES[0])] == [h.id for h in core.search(QUERIES[0])]


async def test_llamaindex_async_and_filters(corpus, li_index):
    nodes, embed, _, core = corpus
    index = li_index
    hybrid = HybridRetriever.from_defaults(index, nodes=nodes, similarity_top_k=20, windows=WINDOWS)
    for query in QUERIES[:3]:
        assert [r.node.node_id for r in await hybrid.aretrieve(query)] == [h.id for h in core.search(query)]
    only = MetadataFilters(filters=[MetadataFilter(key="team", value="handbook")])
    filtered = HybridRetriever.from_defaults(index, nodes=nodes, similarity_top_k=20, windows=WINDOWS, filters=only)
    got = filtered.retrieve("office holidays")
    handbook = {n.node_id for n in nodes if n.metadata["team"] == "handbook"}
    assert got and {r.node.node_id for r in got} <= handbook and len(got) == len({r.node.node_id for r in got})


def test_llamaindex_rejects_mean_pooling(corpus):
    nodes, embed, _, _ = corpus
    index = VectorStoreIndex(nodes[:3], embed_model=embed)
    with pytest.raises(ValueError, match="pooling='max'"):
        HybridRetriever.from_defaults(index, nodes=nodes[:3], windows=WindowConfig(pooling="mean"))


def lc_docs(corpus) -> list[LCDocument]:
    nodes = corpus[0]
    chunks = [LCDocument(page_content=n.text, metadata={"source": n.ref_doc_id, "team": n.metadata["team"]}) for n in nodes]
    docs = ContextualDocumentTransformer(show_progress=False).transform_documents(chunks, parents=dict(DEMO_DOCUMENTS))
    assert [d.page_content for d in docs] == [c.indexed_text for c in corpus[2]]
    return docs


async def test_langchain_in_memory_store_matches_the_core_sync_and_async(corpus, shared):
    docs, core = lc_docs(corpus), corpus[3]
    embeddings = EmbedderEmbeddings(embedder=shared)
    retriever = ContextualEnsembleRetriever.from_documents(
        docs, vectorstore=InMemoryVectorStore(embeddings), k=20, windows=WINDOWS)
    store = retriever.retrievers[0].vectorstore
    assert isinstance(store, WindowedVectorStore) and store.extra == core._extra_rows
    for query in QUERIES:
        expected = [h.id for h in core.search(query)]
        got = retriever.invoke(query)
        assert [d.id for d in got] == expected
        assert [d.page_content for d in got] == [core.chunks[i].indexed_text for i in expected]  # the chunk, not a window
    assert [d.id for d in await retriever.ainvoke(QUERIES[1])] == [h.id for h in core.search(QUERIES[1])]
    hits = store.similarity_search("fork server child process", k=len(docs))
    assert len(hits) == len({d.id for d in hits}) == len(docs)


def test_langchain_filter_and_a_store_that_already_holds_the_documents(corpus, shared):
    docs, core = lc_docs(corpus), corpus[3]
    embeddings = EmbedderEmbeddings(embedder=shared)
    held = InMemoryVectorStore(embeddings)
    held.add_documents(docs, ids=[d.id for d in docs])
    retriever = ContextualEnsembleRetriever.from_documents(docs, vectorstore=held, k=20, windows=WINDOWS)
    assert len(held.store) == len(docs) + core._extra_rows  # long chunks' rows replaced, windows added
    query = QUERIES[2]
    assert [d.id for d in retriever.invoke(query)] == [h.id for h in core.search(query)]
    got = retriever.invoke("office holidays", filter=lambda d: d.metadata["team"] == "handbook")
    assert got and all(d.metadata["team"] == "handbook" for d in got) and len(got) == len({d.id for d in got})

    store = retriever.retrievers[0].vectorstore
    long_id = next(cid for cid, rows in store._ledger.held().items() if len(rows) > 1)
    store.delete([long_id])
    assert not any(i == long_id or i.startswith(long_id + WINDOW_MARK) for i in held.store)


def test_langchain_rejects_mean_pooling_and_needs_embeddings(corpus, shared):
    docs = lc_docs(corpus)[:2]
    with pytest.raises(ValueError, match="pooling='max'"):
        ContextualEnsembleRetriever.from_documents(docs, EmbedderEmbeddings(embedder=shared), windows=WindowConfig(pooling="mean"))
    with pytest.raises(ValueError, match="pass embeddings="):
        ContextualEnsembleRetriever.from_documents(docs, windows=WINDOWS)


def test_the_index_embedding_model_accessor(corpus):
    from contextual_retrieval_llamaindex._compat import index_embed_model

    embed = corpus[1]
    assert index_embed_model(VectorStoreIndex([], embed_model=embed)) is embed
    with pytest.raises(TypeError, match="needs a VectorStoreIndex"):
        from contextual_retrieval_llamaindex.windows import add_windows

        add_windows(object(), corpus[0][:1], WINDOWS)


def test_llamaindex_windows_already_in_the_store_are_not_embedded_again(corpus, shared, tmp_path):
    """A script run again over a store that keeps its nodes (Chroma here, a server's pgvector or
    Milvus alike): the windows the store holds with the same texts, embedded by the same model, are
    left as they are and nothing is embedded; a different model's windows are written again."""
    import chromadb
    from llama_index.core import StorageContext
    from llama_index.vector_stores.chroma import ChromaVectorStore

    from contextual_retrieval_llamaindex.windows import WINDOW_MODEL_KEY, add_windows

    embedded = []

    class Counting(CoreEmbedding):
        def _get_text_embeddings(self, texts):
            embedded.extend(texts)
            return super()._get_text_embeddings(texts)

    nodes = corpus[0]
    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=chromadb.Settings(anonymized_telemetry=False))
    collection = client.create_collection("windows-again", metadata={"hnsw:space": "cosine"})
    store = ChromaVectorStore(chroma_collection=collection)
    index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=Counting(shared))
    embedded.clear()
    extra = add_windows(index, nodes, WINDOWS)
    first = len(embedded)
    rows = collection.get(include=["metadatas"])
    assert extra > 0 and first > extra and len(rows["ids"]) == len(nodes) + extra
    assert {m[WINDOW_MODEL_KEY] for m in rows["metadatas"] if WINDOW_OF_KEY in m} == {shared.model_name}
    assert add_windows(index, nodes, WINDOWS) == extra and len(embedded) == first  # nothing embedded again
    other = VectorStoreIndex.from_vector_store(store, embed_model=Counting(shared, model_name="another-model"))
    assert add_windows(other, nodes, WINDOWS) == extra and len(embedded) == 2 * first  # another model's: written again
    assert len(collection.get()["ids"]) == len(nodes) + extra
    # a node whose metadata changed in a key it is not embedded with (a filter key): its rows are
    # written again, with the new metadata the windows' filters read
    long = next(n for n in nodes if any(m.get(WINDOW_OF_KEY) == n.node_id for m in rows["metadatas"]))
    moved = long.model_copy(update={"metadata": {**long.metadata, "team": "elsewhere"}})
    before = len(embedded)
    assert add_windows(other, [moved], WINDOWS) > 0 and before < len(embedded) < before + first
    held = collection.get(where={WINDOW_OF_KEY: long.node_id}, include=["metadatas"])["metadatas"]
    assert held and {m["team"] for m in held} == {"elsewhere"}


@pytest.mark.filterwarnings("ignore:Relevance scores must be between")  # cosine relevance of unrelated chunks < 0
async def test_langchain_windowed_chroma_relevance_scores_are_each_chunks_best_row(corpus, shared):
    """`WindowedVectorStore` over Chroma: the public relevance search gives each chunk once with
    its best row's relevance (the inner store's, for the chunk's own row or a window), the
    score_threshold applied over the collapsed list, sync and async alike."""
    from contextual_retrieval_langchain import chroma_from_documents

    docs = lc_docs(corpus)
    embeddings = EmbedderEmbeddings(embedder=shared)
    inner = chroma_from_documents([], embeddings)
    store = WindowedVectorStore(inner, windows=WINDOWS)
    store.add_documents(docs, ids=[d.id for d in docs])
    query = "fork server child process"
    rows = inner.similarity_search_with_relevance_scores(query, k=len(docs) + store.extra)
    best: dict[str, float] = {}
    for d, s in rows:
        owner = d.metadata.get(WINDOW_OF_KEY) or d.id
        best.setdefault(owner, s)
    got = store.similarity_search_with_relevance_scores(query, k=len(docs))
    assert [d.id for d, _ in got] == list(best) and len(got) == len(docs)
    assert [s for _, s in got] == pytest.approx([best[d.id] for d, _ in got])
    threshold = sorted(best.values())[len(best) // 2]
    cut = store.similarity_search_with_relevance_scores(query, k=len(docs), score_threshold=threshold)
    assert [d.id for d, _ in cut] == [c for c, s in best.items() if s >= threshold]
    assert [(d.id, s) for d, s in await store.asimilarity_search_with_relevance_scores(query, k=len(docs), score_threshold=threshold)] == \
        [(d.id, s) for d, s in cut]


def test_langchain_windowed_store_under_the_indexing_apis_ids(corpus, shared):
    """LangChain's indexing API calls ``add_documents(docs, ids=<hashes>)`` and deletes by those
    ids: the windowed store keeps each chunk's rows (windows too) under its hash, the ensemble
    ranks exactly as over a store keyed by chunk ids, and an incremental re-index leaves no row of
    a replaced chunk behind."""
    import warnings

    from langchain_core.indexing import InMemoryRecordManager, index

    from contextual_retrieval_langchain import ContextualBM25Retriever

    docs = lc_docs(corpus)
    embeddings = EmbedderEmbeddings(embedder=shared)
    inner = InMemoryVectorStore(embeddings)
    store = WindowedVectorStore(inner, windows=WINDOWS)
    manager = InMemoryRecordManager(namespace="windowed")
    manager.create_schema()

    def run(chunks):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the default sha1 key encoder's advice
            return index(chunks, manager, store, cleanup="incremental", source_id_key="source")

    assert run(docs)["num_added"] == len(docs)
    assert store.extra > 0 and not ({d.id for d in docs} & set(inner.store))  # rows under the hashes
    plain = WindowedVectorStore(InMemoryVectorStore(embeddings), windows=WINDOWS)
    plain.add_documents(docs)
    bm25 = ContextualBM25Retriever.from_documents(docs)
    for query in QUERIES:
        got = ContextualEnsembleRetriever(retrievers=[store.as_retriever(), bm25], k=20).invoke(query)
        want = ContextualEnsembleRetriever(retrievers=[plain.as_retriever(), bm25], k=20).invoke(query)
        assert [d.id for d in got] == [d.id for d in want], query
        assert all(d.metadata["chunk_id"] == d.id for d in got)

    # an incremental re-index after one document's chunks changed text but kept their chunk ids:
    # the old rows go, the new ones stay (the cleanup deletes by the old hashes only)
    long_doc = next(d for d in docs if len(store.rows_of(d.id)) > 1)  # a chunk stored as windows
    source = long_doc.metadata["source"]
    changed = [d.model_copy(update={"page_content": d.page_content + " (revised)"}) if d.metadata["source"] == source else d
               for d in docs]
    result = run(changed)
    assert result["num_deleted"] >= 1 and result["num_added"] == result["num_deleted"]
    assert len(inner.store) == len(docs) + store.extra
    assert {row.split(WINDOW_MARK)[0] for row in inner.store} == set(store._ledger.store_ids())  # every row a current chunk's
    assert set(store._ledger.store_ids().values()) == {d.id for d in docs}  # no chunk lost
    assert store.similarity_search(long_doc.page_content, k=1)[0].page_content == long_doc.page_content + " (revised)"
    assert run(changed)["num_skipped"] == len(docs)  # and a third run finds everything in place
    with pytest.raises(ValueError, match="one non-empty string per Document"):
        store.add_documents(docs[:2], ids=["only-one"])


def test_langchain_windowed_store_readding_a_chunk_drops_its_old_windows(shared):
    """A chunk added again under the same id (an upsert) that now fits one row leaves none of
    its old window rows behind to match searches with text it no longer has."""
    from contextual_retrieval_langchain import LocalMiniLMEmbeddings

    inner = InMemoryVectorStore(LocalMiniLMEmbeddings())
    store = WindowedVectorStore(inner, windows=WindowConfig(size=16, overlap=4))
    store.add_documents([LCDocument("Kitchen notes. " * 12 + "The signing key rotates on Tuesday.", id="k")])
    assert len(store.rows_of("k")) > 1 and len(inner.store) == len(store.rows_of("k"))
    store.add_documents([LCDocument("Cats sleep all day.", id="k")])
    assert store.rows_of("k") == ["k"] and list(inner.store) == ["k"]
    assert [d.page_content for d in store.similarity_search("when does the signing key rotate?", k=3)] == ["Cats sleep all day."]


def test_langchain_windowed_store_ids_belong_to_one_chunk_at_a_time(shared):
    """A store id given to another chunk replaces the chunk it held (windows too); deleting by a
    chunk id that is stored under another id deletes nothing, and a stale id never deletes a
    chunk added again later; a Document with only a metadata chunk id comes back with that id."""
    from contextual_retrieval_langchain import LocalMiniLMEmbeddings

    long_text = "Kitchen notes. " * 12 + "The signing key rotates on Tuesday."
    inner = InMemoryVectorStore(LocalMiniLMEmbeddings())
    store = WindowedVectorStore(inner, windows=WindowConfig(size=16, overlap=4))
    store.add_documents([LCDocument(long_text, metadata={"chunk_id": "a"})], ids=["x"])
    assert len(store.rows_of("a")) > 1 and all(r.startswith("x") for r in inner.store)
    store.add_documents([LCDocument("Cats sleep all day.", metadata={"chunk_id": "b"})], ids=["x"])
    assert list(inner.store) == ["x"] and store.rows_of("a") == ["a"]  # a's rows are gone
    assert [d.metadata["chunk_id"] for d in store.similarity_search("signing key", k=2)] == ["b"]
    assert [d.metadata["chunk_id"] for d in store.get_by_ids(["x", "a"])] == ["b"]

    store.delete(["b"])  # a chunk id, not a store id: nothing of b's goes
    assert list(inner.store) == ["x"]
    store.add_documents([LCDocument(long_text, metadata={"chunk_id": "c"})], ids=["h1"])
    store.add_documents([LCDocument(long_text + " Again.", metadata={"chunk_id": "c"})])  # c now under its chunk id
    store.delete(["h1"])  # the id c had before: c stays
    assert store.get_by_ids(["c"]) and any(r.startswith("c") for r in inner.store) and not any(r.startswith("h1") for r in inner.store)

    plain = WindowedVectorStore(InMemoryVectorStore(LocalMiniLMEmbeddings()))
    assert plain.add_documents([LCDocument("key rotates", metadata={"chunk_id": "c1"})]) == ["c1"]
    assert [d.id for d in plain.get_by_ids(["c1"])] == ["c1"] == [d.id for d in plain.similarity_search("key", k=1)]


@pytest.mark.parametrize("given", [None, ["h1", "h2"]])
def test_langchain_windowed_store_a_chunk_twice_in_one_batch_keeps_the_last(shared, given):
    """The same chunk twice in one add (the first long, the second short): the last version is
    stored, and no row of the first is left behind to come back after a delete."""
    from contextual_retrieval_langchain import LocalMiniLMEmbeddings

    inner = InMemoryVectorStore(LocalMiniLMEmbeddings())
    store = WindowedVectorStore(inner, windows=WindowConfig(size=16, overlap=4))
    docs = [LCDocument("Kitchen notes. " * 12 + "The signing key rotates on Tuesday.", metadata={"chunk_id": "c"}),
            LCDocument("Cats sleep all day.", metadata={"chunk_id": "c"})]
    store.add_documents(docs, ids=given)
    key = given[-1] if given else "c"
    assert list(inner.store) == [key] and store.rows_of("c") == [key]
    assert [d.page_content for d in store.similarity_search("signing key", k=3)] == ["Cats sleep all day."]
    store.delete([key])
    assert not inner.store and store.similarity_search("signing key", k=3) == []


def test_langchain_windowed_store_a_failed_write_keeps_the_version_before(shared):
    """The inner store's write fails (its embeddings raise): the chunk's earlier version stays
    searchable and the bookkeeping is as it was, so adding again later just works."""
    from langchain_core.embeddings import Embeddings

    from contextual_retrieval_langchain import LocalMiniLMEmbeddings

    class Flaky(Embeddings):
        def __init__(self) -> None:
            self.inner, self.fail = LocalMiniLMEmbeddings(), False

        def embed_documents(self, texts):
            if self.fail:
                raise RuntimeError("embedding API down")
            return self.inner.embed_documents(texts)

        def embed_query(self, text):
            return self.inner.embed_query(text)

        def __getattr__(self, name):  # max_tokens / count_tokens: the window the store plans with
            return getattr(self.__dict__["inner"], name)

    embeddings = Flaky()
    inner = InMemoryVectorStore(embeddings)
    store = WindowedVectorStore(inner, windows=WindowConfig(size=16, overlap=4))
    old = "Kitchen notes. " * 12 + "The signing key rotates on Tuesday."
    store.add_documents([LCDocument(old, metadata={"chunk_id": "c"})], ids=["h1"])
    rows, state = set(inner.store), (store._ledger.held(), store._ledger.store_ids(), store.extra)
    assert len(rows) > 1
    embeddings.fail = True
    with pytest.raises(RuntimeError, match="embedding API down"):
        store.add_documents([LCDocument("Cats sleep all day.", metadata={"chunk_id": "c"})], ids=["h2"])
    assert set(inner.store) == rows and (store._ledger.held(), store._ledger.store_ids(), store.extra) == state
    assert store.similarity_search("signing key", k=1)[0].page_content == old
    embeddings.fail = False
    store.add_documents([LCDocument("Cats sleep all day.", metadata={"chunk_id": "c"})], ids=["h2"])
    assert list(inner.store) == ["h2"] and store.get_by_ids(["h2"])[0].page_content == "Cats sleep all day."


def test_langchain_windowed_store_skip_fitting_still_rewrites_a_chunk_it_had_windowed(shared):
    from contextual_retrieval_langchain import LocalMiniLMEmbeddings

    inner = InMemoryVectorStore(LocalMiniLMEmbeddings())
    store = WindowedVectorStore(inner, windows=WindowConfig(size=16, overlap=4))
    store.add_documents([LCDocument("Kitchen notes. " * 12 + "The signing key rotates on Tuesday.", id="k")])
    store.add_documents([LCDocument("Cats sleep all day.", id="k"), LCDocument("Dogs bark.", id="d")], skip_fitting=True)
    assert list(inner.store) == ["k"] and inner.store["k"]["text"] == "Cats sleep all day."  # "d": the store holds it
