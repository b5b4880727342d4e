"""The fast fusion (numpy ordering, column-wise hits) gives bit-identical results to the earlier
pure-Python fusion kept in benchmarks/fusion_reference.py: same ids, same order, the same float
scores (compared with ==, not approx), the same ranks; ties, repeats, empty and one-sided lists,
both modes. (Its speed is measured in benchmarks/bm25_speed.py, as a ratio, not here.)"""

from __future__ import annotations

import random

import pytest

from contextual_retrieval_core.search.rank_fusion import fuse, reciprocal_rank_fusion, relative_score_fusion
from contextual_retrieval_core.search.ranked import fuse_sources
from tests.scripts import load_script

ref = load_script("benchmarks/fusion_reference.py")


def _lists(rng: random.Random, n_lists: int, universe: int, length: int, ties: bool) -> list[list[tuple]]:
    out = []
    for _ in range(n_lists):
        ids = rng.sample(range(universe), min(length, universe))
        scores = sorted(((rng.randint(0, 3) if ties else rng.random() * 10) for _ in ids), reverse=True)
        out.append([(f"d{i}", float(s)) for i, s in zip(ids, scores)])
    return out


CASES = [(n_lists, universe, length, ties, seed)
         for seed, (n_lists, universe, length, ties) in enumerate([
             (2, 100_000, 150, False), (2, 300, 150, False), (2, 160, 150, True), (3, 50, 40, True),
             (1, 20, 20, False), (4, 30, 10, True), (2, 5, 5, True)])]


@pytest.mark.parametrize("n_lists,universe,length,ties,seed", CASES)
@pytest.mark.parametrize("rrf_k", [0.0, 60.0, 1.5])
def test_rrf_is_bit_identical_to_the_reference(n_lists, universe, length, ties, seed, rrf_k) -> None:
    rng = random.Random(seed)
    lists = _lists(rng, n_lists, universe, length, ties)
    weights = [rng.choice([0.8, 0.2, 0.5, 0.3, 0.0, 1 / 3]) for _ in lists]
    ids = [[i for i, _ in pairs] for pairs in lists]
    for depth, top_k in [(150, None), (7, None), (None, 5)]:
        want = ref.reciprocal_rank_fusion(ids, weights, rrf_k=rrf_k, depth=depth, top_k=top_k)
        got = reciprocal_rank_fusion(ids, weights, rrf_k=rrf_k, depth=depth, top_k=top_k)
        assert [tuple(h) for h in got] == [tuple(h) for h in want]
        assert [tuple(h) for h in fuse(lists, weights, rrf_k=rrf_k, depth=depth, top_k=top_k)] == [tuple(h) for h in want]


@pytest.mark.parametrize("n_lists,universe,length,ties,seed", CASES)
def test_relative_score_is_bit_identical_to_the_reference(n_lists, universe, length, ties, seed) -> None:
    rng = random.Random(seed)
    lists = _lists(rng, n_lists, universe, length, ties)
    weights = [rng.choice([0.8, 0.2, 0.5, 0.0]) for _ in lists]
    for depth, top_k in [(150, None), (3, 4)]:
        want = ref.relative_score_fusion(lists, weights, depth=depth, top_k=top_k)
        got = relative_score_fusion(lists, weights, depth=depth, top_k=top_k)
        assert [tuple(h) for h in got] == [tuple(h) for h in want]


@pytest.mark.parametrize("mode", ["rrf", "relative_score"])
def test_fuse_sources_is_bit_identical_to_the_reference(mode) -> None:
    rng = random.Random(7)
    for trial in range(20):
        lists = _lists(rng, 2, rng.choice([10, 200, 5000]), rng.choice([1, 30, 150]), trial % 2 == 0)
        lists[1] = lists[1] + lists[1][:3] + [(lists[0][0][0], None)]  # repeats and a missing score
        sources = [("dense", lists[0], 0.8), ("bm25", lists[1], 0.2)]
        want = ref.fuse_sources(sources, mode=mode, rrf_k=0.0, depth=150)
        got = fuse_sources(sources, mode=mode, depth=150)
        assert [tuple(h) for h in got] == [tuple(h) for h in want]
    assert fuse_sources([("a", [], 1.0), ("b", [], 1.0)]) == [] == ref.fuse_sources([("a", [], 1.0), ("b", [], 1.0)])


def test_the_speed_benchmark_times_both_and_checks_they_agree() -> None:
    bench = load_script("benchmarks/bm25_speed.py", "bm25_speed_for_fusion")
    result = bench.bench_fusion_speedup(2000, pairs=2, repeats=1)
    assert result["identical_results"] is True
    assert set(result["us_per_fusion"]) == {"library", "reference"} and result["speedup_reference_over_library"] > 0
    assert "identical results: True" in bench.format_speedup(result)
