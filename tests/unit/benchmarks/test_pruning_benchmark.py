"""benchmarks/pruning.py: its metrics on a hand-made case, and the documents quote its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextual_retrieval_core.chunking.tokenizer import Tokenizer
from contextual_retrieval_core.pruning import regex_token_counter
from contextual_retrieval_core.types import Chunk, ContextualChunk
from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "benchmarks" / "pruning.py"


@pytest.fixture(scope="module")
def bench():
    return load_script(SCRIPT, "pruning_benchmark")


def test_metrics_on_a_hand_made_case(bench):
    golden = ContextualChunk(Chunk("g", "d", "The executor compares exit kinds. Coverage maps differ."), "")
    other = ContextualChunk(Chunk("o", "d", "Parsers accept inputs."), "")
    case = bench.Case("q", "It compares exit kinds and parsers.", ("g",), [golden, other])
    # evidence terms (in the golden chunk): compar, exit, kind; anywhere in U: + parser
    kept = {"g": "The executor compares exit kinds.", "o": ""}
    row = bench.score([case], [kept], regex_token_counter, Tokenizer())
    assert row["answer_recall"] == 1.0
    assert row["answer_term_recall"] == 0.75
    assert row["golden_kept"] == 1.0
    before = regex_token_counter.count(golden.text) + regex_token_counter.count(other.text)
    assert row["token_reduction"] == round(1 - regex_token_counter.count(kept["g"]) / before, 4)
    dropped = bench.score([case], [{"o": other.text}], regex_token_counter, Tokenizer())
    assert dropped["answer_recall"] == 0.0 and dropped["golden_kept"] == 0.0 and dropped["answer_term_recall"] == 0.25


def test_interpolation_on_the_frontier(bench):
    frontier = [{"token_reduction": 0.2, "answer_recall": 1.0}, {"token_reduction": 0.6, "answer_recall": 0.9}]
    assert bench.interpolate(frontier, 0.4) == (pytest.approx(0.95), True)
    assert bench.interpolate(frontier, 0.9) == (pytest.approx(0.9), False)


def test_readme_and_results_quote_the_benchmark_json(bench):
    payload = json.loads((REPO / "benchmarks" / "pruning.json").read_text(encoding="utf-8"))
    names = [c["name"] for c in payload["configs"]]
    assert "ours-default" in names and "no-pruning" in names
    for c in payload["configs"]:
        assert set(c) >= {"name", "token_reduction", "answer_recall", "answer_term_recall", "golden_kept", "ms_per_query"}
    table = bench.markdown_table(payload)
    page = (REPO / "docs" / "pruning.md").read_text(encoding="utf-8")  # the README's pruning section moved there
    results = (REPO / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    section = page[page.index("# Context pruning") :]
    assert table in section
    assert table in results and bench.comparison_table(payload) in results


def test_matched_settings_bracket_ours_on_token_reduction(bench):
    sweep = [{"setting": t, "token_reduction": r} for t, r in ((0.2, 0.1), (0.3, 0.4), (0.4, 0.65), (0.5, 0.8), (0.6, 0.9))]
    assert [p["setting"] for p in bench.bracket(sweep, 0.7)] == [0.4, 0.5]  # nearest below, nearest above
    assert [p["setting"] for p in bench.bracket(sweep, 0.95)] == [0.5, 0.6]  # never reaches it: the two highest
    assert [p["setting"] for p in bench.bracket(sweep, 0.05)] == [0.2, 0.3]  # all pass it: the two lowest
    payload = json.loads((REPO / "benchmarks" / "pruning.json").read_text(encoding="utf-8"))
    target = payload["matched_target"]
    for peer, points in payload["matched_sweeps"].items():
        chosen = {p["setting"] for p in bench.bracket(points, target)}
        flagged = {c["name"] for c in payload["configs"] if c.get("matched") and c["name"].startswith(peer + "-t")}
        assert flagged == {f"{peer}-t{t:g}" for t in chosen}, peer
