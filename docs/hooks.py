"""mkdocs hook: serve benchmarks/RESULTS.md (with its plot) and CHANGELOG.md as pages of the site
from where they live, so the site never holds a copy that could drift."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]
SERVED = {
    "results.md": REPO / "benchmarks" / "RESULTS.md",
    "quality.png": REPO / "benchmarks" / "quality.png",
    "changelog.md": REPO / "CHANGELOG.md",
}


def on_files(files: Files, config) -> Files:
    for uri, source in SERVED.items():
        files.append(File.generated(config, uri, abs_src_path=str(source)))
    return files
