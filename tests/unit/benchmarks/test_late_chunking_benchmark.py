"""benchmarks/late_chunking.py: the adoption rule as the issue states it and the figures in
benchmarks/RESULTS.md quoting its committed JSON (the script end to end on a tiny dataset, through
the real model: tests/integration/test_eval_runs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.scripts import load_script

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"
bench = load_script("benchmarks/late_chunking.py")


def column(**rows: tuple[float, float, float]) -> dict:
    return {name: {"pass_at": {"5": a, "10": b, "20": c}} for name, (a, b, c) in rows.items()}


BASE = column(**{"hybrid": (80, 85, 90), "contextual-hybrid": (85, 90, 95), "dense": (60, 70, 80)})


@pytest.mark.parametrize("late,adopted,worst", [
    (column(**{"hybrid": (81, 85, 90), "contextual-hybrid": (85, 91, 95), "dense": (59.6, 70, 80)}), True, -0.4),
    (column(**{"hybrid": (81, 85, 90), "contextual-hybrid": (85, 91, 95), "dense": (59.4, 70, 80)}), False, -0.6),
    (column(**{"hybrid": (81, 85, 90), "contextual-hybrid": (85, 90, 95), "dense": (61, 71, 81)}), False, 0),
    (column(**{"hybrid": (81, 84.9, 90), "contextual-hybrid": (86, 91, 96), "dense": (61, 71, 81)}), False, -0.1),
])
def test_the_adoption_rule_needs_both_hybrids_better_and_nothing_half_a_point_worse(late, adopted, worst):
    verdict = bench.adoption(BASE, late)
    assert verdict["adopted"] is adopted
    assert verdict["worst"]["points"] == pytest.approx(worst)


RESULTS = [BENCH / "late_chunking.json", BENCH / "late_chunking_w256.json"]


def test_results_md_quotes_the_committed_json():
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in RESULTS]
    assert runs[0]["columns"]["one-vector"] == runs[1]["columns"]["one-vector"]  # the same baseline in both runs
    columns = {name: col for data in runs for name, col in data["columns"].items()}
    section = (BENCH / "RESULTS.md").read_text(encoding="utf-8").split("## Late chunking", 1)[1].split("\n## ", 1)[0]
    flat = " ".join(section.split())  # prose wraps across lines
    for config in bench.CONFIGS:
        cells = [" ".join(f"{col[config]['pass_at'][k]:.2f}" for k in ("5", "10", "20")) for col in columns.values()]
        line = next(row for row in section.splitlines() if row.startswith(config + " "))
        assert " ".join(line.split()[1:]) == " ".join(cells), config
    for data in runs:
        for name, verdict in data["adoption"].items():
            assert not verdict["adopted"] and "not adopted" in flat.lower(), name
            for config in ("hybrid", "contextual-hybrid"):  # the deltas the verdict rests on
                delta = verdict["delta_pass_at"][config]
                assert " / ".join(f"{delta[k]:+.2f}" for k in ("5", "10", "20")) in flat, (name, config)
            assert f"{-verdict['worst']['points']:.2f}" in flat, name
    for name, limits in (("late-512", runs[0]["limits"]["late-512"]), ("late-256", runs[1]["limits"]["late-256"])):
        chunks = limits["text_sets"]["chunks"]
        assert f"{chunks['documents_over_one_window']} of the" in flat, name
        windows = sum(t["macro_windows"] for t in limits["text_sets"].values())
        assert f"{windows:,} macro-windows" in flat or f"{windows:,} of up to" in flat, name
    chunks = runs[0]["limits"]["late-512"]["text_sets"]["chunks"]
    assert f"{chunks['tokens_median']:,} tokens" in flat
    assert f"{chunks['chunks_in_documents_over_one_window']} of the 737 chunks" in flat
