"""The examples run offline: each script as a script, each notebook through a Jupyter kernel
(nbclient), and every notebook holds the same cells as its script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.scripts import load_script

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = sorted(p for p in EXAMPLES.glob("*_before_after.py"))


def _builder():
    return load_script(EXAMPLES / "build_notebooks.py")


def test_every_example_has_its_notebook_in_sync():
    builder = _builder()
    assert {p.name for p in SCRIPTS} == set(builder.SCRIPTS) & {p.name for p in SCRIPTS}
    assert len(SCRIPTS) >= 1
    for script in SCRIPTS:
        notebook = script.with_suffix(".ipynb")
        assert notebook.is_file(), f"{notebook.name} missing: run python examples/build_notebooks.py"
        assert builder.in_sync(script, notebook), f"{notebook.name} is stale: run python examples/build_notebooks.py"
        saved = nbformat.read(notebook, as_version=4)
        code = [c for c in saved.cells if c.cell_type == "code"]
        assert code and all(c.outputs for c in code[-1:]), f"{notebook.name} was saved without its outputs"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_script_runs_offline(script, tmp_path):
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "answers in the top 3" in result.stdout  # the script asserts contextual beats plain


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_notebook_executes(script, tmp_path):
    builder = _builder()
    nb = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    builder.execute(nb, tmp_path)  # raises CellExecutionError on any failing cell
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "answers in the top 3" in text


def _readme_counts() -> dict[str, tuple[str, str, str]]:
    """The README's "The demo and the notebooks" table: where -> (chunks, plain, contextual)."""
    import re

    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    start = readme.index("### The demo and the notebooks")
    rows = {}
    for line in readme[start:].split("\n\n", 3)[2].splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and "/6" in cells[3]:
            rows[cells[0]] = (re.search(r"\((\d+)\)", cells[1]).group(1), cells[3], cells[4])
    return rows


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_readme_counts_are_the_saved_notebooks_and_the_notebook_says_why_the_demo_differs(script):
    import re

    nb = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    got = {name: (m.group(1), m.group(2)) for name, m in
           ((n, re.search(rf"{n}: (\d/6) answers in the top 3, (\d) ranked first", text)) for n in ("plain", "contextual"))}
    chunks = re.search(r"^(\d+) chunks$", text, re.M).group(1)
    (row,) = [v for k, v in _readme_counts().items() if script.with_suffix(".ipynb").name in k]
    assert row == (chunks, f"{got['plain'][0]}, {got['plain'][1]} first", f"{got['contextual'][0]}, {got['contextual'][1]} first")
    markdown = " ".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "Why these counts are not the demo's" in markdown and f"({chunks})" in markdown
