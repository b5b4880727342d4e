"""eval --generate-questions on the whole cookbook corpus through the loopback Anthropic server,
answering from the cookbook's own golden questions and Claude 3 Haiku contexts
(benchmarks/own_corpus_eval.py): the command's table is `eval`'s table on the set it wrote."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "own_corpus_eval.py"


@pytest.mark.slow
def test_the_command_reproduces_evals_table_on_the_cookbook_corpus(cookbook_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("CONTEXTUAL_RETRIEVAL_DATASET", str(cookbook_dir))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec = importlib.util.spec_from_file_location("own_corpus_eval", BENCH)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.run(30, 1)
    assert result["tables_equal"], (result["table"], result["eval_table_on_written_set"])
    assert result["questions_kept"] == 30 - result["dropped"]
    assert result["golden_questions_served"] > 0 and result["contexts_served_from_the_haiku_file"] == 737
    assert 0.9 <= result["estimate_over_paid_cost"] <= 1.1
    assert result["requests_to_fake"] == result["paid_usage"]["requests"]  # a request paid is a request counted
