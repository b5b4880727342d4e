"""The dense-options figures in benchmarks/RESULTS.md are the ones benchmarks/dense_options.py wrote."""

from __future__ import annotations

import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"
DATA = json.loads((BENCH / "dense_options.json").read_text(encoding="utf-8"))
SECTION = (BENCH / "RESULTS.md").read_text(encoding="utf-8").split("## Dense-side options", 1)[1].split("\n## ", 1)[0]


def triple(row: dict) -> str:
    return " ".join(f"{row['pass_at'][k]:.2f}" for k in ("5", "10", "20"))


def test_the_table_quotes_the_json() -> None:
    for i, one in enumerate(DATA["table"]["one-vector"]):
        if "bm25" in one["name"]:
            continue
        line = next(row for row in SECTION.splitlines() if row.startswith(one["name"] + " "))
        cells = [triple(DATA["table"][v][i]) for v in ("one-vector", "windowed", "windowed-mean")]
        assert " ".join(line.split()[1:]) == " ".join(cells), one["name"]


def test_the_options_and_costs_quote_the_json() -> None:
    for opt in DATA["options"]:
        assert triple(opt) in SECTION, opt
    lat = DATA["latency"]
    assert f"{lat['windowed']['index_rows']:,} index rows instead of {lat['one-vector']['index_rows']}" in SECTION
    assert f"{lat['p50_ratio_windowed_to_one_vector']:.2f}x" in SECTION or f"{lat['p50_ratio_windowed_to_one_vector']:.1f}0x" in SECTION
    assert f"{lat['windowed']['p50_ms']:.2f} ms against {lat['one-vector']['p50_ms']:.2f} ms" in SECTION
