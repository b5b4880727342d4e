"""The examples run offline: each script as a script, each notebook through a Jupyter kernel
(nbclient), and every notebook holds the same cells as its script."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(p for p in EXAMPLES.glob("*_before_after.py"))


def _builder():
    spec = importlib.util.spec_from_file_location("build_notebooks", EXAMPLES / "build_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
