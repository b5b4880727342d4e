"""VoyageContextualizedEmbedder against the loopback Voyage server, through the real SDK."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import voyageai
import voyageai.error

from contextual_retrieval_core.embeddings import VoyageBatching, VoyageContextualizedEmbedder
from tests.fakes.voyage_server import FakeVoyageServer, quick_retry_clients

DOCS = {
    "a.py": ["def load(path): read the config file", "def save(path): write the config file", "class Cache: keeps results"],
    "b.md": ["Install with pip", "Run the tests with pytest"],
    "c.txt": ["A single chunk about BM25 ranking"],
}

# the SDK's own retries without its 1-16 s backoff sleeps
QUICK_CLIENT, QUICK_ASYNC_CLIENT = quick_retry_clients()


@pytest.fixture
def server() -> Iterator[FakeVoyageServer]:
    with FakeVoyageServer() as srv:
        yield srv


def make(server: FakeVoyageServer, *, max_retries: int = 0, **options: Any) -> VoyageContextualizedEmbedder:
    return VoyageContextualizedEmbedder(
        client=QUICK_CLIENT(api_key=server.api_key, base_url=server.base_url, max_retries=max_retries),
        async_client=QUICK_ASYNC_CLIENT(api_key=server.api_key, base_url=server.base_url, max_retries=max_retries),
        **options,
    )


def expected(server: FakeVoyageServer, chunks: list[str], input_type: str = "document", dim: int = 1024) -> np.ndarray:
    return np.stack([server.contextualized_vector(chunks, j, input_type, dim) for j in range(len(chunks))])


def test_one_request_carries_every_chunk_of_each_document_in_order(server: FakeVoyageServer) -> None:
    embedder = make(server)
    out = embedder.embed_document_chunks(list(DOCS.values()))

    (body,) = server.contextualized_requests()
    assert body["inputs"] == list(DOCS.values())
    assert body["model"] == "voyage-context-3" and body["input_type"] == "document"
    for vectors, chunks in zip(out, DOCS.values()):
        assert vectors.dtype == np.float32 and vectors.shape == (len(chunks), 1024)
        np.testing.assert_allclose(vectors, expected(server, chunks), atol=1e-5)
    # the document context reached each chunk: the same text in another document differs
    alone = embedder.embed_document_chunks([[DOCS["a.py"][0]]])[0]
    assert not np.allclose(alone[0], out[0][0], atol=1e-3)


def test_grouped_flat_input_maps_vectors_back_to_chunk_ids_from_a_shuffled_response(server: FakeVoyageServer) -> None:
    server.shuffle_contextualized = True  # documents and chunks answered in reverse order
    # a flat, interleaved list of chunks with their document keys (how the core passes them)
    rows = [("a.py", 0), ("b.md", 0), ("a.py", 1), ("c.txt", 0), ("b.md", 1), ("a.py", 2)]
    ids = [f"{doc}#{i}" for doc, i in rows]
    texts = [DOCS[doc][i] for doc, i in rows]
    vectors = make(server).embed_grouped(texts, [doc for doc, _ in rows])

    (body,) = server.contextualized_requests()
    assert body["inputs"] == [DOCS["a.py"], DOCS["b.md"], DOCS["c.txt"]]
    by_id = dict(zip(ids, vectors))
    for doc, chunks in DOCS.items():
        want = expected(server, chunks)
        for j in range(len(chunks)):
            np.testing.assert_allclose(by_id[f"{doc}#{j}"], want[j], atol=1e-5)


def test_async_matches_sync_with_a_shuffled_response(server: FakeVoyageServer) -> None:
    server.shuffle_contextualized = True
    embedder = make(server)
    sync = embedder.embed_document_chunks(list(DOCS.values()))
    async_ = asyncio.run(embedder.aembed_document_chunks(list(DOCS.values())))
    for a, b in zip(sync, async_):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_requests_respect_the_input_chunk_and_token_limits(server: FakeVoyageServer) -> None:
    docs = [[f"doc {d} chunk {c} " + "word " * 20 for c in range(5)] for d in range(7)]
    embedder = make(server, batching=VoyageBatching(max_inputs_per_request=3, max_texts_per_request=12, max_tokens_per_input=60))
    out = embedder.embed_document_chunks(docs)

    bodies = server.contextualized_requests()
    assert len(bodies) > 1
    sent = [chunk for body in bodies for inp in body["inputs"] for chunk in inp]
    assert sent == [c for d in docs for c in d]  # every chunk once, in order
    for body in bodies:
        assert len(body["inputs"]) <= 3
        assert sum(len(inp) for inp in body["inputs"]) <= 12
        for inp in body["inputs"]:
            assert sum(embedder.batching.token_estimator(c) for c in inp) <= 60
    assert [v.shape[0] for v in out] == [5] * 7


def test_the_default_limits_keep_the_server_happy_on_a_large_batch(server: FakeVoyageServer) -> None:
    # 1,200 one-chunk documents: over the API's 1,000 inputs, so two requests
    docs = [[f"document number {i}"] for i in range(1200)]
    out = make(server).embed_document_chunks(docs)
    bodies = server.contextualized_requests()
    assert [len(b["inputs"]) for b in bodies] == [1000, 200]
    assert len(out) == 1200 and all(r.status == 200 for r in server.requests)


def test_the_fake_enforces_the_api_limits(server: FakeVoyageServer) -> None:
    client = voyageai.Client(api_key=server.api_key, base_url=server.base_url, max_retries=0)
    with pytest.raises(voyageai.error.InvalidRequestError, match="1000 inputs"):
        client.contextualized_embed([["x"]] * 1001, model="voyage-context-3", input_type="document")
    with pytest.raises(voyageai.error.InvalidRequestError, match="context length"):
        client.contextualized_embed([["word " * 40_000]], model="voyage-context-3", input_type="document")


def test_a_too_long_single_chunk_is_a_clear_error_before_any_request(server: FakeVoyageServer) -> None:
    with pytest.raises(ValueError, match="split it into smaller chunks"):
        make(server).embed_document_chunks([["word " * 100_000]])
    assert server.requests == []


def test_queries_are_sent_one_per_input_as_queries(server: FakeVoyageServer) -> None:
    vectors = make(server).embed_queries(["how is the config saved", "bm25"])
    (body,) = server.contextualized_requests()
    assert body["inputs"] == [["how is the config saved"], ["bm25"]] and body["input_type"] == "query"
    np.testing.assert_allclose(vectors[1], expected(server, ["bm25"], "query")[0], atol=1e-5)


def test_output_dimension_and_dtype(server: FakeVoyageServer) -> None:
    vectors = make(server, output_dimension=256, output_dtype="int8").embed_document_chunks([DOCS["b.md"]])[0]
    (body,) = server.contextualized_requests()
    assert body["output_dimension"] == 256 and body["output_dtype"] == "int8"
    assert vectors.shape == (2, 256) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, expected(server, DOCS["b.md"], dim=256), atol=0.02)
    with pytest.raises(ValueError, match="output_dtype"):
        make(server, output_dtype="binary")


def test_batching_limits_are_at_most_the_apis() -> None:
    client = voyageai.Client(api_key="x")
    for name, cap in (("max_texts_per_request", 16_000), ("max_tokens_per_request", 120_000),
                      ("max_inputs_per_request", 1000), ("max_tokens_per_input", 32_000)):
        with pytest.raises(ValueError, match=rf"{name} must be in 1\.\.{cap}"):
            VoyageContextualizedEmbedder(client=client, batching=VoyageBatching(**{name: cap + 1}))
    small = VoyageContextualizedEmbedder(client=client, batching=VoyageBatching(max_tokens_per_request=20_000))
    assert small.max_tokens_per_input == 20_000  # an input never holds more than a request


def test_a_429_is_retried_by_the_sdk(server: FakeVoyageServer) -> None:
    server.fail_next(429)
    out = make(server, max_retries=3).embed_document_chunks([DOCS["c.txt"]])
    assert [r.status for r in server.requests] == [429, 200]
    assert out[0].shape == (1, 1024)
    server.reset()
    server.fail_next(429)
    with pytest.raises(voyageai.error.RateLimitError):
        make(server, max_retries=0).embed_document_chunks([DOCS["c.txt"]])


def test_missing_key_names_voyage_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with pytest.raises(RuntimeError, match="VOYAGE_API_KEY"):
        VoyageContextualizedEmbedder()


def test_async_client_per_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOYAGE_API_KEY", "test-key")
    embedder = VoyageContextualizedEmbedder(max_retries=0)
    seen = []

    async def go() -> None:
        first = embedder._aio_client()
        assert embedder._aio_client() is first  # one client for the loop
        seen.append(first)

    asyncio.run(go())
    asyncio.run(go())
    assert isinstance(seen[0], voyageai.AsyncClient) and seen[0] is not seen[1]


def test_llamaindex_adapter_embeds_a_documents_nodes_together(server: FakeVoyageServer) -> None:
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    from contextual_retrieval_llamaindex.voyage_context import VoyageContextualizedEmbedding

    client = voyageai.Client(api_key=server.api_key, base_url=server.base_url, max_retries=0)
    model = VoyageContextualizedEmbedding(client=client)
    nodes = []
    for doc, chunks in DOCS.items():
        for text in chunks:
            node = TextNode(text=text)
            node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc)
            nodes.append(node)
    model.embed_nodes(nodes)
    (body,) = server.contextualized_requests()
    assert body["inputs"] == list(DOCS.values())
    np.testing.assert_allclose(nodes[1].embedding, expected(server, DOCS["a.py"])[1], atol=1e-5)
    assert len(model.get_query_embedding("config")) == 1024
    assert server.contextualized_requests()[-1]["input_type"] == "query"


def test_langchain_adapter_groups_by_metadata(server: FakeVoyageServer) -> None:
    from langchain_core.documents import Document

    from contextual_retrieval_langchain.voyage_context import VoyageContextualizedEmbeddings

    client = voyageai.Client(api_key=server.api_key, base_url=server.base_url, max_retries=0)
    emb = VoyageContextualizedEmbeddings(client=client)
    docs = [Document(t, metadata={"source": d}) for d, chunks in DOCS.items() for t in chunks]
    vectors = emb.embed_grouped_documents(docs)
    assert server.contextualized_requests()[0]["inputs"] == list(DOCS.values())
    np.testing.assert_allclose(vectors[3], expected(server, DOCS["b.md"])[0], atol=1e-5)
    np.testing.assert_allclose(emb.embed_document_chunks([DOCS["b.md"]])[0], vectors[3:5], atol=1e-6)
    with pytest.raises(ValueError, match="metadata"):
        emb.embed_grouped_documents([Document("x")])


def test_the_index_sends_each_files_chunks_together(server: FakeVoyageServer, tmp_path) -> None:
    from contextual_retrieval_core.index.contextual_index import ContextualIndex

    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "a.md").write_text("\n\n".join(f"Paragraph {i} about caching and config files." for i in range(6)))
    (folder / "b.md").write_text("Install with pip.\n\nRun the tests with pytest.")
    index = ContextualIndex(tmp_path / "ix", embedder=make(server), chunk_chars=80)
    index.update([folder], show_progress=False)

    bodies = server.contextualized_requests()
    inputs = [inp for body in bodies for inp in body["inputs"]]
    assert len(inputs) == 2 and len(inputs[0]) > 1  # one input per file, all its chunks
    assert all(body["input_type"] == "document" for body in bodies)
    hit = index.search("how to run the tests", 1)[0]
    assert "b.md" in str(hit)


def test_cli_factory_picks_the_contextualized_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextual_retrieval_core._factories import choose_embedder, embedder_kind

    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with pytest.raises(RuntimeError, match="VOYAGE_API_KEY"):
        choose_embedder("voyage-context")
    monkeypatch.setenv("VOYAGE_API_KEY", "k")
    embedder = choose_embedder("voyage-context")
    assert isinstance(embedder, VoyageContextualizedEmbedder) and embedder_kind(embedder) == "voyage-context"
