"""Rerankers: Cohere and Voyage through their real SDKs against loopback servers; cross-encoders
through an injected scorer object."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from typing import Any

import cohere
import numpy as np
import pytest
import voyageai
import voyageai.error

from contextual_retrieval_core.rerank import (
    CohereReranker,
    CrossEncoderReranker,
    Reranker,
    RerankResult,
    VoyageReranker,
)
from tests.fakes.cohere_server import FakeCohereServer
from tests.fakes.voyage_server import FakeVoyageServer, quick_retry_clients

QUERY = "how does contextual retrieval improve bm25 search"
TEXTS = [
    "The weather in Lisbon is mild in winter.",
    "Contextual retrieval adds chunk context before BM25 indexing and embedding.",
    "BM25 search ranks documents by term frequency.",
    "A recipe for lemon cake with three eggs.",
    "Retrieval pipelines search an index, then rerank.",
]

# the SDK's own retries without its 1-16 s backoff sleeps
QUICK_CLIENT, QUICK_ASYNC_CLIENT = quick_retry_clients()


def expected_ranking(score: Any, query: str, texts: list[str], top_n: int | None = None) -> list[RerankResult]:
    ranked = sorted((RerankResult(i, score(query, t)) for i, t in enumerate(texts)), key=lambda r: (-r.score, r.index))
    return ranked if top_n is None else ranked[:top_n]


# == Voyage ===================================================================================


@pytest.fixture
def voyage_server() -> Iterator[FakeVoyageServer]:
    with FakeVoyageServer() as srv:
        yield srv


def voyage(server: FakeVoyageServer, model: str = "rerank-2.5", *, max_retries: int = 0) -> VoyageReranker:
    return VoyageReranker(
        model,
        client=QUICK_CLIENT(api_key=server.api_key, base_url=server.base_url, max_retries=max_retries),
        async_client=QUICK_ASYNC_CLIENT(api_key=server.api_key, base_url=server.base_url, max_retries=max_retries),
    )


def test_voyage_ranks_best_first_with_the_servers_scores(voyage_server: FakeVoyageServer) -> None:
    reranker = voyage(voyage_server)
    results = reranker.rerank(QUERY, TEXTS, top_n=3)

    assert isinstance(reranker, Reranker)
    assert results == expected_ranking(voyage_server.rerank_score, QUERY, TEXTS, 3)
    assert results[0].index == 1 and results[0].score > results[-1].score
    (request,) = voyage_server.requests
    assert request.path == "/v1/rerank" and request.authorized
    assert request.body["model"] == "rerank-2.5"
    assert request.body["query"] == QUERY and request.body["documents"] == TEXTS
    assert request.body["top_k"] == 3 and request.body["truncation"] is True


def test_voyage_without_top_n_returns_everything(voyage_server: FakeVoyageServer) -> None:
    results = voyage(voyage_server).rerank(QUERY, TEXTS)
    assert results == expected_ranking(voyage_server.rerank_score, QUERY, TEXTS)
    assert voyage_server.rerank_requests()[0]["top_k"] is None


def test_voyage_clamps_top_n_to_the_candidates(voyage_server: FakeVoyageServer) -> None:
    assert len(voyage(voyage_server).rerank(QUERY, TEXTS, top_n=50)) == len(TEXTS)
    assert voyage_server.rerank_requests()[0]["top_k"] == len(TEXTS)


def test_voyage_splits_more_than_1000_candidates_and_merges_by_score(voyage_server: FakeVoyageServer) -> None:
    relevant = {1067, 1164, 1261, 1358, 1455}  # all in the second request
    texts = [f"passage {i} about {'bm25 search' if i in relevant else 'cooking'} topic {i % 13}" for i in range(1500)]
    results = voyage(voyage_server).rerank("bm25 search passage", texts, top_n=10)

    bodies = voyage_server.rerank_requests()
    assert [len(body["documents"]) for body in bodies] == [1000, 500]
    assert [body["top_k"] for body in bodies] == [10, 10]
    assert results == expected_ranking(voyage_server.rerank_score, "bm25 search passage", texts, 10)
    assert [r.index for r in results[:5]] == sorted(relevant)  # indices map back past the first request


def test_voyage_splits_within_the_rerank_token_budget(voyage_server: FakeVoyageServer) -> None:
    texts = [f"doc {i} " + "ranking signals " * 2500 for i in range(30)]  # ~40k chars, ~10k server tokens each
    client = voyageai.Client(api_key=voyage_server.api_key, base_url=voyage_server.base_url)
    with pytest.raises(voyageai.error.InvalidRequestError, match="limit of 300000"):
        client.rerank("ranking signals", texts, model="rerank-1")  # all at once: over rerank-1's budget
    voyage_server.reset()

    results = voyage(voyage_server, "rerank-1").rerank("ranking signals", texts, top_n=5)

    assert len(voyage_server.requests) > 1 and all(r.status == 200 for r in voyage_server.requests)
    assert [d for body in voyage_server.rerank_requests() for d in body["documents"]] == texts
    assert results == expected_ranking(voyage_server.rerank_score, "ranking signals", texts, 5)


async def test_voyage_async_matches_sync(voyage_server: FakeVoyageServer) -> None:
    reranker = voyage(voyage_server)
    texts = [f"passage {i} on {'bm25' if i % 3 else 'cakes'} and search {i}" for i in range(1200)]
    assert await reranker.arerank(QUERY, TEXTS, top_n=2) == reranker.rerank(QUERY, TEXTS, top_n=2)
    assert await reranker.arerank("bm25 search", texts, top_n=7) == reranker.rerank("bm25 search", texts, top_n=7)


async def test_voyage_empty_candidates_and_bad_top_n_make_no_request(voyage_server: FakeVoyageServer) -> None:
    reranker = voyage(voyage_server)
    assert reranker.rerank(QUERY, []) == [] and await reranker.arerank(QUERY, [], top_n=3) == []
    for bad in (0, -1):
        with pytest.raises(ValueError, match="top_n"):
            reranker.rerank(QUERY, TEXTS, top_n=bad)
        with pytest.raises(ValueError, match="top_n"):
            await reranker.arerank(QUERY, TEXTS, top_n=bad)
    assert voyage_server.requests == []


def test_voyage_missing_api_key_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    with pytest.raises(RuntimeError, match=r"^VOYAGE_API_KEY is not set.*PassThroughReranker"):
        VoyageReranker()


async def test_voyage_async_with_only_a_sync_client_uses_it_in_a_thread(
    voyage_server: FakeVoyageServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VOYAGE_API_KEY", raising=False)
    reranker = VoyageReranker(client=voyageai.Client(api_key=voyage_server.api_key, base_url=voyage_server.base_url))
    results = await reranker.arerank(QUERY, TEXTS, top_n=2)
    assert results == expected_ranking(voyage_server.rerank_score, QUERY, TEXTS, 2)
    assert [r.authorized for r in voyage_server.requests] == [True]


async def test_voyage_async_survives_a_429_through_sdk_retries(voyage_server: FakeVoyageServer) -> None:
    voyage_server.fail_next(429)
    results = await voyage(voyage_server, max_retries=2).arerank(QUERY, TEXTS, top_n=2)
    assert [r.status for r in voyage_server.requests] == [429, 200]
    assert results == expected_ranking(voyage_server.rerank_score, QUERY, TEXTS, 2)


# == Cohere ===================================================================================


@pytest.fixture
def cohere_server() -> Iterator[FakeCohereServer]:
    with FakeCohereServer() as srv:
        yield srv


def cohere_reranker(server: FakeCohereServer, *, max_retries: int = 0, **options: Any) -> CohereReranker:
    return CohereReranker(
        client=cohere.ClientV2(api_key=server.api_key, base_url=server.base_url, max_retries=max_retries),
        async_client=cohere.AsyncClientV2(api_key=server.api_key, base_url=server.base_url, max_retries=max_retries),
        **options,
    )


def test_cohere_ranks_best_first_with_the_servers_scores(cohere_server: FakeCohereServer) -> None:
    reranker = cohere_reranker(cohere_server)
    results = reranker.rerank(QUERY, TEXTS, top_n=2)

    assert isinstance(reranker, Reranker) and reranker.model_name == "rerank-v3.5"
    assert results == expected_ranking(cohere_server.rerank_score, QUERY, TEXTS, 2)
    (request,) = cohere_server.requests
    assert request.path == "/v2/rerank" and request.authorized
    assert "authorization" not in request.headers
    assert request.body["model"] == "rerank-v3.5"
    assert request.body["query"] == QUERY and request.body["documents"] == TEXTS
    assert request.body["top_n"] == 2
    assert "max_tokens_per_doc" not in request.body  # left to the API's default


def test_cohere_without_top_n_returns_everything(cohere_server: FakeCohereServer) -> None:
    results = cohere_reranker(cohere_server).rerank(QUERY, TEXTS)
    assert results == expected_ranking(cohere_server.rerank_score, QUERY, TEXTS)
    assert "top_n" not in cohere_server.rerank_requests()[0]


def test_cohere_max_tokens_per_doc_is_sent_and_truncates(cohere_server: FakeCohereServer) -> None:
    texts = ["intro words here then finally bm25", "bm25 right away"]
    full = cohere_reranker(cohere_server).rerank("bm25", texts)
    cut = cohere_reranker(cohere_server, max_tokens_per_doc=3).rerank("bm25", texts)

    assert [body.get("max_tokens_per_doc") for body in cohere_server.rerank_requests()] == [None, 3]
    assert all(r.score > 0 for r in full)
    assert cut == [RerankResult(1, cohere_server.rerank_score("bm25", texts[1], 3)), RerankResult(0, 0.0)]


async def test_cohere_async_matches_sync(cohere_server: FakeCohereServer) -> None:
    reranker = cohere_reranker(cohere_server)
    assert await reranker.arerank(QUERY, TEXTS, top_n=3) == reranker.rerank(QUERY, TEXTS, top_n=3)
    assert len(cohere_server.requests) == 2


async def test_cohere_empty_candidates_and_bad_top_n_make_no_request(cohere_server: FakeCohereServer) -> None:
    reranker = cohere_reranker(cohere_server)
    assert reranker.rerank(QUERY, []) == [] and await reranker.arerank(QUERY, []) == []
    with pytest.raises(ValueError, match="top_n"):
        reranker.rerank(QUERY, TEXTS, top_n=0)
    with pytest.raises(ValueError, match="top_n"):
        await reranker.arerank(QUERY, TEXTS, top_n=-2)
    assert cohere_server.requests == []


@pytest.mark.parametrize("env_key", [None, "co-key-of-another-account"])
async def test_cohere_async_with_only_a_sync_client_uses_it_in_a_thread(
    cohere_server: FakeCohereServer, monkeypatch: pytest.MonkeyPatch, env_key: str | None
) -> None:
    # no key in the environment: no "COHERE_API_KEY is not set" though client= was passed; a key
    # there: no second client built from it, aimed at api.cohere.com instead of the injected URL
    monkeypatch.delenv("CO_API_KEY", raising=False)
    if env_key is None:
        monkeypatch.delenv("COHERE_API_KEY", raising=False)
    else:
        monkeypatch.setenv("COHERE_API_KEY", env_key)
    client = cohere.ClientV2(api_key=cohere_server.api_key, base_url=cohere_server.base_url, max_retries=0)
    reranker = CohereReranker(client=client, max_retries=0)

    results = await reranker.arerank(QUERY, TEXTS, top_n=2)

    assert results == expected_ranking(cohere_server.rerank_score, QUERY, TEXTS, 2)
    assert [(r.path, r.authorized) for r in cohere_server.requests] == [("/v2/rerank", True)]
    assert await reranker.arerank(QUERY, []) == []
    with pytest.raises(ValueError, match="top_n"):
        await reranker.arerank(QUERY, TEXTS, top_n=0)


def test_cohere_missing_api_key_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COHERE_API_KEY", raising=False)
    monkeypatch.delenv("CO_API_KEY", raising=False)
    with pytest.raises(RuntimeError) as info:
        CohereReranker()
    assert str(info.value).startswith("COHERE_API_KEY is not set")
    assert "cohere.ClientV2(api_key=...)" in str(info.value) and "PassThroughReranker" in str(info.value)
    monkeypatch.setenv("CO_API_KEY", "co-the-sdks-own-variable")
    assert CohereReranker().rerank(QUERY, []) == []  # either variable is enough (no request made)


def test_cohere_rejected_key_does_not_appear_in_the_error(cohere_server: FakeCohereServer) -> None:
    secret = "co-very-secret-wrong-key-9876543210"
    client = cohere.ClientV2(api_key=secret, base_url=cohere_server.base_url, max_retries=0)
    with pytest.raises(cohere.errors.UnauthorizedError) as info:
        CohereReranker(client=client).rerank(QUERY, TEXTS)
    assert secret not in str(info.value) and secret not in repr(info.value)
    assert [r.status for r in cohere_server.requests] == [401]


def test_cohere_survives_429_then_500_through_sdk_retries(cohere_server: FakeCohereServer) -> None:
    # retry-after-ms keeps the SDK's back-off to a millisecond (retry-after: 0 falls back to ~1 s)
    cohere_server.fail_next(429, headers={"retry-after-ms": "1"})
    cohere_server.fail_next(500, headers={"retry-after-ms": "1"})
    results = cohere_reranker(cohere_server, max_retries=2).rerank(QUERY, TEXTS, top_n=1)
    assert [r.status for r in cohere_server.requests] == [429, 500, 200]
    assert results == expected_ranking(cohere_server.rerank_score, QUERY, TEXTS, 1)


async def test_cohere_async_survives_a_429(cohere_server: FakeCohereServer) -> None:
    cohere_server.fail_next(429, headers={"retry-after-ms": "1"})
    results = await cohere_reranker(cohere_server, max_retries=1).arerank(QUERY, TEXTS, top_n=2)
    assert [r.status for r in cohere_server.requests] == [429, 200]
    assert results == expected_ranking(cohere_server.rerank_score, QUERY, TEXTS, 2)


# == cross-encoder ============================================================================


class OverlapScorer:
    """A real (tiny) pair scorer: word overlap, recording what it was asked and on which thread."""

    def __init__(self, shape: str = "flat") -> None:
        self.shape = shape
        self.calls: list[list[tuple[str, str]]] = []
        self.threads: list[int] = []

    def predict(self, pairs: list[tuple[str, str]]) -> Any:
        self.calls.append(list(pairs))
        self.threads.append(threading.get_ident())
        scores = [float(len(set(q.lower().split()) & set(t.lower().split()))) for q, t in pairs]
        if self.shape == "column":
            return np.array(scores)[:, None]
        if self.shape == "two-labels":
            return np.array([[s, -s] for s in scores])
        return scores


def overlap(query: str, text: str) -> float:
    return float(len(set(query.lower().split()) & set(text.lower().split())))


def test_cross_encoder_scores_pairs_best_first() -> None:
    scorer = OverlapScorer()
    reranker = CrossEncoderReranker("overlap", model=scorer)
    results = reranker.rerank(QUERY, TEXTS, top_n=3)

    assert isinstance(reranker, Reranker) and reranker.model_name == "overlap"
    assert results == expected_ranking(overlap, QUERY, TEXTS, 3)
    assert scorer.calls == [[(QUERY, t) for t in TEXTS]]


def test_cross_encoder_accepts_a_score_column_and_refuses_multi_label_output() -> None:
    column = CrossEncoderReranker(model=OverlapScorer("column"))
    assert column.rerank(QUERY, TEXTS) == expected_ranking(overlap, QUERY, TEXTS)
    with pytest.raises(ValueError, match="one score per pair"):
        CrossEncoderReranker(model=OverlapScorer("two-labels")).rerank(QUERY, TEXTS)


async def test_cross_encoder_async_runs_in_a_worker_thread_with_the_same_results() -> None:
    scorer = OverlapScorer()
    reranker = CrossEncoderReranker(model=scorer)
    assert await reranker.arerank(QUERY, TEXTS, top_n=2) == reranker.rerank(QUERY, TEXTS, top_n=2)
    assert scorer.threads[0] != threading.get_ident() == scorer.threads[1]


async def test_cross_encoder_empty_candidates_and_bad_top_n() -> None:
    scorer = OverlapScorer()
    reranker = CrossEncoderReranker(model=scorer)
    assert reranker.rerank(QUERY, []) == [] and await reranker.arerank(QUERY, []) == []
    with pytest.raises(ValueError, match="top_n"):
        reranker.rerank(QUERY, TEXTS, top_n=0)
    with pytest.raises(TypeError, match="not a single string"):
        await reranker.arerank(QUERY, "one candidate, not 14 characters")  # type: ignore[arg-type]
    assert scorer.calls == []


def test_cross_encoder_ties_keep_the_input_order_and_top_n_cuts() -> None:
    reranker = CrossEncoderReranker(model=OverlapScorer())
    texts = ["bm25", "cake", "bm25 search", "search bm25", "cake"]
    results = reranker.rerank("bm25 search", texts, top_n=4)
    assert results == [RerankResult(2, 2.0), RerankResult(3, 2.0), RerankResult(0, 1.0), RerankResult(1, 0.0)]


def test_cross_encoder_refuses_a_model_without_predict() -> None:
    with pytest.raises(TypeError, match="predict"):
        CrossEncoderReranker(model=object())  # type: ignore[arg-type]


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is not None, reason="sentence-transformers is installed"
)
def test_cross_encoder_without_sentence_transformers_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r"pip install 'contextual-retrieval-kit\[crossencoder\]'"):
        CrossEncoderReranker("cross-encoder/ms-marco-MiniLM-L-6-v2")


# == package ==================================================================================
