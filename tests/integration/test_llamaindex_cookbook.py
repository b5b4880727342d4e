"""The LlamaIndex path scores what the core scores on the cookbook set (benchmarks/llamaindex_cookbook.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "llamaindex_cookbook.py"


@pytest.mark.slow
def test_llamaindex_path_matches_the_core_on_the_cookbook(cookbook_dir, cookbook_embedder, tmp_path):
    bench = load_script(SCRIPT, "llamaindex_cookbook_benchmark")
    from contextual_retrieval_core.app.evaluation import load_cookbook

    dataset = load_cookbook(cookbook_dir)
    (core, ours, stock), _, identical = bench.run(dataset, cookbook_dir / "contexts_claude-3-haiku.jsonl", cookbook_embedder, tmp_path)
    for k in (5, 10, 20):
        assert abs(ours.pass_at[k] - core.pass_at[k]) <= 0.5, (k, ours.pass_at, core.pass_at)
        assert ours.pass_at[k] >= stock.pass_at[k], (k, ours.pass_at, stock.pass_at)
    # the stock retriever indexes the same nodes (structural header + Claude's context + chunk): it comes
    # within 0.2 of ours at Pass@20 (README, RESULTS.md); ours leads at the top of the ranking
    assert ours.pass_at[5] > stock.pass_at[5] + 1.0 and ours.mrr > stock.mrr
    assert identical >= 0.95 * len(dataset.queries)  # the same rankings, not just the same scores
