"""FusionConfig: one validated set of fusion settings, one name per idea, and the reranker fallback
(on_rerank_error="fused") in the core, with the real Cohere SDK against the loopback server."""

from __future__ import annotations

import asyncio
import dataclasses

import cohere
import pytest

from contextual_retrieval_core import FusionConfig, HybridSearcher
from contextual_retrieval_core.search.rank_fusion import reciprocal_rank_fusion
from contextual_retrieval_core.search.ranked import fuse_sources
from tests.unit.search.test_bad_input import CHUNKS, WordEmbedder


def test_defaults_are_the_libraries_defaults() -> None:
    config = FusionConfig()
    assert (config.weights, config.mode, config.rrf_k, config.depth, config.top_k) == (None, "rrf", 0.0, 150, 20)
    assert (config.rerank_depth, config.effective_rerank_depth, config.reranker, config.on_rerank_error) == (None, 150, None, "raise")
    assert config.weights_for(2) == (0.5, 0.5) and config.weights_for(4) == (0.25,) * 4


@pytest.mark.parametrize(
    "settings, error, message",
    [
        ({"weights": (0.5, float("nan"))}, ValueError, r"^weights\[1\] must be a finite number >= 0"),
        ({"weights": (-1.0, 1.0)}, ValueError, r"^weights\[0\] must be a finite number >= 0"),
        ({"weights": ()}, ValueError, "^weights is empty"),
        ({"weights": 0.5}, TypeError, "^weights must be a list of numbers"),
        ({"mode": "max"}, ValueError, "^mode must be 'rrf' or 'relative_score', not 'max'"),
        ({"rrf_k": -1}, ValueError, "^rrf_k must be a finite number >= 0"),
        ({"rrf_k": float("inf")}, ValueError, "^rrf_k must be a finite number >= 0"),
        ({"rrf_k": "60"}, TypeError, "^rrf_k must be a finite number >= 0"),
        ({"depth": 0}, ValueError, "^depth must be a positive integer"),
        ({"top_k": 1.5}, TypeError, "^top_k must be a positive integer"),
        ({"rerank_depth": -1}, ValueError, "^rerank_depth must be a positive integer or None"),
        ({"reranker": object()}, TypeError, "^reranker must be a contextual_retrieval_core Reranker"),
        ({"on_rerank_error": "ignore"}, ValueError, "^on_rerank_error must be 'raise' or 'fused'"),
    ],
)
def test_each_bad_setting_fails_when_built_naming_it(settings, error, message) -> None:
    with pytest.raises(error, match=message):
        FusionConfig(**settings)
    with pytest.raises(error, match=message):  # and again through every way of changing a config
        FusionConfig.merged(None, **settings)


def test_frozen_normalised_merged_and_weight_count_checked() -> None:
    config = FusionConfig(weights=[1, 3], rrf_k=60, depth=10)
    assert config.weights == (1.0, 3.0) and config.rrf_k == 60.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.depth = 5  # type: ignore[misc]
    merged = FusionConfig.merged(config, depth=None, top_k=3)  # None: keep the config's
    assert (merged.depth, merged.top_k, merged.rrf_k) == (10, 3, 60.0)
    assert FusionConfig.merged(config) is config
    with pytest.raises(TypeError, match=r"unknown fusion settings \['k'\]"):
        FusionConfig.merged(config, k=3)
    with pytest.raises(TypeError, match="config must be a FusionConfig"):
        FusionConfig.merged({"depth": 3})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="got 2 weights for 3 retrievers; pass one weight per retriever"):
        config.weights_for(3, per="retriever")


