"""`ContextualIndex.search` on its less common paths: a blank query finds nothing whatever the
settings (and never reaches the embedder or the reranker), and a reranker that fails leaves the
fused order with the error on every `IndexHit` when ``on_rerank_error="fused"`` (the default stays an
error). Real Chroma and BM25; Cohere is the loopback server with the real SDK client."""

from __future__ import annotations

import cohere
import pytest

from contextual_retrieval_core.app.cli import main
from contextual_retrieval_core.index.contextual_index import ContextualIndex
from contextual_retrieval_core.search.config import FusionConfig
from tests.notes_corpus import CountingEmbedder, folder_digest, make_corpus


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("query-paths")
    ix = root / "ix"
    ContextualIndex(ix, embedder=CountingEmbedder()).update([make_corpus(root)], show_progress=False)
    return ix


@pytest.mark.parametrize("query", ["", " ", "\n\t "])
def test_a_blank_query_returns_no_results_in_every_path(built, cohere_server, query) -> None:
    embedder = CountingEmbedder()
    index = ContextualIndex(built, embedder=embedder)
    assert index.search("refunds", top_k=2)  # the index answers real questions
    embedder.queries.clear()
    assert index.search(query) == []
    assert index.search(query, top_k=1, config=FusionConfig(depth=5)) == []
    assert index.search(query, config=FusionConfig(reranker=cohere_server.reranker())) == []
    assert index.search(query, config=FusionConfig(reranker=cohere_server.reranker(), on_rerank_error="fused", top_k=3)) == []
    assert embedder.queries == [] and cohere_server.requests == []  # nothing embedded, nothing sent


@pytest.mark.usefixtures("offline_env")
def test_a_blank_question_on_the_command_line_prints_no_results_and_touches_nothing(built, capsys) -> None:
    before = folder_digest(built)
    for extra in ([], ["--json"], ["--prune"]):
        assert main(["query", str(built), "  ", *extra]) == 2
        out = capsys.readouterr()
        assert out.out == "" and "the question is empty" in out.err and "Traceback" not in out.err
    assert folder_digest(built) == before


def test_a_failing_reranker_raises_by_default(built, cohere_server) -> None:
    index = ContextualIndex(built, embedder=CountingEmbedder())
    assert index.search("refunds", top_k=2, config=FusionConfig(reranker=cohere_server.reranker()))[0].rerank_score is not None
    cohere_server.fail_next(500, times=1)
    with pytest.raises(cohere.errors.InternalServerError):
        index.search("refunds", top_k=2, config=FusionConfig(reranker=cohere_server.reranker()))


def test_on_rerank_error_fused_keeps_the_fused_order_and_each_hit_says_why(built, cohere_server) -> None:
    index = ContextualIndex(built, embedder=CountingEmbedder())
    fused = index.search("how many days until refunds", top_k=3)
    assert fused and all(h.rerank_error is None and h.rerank_score is None for h in fused)
    settings = {"config": FusionConfig(reranker=cohere_server.reranker(), on_rerank_error="fused")}
    reranked = index.search("how many days until refunds", top_k=3, **settings)
    assert all(h.rerank_error is None and h.rerank_score is not None for h in reranked)

    cohere_server.fail_next(500, times=1, message="upstream overloaded")
    hits = index.search("how many days until refunds", top_k=3, **settings)
    assert [(h.id, h.score, h.fused_score, h.ranks) for h in hits] == [(h.id, h.score, h.fused_score, h.ranks) for h in fused]
    assert all(h.rerank_score is None for h in hits)
    assert {h.rerank_error for h in hits} == {"InternalServerError: HTTP 500: upstream overloaded"}
    assert cohere_server.api_key not in hits[0].rerank_error
    assert [r.status for r in cohere_server.requests] == [200, 500]
