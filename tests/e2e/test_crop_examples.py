"""The image-crop examples run offline, as the other examples do: each script as a script, each
notebook through a Jupyter kernel (nbclient), every notebook holding its script's cells and saved
with its outputs; contextual crops beat crops named only by file (each script asserts it)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.scripts import load_script

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SCRIPTS = [EXAMPLES / "llamaindex_image_crops.py", EXAMPLES / "langchain_image_crops.py"]


def _builder():
    return load_script(EXAMPLES / "build_notebooks.py")


def _counts(text: str) -> dict[str, tuple[int, int]]:
    return {name: (int(m.group(1)), int(m.group(2))) for name, m in
            ((n, re.search(rf"{n}: (\d)/6 answers in the top 3, (\d) ranked first", text)) for n in ("plain", "contextual"))}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_notebook_is_in_sync_and_saved_with_its_outputs(script):
    builder = _builder()
    assert script.name in builder.SCRIPTS
    notebook = script.with_suffix(".ipynb")
    assert builder.in_sync(script, notebook), f"{notebook.name} is stale: run python examples/build_notebooks.py"
    saved = nbformat.read(notebook, as_version=4)
    text = "".join(o.get("text", "") for c in saved.cells if c.cell_type == "code" for o in c.outputs)
    counts = _counts(text)
    assert counts["contextual"][0] > counts["plain"][0] and counts["contextual"][1] > counts["plain"][1]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_script_runs_offline(script, tmp_path):
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "seen by camera north-gate" in result.stdout
    counts = _counts(result.stdout)
    assert counts["contextual"] == (6, 5) and counts["plain"][0] < 6


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_notebook_executes(script, tmp_path):
    builder = _builder()
    nb = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    builder.execute(nb, tmp_path)  # raises CellExecutionError on any failing cell
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    saved = nbformat.read(script.with_suffix(".ipynb"), as_version=4)
    saved_text = "".join(o.get("text", "") for c in saved.cells if c.cell_type == "code" for o in c.outputs)
    assert _counts(text) == _counts(saved_text)  # the saved outputs are what a run prints
