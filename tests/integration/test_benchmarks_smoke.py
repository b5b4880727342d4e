"""Smoke test of benchmarks/bm25_speed.py on a tiny corpus: it runs, agrees with rank_bm25, and
reports its ratios. Timing ratios are benchmark output, never asserted here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.scripts import load_script

pytest.importorskip("rank_bm25")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bm25_speed.py"


@pytest.fixture(scope="module")
def bm25_speed():
    return load_script(SCRIPT, "bm25_speed_benchmark")


def test_synthetic_corpus_is_deterministic_and_zipfian(bm25_speed):
    ids, tokens, probs = bm25_speed.make_corpus(300, vocab_size=2000, seed=7)
    ids2, tokens2, _ = bm25_speed.make_corpus(300, vocab_size=2000, seed=7)
    assert (ids, tokens) == (ids2, tokens2)
    assert len(ids) == len(set(ids)) == 300
    assert 100 < sum(map(len, tokens)) / 300 < 140
    assert probs[0] > probs[1] > probs[-1] and math.isclose(probs.sum(), 1.0)
    queries = bm25_speed.make_queries(5, probs, terms=10, seed=8)
    assert all(len(q) == len(set(q)) == 10 for q in queries)


def test_bm25_bench_agrees_with_rank_bm25(bm25_speed):
    result = bm25_speed.bench_bm25(2000, n_queries=5, n_rank_queries=5, vocab_size=5000, log=lambda *_: None)
    agreement = result["agreement"]
    assert agreement["queries"] == 5
    assert agreement["equal_up_to_ties"] == 5
    assert agreement["min_overlap"] == 1.0
    assert agreement["max_rel_err"] < 1e-9
    assert result["speedup_mean"] > 0 and math.isfinite(result["speedup_mean"])
    assert result["ms_per_query"]["ours_mean"] > 0 and result["ms_per_query"]["rank_bm25_mean"] > 0


def test_fusion_bench_reports_a_ratio(bm25_speed):
    result = bm25_speed.bench_fusion((1000, 10_000), pairs=3, repeats=2)
    assert set(result["us_per_fusion"]) == {"1000", "10000"}
    assert result["ratio_largest_smallest"] > 0
    text = bm25_speed.format_report(
        bm25_speed.bench_bm25(500, n_queries=2, n_rank_queries=2, vocab_size=1000, log=lambda *_: None), result
    )
    assert "speed-up" in text and "ratio 10,000 / 1,000" in text


def test_main_writes_json(bm25_speed, tmp_path, capsys):
    out = tmp_path / "speed.json"
    assert bm25_speed.main(["--docs", "500", "--queries", "2", "--rank-queries", "2", "--fusion-sizes", "1000", "2000", "--json", str(out)]) == 0
    payload = json.loads(out.read_text())
    assert payload["bm25"]["n_docs"] == 500 and payload["bm25"]["agreement"]["queries"] == 2
    assert "ratio 2,000 / 1,000" in capsys.readouterr().out


# -- the cookbook-set scripts, on the tiny dataset (seconds; the real runs are in benchmarks/RESULTS.md) --


def run_script(name: str, *args: str) -> str:
    import subprocess
    import sys

    script = SCRIPT.parent / name
    result = subprocess.run([sys.executable, str(script), *args], cwd=SCRIPT.parents[1], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_quality_writes_failure_rates_and_truncation(tiny_dataset, tmp_path):
    out, plot = tmp_path / "quality.json", tmp_path / "quality.png"
    printed = run_script("quality.py", "--dataset", str(tiny_dataset), "--contexts", str(tiny_dataset / "contexts.jsonl"),
                         "--json", str(out), "--plot", str(plot), "--embedding-cache", str(tmp_path / "emb.sqlite3"))
    payload = json.loads(out.read_text())
    assert payload["dataset"] == tiny_dataset.name
    rates = payload["failure_rate_at_20"]["configs"]
    assert rates == {c["name"]: round(100 - c["pass_at"]["20"], 2) for c in payload["configs"]}
    quality = load_script(SCRIPT.parent / "quality.py", "quality_benchmark")
    rows = [{"name": "dense", "pass_at": {"20": 80.18}}, {"name": "contextual-hybrid", "pass_at": {"20": 94.25}}]
    assert quality.failure_rates(rows)["relative_fall_dense_to_contextual_hybrid_percent"] == 71.0  # (19.82 - 5.75) / 19.82
    t = payload["truncation"]
    assert t["max_tokens"] == 256 and t["chunks"] == 8 and 0 <= t["contextualized_over_window"] <= t["chunks"]
    assert "top-20 failure rate (100 - Pass@20)" in printed and "token window" in printed
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_fusion_sweep_covers_the_grid_and_marks_the_default(tiny_dataset, tmp_path):
    out = tmp_path / "sweep.json"
    printed = run_script("fusion_sweep.py", "--dataset", str(tiny_dataset), "--contexts", str(tiny_dataset / "contexts.jsonl"),
                         "--json", str(out), "--embedding-cache", str(tmp_path / "emb.sqlite3"))
    payload = json.loads(out.read_text())
    assert len(payload["rows"]) == 18 and sum(r["default"] for r in payload["rows"]) == 1
    assert payload["best_per_k"] == {k: max(r["pass_at"][k] for r in payload["rows"]) for k in ("5", "10", "20")}
    assert "<- library default" in printed
