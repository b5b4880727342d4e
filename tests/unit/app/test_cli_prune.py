"""`contextual-retrieval query --prune [--budget N]`: the evidence with its file line spans."""

from __future__ import annotations

import json
import re

import pytest

from contextual_retrieval_core.app.cli import main

pytestmark = pytest.mark.usefixtures("offline_env")

HANDBOOK = """# Employee handbook: Austin office

This handbook describes the policies that apply to everyone employed at the Austin office.

## Parental leave

Employees are entitled to 12 weeks of fully paid leave after the birth or adoption of a child. Leave can be split into blocks and must be taken within two years.

## Working hours

The standard working week is 40 hours. Core hours are 10:00 to 15:00; outside them, schedules are flexible. Overtime is compensated with time off.
"""
CODE = '''"""Executors."""


class DiffExecutor:
    """Runs every input on two executors and compares them."""

    def __init__(self, primary, secondary):
        self.primary = primary
        self.secondary = secondary

    def run_target(self, data):
        first = self.primary.run_target(data)
        second = self.secondary.run_target(data)
        return "diff" if first != second else first
'''


@pytest.fixture()
def index(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "austin.md").write_text(HANDBOOK, encoding="utf-8")
    (folder / "diff.py").write_text(CODE, encoding="utf-8")
    ix = tmp_path / "ix"
    assert main(["index", str(folder), "--index-dir", str(ix), "--no-progress"]) == 0
    return ix, folder


def test_query_prune_prints_evidence_with_file_lines(index, capsys):
    ix, folder = index
    capsys.readouterr()
    assert main(["query", str(ix), "How many weeks of parental leave do Austin employees get?", "-k", "3", "--prune", "--budget", "40"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith('pruned evidence for "How many weeks')
    assert "12 weeks of fully paid leave" in printed
    files = {"austin.md": HANDBOOK.splitlines(), "diff.py": CODE.splitlines()}
    current = None
    for line in printed.splitlines():
        head = re.match(r"\d+\. (\S+) lines ", line)
        if head:
            current = files[head.group(1).rsplit("/", 1)[-1]]
        shown = re.match(r"\s+(\d+) \| (.*)$", line)
        if shown:  # every shown line is that line of the file
            assert current[int(shown.group(1)) - 1] == shown.group(2)

    assert main(["query", str(ix), "How does DiffExecutor compare the two executors?", "-k", "3", "--prune", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    code = [r for r in records if r["path"].endswith("diff.py")]
    assert code
    for piece in code[0]["pieces"]:
        lines = CODE.splitlines()[piece["start_line"] - 1 : piece["end_line"]]
        assert piece["text"] in "\n".join(lines) and piece["text"].splitlines()[0] in lines[0]


def test_query_budget_must_be_positive(index, capsys):
    ix, _ = index
    assert main(["query", str(ix), "parental leave", "--prune", "--budget", "0"]) == 2
    assert "budget must be a positive number of tokens" in capsys.readouterr().err


def test_safety_valves_are_said_in_words_with_the_file_not_the_chunk_id():
    from contextual_retrieval_core.index.report import IndexHit
    from contextual_retrieval_core.pruning._evidence import format_evidence
    from contextual_retrieval_core.pruning.result import PruningReport, PruningResult

    hit = IndexHit(id="9b1c2d3e-0000-5000-8000-000000000001", path="docs/handbook.md", score=1.0, context="", text="x")
    report = PruningReport("words", tokens_before=10, tokens_after=4, fallbacks=[f"standout:{hit.id}", "min_tokens"])
    text = format_evidence("question", [hit], PruningResult([], report))
    assert "kept the best unit of docs/handbook.md, which stands out" in text
    assert "the top two chunks kept whole" in text
    assert "standout:" not in text and hit.id not in text and "safety valves" not in text
