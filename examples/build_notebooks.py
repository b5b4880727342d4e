"""Build the example notebooks from the example scripts, and run them (outputs kept).

Each `examples/*.py` example is written in cells (`# %%` code cells, `# %% [markdown]` markdown
cells, as Jupytext and VS Code read them); its notebook `examples/<name>.ipynb` has the same cells.
`python examples/build_notebooks.py` rewrites and executes every notebook with nbclient;
`--check` only verifies that each notebook's cells match its script (what CI asserts).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

EXAMPLES = Path(__file__).resolve().parent
SCRIPTS = ["llamaindex_before_after.py", "langchain_before_after.py", "llamaindex_image_crops.py", "langchain_image_crops.py"]


def cells(script: Path) -> list[tuple[str, str]]:
    """(kind, source) of each cell of a `# %%` script."""
    out: list[tuple[str, list[str]]] = []
    for line in script.read_text(encoding="utf-8").splitlines():
        if line.startswith("# %%"):
            out.append(("markdown" if "[markdown]" in line else "code", []))
        elif out:
            kind, lines = out[-1]
            lines.append(line[2:] if kind == "markdown" and line.startswith("# ") else ("" if kind == "markdown" and line == "#" else line))
    return [(kind, "\n".join(lines).strip("\n")) for kind, lines in out]


def notebook(script: Path) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for i, (kind, source) in enumerate(cells(script)):
        cell = nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source)
        cell.id = f"cell-{i}"  # stable ids: rebuilding a notebook changes only what changed
        nb.cells.append(cell)
    return nb


def in_sync(script: Path, path: Path) -> bool:
    saved = nbformat.read(path, as_version=4)
    return [(c.cell_type, c.source) for c in saved.cells] == cells(script)


def execute(nb: nbformat.NotebookNode, cwd: Path, timeout: int = 600) -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that notebooks match their scripts")
    args = parser.parse_args(argv)
    stale = []
    for name in SCRIPTS:
        script = EXAMPLES / name
        if not script.is_file():
            continue
        target = script.with_suffix(".ipynb")
        if args.check:
            if not target.is_file() or not in_sync(script, target):
                stale.append(target.name)
            continue
        nb = execute(notebook(script), EXAMPLES.parent)
        for cell in nb.cells:  # keep outputs, drop volatile run metadata
            cell.metadata.pop("execution", None)
        nbformat.write(nb, target)
        print(f"wrote {target.relative_to(EXAMPLES.parent)}")
    if stale:
        print("out of date (run python examples/build_notebooks.py):", ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
