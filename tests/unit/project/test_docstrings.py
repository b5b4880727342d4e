"""Docstrings say what a thing does and how to use it; measured figures and project history live in
benchmarks/RESULTS.md and the docs pages (a docstring may point there, without the number).

Reads every module, class and function docstring of the three packages with `ast` (nothing is
imported) and fails on a phrase that only a benchmark run or the project's history can produce.
The patterns are narrow on purpose: facts a user relies on stay allowed (API limits such as 1,000
texts a request, prices such as 0.1x for a cache read, defaults such as depth 150, buffer sizes
such as a 64 MB block, a target such as recall 0.99).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PACKAGES = ("contextual_retrieval_core", "contextual_retrieval_langchain", "contextual_retrieval_llamaindex")

#: what each pattern stands for -> the pattern (case-insensitive)
MEASURED = {
    # "about 30 ms", "12.5 ms": a timing
    "a timing": r"\b\d+(?:\.\d+)?\s*(?:ms|µs)\b|\b(?:about|around|roughly|~)\s*\d[\d,.]*\s*s\b",
    # "about 300 MB", "1.6 GB/s", "768 MB at 1M x 384", "0.9 GB for a million chunks": measured or per-scale memory
    "a memory or disk figure": r"\b(?:about|around|roughly|~)\s*\d[\d,.]*\s*[KMG]i?B\b|\d\s*[KMG]i?B/s\b"
                               r"|\d\s*[KMG]i?B\s+(?:at|for)\s+(?:a|one)\s+million\b"
                               r"|\d\s*[KMG]i?B\s+(?:at|for)\s+\d[\d,.]*\s*(?:[kM]\b|rows|chunks|vectors|texts)",
    # "4x faster", "20 to 70 times slower": a comparison from a run
    "a speed-up": r"\d(?:\.\d+)?\s*(?:x|×|times)\s+(?:faster|slower|quicker|cheaper|costlier)\b",
    # "85.93 / 90.12 / 94.25", "3% recall": a quality figure
    "a quality figure": r"\b\d{2}\.\d{2}\s*/\s*\d{2}\.\d{2}\b|\d\s*%\s*(?:recall|better|worse)\b",
    # "issue 14", "last session", "an earlier version", "was tried first", "we measured": history
    "project history": r"\bissues?\s*#?\d+|\b(?:this|last|that|previous|earlier) session\b|\ban earlier version\b"
                       r"|\bwas tried\b|\bwe (?:measured|timed|tried|found)\b",
}
PATTERN = re.compile("|".join(f"(?P<g{i}>{p})" for i, p in enumerate(MEASURED.values())), re.IGNORECASE)
KINDS = list(MEASURED)


def docstrings(path: Path) -> list[tuple[int, str, str]]:
    """(line, name, docstring) of the module and of every class and function in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text:
                found.append((node.body[0].lineno, getattr(node, "name", "<module>"), text))
    return found


def figures(text: str) -> list[str]:
    """Each measured-figure phrase in `text`, named by kind."""
    return [f"{KINDS[int(m.lastgroup[1:])]}: {m.group(0)!r}" for m in PATTERN.finditer(text) if m.lastgroup]


@pytest.mark.parametrize("package", PACKAGES)
def test_docstrings_hold_no_measured_figures(package: str) -> None:
    bad = [f"{path.relative_to(REPO)}:{line} {name}: {hit}"
           for path in sorted((REPO / package).rglob("*.py"))
           for line, name, text in docstrings(path)
           for hit in figures(text)]
    assert not bad, "move these to benchmarks/RESULTS.md or docs/ (a docstring may point there):\n" + "\n".join(bad)


@pytest.mark.parametrize("text", [
    "Scans the database (about 30 ms).", "reading it costs about 0.1 s at 1.6 GB/s",
    "the float16 lists (768 MB at 1M x 384)", "0.9 GB for a million chunks", "about 300 MB of vectors",
    "20 to 70 times slower at 20,000 rows", "a dict display is 4x faster", "from 85.93 / 90.12 / 94.25",
    "before issue 14", "as measured last session", "written by an earlier version", "usearch was tried first",
])
def test_patterns_catch_figures(text: str) -> None:
    assert figures(text), text


@pytest.mark.parametrize("text", [
    "at most 1,000 texts per request", "a cache read costs 0.1x the input price; a write 1.25x (2x with 1h)",
    "depth: candidates from each source (default 150, as the cookbook)", "one 64 MB block at a time", "64 MB at a time",
    "once they pass 128 MB", "calibrated for depth 150 at recall 0.99", "Message Batches: 50% off, results within 24 h",
    "'3.5 MB'", "too large (30.0 MB > 1.0 MB)", "timeout: seconds (default 120)", "the onnxruntime session",
    "an index written before version folders held every row keeps them in Chroma",
])
def test_patterns_allow_facts(text: str) -> None:
    assert not figures(text), figures(text)
