"""Queries while ``contextual-retrieval index`` updates the same folder in another process, the
files switching between two versions at each update: a long-lived `ContextualIndex` in a third
process, the ``query`` command's entry point in a loop in a fourth, and a real
``contextual-retrieval query`` process; every answer is the one index A or index B gives, never an
error and never a third answer. benchmarks/soak.py runs the same case on the cookbook corpus with
at least 200 queries per reader."""

from __future__ import annotations

from pathlib import Path

from tests.scripts import load_script


def test_every_answer_during_updates_is_the_old_or_the_new_index(tmp_path: Path) -> None:
    soak = load_script("benchmarks/soak.py")
    corpus = soak.demo_corpus()
    queries = corpus.queries[:6] + ["soak watchdog restarts a stalled worker after ninety seconds"]
    rows = soak.read_during_write_case(corpus, tmp_path, queries, count=40, cli_processes=1, min_updates=3)
    assert [r["name"] for r in rows] == ["read_during_write/search", "read_during_write/cli-main",
                                         "read_during_write/contextual-retrieval query"]
    for row in rows:
        assert row["first_errors"] == [] and row["errors"] == 0, row
        assert row["mismatches"] == 0, row
    search, cli_main = rows[0], rows[1]
    assert search["updates"] >= 3 and search["queries_whose_answer_changes"] >= 1
    assert search["queries"] >= 40 and cli_main["queries"] >= 40
