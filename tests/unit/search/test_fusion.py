from __future__ import annotations

import pytest

from contextual_retrieval_core.search.rank_fusion import FusedHit, fuse, reciprocal_rank_fusion, relative_score_fusion


def test_k0_reproduces_the_cookbook_formula():
    dense = ["a", "b", "c"]
    sparse = ["c", "d", "a"]
    hits = reciprocal_rank_fusion([dense, sparse], [0.8, 0.2], rrf_k=0)
    # cookbook: score = 0.8 / (dense_rank + 1) + 0.2 / (sparse_rank + 1) with 0-based ranks
    expected = {"a": 0.8 / 1 + 0.2 / 3, "b": 0.8 / 2, "c": 0.8 / 3 + 0.2 / 1, "d": 0.2 / 2}
    assert {h.id: h.score for h in hits} == pytest.approx(expected)
    assert [h.id for h in hits] == sorted(expected, key=lambda x: -expected[x])
    assert hits[0].ranks == (1, 3)
    assert {h.id: h.ranks for h in hits}["d"] == (None, 2)


def test_classic_rrf_with_k60_and_equal_weights():
    hits = reciprocal_rank_fusion([["x", "y"], ["y", "x"], ["y"]], rrf_k=60)
    assert hits[0].id == "y"
    assert hits[0].score == pytest.approx(1 / 62 + 1 / 61 + 1 / 61)


def test_any_number_of_lists_and_weights_matter():
    lists = [["a", "b"], ["b", "a"], ["b", "c"]]
    assert reciprocal_rank_fusion(lists, [10, 1, 1], rrf_k=0)[0].id == "a"
    assert reciprocal_rank_fusion(lists, [1, 1, 1], rrf_k=0)[0].id == "b"


def test_depth_cuts_each_list_and_top_k_cuts_output():
    long = [f"d{i}" for i in range(500)]
    hits = reciprocal_rank_fusion([long, long[::-1]], depth=150)
    assert len(hits) == 300
    assert all(h.id in set(long[:150]) | set(long[-150:]) for h in hits)
    assert len(reciprocal_rank_fusion([long], top_k=20)) == 20
    assert len(reciprocal_rank_fusion([long], depth=None)) == 500


def test_ties_are_deterministic():
    # "p" and "q" tie on score; both have best rank 1; first seen wins
    hits = reciprocal_rank_fusion([["p", "x"], ["q", "y"]], rrf_k=0)
    assert [h.id for h in hits] == ["p", "q", "x", "y"]
    # equal score, better best-rank first
    hits = reciprocal_rank_fusion([["m", "n"], ["n"]], [1.0, 0.0], rrf_k=0)
    assert [h.id for h in hits] == ["m", "n"]


def test_relative_score_fusion():
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    sparse = [("c", 12.0), ("a", 6.0), ("d", 0.0)]
    hits = relative_score_fusion([dense, sparse], [0.5, 0.5])
    scores = {h.id: h.score for h in hits}
    assert scores == pytest.approx({"a": 0.5 * 1 + 0.5 * 0.5, "b": 0.5 * 0.5, "c": 0.5 * 0 + 0.5 * 1, "d": 0.0})
    assert hits[0].id == "a"
    # all-equal scores in a list count as full weight
    assert relative_score_fusion([[("x", 3.0), ("y", 3.0)]])[0].score == 1.0


def test_fuse_dispatches_both_modes():
    lists = [[("a", 1.0), ("b", 0.5)], [("b", 2.0)]]
    assert [h.id for h in fuse(lists, mode="rrf", rrf_k=0)] == ["b", "a"]
    assert isinstance(fuse(lists, mode="relative_score")[0], FusedHit)
    with pytest.raises(ValueError, match="mode"):
        fuse(lists, mode="borda")


def test_bad_input():
    with pytest.raises(ValueError, match="one weight per list"):
        reciprocal_rank_fusion([["a"], ["b"]], [1.0])
    with pytest.raises(ValueError, match="holds id 'a' twice"):
        reciprocal_rank_fusion([["a", "b", "a"]])
    with pytest.raises(ValueError, match="rrf_k must be"):
        reciprocal_rank_fusion([["a"]], rrf_k=-1)
    with pytest.raises(ValueError, match=r"weights\[0\] must be a finite number"):
        reciprocal_rank_fusion([["a"]], [-1.0])
    with pytest.raises(ValueError, match="depth"):
        reciprocal_rank_fusion([["a"]], depth=0)
    with pytest.raises(ValueError, match="top_k"):
        reciprocal_rank_fusion([["a"]], top_k=0)
    with pytest.raises(TypeError):
        reciprocal_rank_fusion("abc")
    with pytest.raises(ValueError, match="finite"):
        relative_score_fusion([[("a", float("nan"))]])
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []
