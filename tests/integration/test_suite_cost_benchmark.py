"""benchmarks/suite_cost.py: the pytest command it runs for a tree, what it reads from pytest's
output (counts, the TOTAL coverage line, the slowest tests), and a real run of a tiny test file
with its CPU time and peak memory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def suite_cost():
    return load_script("benchmarks/suite_cost.py")


OUTPUT = """\
........s.F                                                              [100%]
Name                       Stmts   Miss  Cover
----------------------------------------------
TOTAL                       9422    502    95%
============================= slowest 15 durations =============================
585.12s call     tests/integration/test_cookbook_corpus.py::test_cookbook_figures
0.50s setup    tests/unit/test_x.py::test_y[a]
=========================== short test summary info ============================
FAILED tests/unit/test_x.py::test_z - AssertionError
1 failed, 9 passed, 1 skipped, 2 warnings, 1 error in 12.34s
"""


def test_the_summary_counts_coverage_and_slowest_tests_are_read(suite_cost) -> None:
    got = suite_cost.parse_summary(OUTPUT)
    assert got["counts"] == {"failed": 1, "passed": 9, "skipped": 1, "warnings": 2, "errors": 1}
    assert got["tests"] == 12
    assert (got["coverage_percent"], got["coverage_statements"], got["coverage_missed"]) == (95.0, 9422, 502)
    assert got["slowest"] == [
        {"s": 585.12, "phase": "call", "test": "tests/integration/test_cookbook_corpus.py::test_cookbook_figures"},
        {"s": 0.5, "phase": "setup", "test": "tests/unit/test_x.py::test_y[a]"},
    ]


def test_the_command_passes_ci_coverage_and_paths(suite_cost, tmp_path) -> None:
    cmd = suite_cost.pytest_command(tmp_path, ["tests/unit"], ci=True, coverage=True)
    assert cmd[0] == sys.executable  # no .venv in that tree: this interpreter
    assert cmd[1:4] == ["-m", "pytest", "-q"] and "--durations=15" in cmd and "--ci" in cmd
    assert [a for a in cmd if a.startswith("--cov=")] == [f"--cov={p}" for p in suite_cost.PACKAGES]
    assert cmd[-1] == "tests/unit"


def test_a_run_of_a_tiny_test_file_is_measured(suite_cost, tmp_path, monkeypatch) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "test_tiny.py").write_text("def test_one():\n    assert sum(range(10)) == 45\n", encoding="utf-8")
    out = tmp_path / "cost.json"
    monkeypatch.setattr(suite_cost, "TREE", tree)
    assert suite_cost.main(["test_tiny.py", "--json", str(out), "--dataset", str(tmp_path)]) == 0
    result = json.loads(out.read_text(encoding="utf-8"))
    (run,) = result["runs"]
    assert run["exit_code"] == 0 and run["counts"] == {"passed": 1} and run["tests"] == 1
    assert run["wall_s"] > 0 and run["cpu_s"] > 0 and run["peak_rss_mb"] > 0
    assert result["summary"]["tree"]["tests"] == 1 and "wall_ratio_base_over_tree" not in result


def test_the_split_counts_each_test_once_on_its_side(tmp_path):
    split = load_script("benchmarks/suite_split.py").split
    junit = tmp_path / "run.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest" time="7.5">'
        '<testcase classname="tests.unit.test_a" name="test_old[1]" time="1.0"/>'
        '<testcase classname="tests.integration.test_b" name="test_new" time="4.0"/>'
        '<testcase classname="contextual_retrieval_core.search.bm25" name="contextual_retrieval_core.search.bm25.BM25Index" time="0.5"/>'
        "</testsuite></testsuites>", encoding="utf-8")
    got = split(junit, {"test_old[1]", "contextual_retrieval_core.bm25.BM25Index"})  # the doctest's module moved
    assert got["run_seconds"] == 7.5
    assert got["tests_before"] == {"count": 2, "seconds": 1.5} and got["tests_added"] == {"count": 1, "seconds": 4.0}
    assert got["seconds_by_tier"] == {"doctests": 0.5, "integration": 4.0, "unit": 1.0}
    assert got["added_by_file"] == [{"file": "test_b", "seconds": 4.0}]