def test_the_searcher_takes_its_settings_in_one_config() -> None:
    config = FusionConfig(weights=(0.8, 0.2), rrf_k=60, depth=2, top_k=2)
    from_config = HybridSearcher(CHUNKS, WordEmbedder(), config=config)
    from_settings = HybridSearcher(CHUNKS, WordEmbedder(), config=FusionConfig(weights=(0.8, 0.2), rrf_k=60, depth=2, top_k=2))
    assert from_config.config == from_settings.config == config
    assert (from_config.depth, from_config.rrf_k, from_config.top_k, from_config.weights) == (2, 60.0, 2, (0.8, 0.2))
    for query in ("revenue grew", "ACME headcount"):
        hits = from_config.search(query)
        assert len(hits) == 2 and [h.id for h in hits] == [h.id for h in from_settings.search(query)]
        default = HybridSearcher(CHUNKS, WordEmbedder()).search(query, top_k=2)
        assert [h.fused_score for h in hits] != [h.fused_score for h in default]  # rrf_k=60 took effect
    assert len(from_config.search("revenue grew", top_k=1)) == 1  # a query's own count
    with pytest.raises(TypeError, match="top_k"):
        HybridSearcher(CHUNKS, WordEmbedder(), config=config, top_k=1)  # the flat keywords of 0.1 are gone
    with pytest.raises(ValueError, match="weights"):
        HybridSearcher(CHUNKS, None, config=FusionConfig(weights=(1.0,)))


def test_the_old_names_are_gone_and_the_rrf_constant_defaults_to_the_librarys() -> None:
    with pytest.raises(TypeError, match="'k'"):
        reciprocal_rank_fusion([["a", "b"], ["b"]], k=60)  # rrf_k= since 0.2; the old name was removed in 0.3
    with pytest.raises(TypeError, match="'k'"):
        HybridSearcher(CHUNKS, None).search("revenue", k=1)
    # fusion's RRF constant defaults to the library's (0, the cookbook's w / rank), as everywhere
    assert reciprocal_rank_fusion([["a", "b"]])[1].score == pytest.approx(1 / 2)
    assert fuse_sources([("x", [("a", 1.0), ("b", 0.5)], 1.0)])[1].score == pytest.approx(1 / 2)


# -- the reranker fails: raise (default) or keep the fused order ------------------------------------


def test_a_failing_reranker_raises_by_default(cohere_server) -> None:
    searcher = HybridSearcher(CHUNKS, WordEmbedder(), config=FusionConfig(reranker=cohere_server.reranker()))
    assert searcher.search("ACME revenue")[0].rerank_score is not None  # the server works
    cohere_server.fail_next(500, times=1)
    with pytest.raises(cohere.errors.InternalServerError):
        searcher.search("ACME revenue")


def test_on_rerank_error_fused_keeps_the_fused_order_and_reports_why(cohere_server) -> None:
    reranker = cohere_server.reranker()
    searcher = HybridSearcher(CHUNKS, WordEmbedder(), config=FusionConfig(reranker=reranker, on_rerank_error="fused"))
    fused = HybridSearcher(CHUNKS, WordEmbedder()).search("ACME revenue", top_k=2)
    reranked = searcher.search("ACME revenue", top_k=2)
    assert all(h.rerank_error is None and h.rerank_score is not None for h in reranked)

    cohere_server.fail_next(500, times=2, message="upstream overloaded")
    hits = searcher.search("ACME revenue", top_k=2)
    assert [(h.id, h.score) for h in hits] == [(h.id, h.fused_score) for h in fused]
    assert all(h.rerank_score is None for h in hits)
    assert {h.rerank_error for h in hits} == {"InternalServerError: HTTP 500: upstream overloaded"}
    assert cohere_server.api_key not in hits[0].rerank_error

    # async, through the same config: the fused order again, the error on every hit
    pool = searcher.config.fuse([("x", [(c.id, None) for c in CHUNKS])])
    texts = {c.id: c.indexed_text for c in CHUNKS}.__getitem__
    ahits = asyncio.run(searcher.config.arerank("ACME revenue", pool, texts, top_k=2))
    assert [h.id for h in ahits] == [h.id for h in pool[:2]] and all(h.rerank_error for h in ahits)
    assert [r.status for r in cohere_server.requests] == [200, 500, 500]
    assert "500" in ahits[0].rerank_error and cohere_server.api_key not in ahits[0].rerank_error
