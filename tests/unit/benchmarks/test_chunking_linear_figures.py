"""The chunking-time figures benchmarks/RESULTS.md quotes are `benchmarks/chunk_linear.py`'s, and
they meet issue 43's mark: 1 MB without whitespace chunked in under 5 s, ten times the text in
about ten times the time. Reads the committed JSON; runs no benchmark."""

from __future__ import annotations

import json
import re
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "benchmarks"
RESULT = json.loads((BENCH / "chunk_linear.json").read_text(encoding="utf-8"))
SECTION = (BENCH / "RESULTS.md").read_text(encoding="utf-8").split("## Chunking time against the text's size")[1].split("\n## ")[0]


def test_the_results_table_is_the_scripts() -> None:
    rows = {(r["kind"], r["way"], r["size"]): r for r in RESULT["rows"]}
    table = [line.split("|")[1:-1] for line in SECTION.splitlines() if re.match(r"\| [a-zA-Z]", line) and "---" not in line][1:]
    assert len(table) == len(rows) // 2
    for kind, way, small, large, ratio, chunks, per_char in (map(str.strip, cells) for cells in table):
        a, b = rows[(kind, way, 100_000)], rows[(kind, way, 1_000_000)]
        assert (small, large) == (f"{a['cpu_seconds']:.3f} s", f"{b['cpu_seconds']:.3f} s")
        expected_ratio = RESULT["ratio_1mb_over_100kb"][f"{kind}, {way}"]
        assert ratio == (str(expected_ratio) if expected_ratio is not None else "-")
        assert (chunks, per_char) == (str(b["chunks"]), str(b.get("tokenized_chars_per_char", "-")))


def test_a_megabyte_without_whitespace_chunks_in_seconds_and_in_proportion() -> None:
    rows = {(r["kind"], r["way"], r["size"]): r for r in RESULT["rows"]}
    assert all(r["covers_text"] for r in RESULT["rows"])
    for kind in ("no whitespace", "base64"):
        assert rows[(kind, "fitted", 1_000_000)]["cpu_seconds"] < 5
        assert RESULT["ratio_1mb_over_100kb"][f"{kind}, fitted"] <= 12
        assert rows[(kind, "fitted", 1_000_000)]["tokenized_chars_per_char"] <= 1.1
    for name, ratio in RESULT["ratio_1mb_over_100kb"].items():  # the chunker's own work, every kind
        if ratio is not None and not name.endswith(", fitted"):
            assert ratio <= 12, name
    notebook = RESULT["notebook_100kb"]
    assert notebook["as read, fitted"]["base64_chunks"] > 100
    assert notebook["payloads omitted, default"]["base64_chunks"] == notebook["payloads omitted, fitted"]["base64_chunks"] == 0
    assert f"{notebook['as read, default']['chunks']} chunks (default)" in SECTION.replace("\n", " ")
