"""RESULTS.md quotes the committed JSON of the pruning-speed, embedder and query start-up benchmarks."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[3]
RESULTS = (REPO / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")


def _json(name: str) -> dict:
    return json.loads((REPO / "benchmarks" / name).read_text(encoding="utf-8"))


def test_pruning_speed_table_is_quoted_and_meets_the_target():
    module = load_script("benchmarks/pruning.py", "pruning_benchmark_figures")
    payload = _json("pruning_speed.json")
    assert module.speed_table(payload) in RESULTS
    assert payload["speed"]["ratio_to_fastest_peer"] <= 0.25
    assert payload["selection"]["warm_vs_cold_differ"] == 0


def test_embedder_figures_are_quoted():
    payload = _json("embed_speed.json")
    for mix in ("full", "cookbook"):
        row = payload["mixes"][mix]
        assert row["vectors_identical"]
        assert row["after"]["rss_peak_mb"] < 600
        assert f"| {row['before']['rss_peak_mb']} MB | {row['after']['rss_peak_mb']} MB | {row['after']['tokens_per_s_ratio']:.3f} |" in RESULTS


def test_query_startup_figures_are_quoted():
    payload = _json("query_startup.json")
    for tree in ("before", "after"):
        row = payload["trees"][tree]
        assert row["same_output"]
        assert f"| {tree} | {row['median_s']:.2f} s |" in RESULTS
    assert f"{payload['trees']['after']['median_ratio']:.3f}" in RESULTS
