"""VoyageEmbedder against a loopback server speaking Voyage's wire format, through the real SDK."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import voyageai
import voyageai.error

from contextual_retrieval_core.embeddings import Embedder, VoyageBatching, VoyageEmbedder
from contextual_retrieval_core.embeddings.cache import CachedEmbedder
from contextual_retrieval_core.embeddings.voyage import estimate_tokens, plan_batches
from tests.fakes.voyage_server import FakeVoyageServer, quick_retry_clients

TEXTS = [
    "BM25 ranks documents by term overlap with the query.",
    "Dense embeddings capture meaning beyond exact words.",
    "Reciprocal rank fusion merges several ranked lists.",
    "Contextual retrieval prepends a short context to every chunk.",
]

# the SDK's own retries without its 1-16 s backoff sleeps
QUICK_CLIENT, QUICK_ASYNC_CLIENT = quick_retry_clients()


@pytest.fixture
def server() -> Iterator[FakeVoyageServer]:
    with FakeVoyageServer() as srv:
        yield srv


def make(
    server: FakeVoyageServer, model: str = "voyage-3.5", *, max_retries: int = 0, **options: Any
) -> VoyageEmbedder:
    """A VoyageEmbedder on real SDK clients pointed at the loopback server."""
    return VoyageEmbedder(
        model,
        client=QUICK_CLIENT(api_key=server.api_key, base_url=server.base_url, max_retries=max_retries),
        async_client=QUICK_ASYNC_CLIENT(api_key=server.api_key, base_url=server.base_url, max_retries=max_retries),
        **options,
    )


def expected(server: FakeVoyageServer, texts: list[str], input_type: str, dim: int = 1024) -> np.ndarray:
    return np.stack([server.embed_text(t, input_type, dim) for t in texts])


# -- wire format and results ------------------------------------------------------------------


def test_documents_are_embedded_as_documents_with_the_servers_vectors(server: FakeVoyageServer) -> None:
    embedder = make(server)
    vectors = embedder.embed_documents(TEXTS)

    assert isinstance(embedder, Embedder)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 1024)
    np.testing.assert_allclose(vectors, expected(server, TEXTS, "document"), atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    (request,) = server.requests
    assert request.path == "/v1/embeddings"
    assert request.body["input"] == TEXTS
    assert request.body["input_type"] == "document"
    assert request.body["model"] == "voyage-3.5"
    assert request.body["truncation"] is True
    assert request.authorized and "authorization" not in request.headers
    assert embedder.model_name == "voyage-3.5" and embedder.normalized is True and embedder.dimension == 1024


def test_queries_are_embedded_as_queries(server: FakeVoyageServer) -> None:
    embedder = make(server)
    queries = embedder.embed_queries(TEXTS[:2])
    documents = embedder.embed_documents(TEXTS[:2])

    assert [body["input_type"] for body in server.embeddings_requests()] == ["query", "document"]
    np.testing.assert_allclose(queries, expected(server, TEXTS[:2], "query"), atol=1e-6)
    assert not np.allclose(queries, documents)  # the input type reached the model
    assert np.all(np.sum(queries * documents, axis=1) > 0.8)  # ... and they stay comparable


def test_similar_texts_get_similar_vectors(server: FakeVoyageServer) -> None:
    embedder = make(server)
    query = embedder.embed_queries(["how does BM25 rank documents"])[0]
    scores = embedder.embed_documents(TEXTS) @ query
    assert int(np.argmax(scores)) == 0


def test_2500_texts_go_in_three_requests_of_at_most_1000_in_order(server: FakeVoyageServer) -> None:
    texts = [f"chunk number {i} about topic {i % 7}" for i in range(2500)]
    vectors = make(server).embed_documents(texts)

    bodies = server.embeddings_requests()
    assert [len(body["input"]) for body in bodies] == [1000, 1000, 500]
    assert [t for body in bodies for t in body["input"]] == texts
    np.testing.assert_allclose(vectors, expected(server, texts, "document"), atol=1e-6)


def test_the_server_really_rejects_more_than_1000_texts(server: FakeVoyageServer) -> None:
    client = voyageai.Client(api_key=server.api_key, base_url=server.base_url)
    with pytest.raises(voyageai.error.InvalidRequestError, match="batch size limit is 1000"):
        client.embed(["x"] * 1001, model="voyage-3.5", input_type="document")


def test_long_texts_are_split_within_the_models_token_cap(server: FakeVoyageServer) -> None:
    # ~100k characters each: ~25k tokens to the server, 33,335 by our over-estimate
    texts = [f"document {i} " + "retrieval augmented generation " * 3200 for i in range(10)]
    client = voyageai.Client(api_key=server.api_key, base_url=server.base_url)
    with pytest.raises(voyageai.error.InvalidRequestError, match="max allowed tokens per submitted batch is 120000"):
        client.embed(texts, model="voyage-3-large", input_type="document")  # all at once: over the cap
    server.reset()

    vectors = make(server, "voyage-3-large").embed_documents(texts)

    bodies = server.embeddings_requests()
    assert [len(body["input"]) for body in bodies] == [3, 3, 3, 1]
    assert all(sum(server.count_tokens(t) for t in body["input"]) <= 120_000 for body in bodies)
    assert all(r.status == 200 for r in server.requests)
    np.testing.assert_allclose(vectors, expected(server, texts, "document"), atol=1e-6)


def test_the_token_cap_follows_the_model(server: FakeVoyageServer) -> None:
    texts = [f"document {i} " + "retrieval augmented generation " * 3200 for i in range(10)]
    make(server, "voyage-3.5-lite").embed_documents(texts)  # 1M tokens per request
    assert [len(body["input"]) for body in server.embeddings_requests()] == [10]
    server.reset()
    make(server, "voyage-3.5-lite", batching=VoyageBatching(max_tokens_per_request=50_000)).embed_documents(texts[:3])  # ~33K each
    assert [len(body["input"]) for body in server.embeddings_requests()] == [1, 1, 1]


def test_batching_limits_are_checked_against_the_api_and_the_model() -> None:
    client = voyageai.Client(api_key="x")
    with pytest.raises(ValueError, match=r"max_texts_per_request must be in 1\.\.1000"):
        VoyageEmbedder(client=client, batching=VoyageBatching(max_texts_per_request=1001))
    with pytest.raises(ValueError, match=r"max_tokens_per_request must be in 1\.\.320000"):
        VoyageEmbedder("voyage-3.5", client=client, batching=VoyageBatching(max_tokens_per_request=400_000))
    assert VoyageEmbedder("voyage-next", client=client, batching=VoyageBatching(max_tokens_per_request=400_000)).max_tokens_per_request == 400_000
    with pytest.raises(ValueError, match="max_tokens_per_input is for VoyageContextualizedEmbedder"):
        VoyageEmbedder(client=client, batching=VoyageBatching(max_tokens_per_input=1000))
    with pytest.raises(TypeError, match="batching must be a VoyageBatching"):
        VoyageEmbedder(client=client, batching={"max_texts_per_request": 10})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="token_estimator must be a function"):
        VoyageBatching(token_estimator=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_concurrency must be a positive integer"):
        VoyageBatching(max_concurrency=0)


def test_a_token_estimator_and_a_text_limit_shape_the_requests(server: FakeVoyageServer) -> None:
    batching = VoyageBatching(max_texts_per_request=3, max_tokens_per_request=10, token_estimator=lambda text: 4)
    make(server, batching=batching).embed_documents(TEXTS)  # two texts fit in 10 tokens
    assert [len(body["input"]) for body in server.embeddings_requests()] == [2, 2]
    server.reset()
    make(server, batching=batching.replace(max_tokens_per_request=100)).embed_documents(TEXTS)
    assert [len(body["input"]) for body in server.embeddings_requests()] == [3, 1]


def test_unknown_models_fall_back_to_the_smallest_cap_and_an_unknown_dimension(server: FakeVoyageServer) -> None:
    embedder = make(server, "voyage-from-the-future")
    assert embedder.max_tokens_per_request == 120_000
    assert embedder.dimension is None
    assert embedder.embed_documents([]).shape == (0, 0)
    assert server.requests == []


def test_output_dimension_is_sent_and_shapes_the_result(server: FakeVoyageServer) -> None:
    embedder = make(server, output_dimension=256)
    assert embedder.embed_queries([]).shape == (0, 256)
    vectors = embedder.embed_queries(TEXTS)
    assert vectors.shape == (len(TEXTS), 256)
    assert server.embeddings_requests()[0]["output_dimension"] == 256
    np.testing.assert_allclose(vectors, expected(server, TEXTS, "query", 256), atol=1e-6)


async def test_empty_input_makes_no_request(server: FakeVoyageServer) -> None:
    embedder = make(server)
    for result in (
        embedder.embed_documents([]),
        embedder.embed_queries([]),
        await embedder.aembed_documents([]),
        await embedder.aembed_queries([]),
    ):
        assert result.shape == (0, 1024) and result.dtype == np.float32
    assert server.requests == []


def test_a_bare_string_is_refused(server: FakeVoyageServer) -> None:
    with pytest.raises(TypeError, match="list of texts"):
        make(server).embed_documents("one text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"texts\[1\] is bytes; decode it"):
        make(server).embed_queries(["fine", b"raw"])  # type: ignore[list-item]
    assert server.requests == []


# -- behind the embedding cache ---------------------------------------------------------------


def test_the_cache_keeps_output_dimensions_apart(server: FakeVoyageServer, tmp_path) -> None:
    path = tmp_path / "emb.sqlite3"
    full = CachedEmbedder(make(server), path)
    assert full.embed_documents(TEXTS).shape == (len(TEXTS), 1024)
    small = CachedEmbedder(make(server, output_dimension=256), path)

    vectors = small.embed_documents(TEXTS)

    assert (small.hits, small.misses) == (0, len(TEXTS))  # the 1024-d vectors are not served
    np.testing.assert_allclose(vectors, expected(server, TEXTS, "document", 256), atol=1e-6)
    assert [body.get("output_dimension") for body in server.embeddings_requests()] == [None, 256]
    again = CachedEmbedder(make(server, output_dimension=256), path)
    np.testing.assert_array_equal(again.embed_documents(TEXTS), vectors)
    assert (again.hits, again.misses) == (len(TEXTS), 0) and len(server.requests) == 2
    assert small.model_name == "voyage-3.5" and small.cache_model == "voyage-3.5@256"


async def test_the_cache_checks_input_and_keeps_the_dimension_of_nothing(server: FakeVoyageServer) -> None:
    cached = CachedEmbedder(make(server, output_dimension=256), ":memory:")
    assert cached.embed_documents([]).shape == (0, 256)
    assert (await cached.aembed_queries([])).shape == (0, 256)
    with pytest.raises(TypeError, match="list of texts"):
        cached.embed_documents("one text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="decode"):
        cached.embed_queries([b"raw"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="decode"):
        cached.embed_queries(b"raw")  # type: ignore[arg-type]
    assert server.requests == [] and (cached.hits, cached.misses) == (0, 0)


# -- async ------------------------------------------------------------------------------------


async def test_async_gives_the_same_vectors_as_sync(server: FakeVoyageServer) -> None:
    texts = [f"chunk number {i} about topic {i % 7}" for i in range(2500)]
    embedder = make(server)

    adocs = await embedder.aembed_documents(texts)
    aqueries = await embedder.aembed_queries(TEXTS)
    async_bodies = server.embeddings_requests()
    server.reset()

    np.testing.assert_array_equal(adocs, embedder.embed_documents(texts))
    np.testing.assert_array_equal(aqueries, embedder.embed_queries(TEXTS))
    assert sorted(len(body["input"]) for body in async_bodies) == [4, 500, 1000, 1000]
    assert sorted(body["input_type"] for body in async_bodies) == ["document"] * 3 + ["query"]


# -- keys, errors and retries -----------------------------------------------------------------


def test_missing_api_key_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with pytest.raises(RuntimeError) as info:
        VoyageEmbedder()
    message = str(info.value)
    assert message.startswith("VOYAGE_API_KEY is not set")
    assert "client=voyageai.Client(api_key=...)" in message and "LocalMiniLMEmbedder" in message


def test_an_environment_key_is_enough_to_construct(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOYAGE_API_KEY", "pa-from-the-environment")
    embedder = VoyageEmbedder("voyage-3.5-lite")
    assert embedder.embed_documents([]).shape == (0, 1024)  # no request, so no network


async def test_async_with_only_a_sync_client_uses_it_in_a_thread(
    server: FakeVoyageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    client = voyageai.Client(api_key=server.api_key, base_url=server.base_url, max_retries=0)
    embedder = VoyageEmbedder(client=client, output_dimension=256)

    vectors = await embedder.aembed_queries(TEXTS)

    np.testing.assert_allclose(vectors, expected(server, TEXTS, "query", 256), atol=1e-6)
    assert [(body["input_type"], body["output_dimension"]) for body in server.embeddings_requests()] == [("query", 256)]
    assert (await embedder.aembed_documents([])).shape == (0, 256)
    with pytest.raises(TypeError, match="list of texts"):
        await embedder.aembed_documents("one text")  # type: ignore[arg-type]


def test_a_rejected_key_does_not_appear_in_the_error(server: FakeVoyageServer) -> None:
    secret = "pa-very-secret-wrong-key-0123456789"
    client = voyageai.Client(api_key=secret, base_url=server.base_url)
    with pytest.raises(voyageai.error.AuthenticationError) as info:
        VoyageEmbedder(client=client).embed_documents(TEXTS)
    assert secret not in str(info.value) and secret not in repr(info.value)
    assert [r.status for r in server.requests] == [401]
    assert not server.requests[0].authorized


def test_a_429_is_retried_by_the_sdk(server: FakeVoyageServer) -> None:
    server.fail_next(429, headers={"retry-after": "0"}, message="rate limited")
    vectors = make(server, max_retries=2).embed_documents(TEXTS)
    assert [r.status for r in server.requests] == [429, 200]
    np.testing.assert_allclose(vectors, expected(server, TEXTS, "document"), atol=1e-6)


def test_sdk_max_retries_counts_attempts(server: FakeVoyageServer) -> None:
    # voyageai hands max_retries to tenacity's stop_after_attempt: 1 means a single attempt
    server.fail_next(429)
    with pytest.raises(voyageai.error.RateLimitError):
        make(server, max_retries=1).embed_documents(TEXTS)
    assert [r.status for r in server.requests] == [429]


async def test_a_503_is_retried_by_the_async_sdk(server: FakeVoyageServer) -> None:
    server.fail_next(503)
    vectors = await make(server, max_retries=2).aembed_queries(TEXTS)
    assert [r.status for r in server.requests] == [503, 200]
    np.testing.assert_allclose(vectors, expected(server, TEXTS, "query"), atol=1e-6)


# -- batch planning ---------------------------------------------------------------------------


def test_plan_batches_respects_both_limits_and_keeps_order() -> None:
    assert plan_batches([], 3, 10) == []
    assert plan_batches([1] * 7, 3, 100) == [slice(0, 3), slice(3, 6), slice(6, 7)]
    assert plan_batches([4, 4, 4, 4], 10, 8) == [slice(0, 2), slice(2, 4)]
    assert plan_batches([20, 1, 1], 10, 8) == [slice(0, 1), slice(1, 3)]  # an oversized text goes alone
    with pytest.raises(ValueError):
        plan_batches([1], 0, 10)


def test_estimate_tokens_over_counts() -> None:
    assert estimate_tokens("") == 1
    assert estimate_tokens("a" * 300) == 101
    assert estimate_tokens("检索增强生成") == 7  # one per non-ASCII character
