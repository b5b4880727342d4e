"""Both framework paths against a real Chroma server (`chroma run` on loopback, tests/servers.py):
the same top-20 ids as embedded Chroma on the demo corpus, before and after incremental updates."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("chromadb")

from contextual_retrieval_core.app._demo import demo_chunks  # noqa: E402
from contextual_retrieval_core.app.demo_corpus import DEMO_QUERIES  # noqa: E402

K = 20


def http_client(url: str):
    import chromadb
    from chromadb.config import Settings

    host, port = url.removeprefix("http://").rsplit(":", 1)
    return chromadb.HttpClient(host=host, port=int(port), settings=Settings(anonymized_telemetry=False))


@pytest.fixture(scope="module")
def demo():
    _, chunks = demo_chunks()
    queries = [q.query for q in DEMO_QUERIES] + ["reset the device", "parental leave weeks", "compare outputs of two targets"]
    # held back for the incremental update: one document's chunks are added later, another's removed
    later_doc = chunks[-1].document_id
    first = [c for c in chunks if c.document_id != later_doc]
    later = [c for c in chunks if c.document_id == later_doc]
    removed_doc = chunks[0].document_id
    return first, later, [c.id for c in chunks if c.document_id == removed_doc], queries


def test_llamaindex_chroma_vector_store_on_a_server_matches_embedded(chroma_server, demo) -> None:
    pytest.importorskip("llama_index.vector_stores.chroma")
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode

    from contextual_retrieval_llamaindex import LocalMiniLMEmbedding, chroma_vector_store

    first, later, removed, queries = demo
    embed = LocalMiniLMEmbedding()

    def nodes(chunks):
        return [TextNode(id_=c.id, text=c.text, metadata={"path": c.document_id}) for c in chunks]

    def build(store):
        return VectorStoreIndex(nodes(first), storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed)

    server_store = chroma_vector_store(client=http_client(chroma_server), collection="demo-llamaindex")
    indexes = {"server": build(server_store), "embedded": build(chroma_vector_store())}

    def top_ids(index):
        retriever = index.as_retriever(similarity_top_k=K)
        return [[n.node.node_id for n in retriever.retrieve(q)] for q in queries]

    before = {name: top_ids(index) for name, index in indexes.items()}
    assert before["server"] == before["embedded"]
    assert all(len(ids) == K for ids in before["server"])
    # the server really holds the data: a fresh client sees the collection and its rows
    assert http_client(chroma_server).get_collection("demo-llamaindex").count() == len(first)

    for index in indexes.values():  # incremental: add a document's chunks, delete another's
        index.insert_nodes(nodes(later))
        index.vector_store.delete_nodes(removed)
    after = {name: top_ids(index) for name, index in indexes.items()}
    assert after["server"] == after["embedded"]
    seen = {i for ids in after["server"] for i in ids}
    assert not seen & set(removed)
    assert seen & {c.id for c in later}, "the added chunks are searchable"
    assert http_client(chroma_server).get_collection("demo-llamaindex").count() == len(first) + len(later) - len(removed)


def test_langchain_chroma_on_a_server_matches_embedded(chroma_server, demo) -> None:
    pytest.importorskip("langchain_chroma")
    from langchain_core.documents import Document

    from contextual_retrieval_langchain import LocalMiniLMEmbeddings, chroma_from_documents

    first, later, removed, queries = demo
    embeddings = LocalMiniLMEmbeddings()

    def docs(chunks):
        return [Document(c.text, id=c.id, metadata={"path": c.document_id}) for c in chunks]

    stores = {
        "server": chroma_from_documents(docs(first), embeddings, client=http_client(chroma_server), collection_name="demo-langchain"),
        "embedded": chroma_from_documents(docs(first), embeddings),
    }

    def top_ids(store):
        return [[d.id for d in store.similarity_search(q, k=K)] for q in queries]

    before = {name: top_ids(store) for name, store in stores.items()}
    assert before["server"] == before["embedded"]
    assert all(len(ids) == K for ids in before["server"])

    for store in stores.values():
        store.add_documents(docs(later), ids=[c.id for c in later])
        store.delete(ids=removed)
    after = {name: top_ids(store) for name, store in stores.items()}
    assert after["server"] == after["embedded"]
    seen = {i for ids in after["server"] for i in ids}
    assert not seen & set(removed)
    assert seen & {c.id for c in later}
    assert http_client(chroma_server).get_collection("demo-langchain").count() == len(first) + len(later) - len(removed)


def _cli_top(index, question: str, *extra: str, capsys) -> list[str]:
    from contextual_retrieval_core.app.cli import main

    capsys.readouterr()
    assert main(["query", str(index), question, "-k", str(K), "--json", "--rerank", "none", *extra]) == 0
    return [hit["id"] for hit in json.loads(capsys.readouterr().out)]


def test_cli_index_and_query_with_chroma_url(chroma_server, offline_env, tmp_path, capsys) -> None:
    """`index --chroma-url` / `query` against the server: the same top-20 as an embedded index of
    the same files, after the first run and after an incremental update (a file added, one
    changed, one deleted); the folder remembers the server, and a rebuild empties its collection."""
    from contextual_retrieval_core.app._demo import write_corpus
    from contextual_retrieval_core.app.cli import main
    from contextual_retrieval_core.index.chroma_server import SERVER_FILE

    corpus = tmp_path / "corpus"
    files = sorted(write_corpus(corpus))
    held = files[-1]
    held_text = held.read_text(encoding="utf-8")
    held.unlink()
    indexes = {"server": tmp_path / "idx-server", "embedded": tmp_path / "idx-embedded"}

    def index_all() -> None:
        for name, folder in indexes.items():
            extra = ["--chroma-url", chroma_server] if name == "server" else []
            assert main(["index", str(corpus), "--index-dir", str(folder), "--no-progress", *extra]) == 0

    questions = [q.query for q in DEMO_QUERIES[:3]]

    def compare() -> list[list[str]]:
        tops = {name: [_cli_top(folder, q, capsys=capsys) for q in questions] for name, folder in indexes.items()}
        assert tops["server"] == tops["embedded"]
        return tops["server"]

    index_all()
    assert not (indexes["server"] / "chroma").exists(), "the vectors went to the server, not the folder"
    saved = json.loads((indexes["server"] / SERVER_FILE).read_text())
    assert saved["url"] == chroma_server
    rows = http_client(chroma_server).get_collection(saved["collection"]).count()
    assert rows > 0
    before = compare()
    assert all(len(t) == min(K, rows) for t in before)

    # incremental: add the held-back file, change one, delete another
    held.write_text(held_text, encoding="utf-8")
    files[0].write_text(files[0].read_text(encoding="utf-8") + "\n\nAn appendix about the zebra migration.\n", encoding="utf-8")
    files[1].unlink()
    index_all()
    after = compare()
    assert after != before
    zebra = _cli_top(indexes["server"], "zebra migration appendix", capsys=capsys)
    assert zebra == _cli_top(indexes["embedded"], "zebra migration appendix", capsys=capsys)
    # the same index through an explicit --chroma-url answers the same
    assert _cli_top(indexes["server"], questions[0], "--chroma-url", chroma_server, capsys=capsys) == after[0]

    # a rebuild clears the server collection and refills it
    assert main(["index", str(corpus), "--index-dir", str(indexes["server"]), "--no-progress", "--rebuild"]) == 0
    assert [_cli_top(indexes["server"], q, capsys=capsys) for q in questions] == after


def test_bad_chroma_url_names_the_option() -> None:
    from contextual_retrieval_core.index.chroma_server import chroma_http_client

    with pytest.raises(ValueError, match="--chroma-url must look like http://host:port"):
        chroma_http_client("localhost:8000")
